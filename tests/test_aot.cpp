// Ahead-of-time compilation (codegen/aot.h, `loom compile`) and the runner (tools/loom_run).
// CI has no GPU: the CUDA path is compiled (PTX generation, the C API links), the host path is run
// end to end against the reference outputs saved by `loom compile`.
#include <cpuid.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "autoschedule/gpu_schedule.h"
#include "codegen/aot.h"
#include "codegen/aot_segments.h"
#include "codegen/cublas_gemm.h"
#include "codegen/cuda_graph_glue.h"
#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "codegen/ptx_register_caps.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/npy.h"
#include "graph/gelu_recognition.h"
#include "graph/passes.h"
#include "lower/tanh_gelu.h"
#include "lower/extern_stages.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/gpu_loop_lint.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"
#include "graph_builder.h"
#include "schedule/schedule_printer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace loom;
using loom::testing::count_of;

namespace {

fs::path scratch(const std::string &name) {
    fs::path p = fs::temp_directory_path() / ("loom_test_aot_" + std::to_string(getpid())) / name;
    fs::remove_all(p);
    fs::create_directories(p.parent_path());
    return p;
}

/// compile_aot of \p p for \p target, named \p name, into \p out, cut into at most \p pipelines
/// (LOOM_PIPELINES, unset again however it ends).
AotArtifact compile_cut(const LoweredPipeline &p, const Halide::Target &target, const fs::path &out,
                        const std::string &name, int pipelines) {
    setenv("LOOM_PIPELINES", std::to_string(pipelines).c_str(), 1);
    struct Unset {
        ~Unset() { unsetenv("LOOM_PIPELINES"); }
    } unset;
    AotOptions o;
    o.name = name;
    return compile_aot(p, target, out.string(), o);
}

std::string slurp(const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream os;
    os << f.rdbuf();
    return os.str();
}

// Builds tools/loom_run without CUDA beside \p artifact and runs it on the host artifact: it checks
// the outputs against the reference `loom compile` saved, and times.
void check_with_runner(const fs::path &artifact) {
    fs::path runner = artifact.parent_path() / "loom_run";
    std::string output;
    int rc = loom::testing::run_command(std::string("CUDA_HOME=/nonexistent sh ") + LOOM_SOURCE_DIR +
                                            "/tools/loom_run/build.sh " + runner.string(),
                                        output);
    ASSERT_EQ(rc, 0) << output;
    rc = loom::testing::run_command(runner.string() + " " + artifact.string() + " --mode host --reps 3 --warmup 1",
                                    output);
    EXPECT_EQ(rc, 0) << output;
    EXPECT_NE(output.find("ok=1"), std::string::npos) << output;
}

LoweredPipeline lowered_fixture(const std::string &name) {
    Graph g = import_onnx(loom::testing::data_path(name + ".onnx"));
    prepare_graph(g);
    return lower_graph(g);
}

// A LayerNorm-like statistic over segments of a row: x [8, 256] seen as [8, 4, 64], each 64-wide
// segment's mean subtracted, tanh, back to [8, 256] (combined's pattern, small).
// tanh(x - mean) over \p segs segments of \p k per row of x [rows, segs * k], viewed as [rows, segs, k].
LoweredPipeline lowered_segments(int64_t rows = 8, int64_t segs = 4, int64_t k = 64) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    GraphBuilder b;
    std::string x = b.input("x", {rows, segs * k});
    std::string s3 = b.constant(Tensor::from_ints(DType::I64, {3}, {rows, segs, k}));
    std::string s2 = b.constant(Tensor::from_ints(DType::I64, {2}, {rows, segs * k}));
    std::string x3 = b.node("Reshape", {x, s3}, {rows, segs, k});
    std::string m = b.node("ReduceMean", {x3}, {rows, segs, 1}, {{"axes", Ints{2}}, {"keepdims", int64_t(1)}});
    std::string d = b.node("Tanh", {b.node("Sub", {x3, m}, {rows, segs, k})}, {rows, segs, k});
    b.out("Reshape", {d, s2}, {rows, segs * k});
    return lower_graph(b.g);
}
// Segments too long for one warp's lanes at 16 floats each: the block reduction.
LoweredPipeline lowered_long_segments() { return lowered_segments(4, 2, 2048); }

// Auto-schedules \p p for CUDA and compiles it into a scratch artifact named \p name; returns
// the pipeline object's bytes and `nm -D` + `ldd` of the shared object.
bool ends_with(const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::pair<std::string, std::string> cuda_artifact(LoweredPipeline &p, const std::string &name) {
    Halide::Target t = aot_target("cuda");
    apply_schedule(gpu_auto_schedule(p, t), p, t);
    fs::path out = scratch("cuda_" + name);
    AotOptions o;
    o.name = name;
    AotArtifact a = compile_aot(p, t, out.string(), o);
    std::string object = slurp(out / (name + "_halide.o")), output;
    int rc = loom::testing::run_command("nm -D " + a.shared_lib + " && ldd " + a.shared_lib, output);
    EXPECT_EQ(rc, 0) << output;
    fs::remove_all(out.parent_path());
    return {object, output};
}

}  // namespace

// Targets that run on this machine claim only what its CPU has: Halide 14 reports AMD Zen 4 as
// Sapphire Rapids (AVX512-FP16), and JIT code for that died of SIGILL there. The CUDA target's
// host part is the same host target.
TEST(Aot, HostTargetsClaimOnlyThisCpusFeatures) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    bool fp16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u);
    for (const Halide::Target &t : {host_target(), aot_target("host"), aot_target("cuda")})
        if (!fp16) {
            EXPECT_FALSE(t.has_feature(Halide::Target::AVX512_SapphireRapids)) << t.to_string();
        }
    Halide::Target claimed("x86-64-linux-avx-avx2-avx512-avx512_skylake-avx512_cannonlake-avx512_sapphirerapids");
    EXPECT_EQ(runnable_here(claimed).has_feature(Halide::Target::AVX512_SapphireRapids), fp16);
    EXPECT_TRUE(runnable_here(claimed).has_feature(Halide::Target::AVX512_Cannonlake));
    Halide::Target cuda = aot_target("cuda");
    EXPECT_TRUE(cuda.has_feature(Halide::Target::CUDA) && cuda.has_feature(Halide::Target::CUDACapability80));
    EXPECT_EQ(cuda.without_feature(Halide::Target::CUDA).without_feature(Halide::Target::CUDACapability80),
              aot_target("host"));
}

TEST(Aot, CudaArtifactHasPtxAndCApi) {
    Graph g = import_onnx(loom::testing::data_path("softmax_rows.onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.buffer_alignment = 16;  // what `loom compile --target cuda` declares
    LoweredPipeline p = lower_graph(g, lo);
    Halide::Target t = aot_target("cuda");
    ASSERT_TRUE(t.has_feature(Halide::Target::CUDA));
    apply_schedule(gpu_auto_schedule(p, t), p, t);
    fs::path out = scratch("cuda_softmax");
    AotOptions o;
    o.name = "softmax_rows";
    AotArtifact a = compile_aot(p, t, out.string(), o);
    for (const auto &f : {a.static_lib, a.shared_lib, a.header, a.halide_header, a.manifest})
        EXPECT_TRUE(fs::exists(f)) << f;
    std::string h = slurp(a.header);
    for (const char *fn : {"softmax_rows_create(void)", "softmax_rows_run_host(", "softmax_rows_run_device(",
                           "softmax_rows_destroy(", "softmax_rows_last_error(", "softmax_rows_set_cuda_graphs(",
                           "softmax_rows_cuda_graph_status(", "softmax_rows_set_threading("})
        EXPECT_NE(h.find(fn), std::string::npos) << fn;
    // The PTX is embedded in the pipeline object: one kernel per fusion group; the row kernel loads
    // and stores 8-byte vectors whole (aligned buffers), with no 16-byte stores split into halves.
    std::string obj = slurp(out / "softmax_rows_halide.o");
    EXPECT_NE(obj.find(".entry"), std::string::npos);
    EXPECT_NE(obj.find("ld.global.nc.v2.f32"), std::string::npos);
    EXPECT_NE(obj.find("st.global.v2.f32"), std::string::npos);
    EXPECT_EQ(obj.find("st.global.u64"), std::string::npos);
    EXPECT_NE(slurp(a.manifest).find("cuda 1"), std::string::npos);

    // Buffer alignment through the C API (no GPU needed: both checks come before any CUDA call).
    void *lib = dlopen(a.shared_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto create = (void *(*)())dlsym(lib, "softmax_rows_create");
    using RunFn = int (*)(void *, const void *const *, void *const *);
    auto run_device = (RunFn)dlsym(lib, "softmax_rows_run_device");
    auto run_host = (RunFn)dlsym(lib, "softmax_rows_run_host");
    auto last_error = (const char *(*)())dlsym(lib, "softmax_rows_last_error");
    auto destroy = (void (*)(void *))dlsym(lib, "softmax_rows_destroy");
    ASSERT_TRUE(create && run_device && run_host && last_error && destroy);
    void *m = create();
    std::vector<float> storage(2 * 64 * 256 + 8);
    float *aligned = storage.data() + (16 - (uintptr_t)storage.data() % 16) % 16 / sizeof(float);
    // A device pointer off the 16-byte grid: refused, naming the input and the fix.
    const void *bad_in[] = {aligned + 1};
    void *outs[] = {aligned + 64 * 256 + 4};
    EXPECT_NE(run_device(m, bad_in, outs), 0);
    std::string err = last_error();
    EXPECT_NE(err.find("input 'x'"), std::string::npos) << err;
    EXPECT_NE(err.find("not 16-byte aligned"), std::string::npos) << err;
    EXPECT_NE(err.find("cudaMalloc"), std::string::npos) << err;
    // A misaligned host pointer is staged through an aligned copy, not refused by Halide's check
    // (here the run then stops at the missing CUDA driver, or runs where there is one).
    int rc_host = run_host(m, bad_in, outs);
    err = last_error();
    EXPECT_EQ(err.find("aligned"), std::string::npos) << err;
    if (rc_host != 0) {
        EXPECT_FALSE(err.empty());
    }
    destroy(m);

    // Whole-model CUDA graphs (codegen/cuda_graph_glue.h): on unless LOOM_CUDA_GRAPHS=0 or the
    // C API turns them off; the status says why a model runs directly. (Capture and replay need a
    // GPU: bench/gpu/run_networks.sh and loom_run check replays on poisoned outputs there.)
    auto set_graphs = (int (*)(void *, int))dlsym(lib, "softmax_rows_set_cuda_graphs");
    auto graph_status = (const char *(*)(void *))dlsym(lib, "softmax_rows_cuda_graph_status");
    ASSERT_TRUE(set_graphs && graph_status);
    setenv("LOOM_CUDA_GRAPHS", "0", 1);
    m = create();
    unsetenv("LOOM_CUDA_GRAPHS");
    std::string status = graph_status(m);
    EXPECT_EQ(status.rfind("off (", 0), 0u) << status;
    EXPECT_EQ(set_graphs(m, 1), 0);
    // On again where a driver with the graph API loads (a stub libcuda does), else still off.
    status = graph_status(m);
    bool on = status.rfind("direct: not yet called twice", 0) == 0;
    EXPECT_TRUE(on || status.rfind("off (", 0) == 0) << status;
    EXPECT_EQ(set_graphs(m, 0), on ? 1 : 0);
    EXPECT_EQ(std::string(graph_status(m)), "off (set_cuda_graphs)");
    EXPECT_NE(run_device(nullptr, bad_in, outs), 0);
    err = last_error();
    EXPECT_NE(err.find("softmax_rows_run_device: the model handle is NULL"), std::string::npos) << err;
    // OpenMP threading is a host matter: refused with why and what to pass.
    auto set_threading = (int (*)(int))dlsym(lib, "softmax_rows_set_threading");
    ASSERT_TRUE(set_threading);
    EXPECT_EQ(set_threading(0), 0);
    EXPECT_EQ(set_threading(1), -1);
    err = last_error();
    EXPECT_NE(err.find("softmax_rows_set_threading: OpenMP threading is for host artifacts"), std::string::npos) << err;
    destroy(m);
    destroy(nullptr);  // as free(NULL)
    dlclose(lib);

    // A C program links against the static library with only libc/libdl (no libHalide, no libcuda).
    fs::path c = out / "main.c", exe = out / "main";
    std::ofstream(c) << "#include \"softmax_rows.h\"\n#include <stdio.h>\nint main(void) {\n"
                        "  printf(\"%d %d\\n\", softmax_rows_num_inputs(), softmax_rows_num_outputs());\n"
                        "  return softmax_rows_create == 0; }\n";
    std::string output;
    int rc = loom::testing::run_command("cc -I" + out.string() + " " + c.string() + " " + a.static_lib + " -o " +
                                   exe.string() + " -ldl -lpthread -lstdc++ -lm && " + exe.string(),
                               output);
    EXPECT_EQ(rc, 0) << output;
    EXPECT_NE(output.find("1 1"), std::string::npos) << output;
    fs::remove_all(out.parent_path());
}

// Halide's runtime frees its cached device allocations through the graph glue's cuMemFree hook from
// an exit-time destructor, which may run after the glue's own static objects are destroyed: the
// hooks' state must not be a namespace-scope object with a destructor (a std::set there was read
// and erased after free at exit: heap corruption on the H200, found by ASAN). Every line of the
// chunk at namespace scope (no indentation) that declares a std:: container is a defect.
TEST(Aot, GraphGlueStateOutlivesStaticDestructors) {
    std::istringstream src(loom::cuda_graph_glue_source());
    int containers = 0;
    for (std::string line; std::getline(src, line);) {
        bool top_level = !line.empty() && line[0] != ' ' && line[0] != '/' && line[0] != '#' && line[0] != '}';
        for (const char *c : {"std::set<", "std::vector<", "std::map<", "std::string "})
            if (top_level && line.rfind(c, 0) == 0) {
                ADD_FAILURE() << "namespace-scope object with a destructor: " << line;
                containers++;
            }
    }
    EXPECT_EQ(containers, 0);
    EXPECT_NE(loom::cuda_graph_glue_source().find("new GraphMemory"), std::string::npos);
}

// With LowerOptions::gemm_extern (what `loom compile --target cuda` uses), the mlp fixture's Gemms
// (constant weights) become extern stages calling cuBLAS: fc1 (bias, then only a Relu) one
// cuBLASLt call with the RELU_BIAS epilogue that stands for the Relu's output (no Halide Relu Func
// left), fc2 and fc3 cublasSgemm with the bias in Halide. The shared object defines both C
// functions and links libcublas/libcublasLt. CPU lowering is unchanged.
TEST(Aot, CudaGemmCallsCublasExternStage) {
    Graph g = import_onnx(loom::testing::data_path("mlp.onnx"));
    prepare_graph(g);
    EXPECT_TRUE(lower_graph(g).extern_calls.empty());
    LowerOptions lo;
    lo.gemm_extern = true;
    LoweredPipeline p = lower_graph(g, lo);
    EXPECT_EQ(p.extern_calls, (std::vector<std::string>{"loom_cublaslt_bias_act", "loom_cublas_sgemm"}));
    int externs = 0;
    for (const auto &f : p.funcs) {
        EXPECT_NE(f.op, "Relu") << f.name << ": the ReLU is cuBLASLt's epilogue";
        externs += f.is_extern;
    }
    EXPECT_EQ(externs, 1);
    lo.fuse_activation_epilogue = false;
    EXPECT_EQ(lower_graph(g, lo).extern_calls, std::vector<std::string>{"loom_cublas_sgemm"});
    auto [object, output] = cuda_artifact(p, "mlp");
    EXPECT_NE(object.find("loom_cublas_sgemm"), std::string::npos);
    EXPECT_NE(object.find("loom_cublaslt_bias_act"), std::string::npos);
    EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
    EXPECT_NE(output.find("T loom_cublaslt_bias_act"), std::string::npos) << output;
    EXPECT_NE(output.find("cublasGemmStridedBatchedEx"), std::string::npos) << output;
    EXPECT_NE(output.find("cublasLtMatmul"), std::string::npos) << output;
    EXPECT_NE(output.find("libcublasLt.so"), std::string::npos) << output;
}

// A cublasLtMatmul captured into the model's CUDA graph whose configuration keeps counters in its
// workspace (Hopper's TF32/BF16 kernels: a memset node before each kernel) gets a workspace slot of
// its own, which the cuBLAS stage exports (loom_cublaslt_private_workspace), and the glue merges the
// memsets of such slots into one root of the graph before instantiating it, so that they leave the
// chain of kernels (bench/DECISIONS.md#d163-cuda-graph-library-memsets-merged). An artifact without
// a cuBLAS stage leaves the symbol weak and undefined: it loads, and nothing is merged.
TEST(Aot, CudaLibraryMemsetsLeaveTheKernelChain) {
    const std::string cublas = loom::cublas_gemm_source(), glue = loom::cuda_graph_glue_source();
    EXPECT_NE(cublas.find("cudaStreamIsCapturing(stream, &capturing)"), std::string::npos);
    EXPECT_NE(cublas.find("p.workspace <= kLtPrivateSlot"), std::string::npos);
    const size_t hoist = glue.find("(g.hoisted = hoist_library_memsets(graph)) >= 0"), inst = glue.find("g_api.instantiate(&g.exec");
    ASSERT_NE(hoist, std::string::npos);
    EXPECT_LT(hoist, inst) << "memsets move before the graph is instantiated";
    for (const char *fn : {"\"cuGraphGetEdges\"", "\"cuGraphAddDependencies\"", "\"cuGraphRemoveDependencies\"",
                           "\"cuGraphMemsetNodeGetParams\"", "\"cuGraphMemsetNodeSetParams\"", "\"cuGraphDestroyNode\""})
        EXPECT_NE(glue.find(fn), std::string::npos) << fn;

    Graph g = import_onnx(loom::testing::data_path("mlp.onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.gemm_extern = true;
    LoweredPipeline p = lower_graph(g, lo);
    Halide::Target t = aot_target("cuda");
    apply_schedule(gpu_auto_schedule(p, t), p, t);
    fs::path out = scratch("cuda_mlp_memsets");
    AotOptions o;
    o.name = "mlp_memsets";
    AotArtifact a = compile_aot(p, t, out.string(), o);
    std::string output;
    EXPECT_EQ(loom::testing::run_command("nm -D " + a.shared_lib, output), 0) << output;
    EXPECT_NE(output.find(" T loom_cublaslt_private_workspace"), std::string::npos) << output;
    void *lib = dlopen(a.shared_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto owns = (int (*)(uint64_t, size_t))dlsym(lib, "loom_cublaslt_private_workspace");
    ASSERT_NE(owns, nullptr);
    EXPECT_EQ(owns(4096, 131), 0) << "no slot handed out before a capture";
    dlclose(lib);
    fs::remove_all(out.parent_path());

    Graph sg = import_onnx(loom::testing::data_path("softmax_rows.onnx"));
    prepare_graph(sg);
    LoweredPipeline sp = lower_graph(sg, lo);
    EXPECT_TRUE(sp.extern_calls.empty());
    auto [object, symbols] = cuda_artifact(sp, "softmax_memsets");
    EXPECT_NE(symbols.find(" w loom_cublaslt_private_workspace"), std::string::npos) << symbols;
}

// In BF16 a GEMM with a constant B reads BF16 operands: B rounded at compile time, A through a
// Halide copy `<node>_a_bf16` that the schedule computes at root (cuBLASLt's FAST_16BF on FP32
// operands ran TF32 kernels); FP32 and TF32 keep FP32 operands. The artifact compiles and links.
TEST(Aot, CudaBf16GemmReadsBf16Operands) {
    Graph g = import_onnx(loom::testing::data_path("mlp.onnx"));
    prepare_graph(g);
    auto copies = [](const LoweredPipeline &p) {
        int n = 0;
        for (const auto &f : p.funcs) n += f.feeds_extern && ends_with(f.name, "_a_bf16") && f.dtype == DType::I16;
        return n;
    };
    LowerOptions lo;
    lo.gemm_extern = true;
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::FP16}) {
        lo.gemm_precision = p;
        EXPECT_EQ(copies(lower_graph(g, lo)), 0) << precision_name(p);
    }
    lo.gemm_precision = Precision::BF16;
    LoweredPipeline p = lower_graph(g, lo);
    EXPECT_EQ(p.extern_calls, (std::vector<std::string>{"loom_cublaslt_bias_act", "loom_cublas_sgemm"}));
    EXPECT_EQ(copies(p), 3);  // fc1 (the RELU_BIAS epilogue), fc2, fc3
    auto [object, output] = cuda_artifact(p, "mlp_bf16");
    EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
    EXPECT_NE(output.find("T loom_cublaslt_bias_act"), std::string::npos) << output;
}

// With LowerOptions::gemm_split_tf32 under FP32 (`--split-tf32`), every GEMM with a constant B runs
// as 3xTF32 (D200): its A is a Halide copy `<node>_a_tf32x2` [.., M, 2, K] of high and low parts
// (a pointwise producer on an earlier GEMM computed inside it, as D138's BF16 copy), B a constant
// [2K, N] of B_lo's rows then B_hi's that add up to the weight exactly, and the stage's precision
// argument carries kGemmSplitTf32; the RELU_BIAS epilogue and a rank-3 A (BERT's [B, S, K]) take
// it too. Without the option, or under TF32, nothing changes. The artifact compiles (PTX and C API).
TEST(Aot, CudaFp32GemmSplitTf32) {
    using loom::testing::GraphBuilder;
    GraphBuilder b;
    std::string x = b.input("x", {2, 8, 32});
    std::string w1 = b.random_constant("w1", {32, 48}, 1), w2 = b.random_constant("w2", {48, 16}, 2);
    std::string h = b.node("Tanh", {b.node("MatMul", {x, w1}, {2, 8, 48}, {}, DType::F32, "fc1")}, {2, 8, 48}, {},
                           DType::F32, "act");
    b.out("MatMul", {h, w2}, {2, 8, 16}, {}, DType::F32, "fc2");
    Graph mlp = import_onnx(loom::testing::data_path("mlp.onnx"));
    prepare_graph(mlp);
    // {copy name, rank} of each split A, and the precision arguments of the GEMM stages.
    auto split_copies = [](const LoweredPipeline &p) {
        std::map<std::string, int> copies;
        for (const auto &f : p.funcs)
            if (f.feeds_extern && ends_with(f.name, "_a_tf32x2")) copies[f.name] = (int)f.func.dimensions();
        return copies;
    };
    auto stages = [](const LoweredPipeline &p) {
        std::vector<Halide::Internal::Function> out;
        std::set<std::string> seen;
        for (const auto &f : p.funcs)
            if (f.func.defined())
                for (const auto &[name, callee] : Halide::Internal::find_direct_calls(f.func.function()))
                    if (callee.has_extern_definition() && seen.insert(name).second &&
                        callee.extern_function_name().rfind("loom_cublas", 0) == 0)
                        out.push_back(callee);
        return out;
    };
    auto precision_arg = [](const Halide::Internal::Function &fn) {
        const auto &args = fn.extern_arguments();
        const bool epilogue = fn.extern_function_name() == kCublasLtBiasAct;
        const Halide::Expr e = args[args.size() - (epilogue ? 2 : 1)].expr;
        const auto *imm = e.as<Halide::Internal::IntImm>();
        return imm ? (int)imm->value : -1;
    };
    LowerOptions lo;
    lo.gemm_extern = true;
    lo.buffer_alignment = 16;
    for (Precision prec : {Precision::FP32, Precision::TF32}) {
        lo.gemm_precision = prec;
        LoweredPipeline p = lower_graph(b.g, lo);
        EXPECT_TRUE(split_copies(p).empty()) << precision_name(prec);
        for (const auto &fn : stages(p)) EXPECT_EQ(precision_arg(fn), (int)prec) << fn.name();
    }
    lo.gemm_split_tf32 = true;
    lo.gemm_precision = Precision::TF32;
    EXPECT_TRUE(split_copies(lower_graph(b.g, lo)).empty()) << "TF32 keeps its one GEMM";
    lo.gemm_precision = Precision::FP32;
    LoweredPipeline p = lower_graph(b.g, lo);
    ASSERT_EQ(split_copies(p).size(), 2u);
    for (const auto &[name, rank] : split_copies(p)) EXPECT_EQ(rank, 4) << name << ": [B, S, 2, K]";
    ASSERT_NE(p.find("act"), nullptr);
    EXPECT_FALSE(p.find("act")->feeds_extern) << "the tanh is computed inside fc2's split copy";
    ASSERT_EQ(stages(p).size(), 2u);
    for (const auto &fn : stages(p)) {
        SCOPED_TRACE(fn.name());
        EXPECT_EQ(precision_arg(fn), kGemmSplitTf32);
        const Halide::Buffer<> wb = fn.extern_arguments()[1].buffer;
        const bool first = fn.name().rfind("fc1", 0) == 0;
        const Tensor &w = b.g.initializers.at(first ? w1 : w2);
        const int K = (int)w.shape()[0], N = (int)w.shape()[1];
        ASSERT_EQ(wb.dimensions(), 2);
        ASSERT_EQ(wb.dim(0).extent(), N);
        ASSERT_EQ(wb.dim(1).extent(), 2 * K);
        const Halide::Buffer<float> wf(wb);
        const float *wd = static_cast<const float *>(w.data());
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) {
                EXPECT_EQ(wf(j, k) + wf(j, K + k), wd[k * N + j]) << k << "," << j;
                EXPECT_EQ(tf32_high(wf(j, K + k)), wf(j, K + k)) << "B_hi exact in TF32";
            }
    }
    auto [object, output] = cuda_artifact(p, "split_tf32");
    EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
    LoweredPipeline m = lower_graph(mlp, lo);  // fc1 with the RELU_BIAS epilogue, fc2, fc3
    EXPECT_EQ(split_copies(m).size(), 3u);
    int epilogues = 0;
    for (const auto &fn : stages(m)) {
        EXPECT_EQ(precision_arg(fn), kGemmSplitTf32) << fn.name();
        epilogues += fn.extern_function_name() == kCublasLtBiasAct;
    }
    EXPECT_EQ(epilogues, 1);
    auto [mlp_object, mlp_output] = cuda_artifact(m, "mlp_split_tf32");
    EXPECT_NE(mlp_output.find("T loom_cublaslt_bias_act"), std::string::npos) << mlp_output;
}

// Loads in the PTX of kernel \p entry (`.entry _kernel_<entry>...`) of \p ptx: {whole-vector loads,
// element loads} from global memory.
std::pair<int, int> global_loads(const std::string &ptx, const std::string &entry) {
    const size_t at = ptx.find(".entry _kernel_" + entry);
    if (at == std::string::npos) return {-1, -1};
    std::istringstream lines(ptx.substr(at, ptx.find("\n}\n", at) - at));
    int vector = 0, scalar = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.find("ld.global") == std::string::npos) continue;
        const bool v = line.find(".v2.") != std::string::npos || line.find(".v4.") != std::string::npos;
        vector += v;
        scalar += !v;
    }
    return {vector, scalar};
}

// Under BF16 a GEMM's A whose producer is pointwise work on an earlier library stage's output (a
// bias and an activation after a GEMM) is computed inside the GEMM's BF16 copy, one kernel that
// reads the earlier GEMM's FP32 output and writes BF16 (D138); a producer that reads a reduction
// (a Softmax, as a LayerNorm) stays materialized, and in FP32 every A stays a kernel of its own.
// Every cuBLAS stage's buffer is bounded to its shape (D131), so the kernels reading one load whole
// vectors: the PTX of the copy (BF16) and of the activation kernel (FP32) has no element load.
TEST(Aot, CudaBf16GemmCopyComputesPointwiseProducer) {
    using loom::testing::GraphBuilder;
    GraphBuilder b;
    std::string x = b.input("x", {64, 128});
    std::string w1 = b.random_constant("w1", {128, 256}, 1), b1 = b.random_constant("b1", {256}, 2);
    std::string w2 = b.random_constant("w2", {256, 64}, 3), b2 = b.random_constant("b2", {64}, 4);
    std::string w3 = b.random_constant("w3", {64, 32}, 5);
    std::string h1 = b.node("Add", {b.node("MatMul", {x, w1}, {64, 256}, {}, DType::F32, "fc1"), b1}, {64, 256});
    std::string t = b.node("Tanh", {h1}, {64, 256}, {}, DType::F32, "act");
    std::string h2 = b.node("Add", {b.node("MatMul", {t, w2}, {64, 64}, {}, DType::F32, "fc2"), b2}, {64, 64});
    std::string sm = b.node("Softmax", {h2}, {64, 64}, {{"axis", int64_t(1)}}, DType::F32, "probs");
    b.out("Tanh", {b.node("MatMul", {sm, w3}, {64, 32}, {}, DType::F32, "fc3")}, {64, 32});
    const Halide::Target target = aot_target("cuda");
    for (Precision prec : {Precision::BF16, Precision::FP32}) {
        SCOPED_TRACE(precision_name(prec));
        const bool bf16 = prec == Precision::BF16;
        LowerOptions lo;
        lo.gemm_extern = true;
        lo.buffer_alignment = 16;
        lo.gemm_precision = prec;
        LoweredPipeline p = lower_graph(b.g, lo);
        ASSERT_NE(p.find("act"), nullptr);
        EXPECT_EQ(p.find("act")->feeds_extern, !bf16) << "the tanh is computed in fc2's BF16 copy";
        ASSERT_NE(p.find("probs"), nullptr);
        EXPECT_TRUE(p.find("probs")->feeds_extern) << "a reduction's reader stays materialized";
        for (const char *gemm : {"fc1", "fc2", "fc3"}) {  // each a read of its cuBLAS stage
            ASSERT_NE(p.find(gemm), nullptr) << gemm;
            int stages = 0;
            for (const auto &[name, fn] : Halide::Internal::find_direct_calls(p.find(gemm)->func.function()))
                if (fn.has_extern_definition()) {
                    EXPECT_EQ(fn.schedule().bounds().size(), 2u) << name << ": bounded to its shape";
                    stages++;
                }
            EXPECT_EQ(stages, 1) << gemm;
        }
        const std::string text = print_schedule(gpu_auto_schedule(p, target));
        EXPECT_EQ(text.find("act.compute_inline()") != std::string::npos, bf16) << text;
        auto [object, output] = cuda_artifact(p, bf16 ? "copy_tanh_bf16" : "copy_tanh_fp32");
        EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
        const std::string ptx = embedded_ptx(object);
        const auto [vector, scalar] = global_loads(ptx, bf16 ? "fc2_a_bf16" : "act");
        EXPECT_GT(vector, 0) << ptx;
        EXPECT_EQ(scalar, 0) << "the GEMM's output and the bias loaded as whole vectors: " << ptx;
    }
}

// A chain of pure Adds over library stages' outputs (a pre-norm transformer's residual stream) is
// inlined only while it reads at most kMaxInlinedReads tensors: the Add reading a fifth GEMM output
// is a kernel of its own, and the chain after it starts again from it (D139). Before, every kernel
// at the end of ViT-B/16's residual stream re-read all the GEMM outputs before it.
TEST(Aot, CudaInlinedChainsReadBoundedTensors) {
    using loom::testing::GraphBuilder;
    GraphBuilder b;
    std::string x = b.input("x", {64, 128});
    std::vector<std::string> g;
    for (int k = 0; k < 6; k++)
        g.push_back(b.node("MatMul", {x, b.random_constant("w" + std::to_string(k), {128, 64}, 10 + k)}, {64, 64}, {},
                           DType::F32, "g" + std::to_string(k)));
    std::string sum = g[0];
    for (int k = 1; k < 6; k++) sum = b.node("Add", {sum, g[k]}, {64, 64}, {}, DType::F32, "a" + std::to_string(k));
    b.out("Tanh", {sum}, {64, 64});
    LowerOptions lo;
    lo.gemm_extern = true;
    LoweredPipeline p = lower_graph(b.g, lo);
    const std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
    for (const char *inlined : {"a1", "a2", "a3", "a5"})
        EXPECT_NE(text.find(std::string(inlined) + ".compute_inline();"), std::string::npos) << inlined << ": " << text;
    EXPECT_NE(text.find("a4.compute_root()"), std::string::npos) << "a4 reads five GEMM outputs: " << text;
    auto [object, output] = cuda_artifact(p, "residual_chain");
    EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
}

// With LowerOptions::conv_extern, the cnn fixture's 2-D convs (constant filters, symmetric pads)
// become extern stages calling cuDNN. Both feed only a Relu, so cuDNN applies the bias and the ReLU
// (fuse_activation_epilogue): the extern is listed as a LoweredFunc (is_extern) standing for the
// Relu's output, and no Halide Relu Func is left. The depthwise conv stays Halide's (faster there
// than cuDNN's grouped kernel), its ReLU6 (Relu, then Clip) one Clip after prepare_graph. Without
// the fusion each dense conv's bias and Relu stay Halide Funcs reading its extern.
TEST(Aot, CudaConvCallsCudnnExternStage) {
    Graph g = import_onnx(loom::testing::data_path("cnn.onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.conv_extern = true;
    lo.fuse_activation_epilogue = false;
    LoweredPipeline plain = lower_graph(g, lo);
    int pointwise_convs = 0, relus = 0;
    for (const auto &f : plain.funcs) {
        pointwise_convs += f.op == "Conv" && f.is_pointwise && !f.is_extern && !ends_with(f.name, "_pad");
        relus += f.op == "Relu";
    }
    EXPECT_EQ(pointwise_convs, 2);
    EXPECT_EQ(relus, 2);
    lo.fuse_activation_epilogue = true;
    LoweredPipeline p = lower_graph(g, lo);
    ASSERT_EQ(p.extern_calls, std::vector<std::string>{"loom_cudnn_conv"});
    int externs = 0, halide_convs = 0;
    for (const auto &f : p.funcs) {
        EXPECT_NE(f.op, "Relu") << f.name << ": the ReLU is applied by cuDNN";
        if (f.op == "Conv") {
            externs += f.is_extern;
            halide_convs += !f.update_rvars.empty();
        }
    }
    EXPECT_EQ(externs, 2);
    EXPECT_EQ(halide_convs, 1) << "the depthwise conv";
    // A schedule cannot touch an extern stage, and says why.
    std::string ext;
    for (const auto &f : p.funcs)
        if (f.is_extern) ext = f.name;
    try {
        validate_schedule(parse_schedule(ext + ".compute_root();", "cnn.cuda.sched"), p, aot_target("cuda"));
        ADD_FAILURE() << "a statement on an extern stage was accepted";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find(ext + " is an extern stage"), std::string::npos) << e.what();
    }
    auto [object, output] = cuda_artifact(p, "cnn");
    EXPECT_NE(object.find("loom_cudnn_conv"), std::string::npos);
    EXPECT_NE(output.find("T loom_cudnn_conv"), std::string::npos) << output;
    EXPECT_NE(output.find("cudnnConvolutionForward"), std::string::npos) << output;
    EXPECT_NE(output.find("libcudnn.so"), std::string::npos) << output;
}

namespace {

// x -> conv1 (3x3, bias) -> Relu -> conv2 (1x1, bias) + that Relu's output -> Relu -> conv3 (3x3)
// -> Tanh, all [2, 8, 6, 6], random constant filters; returns conv1's filter.
std::string residual_conv_block(loom::testing::GraphBuilder &b) {
    using Ints = std::vector<int64_t>;
    const Shape s = {2, 8, 6, 6};
    std::string x = b.input("x", s);
    std::string w1 = b.random_constant("w1", {8, 8, 3, 3}, 1), w2 = b.random_constant("w2", {8, 8, 1, 1}, 2);
    std::string w3 = b.random_constant("w3", {8, 8, 3, 3}, 3), b1 = b.random_constant("b1", {8}, 4);
    std::string b2 = b.random_constant("b2", {8}, 5);
    const std::map<std::string, AttrValue> k3 = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
    std::string r1 = b.node("Relu", {b.node("Conv", {x, w1, b1}, s, k3, DType::F32, "conv1")}, s);
    std::string c2 = b.node("Conv", {r1, w2, b2}, s, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "conv2");
    std::string r2 = b.node("Relu", {b.node("Add", {c2, r1}, s, {}, DType::F32, "residual")}, s);
    b.out("Tanh", {b.node("Conv", {r2, w3}, s, k3, DType::F32, "conv3")}, s);
    return w1;
}

}  // namespace

// With conv_nhwc in BF16 (D115) every cuDNN conv reads and writes BF16 tensors with channels
// innermost: the constant filter rounded once at compile time and stored KRSC, the input a Halide
// copy `<node>_x_nhwc_bf16` (stored NHWC by the schedule, threads along the channels) that the
// input's other consumers share (the residual Add reads it through `_x_view`), the output an NHWC
// BF16 extern whose bias and ReLU stay Halide Funcs; a 1x1 conv goes to cuDNN too, not cuBLAS.
// Without conv_nhwc FP32 and TF32 keep FP32 NCHW stages and no copies. The artifact compiles and
// links.
TEST(Aot, CudaBf16ConvsAreBf16Nhwc) {
    loom::testing::GraphBuilder b;
    const std::string w1 = residual_conv_block(b);
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = true;
    // The extern stage a conv's node Func reads.
    auto stage_of = [](const LoweredPipeline &p, const std::string &conv) {
        for (const auto &c : Halide::Internal::find_direct_calls(p.find(conv)->func.function()))
            if (c.second.has_extern_definition()) return c.second;
        ADD_FAILURE() << conv << " reads no extern stage";
        return Halide::Internal::Function();
    };
    for (Precision prec : {Precision::FP32, Precision::TF32}) {
        lo.gemm_precision = prec;
        LoweredPipeline p = lower_graph(b.g, lo);
        for (const auto &f : p.funcs) EXPECT_FALSE(f.channels_last || ends_with(f.name, "_x_nhwc_bf16")) << f.name;
        EXPECT_EQ(stage_of(p, "conv3").output_types()[0], Halide::Float(32)) << precision_name(prec);
    }
    lo.gemm_precision = Precision::BF16;
    lo.conv_nhwc = true;
    LoweredPipeline p = lower_graph(b.g, lo);
    EXPECT_EQ(p.extern_calls, std::vector<std::string>{"loom_cudnn_conv"}) << "the 1x1 conv is cuDNN's too";
    std::vector<std::string> copies;
    for (const auto &f : p.funcs)
        if (ends_with(f.name, "_x_nhwc_bf16")) {
            copies.push_back(f.name);
            EXPECT_TRUE(f.channels_last && f.feeds_extern && f.dtype == DType::I16) << f.name;
        }
    EXPECT_EQ(copies, (std::vector<std::string>{"conv1_x_nhwc_bf16", "conv2_x_nhwc_bf16", "conv3_x_nhwc_bf16"}));
    // The residual Add reads conv2's copy of r1, not r1's FP32 Func.
    const std::vector<std::string> &add_reads = p.find("residual")->producers;
    EXPECT_NE(std::find(add_reads.begin(), add_reads.end(), "conv2_x_view"), add_reads.end());
    for (const char *conv : {"conv1", "conv2", "conv3"}) {
        Halide::Internal::Function ext = stage_of(p, conv);
        ASSERT_TRUE(ext.has_extern_definition()) << conv;
        EXPECT_EQ(ext.output_types()[0], Halide::UInt(16)) << conv;
        const auto &dims = ext.schedule().storage_dims();
        ASSERT_EQ(dims.size(), 4u);
        EXPECT_EQ(dims[0].var, ext.args()[2]) << conv << ": channels innermost in memory";  // args (w, h, c, n)
        const std::vector<Halide::ExternFuncArgument> &args = ext.extern_arguments();
        EXPECT_EQ(args.back().expr.as<Halide::Internal::IntImm>()->value, 2 + kConvNhwc) << conv;
        EXPECT_EQ(args[3 + 4 + 7].expr.as<Halide::Internal::IntImm>()->value, 0) << conv << ": mode 0, no fused ReLU";
    }
    // conv1's filter: bfloat16 bits in KRSC order (Halide order c, s, r, k).
    Halide::Buffer<uint16_t> wb = stage_of(p, "conv1").extern_arguments()[1].buffer;
    ASSERT_EQ(wb.dimensions(), 4);
    EXPECT_EQ(wb.dim(0).extent(), 8);
    const float *wf = static_cast<const float *>(b.g.constant(w1)->data());
    for (int k : {0, 5})
        for (int c : {1, 7})
            for (int r : {0, 2})
                for (int q : {1, 2})
                    EXPECT_EQ(wb(c, q, r, k), Halide::bfloat16_t(wf[((k * 8 + c) * 3 + r) * 3 + q]).to_bits());
    // The schedule stores the copies NHWC and runs their threads along the channels.
    const Schedule sched = gpu_auto_schedule(p, aot_target("cuda"));
    std::string text = print_schedule(sched);
    EXPECT_NE(text.find("conv2_x_nhwc_bf16.compute_root()\n    .reorder_storage(c, w, h, n)"), std::string::npos) << text;
    EXPECT_NE(text.find(".gpu_threads(ct, wt)"), std::string::npos) << text;
    auto [object, output] = cuda_artifact(p, "bf16_nhwc_convs");
    EXPECT_NE(output.find("T loom_cudnn_conv"), std::string::npos) << output;
}

// A kernel reading a BF16 NHWC stage through inlined Funcs (here a MaxPool of a conv's biased
// output) is stored NHWC with its threads along the channels (D116), a reduction's init and taps in
// each thread's registers (D118); with NCHW convs nothing reads NHWC data and no kernel reorders
// its storage. The artifact compiles and links.
TEST(Aot, CudaKernelsReadingNhwcStagesAreChannelsLast) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    GraphBuilder b;
    std::string x = b.input("x", {2, 8, 8, 8});
    std::string w1 = b.random_constant("w1", {16, 8, 3, 3}, 1), b1 = b.random_constant("b1", {16}, 2);
    std::string w2 = b.random_constant("w2", {16, 16, 3, 3}, 3);
    const std::map<std::string, AttrValue> k3 = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
    std::string c1 = b.node("Conv", {x, w1, b1}, {2, 16, 8, 8}, k3, DType::F32, "conv1");
    std::string pool = b.node("MaxPool", {c1}, {2, 16, 4, 4}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
                              DType::F32, "pool");
    b.out("Tanh", {b.node("Conv", {b.node("Relu", {pool}, {2, 16, 4, 4}), w2}, {2, 16, 4, 4}, k3, DType::F32, "conv2")},
          {2, 16, 4, 4});
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = true;
    const Halide::Target t = aot_target("cuda");
    lo.gemm_precision = Precision::FP32;
    LoweredPipeline fp32 = lower_graph(b.g, lo);
    std::string text = print_schedule(gpu_auto_schedule(fp32, t));
    EXPECT_EQ(text.find("reorder_storage"), std::string::npos) << text;
    lo.gemm_precision = Precision::BF16;
    lo.conv_nhwc = true;
    LoweredPipeline p = lower_graph(b.g, lo);
    text = print_schedule(gpu_auto_schedule(p, t));
    // Its consumers read a wrapper stored NHWC with threads along the channels; each thread
    // computes its vector of channels, init and taps, in registers (D118).
    const size_t wrapper = text.find("pool_w.compute_root()\n    .reorder_storage(c, w, h, n)");
    ASSERT_NE(wrapper, std::string::npos) << text;
    EXPECT_NE(text.substr(wrapper, text.find(';', wrapper) - wrapper).find(".gpu_threads(ct, wt)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("pool.compute_at(pool_w, ct).reorder(c, w, h, n).vectorize(c);"), std::string::npos) << text;
    EXPECT_NE(text.find("pool.update(0).reorder(c, r.x, r.y, w, h, n).vectorize(c);"), std::string::npos)
        << "the taps serial inside each thread, the channels a vector: " << text;
    auto [object, output] = cuda_artifact(p, "nhwc_pool");
    EXPECT_NE(output.find("T loom_cudnn_conv"), std::string::npos) << output;
}

// An SE block's depthwise conv under conv_nhwc (MobileNetV3's: a 1x1 cuDNN conv and ReLU before
// it, its ReLU read by a GlobalAveragePool and by the gate's Mul) is a channels-last reduction
// whose kernel loads whole vectors: its filter stored [kH][kW][C] at compile time
// (channels_last_depthwise_filters), the cuDNN output it reads and its own wrapper bounded to
// their shapes, so that every stride is a constant and Halide proves the channel vectors aligned.
// Its PTX holds no scalar global load (the D118 kernel loaded each BF16 element and each filter
// tap of each channel on its own); with the graph's filter layout (TF32 here) each channel's tap is
// a load of its own again. The artifacts compile and link.
TEST(Aot, CudaChannelsLastDepthwiseLoadsWholeVectors) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    GraphBuilder b;
    const Shape s = {2, 32, 10, 10};
    std::string x = b.input("x", {2, 16, 10, 10});
    std::string w1 = b.random_constant("w1", {32, 16, 1, 1}, 1), b1 = b.random_constant("b1", {32}, 2);
    std::string w2 = b.random_constant("w2", {32, 1, 3, 3}, 3), b2 = b.random_constant("b2", {32}, 4);
    std::string w3 = b.random_constant("w3", {32, 32, 1, 1}, 5), w4 = b.random_constant("w4", {16, 32, 1, 1}, 6);
    std::string r1 = b.node("Relu", {b.node("Conv", {x, w1, b1}, s, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "expand")}, s);
    std::string dw = b.node("Conv", {r1, w2, b2}, s,
                            {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(32)}},
                            DType::F32, "dw");
    std::string r2 = b.node("Relu", {dw}, s);
    std::string pool = b.node("GlobalAveragePool", {r2}, {2, 32, 1, 1}, {}, DType::F32, "pool");
    std::string gate = b.node("HardSigmoid", {b.node("Conv", {pool, w3}, {2, 32, 1, 1}, {{"kernel_shape", Ints{1, 1}}})},
                              {2, 32, 1, 1}, {{"alpha", 1.0f / 6}, {"beta", 0.5f}});
    std::string scaled = b.node("Mul", {r2, gate}, s, {}, DType::F32, "scale");
    b.out("Tanh", {b.node("Conv", {scaled, w4}, {2, 16, 10, 10}, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "project")},
          {2, 16, 10, 10});
    const Halide::Target t = aot_target("cuda");
    for (Precision prec : {Precision::BF16, Precision::TF32}) {
        SCOPED_TRACE(precision_name(prec));
        LowerOptions lo;
        const bool taps_innermost = prec == Precision::BF16;
        lo.gemm_extern = lo.conv_extern = lo.conv_nhwc = true;
        lo.channels_last_depthwise_filters = taps_innermost;
        lo.buffer_alignment = 16;
        lo.gemm_precision = prec;
        LoweredPipeline p = lower_graph(b.g, lo);
        const std::string text = print_schedule(gpu_auto_schedule(p, t));
        const size_t wrapper = text.find("dw_w.compute_root()\n    .reorder_storage(c, w, h, n)");
        ASSERT_NE(wrapper, std::string::npos) << text;
        EXPECT_NE(text.substr(wrapper, text.find(';', wrapper) - wrapper).find(".bound(c, 0, 32)"), std::string::npos)
            << text;
        auto [object, output] = cuda_artifact(p, prec == Precision::BF16 ? "se_dw_bf16" : "se_dw_tf32");
        EXPECT_NE(output.find("T loom_cudnn_conv"), std::string::npos) << output;
        const std::string ptx = embedded_ptx(object);
        const size_t at = ptx.find(".entry _kernel_dw_global_wrapper");
        ASSERT_NE(at, std::string::npos) << ptx;
        const std::string kernel = ptx.substr(at, ptx.find("\n}\n", at) - at);
        std::istringstream lines(kernel);
        int vector_loads = 0, scalar_loads = 0;
        for (std::string line; std::getline(lines, line);) {
            if (line.find("ld.global") == std::string::npos) continue;
            const bool vector = line.find(".v2.") != std::string::npos || line.find(".v4.") != std::string::npos ||
                                line.find(".u64") != std::string::npos;
            vector_loads += vector;
            scalar_loads += !vector;
            if (taps_innermost) {
                EXPECT_TRUE(vector) << "a scalar load: " << line;
            }
        }
        if (taps_innermost) {
            EXPECT_GE(vector_loads, 9 + 9) << "a filter vector and an input vector per tap: " << kernel;
        } else {
            EXPECT_GE(scalar_loads, 9 * 4) << "the graph's filter: a load per channel and tap: " << kernel;
        }
    }
}

// An SE block's GlobalAveragePool under conv_nhwc (it reads the channels-last depthwise conv through
// its ReLU) is one kernel (D130): a block per few channel vectors of an image, the input rows
// split over a second thread dim by rfactor into `pool_rows` in shared memory, each thread summing
// one row's columns as 16-byte vectors, the rows' partials then summed in the channel thread's
// registers (no init kernel). Halide's default gave every output a block of one thread summing
// all taps serially. The artifact compiles and links; its PTX loads the input as whole vectors.
TEST(Aot, CudaChannelsLastGlobalPoolSplitsRowsOverThreads) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    GraphBuilder b;
    const Shape s = {2, 32, 12, 10};
    std::string x = b.input("x", {2, 16, 12, 10});
    std::string w1 = b.random_constant("w1", {32, 16, 1, 1}, 1), b1 = b.random_constant("b1", {32}, 2);
    std::string w2 = b.random_constant("w2", {32, 1, 3, 3}, 3), b2 = b.random_constant("b2", {32}, 4);
    std::string w3 = b.random_constant("w3", {16, 32, 1, 1}, 5);
    std::string r1 = b.node("Relu", {b.node("Conv", {x, w1, b1}, s, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "expand")}, s);
    std::string dw = b.node("Conv", {r1, w2, b2}, s,
                            {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(32)}},
                            DType::F32, "dw");
    std::string pool = b.node("GlobalAveragePool", {b.node("Relu", {dw}, s)}, {2, 32, 1, 1}, {}, DType::F32, "pool");
    b.out("Tanh", {b.node("Conv", {pool, w3}, {2, 16, 1, 1}, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "fc")},
          {2, 16, 1, 1});
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = lo.conv_nhwc = true;
    lo.channels_last_depthwise_filters = true;
    lo.buffer_alignment = 16;
    lo.gemm_precision = Precision::BF16;
    LoweredPipeline p = lower_graph(b.g, lo);
    const std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
    const size_t wrapper = text.find("pool_w.compute_root()\n    .reorder_storage(c, w, h, n)");
    ASSERT_NE(wrapper, std::string::npos) << text;
    const std::string ws = text.substr(wrapper, text.find(';', wrapper) - wrapper);
    // 8 channel vectors over 2 images: no split gives two blocks per SM, so one block takes all 8.
    EXPECT_NE(ws.find(".split(cq, co, ct, 8, TailStrategy::RoundUp)"), std::string::npos) << ws;
    EXPECT_NE(ws.find(".gpu_threads(ct)"), std::string::npos) << ws;
    EXPECT_NE(text.find("pool.compute_at(pool_w, ct)"), std::string::npos) << text;
    EXPECT_NE(text.find("pool.update(0).rfactor(r.y, u) as pool_rows;"), std::string::npos) << text;
    const size_t rows = text.find("pool_rows.compute_at(pool_w, co)");
    ASSERT_NE(rows, std::string::npos) << text;
    EXPECT_NE(text.substr(rows, text.find(';', rows) - rows).find(".gpu_threads(cq, u)"), std::string::npos) << text;
    EXPECT_NE(text.find("pool_rows.update(0).split(c, cq, cv, 4)\n    .vectorize(cv)\n    .reorder(cv, r.x, cq, u"),
              std::string::npos)
        << "each thread sums one row's columns: " << text;
    auto [object, output] = cuda_artifact(p, "se_pool");
    const std::string ptx = embedded_ptx(object);
    EXPECT_EQ(ptx.find(".entry _kernel_pool_s0"), std::string::npos) << "no init kernel: " << ptx;
    const size_t at = ptx.find(".entry _kernel_pool_global_wrapper");
    ASSERT_NE(at, std::string::npos) << ptx;
    const std::string kernel = ptx.substr(at, ptx.find("\n}\n", at) - at);
    EXPECT_NE(kernel.find("bar.sync"), std::string::npos) << kernel;
    EXPECT_NE(kernel.find("ld.global.nc.v4.f32"), std::string::npos) << kernel;
    std::istringstream lines(kernel);
    for (std::string line; std::getline(lines, line);) {
        if (line.find("ld.global") != std::string::npos) {
            EXPECT_NE(line.find(".v4."), std::string::npos) << line;
        }
    }
}

// With conv_nhwc in FP32 and TF32 (D117) the cuDNN convs read and write FP32 tensors with channels
// innermost: the filter stored KRSC at compile time (exact FP32 values), the graph input a Halide
// copy `<node>_x_nhwc` stored NHWC, and a conv whose sole consumer is a Relu keeps cuDNN's fused
// bias and ReLU, its NHWC output read by the next conv as it is (no copy). The 1x1 conv is cuDNN's
// in TF32 and, in FP32, one cuBLAS GEMM over the pixels on the same NHWC tensors
// (loom_cublas_conv1x1_nhwc: cuDNN has no NHWC FMA kernel for it, D124), its bias a Halide Func
// fused into the residual Add, whose ReLU the last conv copies NHWC; cuDNN's precision argument
// carries kConvNhwc and the math of the precision. The schedule stores the copies NHWC with
// threads along the channels; the artifact compiles and links.
TEST(Aot, CudaFp32AndTf32ConvsAreNhwc) {
    loom::testing::GraphBuilder b;
    const std::string w1 = residual_conv_block(b);
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = lo.conv_nhwc = true;
    for (Precision prec : {Precision::FP32, Precision::TF32}) {
        SCOPED_TRACE(precision_name(prec));
        lo.gemm_precision = prec;
        LoweredPipeline p = lower_graph(b.g, lo);
        const bool fp32 = prec == Precision::FP32;
        EXPECT_EQ(p.extern_calls, fp32 ? (std::vector<std::string>{"loom_cudnn_conv", "loom_cublas_conv1x1_nhwc"})
                                       : std::vector<std::string>{"loom_cudnn_conv"})
            << "the 1x1 conv is cuBLAS's in FP32, cuDNN's in TF32";
        std::vector<std::string> copies;
        for (const auto &f : p.funcs)
            if (f.channels_last && f.feeds_extern) {
                copies.push_back(f.name);
                EXPECT_EQ(f.dtype, DType::F32) << f.name;
            }
        EXPECT_EQ(copies, (std::vector<std::string>{"conv1_x_nhwc", "conv3_x_nhwc"}))
            << "conv2 reads conv1's fused NHWC output as it is";
        std::vector<Halide::Internal::Function> stages;
        for (const auto &f : p.funcs)
            if (f.is_extern) stages.push_back(f.func.function());
        for (const auto &f : p.funcs)
            for (const auto &c : Halide::Internal::find_direct_calls(f.func.function()))
                if (c.second.has_extern_definition() &&
                    std::none_of(stages.begin(), stages.end(), [&](const auto &e) { return e.name() == c.second.name(); }))
                    stages.push_back(c.second);
        ASSERT_EQ(stages.size(), 3u);
        int fused = 0;
        for (const auto &ext : stages) {
            EXPECT_EQ(ext.output_types()[0], Halide::Float(32)) << ext.name();
            const auto &dims = ext.schedule().storage_dims();
            ASSERT_EQ(dims.size(), 4u);
            EXPECT_EQ(dims[0].var, ext.args()[2]) << ext.name() << ": channels innermost in memory";
            const std::vector<Halide::ExternFuncArgument> &args = ext.extern_arguments();
            if (ext.extern_function_name() == "loom_cublas_conv1x1_nhwc") {
                EXPECT_TRUE(fp32) << ext.name();
                EXPECT_EQ(ext.name().rfind("conv2_cublas", 0), 0u) << ext.name();
                // x, w, bias, N, C, H, W, C_out, activation (none: the Add reads it), precision.
                ASSERT_EQ(args.size(), 10u);
                EXPECT_EQ(args[7].expr.as<Halide::Internal::IntImm>()->value, 8);
                EXPECT_EQ(args[8].expr.as<Halide::Internal::IntImm>()->value, 0);
                EXPECT_EQ(args.back().expr.as<Halide::Internal::IntImm>()->value, (int)Precision::FP32);
                Halide::Buffer<float> wb = args[1].buffer;
                ASSERT_EQ(wb.dimensions(), 4);
                EXPECT_EQ(wb.dim(0).extent(), 8);
                EXPECT_EQ(wb.dim(3).stride(), 8) << "the filter is the dense [C_out, C] matrix of the GEMM";
                const float *w2 = static_cast<const float *>(b.g.constant("w2")->data());
                EXPECT_EQ(wb(3, 0, 0, 5), w2[5 * 8 + 3]);
                continue;
            }
            EXPECT_EQ(ext.extern_function_name(), "loom_cudnn_conv");
            EXPECT_EQ(args.back().expr.as<Halide::Internal::IntImm>()->value, (int)prec + kConvNhwc) << ext.name();
            fused += args[3 + 4 + 7].expr.as<Halide::Internal::IntImm>()->value;
            // The filter: FP32 in KRSC order (Halide order c, s, r, k), values exact.
            Halide::Buffer<float> wb = args[1].buffer;
            ASSERT_EQ(wb.dimensions(), 4);
            EXPECT_EQ(wb.dim(0).extent(), 8) << ext.name() << ": input channels innermost";
        }
        EXPECT_EQ(fused, 1) << "conv1's bias and ReLU in cuDNN";
        Halide::Buffer<float> w1b = stages[0].extern_arguments()[1].buffer;
        const float *wf = static_cast<const float *>(b.g.constant(w1)->data());
        for (int k : {0, 5})
            for (int c : {1, 7})
                for (int r : {0, 2})
                    for (int q : {1, 2}) EXPECT_EQ(w1b(c, q, r, k), wf[((k * 8 + c) * 3 + r) * 3 + q]);
        std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
        EXPECT_NE(text.find("conv3_x_nhwc.compute_root()\n    .reorder_storage(c, w, h, n)"), std::string::npos) << text;
        EXPECT_NE(text.find(".gpu_threads(ct, wt)"), std::string::npos) << text;
        if (prec == Precision::TF32) {
            auto [object, output] = cuda_artifact(p, "tf32_nhwc_convs");
            EXPECT_NE(output.find("T loom_cudnn_conv"), std::string::npos) << output;
        } else {
            auto [object, output] = cuda_artifact(p, "fp32_nhwc_convs");
            EXPECT_NE(output.find("T loom_cublas_conv1x1_nhwc"), std::string::npos) << output;
        }
    }
    // FP16 keeps FP32 NCHW stages (no FP16 copies yet), whatever conv_nhwc says.
    lo.gemm_precision = Precision::FP16;
    LoweredPipeline p = lower_graph(b.g, lo);
    for (const auto &f : p.funcs) EXPECT_FALSE(f.channels_last) << f.name;
}

// With gemm_extern, a 1x1 conv (stride 1, no pads, one group) is a cuBLAS GEMM per image
// (loom_cublas_conv1x1). The inverted_residual fixture (MobileNetV2's block, ReLU6 exported as Relu
// then Clip, absorbed into the Clip by prepare_graph): its expand and project convs call cuBLAS,
// each bias a Halide Func reading the extern; the depthwise conv is Halide's. A 1x1 conv whose only
// consumer is a Relu keeps cuDNN's one call with the bias and the ReLU; a strided 1x1 conv and
// `--no-cublas` (gemm_extern off) keep cuDNN.
TEST(Aot, CudaPointwiseConvCallsCublas) {
    Graph g = import_onnx(loom::testing::data_path("inverted_residual.onnx"));
    prepare_graph(g);
    for (const auto &n : g.nodes) EXPECT_NE(n.op, "Relu") << n.name << ": ReLU6's Relu is absorbed by its Clip";
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = true;
    LoweredPipeline p = lower_graph(g, lo);
    EXPECT_EQ(p.extern_calls, (std::vector<std::string>{"loom_cublas_conv1x1"}));
    int biases = 0, halide_convs = 0;
    for (const auto &f : p.funcs) {
        biases += f.op == "Conv" && f.is_pointwise && !f.is_extern && !ends_with(f.name, "_pad");
        halide_convs += f.op == "Conv" && !f.update_rvars.empty();
    }
    EXPECT_EQ(biases, 2) << "each 1x1 conv's bias is a pointwise Func over its extern";
    EXPECT_EQ(halide_convs, 1) << "the depthwise conv";
    lo.gemm_extern = false;
    EXPECT_EQ(lower_graph(g, lo).extern_calls, std::vector<std::string>{"loom_cudnn_conv"});

    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    auto one_conv = [](Ints strides, const char *after) {
        GraphBuilder b;
        std::string x = b.input("x", {1, 8, 6, 6});
        std::string w = b.random_constant("w", {16, 8, 1, 1}, 3);
        int64_t s = strides[0], hw = (6 + s - 1) / s;
        std::string c = b.node("Conv", {x, w}, {1, 16, hw, hw}, {{"kernel_shape", Ints{1, 1}}, {"strides", strides}});
        b.out(after, {c}, {1, 16, hw, hw});
        LowerOptions o;
        o.gemm_extern = o.conv_extern = true;
        return lower_graph(b.g, o).extern_calls;
    };
    EXPECT_EQ(one_conv({1, 1}, "Tanh"), std::vector<std::string>{"loom_cublas_conv1x1"});
    EXPECT_EQ(one_conv({1, 1}, "Relu"), std::vector<std::string>{"loom_cudnn_conv"});
    EXPECT_EQ(one_conv({2, 2}, "Tanh"), std::vector<std::string>{"loom_cudnn_conv"});
    {  // FP32 NHWC (D124): a 1x1 conv whose sole consumer is a Relu is one cuBLASLt GEMM with the
       // RELU_BIAS epilogue (its bias the node's), the ReLU's value the extern's; TF32 keeps cuDNN.
        GraphBuilder b;
        std::string x = b.input("x", {2, 8, 6, 6});
        std::string w = b.random_constant("w", {16, 8, 1, 1}, 3), bias = b.random_constant("b", {16}, 4);
        std::string c = b.node("Conv", {x, w, bias}, {2, 16, 6, 6}, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "pw");
        b.out("Tanh", {b.node("Relu", {c}, {2, 16, 6, 6})}, {2, 16, 6, 6});
        LowerOptions o;
        o.gemm_extern = o.conv_extern = o.conv_nhwc = true;
        LoweredPipeline fp32 = lower_graph(b.g, o);
        EXPECT_EQ(fp32.extern_calls, std::vector<std::string>{"loom_cublas_conv1x1_nhwc"});
        const LoweredFunc *ext = nullptr;
        for (const auto &f : fp32.funcs)
            if (f.is_extern) ext = &f;
        ASSERT_NE(ext, nullptr);
        EXPECT_EQ(ext->name.rfind("pw_relu_cublaslt", 0), 0u) << ext->name;
        const auto &args = ext->func.function().extern_arguments();
        ASSERT_EQ(args.size(), 10u);
        EXPECT_EQ(args[8].expr.as<Halide::Internal::IntImm>()->value, kCublasLtRelu);
        Halide::Buffer<float> bb = args[2].buffer;
        ASSERT_EQ(bb.dim(0).extent(), 16);
        const float *bf = static_cast<const float *>(b.g.constant(bias)->data());
        for (int k : {0, 9, 15}) EXPECT_EQ(bb(k), bf[k]);
        o.gemm_precision = Precision::TF32;
        EXPECT_EQ(lower_graph(b.g, o).extern_calls, std::vector<std::string>{"loom_cudnn_conv"});
        o.gemm_precision = Precision::FP32;
        o.gemm_extern = false;  // --no-cublas
        EXPECT_EQ(lower_graph(b.g, o).extern_calls, std::vector<std::string>{"loom_cudnn_conv"});
    }

    auto [object, output] = cuda_artifact(p, "inverted_residual");
    EXPECT_NE(object.find("loom_cublas_conv1x1"), std::string::npos);
    EXPECT_NE(output.find("T loom_cublas_conv1x1"), std::string::npos) << output;
    EXPECT_EQ(output.find("libcudnn.so"), std::string::npos) << "no cuDNN call left: " << output;
    EXPECT_NE(output.find("cublasGemmStridedBatchedEx"), std::string::npos) << output;
    EXPECT_NE(output.find("libcublas.so"), std::string::npos) << output;
}

// A CUDA model is cut into pipelines as a host one is (codegen/jit_segments.h), by the artifact's
// chain (SegmentRunner::Artifact): a library stage's output crosses a cut as a whole buffer, and a
// library stage whose input an earlier pipeline computed takes that pipeline's buffer (an
// ImageParam) instead of computing the input again. The JIT keeps such a pipeline whole. The cut
// artifact links its C API and cuBLAS. (Run on an H200 in bench/gpu/RESULTS_GPU.md, runs 108-109.)
TEST(Aot, CudaModelsAreCutWithLibraryStagesAcrossCuts) {
    Graph g = import_onnx(loom::testing::data_path("inverted_residual.onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = true;
    lo.buffer_alignment = 16;
    LoweredPipeline p = lower_graph(g, lo);
    Halide::Target t = aot_target("cuda");
    apply_schedule(gpu_auto_schedule(p, t), p, t);
    EXPECT_EQ(segment_pipeline(p, t, 8, SegmentRunner::Jit).segments.size(), 1u);
    SegmentedPipeline sp = segment_pipeline(p, t, 8, SegmentRunner::Artifact);
    ASSERT_GE(sp.segments.size(), 3u);
    bool extern_output_crosses = false, extern_reads_param = false;
    for (const auto &b : sp.boundaries) extern_output_crosses |= p.extern_shapes.count(b.func) > 0;
    for (size_t s = 0; s < sp.segments.size(); s++) {
        std::vector<Halide::Internal::Function> outs;
        for (const auto &f : sp.segments[s].pipeline.outputs()) outs.push_back(f.function());
        auto env = Halide::Internal::build_environment(outs);
        for (int b : sp.segments[s].reads)
            EXPECT_EQ(env.count(sp.boundaries[b].func), 0u)
                << "pipeline " << s << " computes " << sp.boundaries[b].func << " again";
        for (const auto &[name, f] : env)
            if (f.has_extern_definition())
                for (const auto &a : f.extern_arguments())
                    extern_reads_param |= a.is_image_param() && a.image_param.name().find("_from_segment_") != std::string::npos;
    }
    EXPECT_TRUE(extern_output_crosses);
    EXPECT_TRUE(extern_reads_param);

    fs::path out = scratch("cuda_cut");
    AotArtifact a = compile_cut(p, t, out, "inverted_residual", 8);
    EXPECT_EQ(a.pipelines, (int)sp.segments.size());
    std::string output;
    EXPECT_EQ(loom::testing::run_command("nm -D " + a.shared_lib + " && ldd " + a.shared_lib, output), 0) << output;
    EXPECT_NE(output.find("T inverted_residual_run_device"), std::string::npos) << output;
    EXPECT_NE(output.find("T loom_cublas_conv1x1"), std::string::npos) << output;
    EXPECT_NE(output.find("libcublas.so"), std::string::npos) << output;
    fs::remove_all(out.parent_path());
}

// GPU auto-scheduling of statistics over segments of a row (LayerNorm over [B, 4, 64] read by a
// [B, 256] kernel): computed per block of that kernel in 8-element pieces (one fused thread dim;
// each thread's piece of the row is contiguous, 32 threads for the 256-wide row),
// and of costly Concat inputs: computed per row over their own slice. The CUDA code compiles.
// A pointwise kernel whose fused outer vars pass gridDim.z's limit of 65535 ([32, 2048, 7, 7]:
// ResNet-50's last stage at batch 32) puts them on blockIdx.x; a smaller one keeps them on z.
TEST(Aot, GpuPointwiseOuterBlocksPastTheGridLimitAreBlockX) {
    using loom::testing::GraphBuilder;
    Halide::Target t = aot_target("cuda");
    // The arguments of the last `.<call>(...)` in a schedule's text.
    auto last_args = [](const std::string &text, const std::string &call) {
        size_t a = text.rfind("." + call + "(");
        if (a == std::string::npos) return std::string();
        a += call.size() + 2;
        return text.substr(a, text.find(')', a) - a);
    };
    auto fused_var = [&](const std::string &text) {  // what the last fuse() makes
        std::string args = last_args(text, "fuse");
        return args.substr(args.rfind(", ") + 2);
    };
    auto schedule_of = [&](const std::string &op, int64_t n, int64_t hw) {
        GraphBuilder b;
        b.out(op, {b.input("x", {n, 2048, 7, 7})}, {n, 2048, hw, hw});
        LoweredPipeline p = lower_graph(b.g);
        return print_schedule(gpu_auto_schedule(p, t));
    };
    std::string big = schedule_of("Relu", 32, 7), small = schedule_of("Relu", 8, 7);
    std::string fb = fused_var(big), fs = fused_var(small);
    ASSERT_FALSE(fb.empty()) << big;
    EXPECT_EQ(last_args(big, "gpu_blocks").rfind(fb + ", ", 0), 0u) << big;  // blockIdx.x
    std::string sb = last_args(small, "gpu_blocks");
    EXPECT_EQ(sb.substr(sb.size() - fs.size()), fs) << small;  // blockIdx.z
    // The default mapping (a global average pool, which no kernel rule claims) likewise.
    std::string pool = schedule_of("GlobalAveragePool", 32, 1);
    EXPECT_EQ(last_args(pool, "gpu_blocks").rfind(fused_var(pool) + ", ", 0), 0u) << pool;
    EXPECT_EQ(pool.find("gpu_tile"), std::string::npos) << pool;
}

// Scaled-dot-product attention as exporters write it (kᵀ by a Transpose, a scale, Softmax) over
// [2, 3, S, d] (\p rank4) or [6, S, d], its values stored as \p dt, recognised for cuDNN and lowered
// for CUDA under BF16 (the GEMMs, convs and attention as library calls), or under TF32 with the
// attention on FP16 copies (\p f16, LowerOptions::attention_f16).
static LoweredPipeline cudnn_attention_pipeline(bool rank4, DType dt, bool f16 = false) {
    loom::testing::GraphBuilder b;
    Shape batch = rank4 ? Shape{2, 3} : Shape{6};
    auto sh = [&](int64_t x, int64_t y) {
        Shape s = batch;
        s.push_back(x);
        s.push_back(y);
        return s;
    };
    const int r = (int)batch.size() + 2;
    std::vector<int64_t> perm;
    for (int i = 0; i < r - 2; i++) perm.push_back(i);
    perm.push_back(r - 1);
    perm.push_back(r - 2);
    std::string kt = b.node("Transpose", {b.input("k", sh(37, 64), dt)}, sh(64, 37), {{"perm", perm}}, dt);
    std::string s = b.node("MatMul", {b.input("q", sh(11, 64), dt), kt}, sh(11, 37), {}, dt);
    s = b.node("Mul", {s, b.scalar(0.125, dt)}, sh(11, 37), {}, dt);
    std::string p = b.node("Softmax", {s}, sh(11, 37), {{"axis", int64_t(r - 1)}}, dt);
    b.out("MatMul", {p, b.input("v", sh(37, 64), dt)}, sh(11, 64), {}, dt);
    PrepareOptions po;
    po.attention = AttentionFusion::Cudnn;
    prepare_graph(b.g, po);
    LowerOptions lo;
    lo.gemm_extern = lo.conv_extern = lo.attention_extern = true;
    lo.gemm_precision = f16 ? Precision::TF32 : Precision::BF16;
    lo.attention_f16 = f16;
    return lower_graph(b.g, lo);
}

// Attention in BF16 on CUDA: recognised for cuDNN, lowered to one loom_cudnn_attention extern on
// BF16 copies of q, k and v (Halide Funcs the GPU schedule computes at root), compiled in and
// linked against cuDNN; rank 3 ([heads, S, d]) runs as one batch.
TEST(Aot, CudnnAttentionIsOneExternOnBf16Copies) {
    for (bool rank4 : {true, false}) {
        LoweredPipeline lp = cudnn_attention_pipeline(rank4, DType::F32);
        ASSERT_EQ(lp.extern_calls, std::vector<std::string>{kCudnnAttention});
        int copies = 0;
        for (const auto &f : lp.funcs) copies += f.feeds_extern && ends_with(f.name, "_bf16");
        EXPECT_EQ(copies, 3);
        auto [object, symbols] = cuda_artifact(lp, rank4 ? "attention4" : "attention3");
        EXPECT_NE(symbols.find("T loom_cudnn_attention"), std::string::npos) << symbols;
        EXPECT_NE(symbols.find("libcudnn.so"), std::string::npos) << symbols;
    }
}

// TF32 attention with LowerOptions::attention_f16 (`--f16-attention`, D208): the same one extern, on
// three FP16 copies (Halide Float(16) Funcs), its FP16 output widened by the node's Func, at rank 4
// and 3; no BF16 copy is made.
TEST(Aot, CudnnAttentionInTf32TakesFp16Copies) {
    for (bool rank4 : {true, false}) {
        LoweredPipeline lp = cudnn_attention_pipeline(rank4, DType::F32, true);
        ASSERT_EQ(lp.extern_calls, std::vector<std::string>{kCudnnAttention});
        int f16 = 0, bf16 = 0;
        for (const auto &f : lp.funcs) {
            if (!f.feeds_extern) continue;
            bf16 += ends_with(f.name, "_bf16");
            if (ends_with(f.name, "_f16")) {
                f16++;
                EXPECT_EQ(f.dtype, DType::F16) << f.name;
                EXPECT_EQ(f.func.output_types()[0], Halide::Float(16)) << f.name;
            }
        }
        EXPECT_EQ(f16, 3);
        EXPECT_EQ(bf16, 0);
        ASSERT_EQ(lp.output_dtypes.size(), 1u);
        EXPECT_EQ(lp.output_dtypes[0], DType::F32);
        auto [object, symbols] = cuda_artifact(lp, rank4 ? "attention4_f16" : "attention3_f16");
        EXPECT_NE(symbols.find("T loom_cudnn_attention"), std::string::npos) << symbols;
    }
}

// A bf16 model's attention (D100 widens its inputs with Casts and rounds its output with one): under
// BF16 the widening and cuDNN's rounding back are the identity, so a rank-4 bf16 graph input goes to
// cuDNN as it is (no copy), and the output is the extern's own BF16 buffer; rank 3 copies the bits.
TEST(Aot, CudnnAttentionReadsBf16ModelInputsDirectly) {
    for (bool rank4 : {true, false}) {
        LoweredPipeline lp = cudnn_attention_pipeline(rank4, DType::BF16);
        ASSERT_EQ(lp.extern_calls, std::vector<std::string>{kCudnnAttention});
        int copies = 0, inputs = 0;
        for (const auto &f : lp.funcs) {
            copies += f.feeds_extern && ends_with(f.name, "_bf16");
            if (f.is_extern && f.name.find("_cudnn_attention") != std::string::npos) inputs = (int)f.input_reads.size();
        }
        EXPECT_EQ(copies, rank4 ? 0 : 3);
        EXPECT_EQ(inputs, rank4 ? 3 : 0);
        ASSERT_EQ(lp.output_funcs.size(), 1u);
        EXPECT_EQ(lp.output_funcs[0].find("_cudnn_attention") != std::string::npos, rank4) << lp.output_funcs[0];
        EXPECT_EQ(lp.output_dtypes[0], DType::BF16);
        auto [object, symbols] = cuda_artifact(lp, rank4 ? "attention4_bf16_io" : "attention3_bf16_io");
        EXPECT_NE(symbols.find("T loom_cudnn_attention"), std::string::npos) << symbols;
    }
}

// The output types of the cuBLAS stages of \p p (`<node>_cublas`, Halide's `$n` suffix of a name
// made again dropped), by name.
std::map<std::string, Halide::Type> cublas_output_types(const LoweredPipeline &p) {
    std::map<std::string, Halide::Type> out;
    for (const auto &f : p.funcs)
        if (f.func.defined())
            for (const auto &[name, callee] : Halide::Internal::find_direct_calls(f.func.function()))
                if (callee.has_extern_definition() && ends_with(name.substr(0, name.find('$')), "_cublas"))
                    out[name] = callee.output_types()[0];
    return out;
}

// Under BF16, a GEMM whose readers are all BF16 operand copies (fc1, read through its bias and erf
// GELU by fc2's A copy; the QKV projection, read through the head split by cuDNN attention's q, k
// and v copies) writes BF16 (cuBLAS's D type, kGemmBf16Output); one read by anything else (fc2 into
// the residual Add, a graph output) stays FP32, and so does every GEMM under FP32 and TF32.
TEST(Aot, CudaBf16GemmWritesBf16ForBf16Readers) {
    using loom::testing::GraphBuilder;
    GraphBuilder b;
    std::string x = b.input("x", {64, 32});
    std::string h = b.node("MatMul", {x, b.random_constant("w1", {32, 48}, 1)}, {64, 48}, {}, DType::F32, "fc1");
    h = b.node("Add", {h, b.random_constant("b1", {48}, 2)}, {64, 48});
    std::string e = b.node("Erf", {b.node("Div", {h, b.scalar(1.4142135)}, {64, 48})}, {64, 48});
    e = b.node("Mul", {b.node("Mul", {h, b.node("Add", {e, b.scalar(1.0)}, {64, 48})}, {64, 48}), b.scalar(0.5)},
               {64, 48});
    std::string y = b.node("MatMul", {e, b.random_constant("w2", {48, 32}, 3)}, {64, 32}, {}, DType::F32, "fc2");
    b.out("Add", {y, x}, {64, 32});
    // Attention on the head split of a QKV projection: [16, 2, 3, 2, 64] -> q, k, v [2, 3, 16, 64].
    std::string t = b.input("t", {32, 128});
    std::string qkv = b.node("MatMul", {t, b.random_constant("wqkv", {128, 384}, 4)}, {32, 384}, {}, DType::F32, "qkv");
    qkv = b.node("Reshape", {qkv, b.constant(Tensor::from_doubles(DType::I64, {5}, {2, 16, 3, 2, 64}))}, {2, 16, 3, 2, 64});
    qkv = b.node("Transpose", {qkv}, {3, 2, 2, 16, 64}, {{"perm", std::vector<int64_t>{2, 0, 3, 1, 4}}});
    std::vector<std::string> heads;
    for (int k = 0; k < 3; k++)
        heads.push_back(b.node("Gather", {qkv, b.constant(Tensor::scalar(DType::I64, k))}, {2, 2, 16, 64},
                               {{"axis", int64_t(0)}}));
    std::string kt = b.node("Transpose", {heads[1]}, {2, 2, 64, 16}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    std::string sc = b.node("Mul", {b.node("MatMul", {heads[0], kt}, {2, 2, 16, 16}), b.scalar(0.125)}, {2, 2, 16, 16});
    b.out("MatMul", {b.node("Softmax", {sc}, {2, 2, 16, 16}, {{"axis", int64_t(3)}}), heads[2]}, {2, 2, 16, 64});
    PrepareOptions po;
    po.attention = AttentionFusion::Cudnn;
    prepare_graph(b.g, po);
    LowerOptions lo;
    lo.gemm_extern = lo.attention_extern = true;
    for (Precision p : {Precision::FP32, Precision::TF32}) {
        lo.gemm_precision = p;
        for (const auto &[name, type] : cublas_output_types(lower_graph(b.g, lo)))
            EXPECT_EQ(type, Halide::Float(32)) << name << " " << precision_name(p);
    }
    lo.gemm_precision = Precision::BF16;
    LoweredPipeline lp = lower_graph(b.g, lo);
    auto types = cublas_output_types(lp);
    ASSERT_EQ(types.size(), 3u);
    for (const auto &[name, type] : types)
        EXPECT_EQ(type, name.rfind("fc2", 0) == 0 ? Halide::Float(32) : Halide::UInt(16)) << name;
    auto [object, symbols] = cuda_artifact(lp, "bf16_outputs");
    EXPECT_NE(symbols.find("T loom_cublas_sgemm"), std::string::npos) << symbols;
    EXPECT_NE(symbols.find("T loom_cudnn_attention"), std::string::npos) << symbols;
}

// A softmax over rank-4 rows long enough for two-level block partials ([2, 12, 8, 2048]: attention's
// scores at S = 2048; rows of 512 take a warp, D157) names the partials' thread vars apart from its
// own pure var w: the schedule applies.
TEST(Aot, GpuBlockPartialsOfRank4RowsApply) {
    using loom::testing::GraphBuilder;
    Halide::Target t = aot_target("cuda");
    GraphBuilder b;
    b.out("Softmax", {b.input("x", {2, 12, 8, 2048})}, {2, 12, 8, 2048}, {{"axis", int64_t(3)}});
    LoweredPipeline p = lower_graph(b.g);
    Schedule s = gpu_auto_schedule(p, t);
    std::string text = print_schedule(s);
    EXPECT_NE(text.find("w_"), std::string::npos) << text;
    EXPECT_NO_THROW(apply_schedule(s, p, t)) << text;
}

TEST(Aot, GpuScheduleSegmentsAndConcatInputs) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    Halide::Target t = aot_target("cuda");
    {
        LoweredPipeline p = lowered_long_segments();
        Schedule s = gpu_auto_schedule(p, t);
        std::string text = print_schedule(s);
        EXPECT_NE(text.find("segment statistic"), std::string::npos) << text;
        EXPECT_NE(text.find("rfactor(r_xo, u)"), std::string::npos) << text;
        EXPECT_NE(text.find("fuse(u, i, u_i)"), std::string::npos) << text;
        EXPECT_NE(text.find("summed in 8-element pieces by 512 threads"), std::string::npos) << text;
        EXPECT_NE(text.find(".split(jq, jt, jo, 2"), std::string::npos) << text;
        EXPECT_NE(cuda_artifact(p, "segments").second.find("T segments"), std::string::npos);  // the C API links
    }
    {
        // 64-wide segments: 16 lanes of a warp × 4 floats each, the mean a tree of lane Funcs
        // (16 → 8 → 4 → 2 lanes, then the statistic per lane), one shuffle down per level.
        LoweredPipeline p = lowered_segments();
        std::string text = print_schedule(gpu_auto_schedule(p, t));
        std::string r;
        for (const auto &f : p.funcs)
            if (f.op == "ReduceMean") r = f.name;
        EXPECT_NE(text.find("row kernel of segments: one block per row, one warp's 16 lanes × 4 floats per 64-wide"),
                  std::string::npos) << text;
        EXPECT_NE(text.find(".split(jj, jl, jv, 4, TailStrategy::RoundUp)"), std::string::npos) << text;
        for (int w : {16, 8, 4, 2})
            EXPECT_NE(text.find("as " + r + "_l" + std::to_string(w) + ";"), std::string::npos) << w << "\n" << text;
        EXPECT_NE(text.find(r + ".compute_at("), std::string::npos) << text;
        EXPECT_NE(text.find(".gpu_lanes(u16)"), std::string::npos) << text;
    }
    {
        GraphBuilder b;
        std::vector<std::string> parts;
        for (int k = 0; k < 2; k++) {
            std::string a = b.input("a" + std::to_string(k), {8, 64});
            std::string m = b.node("ReduceMean", {a}, {8, 1}, {{"axes", Ints{1}}, {"keepdims", int64_t(1)}});
            parts.push_back(b.node("Tanh", {b.node("Sub", {a, m}, {8, 64})}, {8, 64}));
        }
        b.out("Concat", parts, {8, 128}, {{"axis", int64_t(1)}});
        LoweredPipeline p = lower_graph(b.g);
        Schedule s = gpu_auto_schedule(p, t);
        std::string text = print_schedule(s);
        EXPECT_NE(text.find("concat input: computed per row"), std::string::npos) << text;
        for (const auto &f : p.funcs)
            if (f.op == "Tanh") {
                EXPECT_NE(text.find(f.name + ".compute_at("), std::string::npos) << text;
            }
        EXPECT_NE(cuda_artifact(p, "concat_rows").second.find("T concat_rows"), std::string::npos);  // the C API links
    }
}


// Every statistic of a row kernel is summed in the registers of the threads that combine it and
// stored once through an in() wrapper: three block barriers per statistic (partials, 32 partial
// sums, the statistic), where accumulating in shared memory took six, with a dependent shared store
// and load per step of the serial combine (H200: softmax 8192² 0.1438 -> 0.1340 ms, combined
// 0.2410 -> 0.2261; RESULTS_GPU.md runs 56-64). Segment statistics: two barriers each.
TEST(Aot, CudaBlockStatisticsCombineInRegisters) {
    Halide::Target t = aot_target("cuda");
    for (const char *name : {"softmax_rows", "layernorm_rows"}) {  // the H200 suite's sizes: two levels
        LoweredPipeline p = lowered_fixture(std::string("gpu_suite/") + name);
        std::string text = print_schedule(gpu_auto_schedule(p, t));
        int stats = 0;
        for (const auto &f : p.funcs) {
            if (f.op.rfind("Reduce", 0) != 0 && f.name.find("_max") == std::string::npos &&
                f.name.find("_sum") == std::string::npos)
                continue;
            if (text.find(f.name + ".update(0)") == std::string::npos) continue;
            stats++;
            EXPECT_NE(text.find(f.name + ".in() as " + f.name + "_w;"), std::string::npos) << f.name << "\n" << text;
            EXPECT_NE(text.find(f.name + ".compute_at(" + f.name + "_w, "), std::string::npos) << f.name;
            EXPECT_NE(text.find(f.name + "_part.in() as " + f.name + "_part_w;"), std::string::npos) << f.name;
        }
        EXPECT_EQ(stats, 2) << name << "\n" << text;
        std::string object = cuda_artifact(p, name).first;
        EXPECT_EQ(count_of(object, "bar.sync"), 6u) << name;
    }
    LoweredPipeline p = lowered_long_segments();
    std::string text = print_schedule(gpu_auto_schedule(p, t));
    EXPECT_NE(text.find("in registers"), std::string::npos) << text;
    EXPECT_EQ(count_of(cuda_artifact(p, "segments_regs").first, "bar.sync"), 2u) << text;
}

// Short segments are reduced within a warp: no block barrier, no shared memory, one shuffle down
// per level of the lane tree (16 lanes: 3 levels of adds, then lanes 0 and 1 read by index). H100,
// RESULTS_GPU.md run 114: combined 0.2387 -> 0.2252 ms.
// Lengths 8 to 128 take 2 to 32 lanes of 4 floats (bench/gpu/reduction_tails.py checks them on a
// GPU, RESULTS_GPU.md run 116); too few threads for a warp per block, or longer segments, keep the
// block path.
TEST(Aot, CudaShortSegmentsReduceWithinAWarp) {
    struct Case {
        int64_t rows, segs, k;
        size_t downs;  // levels of the lane tree after the first: log2(lanes) - 1
    };
    for (const Case &c : {Case{8, 4, 64, 3}, Case{4, 16, 8, 0}, Case{4, 8, 128, 4}}) {
        LoweredPipeline p = lowered_segments(c.rows, c.segs, c.k);
        std::string name = "segments_warp_" + std::to_string(c.k);
        std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
        EXPECT_NE(text.find("row kernel of segments"), std::string::npos) << text;
        std::string object = cuda_artifact(p, name).first;
        EXPECT_EQ(count_of(object, "bar.sync"), 0u) << c.k;
        EXPECT_EQ(count_of(object, ".shared"), 0u) << c.k;
        EXPECT_EQ(count_of(object, "shfl.sync.down.b32"), c.downs) << c.k;
        EXPECT_NE(object.find("ld.global.nc.v4.f32"), std::string::npos) << c.k;
    }
    // 4 segments of 8: 8 threads a row, under a warp; segments of 256: over 32 lanes of 4.
    for (const Case &c : {Case{8, 4, 8, 0}, Case{4, 4, 256, 0}}) {
        LoweredPipeline p = lowered_segments(c.rows, c.segs, c.k);
        EXPECT_EQ(print_schedule(gpu_auto_schedule(p, aot_target("cuda"))).find("row kernel of segments"),
                  std::string::npos) << c.k;
    }
}

// Short rows (an attention-sized softmax, a small LayerNorm) take a warp's lanes per row and
// several rows per block, their statistics summed by lane trees: no barrier, no shared memory
// (H200, RESULTS_GPU.md run 125: softmax 262144x64 0.1625 -> 0.0426 ms, LayerNorm 131072x128
// 0.0839 -> 0.0419). Rows that no block of at least a warp divides keep the block reduction.
// Whole rows of 512 and 1024 (attention's scores at S = 512) take a warp too, each lane 4 or 8
// vectors a warp's width apart, read once with 16-byte loads
// (bench/DECISIONS.md#d157-gpu-wide-softmax-rows-in-a-warp). Rows of 2048 (16 vectors a lane) keep
// the block reduction.
TEST(Aot, CudaShortRowsReduceWithinAWarp) {
    using loom::testing::GraphBuilder;
    struct Case {
        const char *op;
        int64_t rows, n;
        const char *kernel;  // the row kernel's comment, or "" for the block path
        size_t downs;        // shuffles down: (log2(lanes) - 1) per statistic
    };
    for (const Case &c : {Case{"Softmax", 48, 64, "16 rows per block, one warp's 16 lanes", 6},
                          Case{"LayerNormalization", 40, 128, "8 rows per block, one warp's 32 lanes", 8},
                          Case{"Softmax", 24, 512,
                               "8 rows per block, one warp's 32 lanes × 16 floats per 512-wide row (4 vectors a lane", 8},
                          Case{"Softmax", 16, 1024,
                               "8 rows per block, one warp's 32 lanes × 32 floats per 1024-wide row (8 vectors a lane",
                               8},
                          Case{"Softmax", 37, 64, "", 0}, Case{"Softmax", 8, 2048, "", 0}}) {
        GraphBuilder b;
        std::string x = b.input("x", {c.rows, c.n});
        if (std::string(c.op) == "Softmax") {
            // Wide rows as attention writes them: scaled scores, then the softmax.
            if (c.n >= 512) x = b.node("Mul", {x, b.scalar(0.125)}, {c.rows, c.n});
            b.out("Softmax", {x}, {c.rows, c.n}, {{"axis", int64_t(1)}});
        } else {
            std::string g = b.random_constant("g", {c.n}, 3), h = b.random_constant("h", {c.n}, 4);
            b.out("LayerNormalization", {x, g, h}, {c.rows, c.n}, {{"axis", int64_t(1)}});
        }
        LoweredPipeline p = lower_graph(b.g);
        std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
        std::string name = std::string("short_") + std::to_string(c.rows);
        std::string object = cuda_artifact(p, name).first;
        if (*c.kernel) {
            EXPECT_NE(text.find(std::string("row kernel of short rows: ") + c.kernel), std::string::npos) << text;
            // Softmax's exponentials, read by the sum and the output, are computed once per lane.
            EXPECT_EQ(text.find("read by a statistic and by") != std::string::npos, std::string(c.op) == "Softmax")
                << text;
            EXPECT_EQ(count_of(object, "bar.sync"), 0u) << c.op;
            EXPECT_EQ(count_of(object, "shfl.sync.down.b32"), c.downs) << c.op;
            EXPECT_NE(object.find("ld.global.nc.v4.f32"), std::string::npos) << c.op;
            EXPECT_EQ(count_of(object, "ld.local"), 0u) << c.op;  // a lane's values stay in registers
            // A wide row is loaded once: the scores kept per lane too, one 16-byte load a vector.
            if (c.n >= 512) EXPECT_EQ(count_of(object, "ld.global.nc.v4.f32"), size_t(c.n / 128)) << object;
            if (c.n >= 512) EXPECT_EQ(count_of(object, "ld.global.nc.f32"), 0u) << object;
        } else {
            EXPECT_EQ(text.find("row kernel of short rows"), std::string::npos) << text;
            EXPECT_GT(count_of(object, "bar.sync"), 0u) << c.op;
        }
    }
}

// A few-output reduction (here a mean of squares over 2^16, and 3 rows of 50000 with a tail) is a
// split reduction in one kernel besides the init: each block's partial is computed at the block var
// of the output's atomic update, not in a partials kernel followed by a combining kernel (H200:
// 0.1442 -> 0.1326 ms on the suite's mse, RESULTS_GPU.md run 40).
TEST(Aot, CudaSplitReductionIsOneKernelWithAtomics) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    for (const Ints &shape : {Ints{65536}, Ints{3, 50000}}) {
        GraphBuilder b;
        std::string x = b.input("x", shape);
        std::string sq = b.node("Mul", {x, x}, shape);
        Ints out = shape;
        out.back() = 1;
        b.out("ReduceMean", {sq}, out, {{"axes", Ints{(int64_t)shape.size() - 1}}, {"keepdims", int64_t(1)}});
        LoweredPipeline p = lower_graph(b.g);
        std::string r;
        for (const auto &f : p.funcs)
            if (f.op == "ReduceMean") r = f.name;
        ASSERT_FALSE(r.empty());
        std::string text = print_schedule(gpu_auto_schedule(p, aot_target("cuda")));
        EXPECT_NE(text.find("split reduction: "), std::string::npos) << text;
        // The block's partial is summed in registers, stored once through a wrapper at the block var.
        EXPECT_NE(text.find(r + "_blk_w.compute_at(" + r + ", r_xb).gpu_threads(b);"), std::string::npos) << text;
        EXPECT_NE(text.find(r + "_blk.compute_at(" + r + "_blk_w, b).store_in(MemoryType::Register);"),
                  std::string::npos) << text;
        // The output's own vars (extent 1 where reduced) are block dims too: no host loop of launches.
        EXPECT_NE(text.find(shape.size() == 1 ? ".atomic().gpu_blocks(r_xb, i);" : ".atomic().gpu_blocks(r_xb, j, i);"),
                  std::string::npos) << text;
        std::string object = cuda_artifact(p, "split_" + std::to_string(shape.size())).first;
        size_t kernels = 0;
        for (size_t at = object.find(".entry"); at != std::string::npos; at = object.find(".entry", at + 1)) kernels++;
        EXPECT_EQ(kernels, 2u) << "the init and the reduction";
        EXPECT_NE(object.find("atom.global.add.f32"), std::string::npos);
    }
}

// The GPU auto-scheduler at the sizes the H200 suite measures (tests/data/gpu_suite: the six
// memory-bound workloads as bench/gpu exports them): every schedule validates, applies without a
// GPU-lint warning and lowers to CUDA kernels; mse's is the one-kernel split reduction, the row
// workloads' one block per row with a register budget.
TEST(Aot, GpuSuiteAutoSchedulesLintCleanAndLower) {
    Halide::Target cuda = aot_target("cuda");
    for (const char *name : {"sincos", "sigmoid_affine", "sum_prologue", "softmax_rows", "layernorm_rows", "mse"}) {
        SCOPED_TRACE(name);
        Graph g = import_onnx(loom::testing::data_path(std::string("gpu_suite/") + name + ".onnx"));
        prepare_graph(g);
        LoweredPipeline lp = lower_graph(g);
        Schedule s = gpu_auto_schedule(lp, cuda);
        std::string text = print_schedule(s);
        if (std::string(name) == "mse") {
            EXPECT_NE(text.find("_blk_w.compute_at(reducemean, r_xb)"), std::string::npos) << text;
        }
        if (std::string(name) == "softmax_rows") {
            EXPECT_NE(text.find(".gpu_max_registers(32)"), std::string::npos) << text;
        }
        ASSERT_NO_THROW(validate_schedule(s, lp, cuda)) << text;
        AppliedSchedule applied = apply_schedule(s, lp, cuda);
        std::vector<std::string> lint = lint_gpu_loops(applied, lp);
        EXPECT_TRUE(lint.empty()) << lint.front();
        std::vector<Halide::Argument> args(lp.inputs.begin(), lp.inputs.end());
        std::string stmt = loom::testing::temp_path(std::string("suite_") + name + ".stmt");
        ASSERT_NO_THROW(lp.pipeline().compile_to_lowered_stmt(stmt, args, Halide::Text, cuda));
        EXPECT_NE(slurp(stmt).find("cuda_gpu_source_kernels"), std::string::npos);
        fs::remove(stmt);
    }
}

// The glue and the extern stages compile while Halide does; a compiler that fails is reported by
// what it was compiling and its output, and the artifact already in the folder (--force) is left as
// it was, with no temporary folder beside it.
TEST(Aot, FailedToolCompileNamesItAndKeepsTheOldArtifact) {
    fs::path out = scratch("failed_tool");
    fs::create_directories(out);
    std::ofstream(out / "manifest.txt") << "the artifact of an earlier compile\n";
    Graph g = import_onnx(loom::testing::data_path("sigmoid_affine.onnx"));
    prepare_graph(g);
    LoweredPipeline p = lower_graph(g);
    AotOptions o;
    o.name = "sigmoid_affine";
    o.force = true;
    o.cxx = "sh -c 'echo no compiler here; exit 3' --";
    try {
        compile_aot(p, aot_target("host"), out.string(), o);
        ADD_FAILURE() << "a failing compiler was not reported";
    } catch (const UserError &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("compiling the C API glue failed"), std::string::npos) << msg;
        EXPECT_NE(msg.find("no compiler here"), std::string::npos) << msg;
    }
    EXPECT_EQ(slurp(out / "manifest.txt"), "the artifact of an earlier compile\n");
    for (const auto &e : fs::directory_iterator(out.parent_path()))
        EXPECT_EQ(e.path().filename().string().find("failed_tool.tmp-"), std::string::npos) << e.path();
    fs::remove_all(out.parent_path());
}

TEST(Aot, HostArtifactRunsAndMatchesReference) {
    fs::path out = scratch("host_sum_prologue");
    std::string output;
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " + loom::testing::data_path("sum_prologue.onnx") +
                                   " --target host -o " + out.string(),
                               output);
    ASSERT_EQ(rc, 0) << output;
    ASSERT_TRUE(fs::exists(out / "data" / "expected_out.npy")) << output;

    // Through the C API (dlopen, as an application would), outputs poisoned first.
    void *lib = dlopen((out / "libsum_prologue.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto create = (void *(*)())dlsym(lib, "sum_prologue_create");
    auto run = (int (*)(void *, const void *const *, void *const *))dlsym(lib, "sum_prologue_run_host");
    auto destroy = (void (*)(void *))dlsym(lib, "sum_prologue_destroy");
    ASSERT_TRUE(create && run && destroy);
    Tensor x = read_npy((out / "data" / "x.npy").string()), y = read_npy((out / "data" / "y.npy").string()),
           z = read_npy((out / "data" / "z.npy").string());
    Tensor ref = read_npy((out / "data" / "expected_out.npy").string());
    Tensor got(DType::F32, ref.shape());
    loom::testing::poison(got);
    const void *ins[] = {x.data(), y.data(), z.data()};
    void *outs[] = {got.data()};
    void *m = create();
    ASSERT_EQ(run(m, ins, outs), 0);
    // A null pointer is refused, naming the buffer and what to pass (no crash, nothing written).
    auto last_error = (const char *(*)())dlsym(lib, "sum_prologue_last_error");
    ASSERT_TRUE(last_error);
    const void *missing[] = {x.data(), nullptr, z.data()};
    EXPECT_NE(run(m, missing, outs), 0);
    std::string err = last_error();
    EXPECT_NE(err.find("input 1 'y' is a null pointer"), std::string::npos) << err;
    EXPECT_NE(err.find("pass 3 input and 1 output pointers"), std::string::npos) << err;
    // Pointers off the 64-byte grid (slices of bigger arrays) are staged through aligned copies:
    // the host code stores 64-byte vectors with aligned instructions (this crashed in vmovaps).
    {
        std::vector<float> xs(x.numel() + 32), os(ref.numel() + 32);
        auto off64 = [](float *p) { return p + (64 - (uintptr_t)p % 64) % 64 / sizeof(float) + 1; };
        float *xo = off64(xs.data()), *oo = off64(os.data());
        std::memcpy(xo, x.data(), x.numel() * sizeof(float));
        for (int64_t i = 0; i < ref.numel(); i++) oo[i] = std::nanf("");
        const void *ins_off[] = {xo, y.data(), z.data()};
        void *outs_off[] = {oo};
        ASSERT_EQ(run(m, ins_off, outs_off), 0) << last_error();
        Tensor got_off(DType::F32, ref.shape());
        std::memcpy(got_off.data(), oo, ref.numel() * sizeof(float));
        auto c = loom::testing::compare(got_off, ref);
        EXPECT_LT(c.rel_error, 1e-5);
        EXPECT_FALSE(c.any_nan);
    }
    // Parallel loops on the application's OpenMP team, then back on Halide's pool: same results
    // on poisoned outputs each way; the previous setting comes back.
    {
        auto set_threading = (int (*)(int))dlsym(lib, "sum_prologue_set_threading");
        ASSERT_TRUE(set_threading);
        EXPECT_EQ(set_threading(0), 0);  // never switched: a no-op
        EXPECT_EQ(set_threading(1), 0);
        EXPECT_EQ(set_threading(1), 1);
        Tensor got_omp(DType::F32, ref.shape());
        loom::testing::poison(got_omp);
        void *outs_omp[] = {got_omp.data()};
        ASSERT_EQ(run(m, ins, outs_omp), 0) << last_error();
        auto c = loom::testing::compare(got_omp, ref);
        EXPECT_LT(c.rel_error, 1e-5);
        EXPECT_FALSE(c.any_nan);
        EXPECT_EQ(set_threading(0), 1);
        loom::testing::poison(got_omp);
        ASSERT_EQ(run(m, ins, outs_omp), 0) << last_error();
        EXPECT_LT(loom::testing::compare(got_omp, ref).rel_error, 1e-5);
    }
    // CUDA graphs are a device matter: a host artifact reports them off.
    auto set_graphs = (int (*)(void *, int))dlsym(lib, "sum_prologue_set_cuda_graphs");
    auto graph_status = (const char *(*)(void *))dlsym(lib, "sum_prologue_cuda_graph_status");
    ASSERT_TRUE(set_graphs && graph_status);
    EXPECT_EQ(set_graphs(m, 1), 0);
    EXPECT_EQ(std::string(graph_status(m)), "off (no device)");
    // A NULL handle is refused with the call and the fix named, not dereferenced.
    EXPECT_NE(run(nullptr, ins, outs), 0);
    err = last_error();
    EXPECT_NE(err.find("sum_prologue_run_host: the model handle is NULL"), std::string::npos) << err;
    EXPECT_NE(err.find("pass what sum_prologue_create returned"), std::string::npos) << err;
    EXPECT_EQ(set_graphs(nullptr, 0), -1);
    EXPECT_NE(std::string(graph_status(nullptr)).find("cuda_graph_status: the model handle is NULL"),
              std::string::npos);
    destroy(m);
    auto cmp = loom::testing::compare(got, ref);
    EXPECT_LT(cmp.rel_error, 1e-5);
    EXPECT_FALSE(cmp.any_nan);
    dlclose(lib);

    // The standalone runner (no CUDA here): checks against the saved reference and times.
    check_with_runner(out);
    fs::remove_all(out.parent_path());
}

TEST(Aot, HostModelCutIntoPipelinesRunsAndMatchesReference) {
    // x → relu (also an output) → tanh → sigmoid, cut before every Func (LOOM_PIPELINES=3): the
    // chain passes relu's output buffer to the segment that reads it, allocates tanh's (stored
    // column-major, as its reorder_storage says).
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {6, 70});
    std::string r = b.out("Relu", {x}, {6, 70});
    b.out("Sigmoid", {b.node("Tanh", {r}, {6, 70})}, {6, 70});
    LoweredPipeline p = lower_graph(b.g);
    for (auto &f : p.funcs) f.func.compute_root().vectorize(f.func.args().front(), 8, Halide::TailStrategy::GuardWithIf);
    p.funcs[1].func.reorder_storage(p.funcs[1].func.args()[1], p.funcs[1].func.args()[0]);  // tanh column-major
    fs::path out = scratch("host_cut");
    AotArtifact a = compile_cut(p, aot_target("host"), out, "cut3", 3);
    EXPECT_EQ(a.pipelines, 3);
    EXPECT_NE(slurp(a.halide_header).find("cut3_halide_argv"), std::string::npos);

    loom::testing::ArtifactApi api(a.shared_lib, "cut3");
    auto set_threading = (int (*)(int))api.symbol("set_threading");
    ASSERT_TRUE(api.ok() && set_threading) << api.error;
    void *m = api.create();
    for (int threading : {0, 1, 0}) {  // Halide's pool, OpenMP's team, back
        set_threading(threading);
        std::map<std::string, Tensor> in{{"x", Tensor(DType::F32, {6, 70})}};
        fill_random(in.at("x"), 40 + threading, -2, 2);
        auto ref = run_reference(b.g, in);
        std::vector<Tensor> got;
        for (size_t k = 0; k < b.g.outputs.size(); k++) {
            got.emplace_back(DType::F32, Shape{6, 70});
            loom::testing::poison(got.back());
        }
        const void *ins[] = {in.at("x").data()};
        void *outs[] = {got[0].data(), got[1].data()};
        ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
        for (size_t k = 0; k < got.size(); k++)
            EXPECT_TRUE(loom::testing::close(got[k], ref.at(b.g.outputs[k]))) << "output " << k;
    }
    api.destroy(m);
    fs::remove_all(out.parent_path());
}

// Artifact \p a (model \p name, one input x and one output, both 6x70) matches the reference
// interpreter on \p g, call after call (other inputs, the output poisoned before each).
void expect_chain_matches_reference(const AotArtifact &a, const std::string &name, const Graph &g) {
    loom::testing::ArtifactApi api(a.shared_lib, name);
    ASSERT_TRUE(api.ok()) << api.error;
    void *m = api.create();
    for (uint64_t seed : {61, 62}) {
        std::map<std::string, Tensor> in{{"x", Tensor(DType::F32, {6, 70})}};
        fill_random(in.at("x"), seed, -2, 2);
        auto ref = run_reference(g, in);
        Tensor got(DType::F32, {6, 70});
        loom::testing::poison(got);
        const void *ins[] = {in.at("x").data()};
        void *outs[] = {got.data()};
        ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
        EXPECT_TRUE(loom::testing::close(got, ref.at(g.outputs[0]))) << name << ", seed " << seed;
    }
    api.destroy(m);
}

TEST(Aot, HostModelCutAtAGlobalWrapperRunsAndMatchesReference) {
    // x → relu → tanh → sigmoid with tanh computed per row of its global wrapper (`tanh.in()`, as
    // the cost model wraps convs), cut before every root: the wrapper crosses as a buffer of
    // tanh's shape, under a C-safe argument name ('$' is part of a wrapper's name).
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {6, 70});
    b.out("Sigmoid", {b.node("Tanh", {b.node("Relu", {x}, {6, 70})}, {6, 70})}, {6, 70});
    LoweredPipeline p = lower_graph(b.g);
    for (auto &f : p.funcs) f.func.compute_root();
    Halide::Func tanh = p.funcs[1].func, wrapper = tanh.in();
    wrapper.compute_root().vectorize(wrapper.args().front(), 8, Halide::TailStrategy::GuardWithIf);
    tanh.compute_at(wrapper, wrapper.args()[1]);
    fs::path out = scratch("host_cut_wrapper");
    AotArtifact a = compile_cut(p, aot_target("host"), out, "cutw", 3);
    EXPECT_EQ(a.pipelines, 3);
    expect_chain_matches_reference(a, "cutw", b.g);
    fs::remove_all(out.parent_path());
}

TEST(Aot, CrossingBuffersWhoseLivesDoNotOverlapShareStorage) {
    // x → relu → tanh → sigmoid → neg, cut before every Func: relu's buffer dies when tanh's
    // segment ends, before sigmoid's is written, so the two share storage; tanh's overlaps both.
    // The chain with shared storage matches the reference, call after call.
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {6, 70});
    std::string r = b.node("Relu", {x}, {6, 70}), t = b.node("Tanh", {r}, {6, 70});
    b.out("Neg", {b.node("Sigmoid", {t}, {6, 70})}, {6, 70});
    LoweredPipeline p = lower_graph(b.g);
    for (auto &f : p.funcs) f.func.compute_root().vectorize(f.func.args().front(), 8, Halide::TailStrategy::GuardWithIf);
    SegmentedPipeline sp = cut_pipeline(p, plan_cuts(p, 4, 1));
    ASSERT_EQ(sp.segments.size(), 4u);
    ASSERT_EQ(sp.boundaries.size(), 3u);
    std::vector<int> storage = crossing_storage(sp);
    std::map<std::string, int> of;
    for (size_t k = 0; k < sp.boundaries.size(); k++) of[sp.boundaries[k].func] = storage[k];
    EXPECT_EQ(of.at(p.funcs[0].name), of.at(p.funcs[2].name));
    EXPECT_NE(of.at(p.funcs[0].name), of.at(p.funcs[1].name));
    EXPECT_NE(of.at(p.funcs[1].name), of.at(p.funcs[2].name));

    fs::path out = scratch("host_shared_crossing");
    AotArtifact a = compile_cut(p, aot_target("host"), out, "share4", 4);
    EXPECT_EQ(a.pipelines, 4);
    expect_chain_matches_reference(a, "share4", b.g);
    fs::remove_all(out.parent_path());
}

TEST(Aot, PipelinesThatShareNoBufferRunAsAChain) {
    // Two independent chains (x → relu, y → tanh) cut into two pipelines: nothing crosses the cut,
    // and the generated chain (no crossing buffer at all) still compiles and runs.
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {4, 16}), y = b.input("y", {4, 16});
    b.out("Relu", {x}, {4, 16});
    b.out("Tanh", {y}, {4, 16});
    LoweredPipeline p = lower_graph(b.g);
    for (auto &f : p.funcs) f.func.compute_root();
    fs::path out = scratch("host_no_crossing");
    AotArtifact a = compile_cut(p, aot_target("host"), out, "apart", 2);
    EXPECT_EQ(a.pipelines, 2);
    loom::testing::ArtifactApi api(a.shared_lib, "apart");
    ASSERT_TRUE(api.ok()) << api.error;
    std::map<std::string, Tensor> in{{"x", Tensor(DType::F32, {4, 16})}, {"y", Tensor(DType::F32, {4, 16})}};
    fill_random(in.at("x"), 51, -2, 2);
    fill_random(in.at("y"), 52, -2, 2);
    auto ref = run_reference(b.g, in);
    std::vector<Tensor> got;
    for (int k = 0; k < 2; k++) {
        got.emplace_back(DType::F32, Shape{4, 16});
        loom::testing::poison(got.back());
    }
    void *m = api.create();
    const void *ins[] = {in.at("x").data(), in.at("y").data()};
    void *outs[] = {got[0].data(), got[1].data()};
    ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
    for (size_t k = 0; k < got.size(); k++) EXPECT_TRUE(loom::testing::close(got[k], ref.at(b.g.outputs[k]))) << k;
    api.destroy(m);
    fs::remove_all(out.parent_path());
}

// An output computed through its wrapper (schedule `f.in() as f_out`) is the wrapper's buffer in the
// artifact: whole and cut before it, the C API's output pointers receive the GEMM and the Tanh.
TEST(Aot, WrappedOutputArtifactMatchesReference) {
    loom::testing::WrappedGemm c;
    for (int pipelines : {1, 2}) {  // relu | the wrapper and tanh (as in the JIT's test)
        LoweredPipeline p = lower_graph(c.b.g);
        apply_schedule(parse_schedule(c.schedule(p), "wrapped.sched"), p, aot_target("host"));
        fs::path out = scratch("host_wrapped_" + std::to_string(pipelines));
        AotArtifact a = compile_cut(p, aot_target("host"), out, "wrapped", pipelines);
        EXPECT_EQ(a.pipelines, pipelines);
        loom::testing::ArtifactApi api(a.shared_lib, "wrapped");
        ASSERT_TRUE(api.ok()) << api.error;
        std::map<std::string, Tensor> in = random_inputs(c.b.g, 60 + pipelines);
        auto ref = run_reference(c.b.g, in);
        std::vector<Tensor> got;
        for (int k = 0; k < 2; k++) {
            got.emplace_back(DType::F32, Shape{3, 21, 40});
            loom::testing::poison(got.back());
        }
        void *m = api.create();
        const void *ins[] = {in.at("a").data(), in.at("w").data()};
        void *outs[] = {got[0].data(), got[1].data()};
        ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
        for (size_t k = 0; k < got.size(); k++)
            EXPECT_TRUE(loom::testing::close(got[k], ref.at(c.b.g.outputs[k]))) << k << ", " << pipelines << " pipelines";
        api.destroy(m);
        fs::remove_all(out.parent_path());
    }
}

TEST(Aot, LargeHostModelsCompileAsSeveralPipelines) {
    // The transformer fixture (39 Funcs) is cut by default; the runner checks the artifact
    // against the reference outputs `loom compile` saved.
    fs::path out = scratch("host_transformer");
    std::string output;
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " +
                                            loom::testing::data_path("transformer.onnx") + " --target host --auto -o " +
                                            out.string(),
                                        output);
    ASSERT_EQ(rc, 0) << output;
    EXPECT_NE(output.find(" pipelines)"), std::string::npos) << output;
    check_with_runner(out);
    fs::remove_all(out.parent_path());
}

TEST(Aot, RefusesToOverwriteWithoutForce) {
    LoweredPipeline p = lowered_fixture("sigmoid_affine");
    fs::path out = scratch("exists");
    fs::create_directories(out);
    AotOptions o;
    o.name = "sigmoid_affine";
    try {
        compile_aot(p, Halide::get_host_target(), out.string(), o);
        FAIL() << "expected a UserError";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(out));  // nothing half-written
    o.force = true;
    compile_aot(p, Halide::get_host_target(), out.string(), o);
    EXPECT_TRUE(fs::exists(out / "libsigmoid_affine.so"));
    fs::remove_all(out.parent_path());
}

// A `loom compile` killed half-way (SIGKILL: no handler runs) leaves the earlier artifact as it
// was, byte for byte; the next compile into that folder removes what the killed one left beside it.
TEST(Aot, KilledCompileLeavesThePreviousArtifactIntact) {
    fs::path out = scratch("killed");
    fs::create_directories(out.parent_path());
    std::string loom = loom::testing::loom_binary(), log;
    std::string first = loom + " compile " + loom::testing::data_path("sigmoid_affine.onnx") +
                        " --eager --name model --no-reference -o " + out.string();
    ASSERT_EQ(loom::testing::run_command(first, log), 0) << log;
    std::string manifest = slurp(out / "manifest.txt"), lib = slurp(out / "libmodel.so");
    ASSERT_FALSE(lib.empty());
    // The transformer under the cost model takes seconds to build: a kill after 1 s lands mid-build.
    // The whole process group is killed, as Ctrl-C or a job's kill would, compilers included.
    std::string killed = "setsid " + loom + " compile " + loom::testing::data_path("transformer.onnx") +
                         " --auto --name model --force -o " + out.string() +
                         " & p=$!; sleep 1; /bin/kill -s KILL -- -$p; wait $p; echo rc=$?";
    loom::testing::run_command(killed, log);
    ASSERT_NE(log.find("rc=137"), std::string::npos) << "the compile was not killed mid-way: " << log;
    bool left = false;
    for (const auto &e : fs::directory_iterator(out.parent_path()))
        left |= e.path().filename().string().find("killed.tmp-") != std::string::npos;
    EXPECT_TRUE(left) << "the kill came after the build: nothing was half-way";
    EXPECT_EQ(slurp(out / "manifest.txt"), manifest);
    EXPECT_EQ(slurp(out / "libmodel.so"), lib);
    ASSERT_EQ(loom::testing::run_command(first + " --force", log), 0) << log;
    for (const auto &e : fs::directory_iterator(out.parent_path())) {
        std::string n = e.path().filename().string();
        EXPECT_EQ(n.find(".tmp-"), std::string::npos) << "left behind: " << e.path();
        EXPECT_EQ(n.find(".old-"), std::string::npos) << "left behind: " << e.path();
    }
    fs::remove_all(out.parent_path());
}

// A Gemm whose only consumer is a tanh-form GELU (gelu_mlp: PyTorch's decomposed export,
// recognised by prepare_graph) is one cuBLASLt call with the GELU_BIAS epilogue, which computes
// that form; no Halide Func is left for the GELU. fc2 (no activation) stays cublasSgemm.
// Fixture \p name imported, prepared and lowered with cuBLAS extern stages, as for CUDA.
LoweredPipeline lowered_with_cublas(const std::string &name) {
    Graph g = import_onnx(loom::testing::data_path(name + ".onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.gemm_extern = true;
    return lower_graph(g, lo);
}

TEST(Aot, CudaTanhGeluGemmIsOneCublasLtCall) {
    LoweredPipeline p = lowered_with_cublas("gelu_mlp");
    EXPECT_EQ(p.extern_calls, (std::vector<std::string>{"loom_cublaslt_bias_act", "loom_cublas_sgemm"}));
    bool gelu_ext = false;
    for (const auto &f : p.funcs) {
        EXPECT_NE(f.op, "Gelu") << f.name << ": the GELU is cuBLASLt's epilogue";
        gelu_ext |= f.is_extern && f.name.find("gelu_cublaslt") != std::string::npos;
    }
    EXPECT_TRUE(gelu_ext);
    auto [object, output] = cuda_artifact(p, "gelu_mlp");
    EXPECT_NE(output.find("T loom_cublaslt_bias_act"), std::string::npos) << output;
}

// x · W + b then the exact GELU (BERT's fc1 on a matrix, as torch.onnx writes it), prepared as for
// a CUDA BF16 compile (fuse_linear_exact_gelu), is one cuBLASLt GELU_BIAS call in BF16: its tanh
// form lies within the BF16 operands' rounding (tanh_gelu_within_rounding). In FP32, TF32 and FP16
// the exact GELU stays a Halide Func after the product.
TEST(Aot, CudaBf16ExactGeluGemmIsOneCublasLtCall) {
    loom::testing::GraphBuilder b;
    Shape s = {64, 96};
    std::string h = b.node("MatMul", {b.input("x", {64, 32}), b.random_constant("w", {32, 96}, 3)}, s);
    std::string sum = b.node("Add", {h, b.random_constant("bias", {96}, 4)}, s);
    std::string e = b.node("Erf", {b.node("Div", {sum, b.scalar(1.4142135381698608)}, s)}, s);
    b.out("Mul", {b.node("Mul", {sum, b.node("Add", {e, b.scalar(1.0)}, s)}, s), b.scalar(0.5)}, s);
    Graph g = b.g;
    prepare_graph(g);
    ASSERT_EQ(fuse_linear_exact_gelu(g), 1);
    for (Precision p : {Precision::BF16, Precision::FP32, Precision::TF32, Precision::FP16}) {
        LowerOptions lo;
        lo.gemm_extern = true;
        lo.gemm_precision = p;
        LoweredPipeline lp = lower_graph(g, lo);
        const bool fused = p == Precision::BF16;
        EXPECT_EQ(tanh_gelu_within_rounding(p), fused) << precision_name(p);
        EXPECT_EQ(lp.extern_calls, (std::vector<std::string>{fused ? "loom_cublaslt_bias_act" : "loom_cublas_sgemm"}))
            << precision_name(p);
        bool gelu_func = false, gelu_ext = false;
        for (const auto &f : lp.funcs) {
            gelu_func |= f.op == "Gelu" && !f.is_extern;
            gelu_ext |= f.is_extern && f.name.find("gelu_cublaslt") != std::string::npos;
        }
        EXPECT_EQ(gelu_ext, fused) << precision_name(p);
        EXPECT_EQ(gelu_func, !fused) << precision_name(p);
    }
}

// A bf16 model's nn.Linear then ReLU or the exact GELU (torch.onnx's Gemm and erf region with bf16
// constants; D100 widens the input with a Cast and rounds the output with one), prepared as for a
// CUDA BF16 compile, is the one cuBLASLt call and nothing else: the bf16 graph input is its A as it
// is (no copy: rounding the widened value back is the identity), and its output, BF16 (kGemmBf16Output;
// the bias BF16 too), is the graph output itself. Under FP32 the same model keeps the FP32 stage
// (and, for the GELU, a Halide GELU) with a Cast after it.
TEST(Aot, CudaBf16ModelLinearIsOneCublasLtCallOnItsOwnTensors) {
    for (const std::string act : {"relu", "gelu"}) {
        loom::testing::GraphBuilder b;
        loom::testing::bf16_linear(b, act, 64, 32, 96);
        prepare_graph(b.g);
        ASSERT_EQ(fuse_linear_exact_gelu(b.g, exact_gelu_region_slack(Precision::BF16)), act == "gelu" ? 1 : 0);
        for (Precision p : {Precision::BF16, Precision::FP32}) {
            LowerOptions lo;
            lo.gemm_extern = true;
            lo.gemm_precision = p;
            LoweredPipeline lp = lower_graph(b.g, lo);
            const bool bf16 = p == Precision::BF16;
            const std::string what = act + " " + precision_name(p);
            EXPECT_EQ(lp.extern_calls, (std::vector<std::string>{bf16 || act == "relu" ? "loom_cublaslt_bias_act" : "loom_cublas_sgemm"}))
                << what;
            ASSERT_EQ(lp.output_funcs.size(), 1u);
            EXPECT_EQ(lp.output_dtypes[0], DType::BF16) << what;
            const LoweredFunc *ext = nullptr;
            int copies = 0;
            for (const auto &f : lp.funcs) {
                if (f.is_extern) ext = &f;
                copies += f.feeds_extern && !f.is_extern;
            }
            EXPECT_EQ(copies, bf16 ? 0 : 1) << what << ": an FP32 stage reads the widened input";
            if (!bf16) {
                EXPECT_EQ(lp.output_funcs[0].find("cublas"), std::string::npos) << what << ": a Cast rounds the output";
                continue;
            }
            ASSERT_NE(ext, nullptr) << what;
            EXPECT_EQ(ext->input_reads, std::vector<std::string>{"x"}) << what;
            EXPECT_EQ(lp.output_funcs[0], ext->name) << what;
            EXPECT_EQ(ext->func.output_types()[0], Halide::UInt(16)) << what;
            auto [object, symbols] = cuda_artifact(lp, "bf16_linear_" + act);
            EXPECT_NE(symbols.find("T loom_cublaslt_bias_act"), std::string::npos) << symbols;
        }
    }
}

// Attention's products of two computed operands (Q K^T, P V: [1, H, S, d] x [1, H, d, S]) are
// cuBLAS batched GEMMs on CUDA (loom_cublas_batched), the weight GEMMs cuBLASLt; the artifact links.
// A batch whose matrices start 256-byte aligned is one strided-batch cuBLASLt call (its layouts'
// batch attributes), the others cublasGemmStridedBatchedEx (bench/DECISIONS.md#d147-cuda-batched-products-on-cublaslt).
TEST(Aot, CudaAttentionProductsAreBatchedCublasCalls) {
    LoweredPipeline p = lowered_with_cublas("transformer");
    int batched = 0;
    for (const auto &[name, shape] : p.extern_shapes) batched += name.find("_cublas_batched") != std::string::npos;
    EXPECT_EQ(batched, 2) << "Q K^T and P V";
    EXPECT_NE(std::find(p.extern_calls.begin(), p.extern_calls.end(), "loom_cublas_batched"), p.extern_calls.end());
    auto [object, output] = cuda_artifact(p, "transformer_batched");
    EXPECT_NE(output.find("T loom_cublas_batched"), std::string::npos) << output;
    EXPECT_NE(output.find("cublasGemmStridedBatchedEx"), std::string::npos) << output;
    EXPECT_NE(output.find("cublasLtMatrixLayoutSetAttribute"), std::string::npos) << output;
}

// Q K^T whose K^T is a Transpose with K's d innermost (BERT's K [B, H, S, d] by perm [0, 1, 3, 2],
// or the head split [B, S, H, d] by [0, 2, 3, 1]) passes K to loom_cublas_batched as a copy
// `<node>_b_t` [B, H, S, d] and the transpose flag, not a transposing copy of K^T: no Transpose
// Func of K^T's shape feeds the extern. The copy's values (host JIT, random x, output poisoned) are K's; P V,
// whose V is not transposed, keeps its operand as it is.
TEST(Aot, CudaBatchedProductReadsKThroughTheTransposeFlag) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    const int B = 2, S = 37, H = 3, d = 16, Sq = 11;
    for (bool head_split : {true, false}) {
        GraphBuilder b;
        std::string x = head_split ? b.input("x", {B, S, H, d}) : b.input("x", {B, H, S, d});
        Ints perm = head_split ? Ints{0, 2, 3, 1} : Ints{0, 1, 3, 2};
        std::string kt = b.node("Transpose", {x}, {B, H, d, S}, {{"perm", perm}});
        std::string sc = b.node("MatMul", {b.input("q", {B, H, Sq, d}), kt}, {B, H, Sq, S});
        std::string v = b.node("Transpose", {b.input("vs", {B, S, H, d})}, {B, H, S, d}, {{"perm", Ints{0, 2, 1, 3}}});
        b.out("MatMul", {sc, v}, {B, H, Sq, d});
        prepare_graph(b.g);
        LowerOptions lo;
        lo.gemm_extern = true;
        LoweredPipeline p = lower_graph(b.g, lo);
        const LoweredFunc *copy = nullptr;
        std::map<std::string, int> flags;  // extern stage -> its trans_b argument
        for (const auto &f : p.funcs) {
            if (ends_with(f.name, "_b_t")) copy = &f;
            if (f.feeds_extern) EXPECT_NE(f.extents, (Shape{B, H, d, S})) << f.name << ": a transposing copy of K^T";
            for (const auto &[name, callee] : Halide::Internal::find_transitive_calls(f.func.function())) {
                if (name.find("_cublas_batched") == std::string::npos || !callee.has_extern_definition()) continue;
                const auto &args = callee.extern_arguments();
                ASSERT_EQ(args.size(), 9u) << name;
                const auto *tb = args[7].expr.as<Halide::Internal::IntImm>();
                ASSERT_NE(tb, nullptr) << name;
                flags[name] = (int)tb->value;
            }
        }
        std::vector<int> values;
        std::string names;
        for (const auto &[name, tb] : flags) values.push_back(tb), names += name + " ";
        std::sort(values.begin(), values.end());
        EXPECT_EQ(values, (std::vector<int>{0, 1})) << "Q K^T transposed, P V not: " << names;
        ASSERT_NE(copy, nullptr);
        EXPECT_TRUE(copy->feeds_extern);
        EXPECT_EQ(copy->extents, (Shape{B, H, S, d}));

        Halide::Buffer<float> xb = head_split ? Halide::Buffer<float>(d, H, S, B) : Halide::Buffer<float>(d, S, H, B);
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        xb.for_each_value([&](float &e) { e = u(rng); });
        for (size_t k = 0; k < p.inputs.size(); k++)
            if (p.input_names[k] == "x") p.inputs[k].set(xb);
        Halide::Buffer<float> out(d, S, H, B);
        out.fill(std::nanf(""));
        Halide::Func cf = copy->func;
        cf.realize(out, Halide::get_host_target());
        int bad = 0;
        for (int bi = 0; bi < B; bi++)
            for (int h = 0; h < H; h++)
                for (int s = 0; s < S; s++)
                    for (int c = 0; c < d; c++) {
                        float want = head_split ? xb(c, h, s, bi) : xb(c, s, h, bi);
                        bad += !(out(c, s, h, bi) == want);
                    }
        EXPECT_EQ(bad, 0) << (head_split ? "head split" : "K [B, H, S, d]");
        auto [object, symbols] = cuda_artifact(p, head_split ? "batched_kt_split" : "batched_kt");
        EXPECT_NE(symbols.find("T loom_cublas_batched"), std::string::npos) << symbols;
    }
}

TEST(Aot, UnfusedEpiloguesKeepBiasAndActivationInHalide) {
    // `loom compile --unfused-epilogues` (LowerOptions::fuse_activation_epilogue off): the GEMM is a
    // plain cuBLAS(Lt) call, the bias and the GELU Halide Funcs after it; the artifact still links.
    Graph g = import_onnx(loom::testing::data_path("gelu_mlp.onnx"));
    prepare_graph(g);
    LowerOptions lo;
    lo.gemm_extern = true;
    lo.fuse_activation_epilogue = false;
    LoweredPipeline p = lower_graph(g, lo);
    EXPECT_EQ(p.extern_calls, (std::vector<std::string>{"loom_cublas_sgemm"}));
    bool gelu = false;
    for (const auto &f : p.funcs) gelu |= f.op == "Gelu" || f.name.find("erf") != std::string::npos ||
                                          f.name.find("tanh") != std::string::npos;
    EXPECT_TRUE(gelu) << "the GELU should stay a Halide Func";
    auto [object, output] = cuda_artifact(p, "gelu_mlp_unfused");
    EXPECT_NE(output.find("T loom_cublas_sgemm"), std::string::npos) << output;
    EXPECT_EQ(object.find("loom_cublaslt_bias_act"), std::string::npos) << "the pipeline calls only the plain GEMM";
}

// gpu_max_registers: `.maxnreg` goes after the parameter list of exactly the named Func's kernels
// (not of a Func whose name merely starts the same), and nothing else in the PTX changes.
TEST(Aot, RegisterCapsPatchOnlyTheNamedKernels) {
    std::string ptx = ".version 7.0\n.visible .entry _kernel_ln_add_s0_i___block_id_x(\n\t.param .u64 a\n)\n{\n\tret;\n}\n"
                      ".visible .entry _kernel_ln_add_1_s0_i___block_id_x(\n\t.param .u64 b\n)\n{\n\tret;\n}\n";
    std::string capped = cap_ptx_registers(ptx, {{"ln_add", 32}});
    EXPECT_NE(capped.find("_kernel_ln_add_s0_i___block_id_x(\n\t.param .u64 a\n)\n.maxnreg 32\n{"), std::string::npos)
        << capped;
    EXPECT_EQ(capped.find(".maxnreg", capped.find("_kernel_ln_add_1_s0")), std::string::npos) << capped;
    std::string back = capped;
    back.erase(back.find("\n.maxnreg 32"), std::string("\n.maxnreg 32").size());
    EXPECT_EQ(back, ptx);
    EXPECT_EQ(cap_ptx_registers(ptx, {}), ptx);
}

// The auto-scheduler caps a wide row kernel's registers; the artifact wraps Halide's kernel loader
// (hidden, so two artifacts never share it) and ptxas accepts the capped PTX within the budget.
TEST(Aot, CudaRowKernelRegisterBudgetReachesPtxas) {
    loom::testing::GraphBuilder b;
    b.output(b.node("Softmax", {b.input("x", {64, 8192})}, {64, 8192}, {{"axis", AttrValue(int64_t(1))}}));
    Graph g = b.g;
    prepare_graph(g);
    LoweredPipeline p = lower_graph(g);
    Halide::Target t = aot_target("cuda");
    Schedule s = gpu_auto_schedule(p, t);
    std::string text = print_schedule(s);
    ASSERT_NE(text.find("gpu_max_registers(32)"), std::string::npos) << text;
    AppliedSchedule applied = apply_schedule(s, p, t);
    ASSERT_EQ(applied.max_registers.size(), 1u);
    fs::path out = scratch("cuda_caps");
    AotOptions o;
    o.name = "caps";
    o.max_registers = applied.max_registers;
    AotArtifact a = compile_aot(p, t, out.string(), o);
    std::string ptxas_path = (std::getenv("CUDA_HOME") ? std::string(std::getenv("CUDA_HOME")) : "/usr/local/cuda") + "/bin/ptxas";
    EXPECT_TRUE(a.warnings.empty()) << a.warnings[0] << ": the auto budget does not spill";
    if (fs::exists(ptxas_path)) {
        // Too low a budget: the build goes on, and a warning names the Func, the spill and the fix.
        AotOptions low = o;
        low.max_registers.begin()->second = 16;
        low.force = true;
        AotArtifact b = compile_aot(p, t, (out.string() + "_low"), low);
        ASSERT_EQ(b.warnings.size(), 1u);
        const std::string &w = b.warnings[0];
        EXPECT_NE(w.find("gpu_max_registers(16) on " + applied.max_registers.begin()->first), std::string::npos) << w;
        EXPECT_NE(w.find("bytes per thread to local memory"), std::string::npos) << w;
        EXPECT_NE(w.find(") does not spill"), std::string::npos) << w;
        // The auto-scheduler's budgets are raised instead, and the artifact carries the raised one.
        low.raise_spilling_budgets = true;
        AotArtifact c = compile_aot(p, t, (out.string() + "_raised"), low);
        ASSERT_EQ(c.warnings.size(), 1u);
        EXPECT_NE(c.warnings[0].find("raised to "), std::string::npos) << c.warnings[0];
        std::string src = slurp(fs::path(c.dir) / "caps_register_caps.cpp");
        EXPECT_EQ(src.find("const int kRegs[] = {16,"), std::string::npos) << src;
    }
    std::string syms;
    ASSERT_EQ(loom::testing::run_command("nm " + a.shared_lib, syms), 0) << syms;
    EXPECT_NE(syms.find(" t halide_cuda_initialize_kernels"), std::string::npos) << "hidden wrapper";
    EXPECT_NE(syms.find(std::string(" ") + kRenamedInitializeKernels), std::string::npos);
    // The PTX text embedded in the pipeline object, capped as the artifact will cap it.
    std::string obj = slurp(out / "caps_halide.o");
    size_t at = obj.find("// Generated by LLVM NVPTX");
    ASSERT_NE(at, std::string::npos);
    std::string ptx = cap_ptx_registers(obj.substr(at, obj.find('\0', at) - at), applied.max_registers);
    ASSERT_NE(ptx.find(".maxnreg 32"), std::string::npos);
    std::string ptxas = (std::getenv("CUDA_HOME") ? std::string(std::getenv("CUDA_HOME")) : "/usr/local/cuda") + "/bin/ptxas";
    if (!fs::exists(ptxas)) GTEST_SKIP() << "no ptxas at " << ptxas;
    std::ofstream(out / "k.ptx") << ptx;
    std::string log;
    ASSERT_EQ(loom::testing::run_command(ptxas + " -arch=sm_80 -v " + (out / "k.ptx").string() + " -o " +
                                             (out / "k.cubin").string() + " 2>&1", log), 0) << log;
    size_t used = log.find("Used ");
    ASSERT_NE(used, std::string::npos) << log;
    EXPECT_LE(std::stoi(log.substr(used + 5)), 32) << log;
    bool no_spill = log.find("spill stores") == std::string::npos || log.find(" 0 bytes spill stores") != std::string::npos;
    EXPECT_TRUE(no_spill) << log;
    fs::remove_all(out.parent_path());
}
