// The `loom` command line end to end: exit codes (0 ok, 1 user error, 2 internal), --help, and
// that every user error names the culprit and the fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/scheduling.h"
#include "graph/npy.h"
#include "graph_builder.h"
#include "test_util.h"

using loom::testing::data_path;
using loom::testing::loom_binary;
using loom::testing::run_command;

namespace {

struct Result {
    int rc;
    std::string out;
};

// Runs `loom args`, with environment assignments (`NAME=value …`) in front when \p env is given.
Result run_loom_env(const std::string &env, const std::string &args) {
    Result r;
    r.rc = run_command((env.empty() ? "" : env + " ") + loom_binary() + " " + args, r.out);
    return r;
}

Result run_loom(const std::string &args) { return run_loom_env("", args); }

std::string temp_dir() {
    auto d = std::filesystem::temp_directory_path() / ("loom_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(Cli, HelpOnEveryCommandSucceeds) {
    for (const char *cmd : {"", "inspect", "run", "schedule", "schedule print", "autoschedule", "bench", "compile"}) {
        Result r = run_loom(std::string(cmd) + " --help");
        EXPECT_EQ(r.rc, 0) << cmd << ": " << r.out;
        EXPECT_HAS(r.out, "Usage");
    }
}

// LOOM_FUSE_ATTENTION takes 0 or 1: another value is a user error naming the variable, the value
// and the valid settings, before anything runs.
TEST(Cli, BadFuseAttentionValueNamesTheVariableAndTheFix) {
    Result r = run_loom_env("LOOM_FUSE_ATTENTION=yes", "run " + data_path("transformer.onnx") + " --schedule auto");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "LOOM_FUSE_ATTENTION='yes'");
    EXPECT_HAS(r.out, "LOOM_FUSE_ATTENTION=1");
    EXPECT_HAS(r.out, "or unset it");
    Result ok = run_loom_env("LOOM_FUSE_ATTENTION=0", "inspect " + data_path("transformer.onnx"));
    EXPECT_EQ(ok.rc, 0) << ok.out;
}

TEST(Cli, InspectPrintsNodesAndHistogram) {
    Result r = run_loom("inspect " + data_path("cnn.onnx"));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "op histogram:");
    EXPECT_HAS(r.out, "Conv");
    EXPECT_HAS(r.out, "parameters");
}

TEST(Cli, InspectFuncsListsVarsAndConsumers) {
    Result r = run_loom("inspect " + data_path("layernorm_rows.onnx") + " --funcs");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "(i:64, j:256)");
    EXPECT_HAS(r.out, "update(0) over r.x");
    EXPECT_HAS(r.out, "read by");
}

TEST(Cli, RunReferenceMatchesPyTorchAndSaves) {
    std::string dir = temp_dir() + "/out";
    Result r = run_loom("run " + data_path("mlp.onnx") + " --reference --inputs " + data_path("mlp") + " --save " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    loom::Tensor saved = loom::read_npy(dir + "/y.npy"), torch = loom::read_npy(data_path("mlp/expected_y.npy"));
    EXPECT_TRUE(loom::testing::close(saved, torch, 1e-5, 1e-5));
}

TEST(Cli, RunCheckPassesUnderBuiltinSchedules) {
    for (const char *s : {"eager", "inline"}) {
        Result r = run_loom("run " + data_path("transformer.onnx") + " --schedule " + s + " --check --repeats 1");
        EXPECT_EQ(r.rc, 0) << s << ": " << r.out;
        EXPECT_HAS(r.out, "compile");
        EXPECT_HAS(r.out, " ok");
    }
}

TEST(Cli, MissingModelFileIsAUserError) {
    Result r = run_loom("inspect /nonexistent/model.onnx");
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "/nonexistent/model.onnx");
}

TEST(Cli, CorruptModelIsAUserError) {
    std::string p = temp_dir() + "/corrupt.onnx";
    std::ofstream(p) << "this is not a protobuf";
    Result r = run_loom("inspect " + p);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "corrupt.onnx");
}

TEST(Cli, UnboundDimNamesTheFlag) {
    Result r = run_loom("run " + data_path("dynamic_mlp.onnx"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "'batch'");
    EXPECT_HAS(r.out, "--input batch=N");
}

TEST(Cli, BadInputFlagShowsTheForm) {
    Result r = run_loom("run " + data_path("dynamic_mlp.onnx") + " --input batch=abc");
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "NAME=DIMS");
    r = run_loom("run " + data_path("dynamic_mlp.onnx") + " --input bacth=4");
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "did you mean 'batch'");
}

// A single-value flag given twice names the flag (CLI11 would otherwise keep the last silently);
// flags that take several values (bench's --schedule) still do, and --generic-plan, one entry per
// input, names an input given twice.
TEST(Cli, SingleValueFlagGivenTwiceNamesTheFlag) {
    Result r = run_loom("run " + data_path("mlp.onnx") + " --schedule auto --schedule eager");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--schedule: At Most 1 required but received 2");
    r = run_loom("compile " + data_path("mlp.onnx") + " -o /nonexistent/a -o /nonexistent/b");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--out");
    r = run_loom("bench " + data_path("dynamic_mlp.onnx") + " --input x=16x64 --generic --generic-plan x=4x64 "
                 "--generic-plan x=8x64");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--generic-plan x=8x64: 'x' is already given by an earlier --generic-plan");
    r = run_loom("bench " + data_path("mlp.onnx") + " --schedule auto --schedule eager --budget-ms 20");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "eager");
}

// bench's --generic-without names the kind of copy it does not know (a typo in a '+' list) and the
// kinds it knows.
TEST(Cli, GenericWithoutNamesAnUnknownKindOfCopy) {
    Result r = run_loom("bench " + data_path("dynamic_mlp.onnx") + " --input x=16x64 --generic-without half-tile+narow");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--generic-without half-tile+narow: 'narow' is no kind of copy; give one of by-value, "
                      "half-tile, narrow, narrow-vectors, remainder, undivided, or several joined by '+'");
}

TEST(Cli, UnknownFlagAndCommandAreUserErrors) {
    EXPECT_EQ(run_loom("run " + data_path("mlp.onnx") + " --no-such-flag").rc, 1);
    EXPECT_EQ(run_loom("frobnicate").rc, 1);
}

TEST(Cli, BadScheduleFileNamesLineColumnAndSuggestion) {
    std::string p = temp_dir() + "/bad.sched";
    std::ofstream(p) << "# a schedule with a typo\nsoftmax_rows.compute_root();\nsofmax.compute_root();\n";
    Result r = run_loom("run " + data_path("softmax_rows.onnx") + " --schedule " + p);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "bad.sched:");
    EXPECT_HAS(r.out, "did you mean");
}

TEST(Cli, MissingScheduleFileIsAUserError) {
    Result r = run_loom("run " + data_path("mlp.onnx") + " --schedule /nonexistent.sched");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "/nonexistent.sched");
}

TEST(Cli, LoopNestNeedsASchedule) {
    Result r = run_loom("inspect " + data_path("mlp.onnx") + " --loop-nest");
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "--schedule");
}

TEST(Cli, InspectPipelinesShowsTheCut) {
    // The transformer fixture's auto schedule is cut for the JIT; each pipeline lists its roots.
    Result r = run_loom("inspect " + data_path("transformer.onnx") + " --schedule auto --pipelines");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "pipeline 1 of ");
    EXPECT_HAS(r.out, "pipeline 2 of ");
    EXPECT_HAS(r.out, "qkv_matmul");
    Result off = run_loom_env("LOOM_PIPELINES=1", "inspect " + data_path("transformer.onnx") +
                                                      " --schedule auto --pipelines");
    EXPECT_EQ(off.rc, 0) << off.out;
    EXPECT_HAS(off.out, "pipeline 1 of 1: the whole model");
    Result none = run_loom("inspect " + data_path("mlp.onnx") + " --pipelines");
    EXPECT_EQ(none.rc, 1);
    EXPECT_HAS(none.out, "--schedule");
}

TEST(Cli, InspectPipelinesOfACudaArtifact) {
    // With --target, the cut `loom compile --target cuda` makes, library stages included.
    std::string cnn = data_path("cnn.onnx");
    Result r = run_loom_env("LOOM_PIPELINES=3", "inspect " + cnn + " --schedule auto --target cuda --pipelines");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "`loom compile --target cuda` makes 3 pipeline(s)");
    EXPECT_HAS(r.out, "fc_gemm_cublas");
    Result jit = run_loom_env("LOOM_PIPELINES=3", "inspect " + cnn + " --schedule auto --pipelines");
    EXPECT_EQ(jit.rc, 0) << jit.out;
    EXPECT_HAS(jit.out, "a JIT compile on this machine makes 3 pipeline(s)");
    Result bad = run_loom("inspect " + cnn + " --schedule auto --target vax --pipelines");
    EXPECT_EQ(bad.rc, 1) << bad.out;
    EXPECT_HAS(bad.out, "unknown target 'vax'");
    EXPECT_HAS(bad.out, "cuda");
    Result alone = run_loom("inspect " + cnn + " --target cuda");
    EXPECT_EQ(alone.rc, 1) << alone.out;
    EXPECT_HAS(alone.out, "add --schedule");
}

TEST(Cli, WrongInputFileShapeNamesTheFix) {
    std::string d = temp_dir() + "/ins";
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(data_path("sincos/x.npy"), d + "/x.npy", std::filesystem::copy_options::overwrite_existing);
    Result r = run_loom("run " + data_path("mlp.onnx") + " --inputs " + d);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "x.npy");
}

TEST(Cli, AutoscheduleWritesCudaScheduleAndNeverOverwrites) {
    std::string p = temp_dir() + "/softmax.cuda.sched";
    std::filesystem::remove(p);
    Result r = run_loom("autoschedule " + data_path("softmax_rows.onnx") + " --target cuda -o " + p);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::ifstream f(p);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_HAS(text, "cuda");
    EXPECT_HAS(text, "gpu_");
    r = run_loom("autoschedule " + data_path("softmax_rows.onnx") + " --target cuda -o " + p);
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "--force");
    r = run_loom("autoschedule " + data_path("softmax_rows.onnx") + " --target cuda --report");
    EXPECT_EQ(r.rc, 1);
    EXPECT_HAS(r.out, "--report");
}

// On CUDA the cuDNN convs take channels-last tensors where tensor cores run them, tf32 and bf16
// (D115, D117): the schedule stores the first conv's input copy NHWC; fp16 keeps cuDNN's NCHW
// stages and no copy. fp32 (FMA kernels, slower NHWC for 3x3 convs) goes channels-last only where
// spatial convs hold under a quarter of the convs' work (D123): cnn's two 3x3 convs keep NCHW,
// inverted_residual's 1x1 convs around a depthwise one go NHWC, the depthwise filter stored
// channels innermost.
TEST(Cli, CudaConvsAreChannelsLastInTf32AndBf16) {
    const std::string p = temp_dir() + "/cnn.cuda.sched";
    for (const char *model : {"cnn", "inverted_residual"})
        for (const char *prec : {"fp32", "tf32", "bf16", "fp16"}) {
            SCOPED_TRACE(std::string(model) + " " + prec);
            std::filesystem::remove(p);
            Result r = run_loom("autoschedule " + data_path(std::string(model) + ".onnx") + " --target cuda --precision " +
                                prec + " -o " + p);
            ASSERT_EQ(r.rc, 0) << r.out;
            std::ifstream f(p);
            std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
            const bool copy = text.find("_x_nhwc") != std::string::npos;
            const bool fp32_nhwc = std::string(prec) == "fp32" && std::string(model) == "inverted_residual";
            EXPECT_EQ(copy, std::string(prec) == "tf32" || std::string(prec) == "bf16" || fp32_nhwc) << text;
            if (copy) EXPECT_HAS(text, ".reorder_storage(c, w, h, n)");
        }
}

// The share of spatial convs' multiply-adds that choose_fp32_conv_layout weighs: a depthwise conv
// does not count (Halide's), a 1x1 conv counts as pointwise work, a 3x3 one as spatial.
TEST(Cli, SpatialConvShareWeighsCudnnConvs) {
    using loom::testing::GraphBuilder;
    using Ints = std::vector<int64_t>;
    GraphBuilder b;
    std::string x = b.input("x", {1, 8, 6, 6});
    std::string w1 = b.random_constant("w1", {8, 8, 1, 1}, 1), w2 = b.random_constant("w2", {8, 1, 3, 3}, 2);
    std::string w3 = b.random_constant("w3", {8, 8, 3, 3}, 3);
    std::string a = b.node("Conv", {x, w1}, {1, 8, 6, 6}, {{"kernel_shape", Ints{1, 1}}});
    std::string d = b.node("Conv", {a, w2}, {1, 8, 6, 6},
                           {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(8)}});
    b.out("Conv", {d, w3}, {1, 8, 6, 6}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}});
    EXPECT_DOUBLE_EQ(loom::cli::spatial_conv_share(b.g), 0.9) << "36·8·72 of 36·8·(8 + 72)";
    loom::LowerOptions lo;
    lo.conv_extern = true;
    loom::cli::choose_fp32_conv_layout(b.g, lo);
    EXPECT_FALSE(lo.conv_nhwc || lo.channels_last_depthwise_filters);
    GraphBuilder pw;
    std::string y = pw.input("x", {1, 8, 6, 6});
    pw.out("Conv", {pw.node("Conv", {y, pw.random_constant("w1", {8, 8, 1, 1}, 1)}, {1, 8, 6, 6}, {{"kernel_shape", Ints{1, 1}}}),
                    pw.random_constant("w2", {8, 1, 3, 3}, 2)},
           {1, 8, 6, 6}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(8)}});
    EXPECT_DOUBLE_EQ(loom::cli::spatial_conv_share(pw.g), 0.0);
    loom::cli::choose_fp32_conv_layout(pw.g, lo);
    EXPECT_TRUE(lo.conv_nhwc && lo.channels_last_depthwise_filters);
    lo = loom::LowerOptions{};
    lo.conv_extern = true;
    lo.gemm_precision = loom::Precision::FP16;
    loom::cli::choose_fp32_conv_layout(pw.g, lo);
    EXPECT_FALSE(lo.conv_nhwc) << "fp16 keeps NCHW stages";
}

// --tf32 only means something where cuBLAS/cuDNN run: on the host it is refused, naming the flag.
TEST(Cli, Tf32OnHostIsAUserError) {
    std::string out = temp_dir() + "/tf32_host";
    Result r = run_loom("compile " + data_path("mlp.onnx") + " --target host --tf32 -o " + out);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--tf32 applies to cuBLAS/cuDNN on --target cuda only; drop it");
    EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written on a user error";
}

// Each of \p flag_sets, given to `compile` of the mlp fixture, is a user error whose message holds
// \p culprit and \p fix; nothing is written.
static void expect_compile_refused(std::initializer_list<const char *> flag_sets, const std::string &culprit,
                                   const std::string &fix) {
    const std::string out = temp_dir() + "/refused";
    for (const char *flags : flag_sets) {
        SCOPED_TRACE(flags);
        Result r = run_loom("compile " + data_path("mlp.onnx") + " " + flags + " -o " + out);
        EXPECT_EQ(r.rc, 1) << r.out;
        EXPECT_HAS(r.out, culprit);
        EXPECT_HAS(r.out, fix);
        EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written on a user error";
    }
}

// --split-tf32 (3xTF32 GEMMs, D200) needs cuBLAS's FP32 GEMMs: on the host, with another precision or
// with --no-cublas it is refused, naming the flag and what to drop; nothing is written.
TEST(Cli, SplitTf32NeedsCudaFp32Gemms) {
    expect_compile_refused({"--target host --split-tf32", "--target cuda --precision bf16 --split-tf32",
                            "--target cuda --no-cublas --split-tf32"},
                           "--split-tf32 runs FP32 GEMMs as 3xTF32 on cuBLASLt", "drop --split-tf32 or those flags");
}

// --f16-attention (TF32 attention through cuDNN on FP16 copies, D208) needs CUDA, cuDNN and TF32: on the
// host, at another precision or with --no-cudnn it is refused, naming the flag and what to drop.
TEST(Cli, F16AttentionNeedsCudaCudnnTf32) {
    expect_compile_refused({"--target host --f16-attention", "--target cuda --precision bf16 --f16-attention",
                            "--target cuda --f16-attention", "--target cuda --precision tf32 --no-cudnn --f16-attention"},
                           "--f16-attention runs TF32 attention as cuDNN's on FP16 copies",
                           "drop --f16-attention or those flags");
}

// A CUDA compile whose library headers are not under CUDA_HOME says where it looked and which flag
// avoids the library; nothing is written.
TEST(Cli, MissingCudaLibrariesNameCudaHomeAndTheFlag) {
    std::string out = temp_dir() + "/no_cudnn_here";
    Result r = run_loom_env("CUDA_HOME=/nonexistent", "compile " + data_path("cnn.onnx") +
                                                          " --target cuda --no-cublas -o " + out);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "compiling the cuDNN extern stage");
    EXPECT_HAS(r.out, "CUDA_HOME=/nonexistent");
    EXPECT_HAS(r.out, "--no-cudnn");
    EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written on a user error";
}

// `loom autoschedule --target cuda` lowers the model as `loom compile --target cuda` does (cuBLAS
// and cuDNN calls included), so its file compiles; a file written with --no-cublas, compiled
// without it, is refused before anything is built, naming the library call and the flags.
TEST(Cli, CudaAutoscheduleNamesTheFuncsCompileLowers) {
    std::string dir = temp_dir() + "/cuda_libs";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    Result r = run_loom("autoschedule " + data_path("mlp.onnx") + " --target cuda -o " + dir + "/lib.sched");
    ASSERT_EQ(r.rc, 0) << r.out;
    r = run_loom("compile " + data_path("mlp.onnx") + " --target cuda --no-reference --schedule " + dir +
                 "/lib.sched -o " + dir + "/lib");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_TRUE(std::filesystem::exists(dir + "/lib/manifest.txt"));

    r = run_loom("autoschedule " + data_path("mlp.onnx") + " --target cuda --no-cublas -o " + dir + "/halide.sched");
    ASSERT_EQ(r.rc, 0) << r.out;
    r = run_loom("compile " + data_path("mlp.onnx") + " --target cuda --no-reference --schedule " + dir +
                 "/halide.sched -o " + dir + "/mismatch");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "halide.sched:");
    EXPECT_HAS(r.out, "fc1_gemm_relu_cublaslt");
    EXPECT_HAS(r.out, "--no-cublas");
    EXPECT_HAS(r.out, "loom autoschedule --target cuda");
    EXPECT_FALSE(std::filesystem::exists(dir + "/mismatch")) << "nothing is written on a user error";
}

TEST(Cli, InspectShowsUnboundSymbolicDimsAndTheFlagsThatBindThem) {
    Result r = run_loom("inspect " + data_path("dynamic_cnn.onnx"));
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "input  x: f32 batchx3xheightxwidth");
    EXPECT_HAS(r.out, "output y: f32 batchx10");
    EXPECT_HAS(r.out, "unbound dims: batch, height, width");
    EXPECT_HAS(r.out, "--input batch=N --input height=N --input width=N");
    // ONNX's inference carries the symbols through the convs: the first conv keeps batch, 16 channels.
    EXPECT_HAS(r.out, "batchx16x?x?");
    EXPECT_HAS(r.out, "op histogram:");
    // Binding only some dims still shows the graph; the message names what is left.
    r = run_loom("inspect " + data_path("dynamic_cnn.onnx") + " --input batch=2");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "unbound dims: height, width");
    // Bound, the canonical graph with numbers.
    r = run_loom("inspect " + data_path("dynamic_cnn.onnx") + " --input batch=2 --input height=24 --input width=40");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "input  x: f32 2x3x24x40");
    EXPECT_EQ(r.out.find("unbound"), std::string::npos) << r.out;
    // What needs the canonical graph still names the dim and the flag.
    r = run_loom("inspect " + data_path("dynamic_cnn.onnx") + " --funcs");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, "--input batch=N");
}

TEST(Cli, InspectNodeTableKeepsLongNamesApartFromTheirOp) {
    Result r = run_loom("inspect " + data_path("transformer.onnx"));
    ASSERT_EQ(r.rc, 0) << r.out;
    std::istringstream lines(r.out);
    std::string line;
    int rows = 0;
    while (std::getline(lines, line)) {
        if (line.rfind("/", 0) != 0) continue;  // node rows start with the exporter's '/...' names
        rows++;
        auto gap = line.find("  ");
        ASSERT_NE(gap, std::string::npos) << "a node name runs into its op: " << line;
    }
    EXPECT_GT(rows, 10) << r.out;
}

TEST(Cli, RunInputsDirBindsShapesFromTheFiles) {
    // dynamic_cnn's x.npy is 2x3x24x40: no --input needed, and the result is PyTorch's.
    std::string dir = temp_dir() + "/dyn_out";
    Result r = run_loom("run " + data_path("dynamic_cnn.onnx") + " --inputs " + data_path("dynamic_cnn") +
                        " --schedule auto --save " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    loom::Tensor saved = loom::read_npy(dir + "/y.npy"), torch = loom::read_npy(data_path("dynamic_cnn/expected_y.npy"));
    EXPECT_EQ(saved.shape(), (loom::Shape{2, 10}));
    EXPECT_TRUE(loom::testing::close(saved, torch, 1e-4, 1e-5));
    r = run_loom("run " + data_path("dynamic_mlp.onnx") + " --inputs " + data_path("dynamic_mlp") + " --reference");
    EXPECT_EQ(r.rc, 0) << r.out;
}

TEST(Cli, RunInputsDirWithAFileOfTheWrongRankNamesTheFile) {
    std::string dir = temp_dir() + "/bad_rank";
    std::filesystem::create_directories(dir);
    loom::Tensor t(loom::DType::F32, {3, 24, 40});
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, 0.5 + 0.001 * (double)i);
    loom::write_npy(dir + "/x.npy", t);
    Result r = run_loom("run " + data_path("dynamic_cnn.onnx") + " --inputs " + dir);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_HAS(r.out, dir + "/x.npy");
    EXPECT_HAS(r.out, "rank 3");
    EXPECT_HAS(r.out, "batchx3xheightxwidth");
}

// `--tail-copies` (loom run and loom bench share it): a negative count is refused, naming the flag,
// the value and what is valid.
TEST(Cli, NegativeTailCopiesIsAUserError) {
    for (const char *cmd : {"run", "bench"}) {
        Result r = run_loom(std::string(cmd) + " " + data_path("dynamic_mlp.onnx") + " --tail-copies -1");
        EXPECT_EQ(r.rc, 1) << cmd << ": " << r.out;
        EXPECT_HAS(r.out, "--tail-copies: '-1' is negative; give 0 (no copies) or more");
    }
}
