// Models stored in float16 and bfloat16 (graph/passes.h widen_half_precision): the types' rounding,
// import, the widened graph, the reference against PyTorch, compiled CPU code against the FP64
// reference within the per-precision tolerance (measure/output_tolerance.h), bf16 .npy files, and
// the user errors. Fixtures from frontends/torch/export_half_fixtures.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>

#include "codegen/jit.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "measure/output_tolerance.h"
#include "frontends/onnx/onnx_import.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "test_util.h"

namespace loom {
namespace {

using testing::data_path;

struct HalfFixture {
    std::string name;
    std::map<std::string, DType> types;  // each graph input and output's stored type
};

const std::vector<HalfFixture> &half_fixtures() {
    static const std::vector<HalfFixture> f = {
        {"mlp_f16", {{"x", DType::F16}, {"y", DType::F16}}},
        {"cnn_f16", {{"x", DType::F16}, {"y", DType::F16}}},
        {"transformer_bf16", {{"x", DType::BF16}, {"y", DType::BF16}}},
        {"mixed_casts", {{"x", DType::F32}, {"y", DType::F32}, {"z", DType::F16}, {"r", DType::BF16}}},
    };
    return f;
}

std::map<std::string, Tensor> fixture_inputs(const std::string &name, const Graph &g) {
    std::map<std::string, Tensor> in;
    for (const auto &i : g.inputs) {
        Tensor t = read_npy(data_path(name + "/" + i + ".npy"));
        in[i] = t.dtype() == g.value(i).dtype ? t : t.cast(g.value(i).dtype);
    }
    return in;
}

Graph prepared(const std::string &name) {
    Graph g = import_onnx(data_path(name + ".onnx"));
    PrepareOptions opts;
    for (const auto &i : g.inputs) opts.bindings[i] = read_npy(data_path(name + "/" + i + ".npy")).shape();
    prepare_graph(g, opts);
    return g;
}

TEST(HalfPrecision, ConversionsRoundToNearestEven) {
    auto bf16 = [](double v) { return Tensor::scalar(DType::BF16, v).get(0); };
    auto f16 = [](double v) { return Tensor::scalar(DType::F16, v).get(0); };
    EXPECT_EQ(bf16(1 + std::ldexp(1.0, -8)), 1.0);  // a tie between 1 and 1 + 2^-7: the even one
    EXPECT_EQ(bf16(1 + 3 * std::ldexp(1.0, -8)), 1 + std::ldexp(1.0, -6));
    EXPECT_EQ(bf16(1 + 1.5 * std::ldexp(1.0, -8)), 1 + std::ldexp(1.0, -7));
    EXPECT_EQ(bf16(-3.0), -3.0);
    EXPECT_TRUE(std::isnan(bf16(NAN)));
    EXPECT_TRUE(std::isinf(bf16(1e39)));  // past float's range
    EXPECT_EQ(f16(1 + std::ldexp(1.0, -11)), 1.0);
    EXPECT_EQ(f16(1 + 3 * std::ldexp(1.0, -11)), 1 + std::ldexp(1.0, -9));
    EXPECT_EQ(f16(std::ldexp(3.0, -25)), std::ldexp(1.0, -23));  // subnormal tie 1.5 ulps: to 2 ulps
    EXPECT_EQ(f16(70000), INFINITY);
    EXPECT_EQ(dtype_from_onnx(16), DType::BF16);
    EXPECT_EQ(dtype_size(DType::BF16), 2);
    EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
}

// 3xTF32's split (LowerOptions::gemm_split_tf32): x = high + low exactly, the high part exact in
// TF32 (its low 13 mantissa bits zero, rounded to nearest) and the low part at most 2^-11 of x;
// the Halide Exprs (the A copy) and the compile-time floats (a constant B) agree bit for bit.
// Infinities keep their high part with a zero low part, a NaN stays NaN, and a value whose rounding
// would overflow keeps itself as the high part.
TEST(HalfPrecision, Tf32SplitIsExactAndMatchesAtCompileTime) {
    const float big = std::numeric_limits<float>::max();
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(1.0f, -12),
                             1.0f + 3 * std::ldexp(1.0f, -12), -3.14159265f, 1e-30f, std::ldexp(1.0f, -140),
                             65504.5f, 3.0e38f, big, -big, INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 200; k++) xs.push_back(std::ldexp((float)std::sin(k * 1.7 + 0.3), k % 40 - 20));
    const int n = (int)xs.size();
    Halide::Buffer<float> in(n), out(n, 2);
    for (int k = 0; k < n; k++) in(k) = xs[k];
    Halide::Var i, part;
    Halide::Func f;
    f(i, part) = Halide::select(part == 0, tf32_high(in(i)), tf32_low(in(i)));
    f.realize(out, Halide::get_jit_target_from_environment());
    auto bits = [](float v) {
        uint32_t u;
        std::memcpy(&u, &v, sizeof u);
        return u;
    };
    for (int k = 0; k < n; k++) {
        const float x = xs[k], hi = tf32_high(x), lo = tf32_low(x);
        SCOPED_TRACE(x);
        if (std::isnan(x)) {
            EXPECT_TRUE(std::isnan(out(k, 1)) && std::isnan(hi + lo)) << "NaN never passes";
            continue;
        }
        EXPECT_EQ(bits(out(k, 0)), bits(hi));
        EXPECT_EQ(bits(out(k, 1)), bits(lo));
        if (std::isinf(x)) {
            EXPECT_EQ(hi, x);
            EXPECT_EQ(lo, 0.0f);
            continue;
        }
        EXPECT_EQ(hi + lo, x);
        if (std::fabs(x) >= std::numeric_limits<float>::min())  // subnormals: all in the low part
            EXPECT_LE(std::fabs(lo), std::ldexp(std::fabs(x), -11));
        if (std::fabs(x) < 3.0e38f) EXPECT_EQ(bits(hi) & 0x1FFFu, 0u) << "exact in TF32";
    }
    EXPECT_EQ(tf32_high(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10)) << "a tie rounds away";
    EXPECT_EQ(tf32_high(big), big) << "rounding up would overflow";
}

TEST(HalfPrecision, FixturesImportWithTheirStoredTypes) {
    for (const auto &f : half_fixtures()) {
        Graph g = import_onnx(data_path(f.name + ".onnx"));
        for (const auto &kv : f.types) EXPECT_EQ(g.value(kv.first).dtype, kv.second) << f.name << " " << kv.first;
        int half = 0;
        for (const auto &kv : g.initializers) half += dtype_is_half(kv.second.dtype());
        EXPECT_GT(half, 0) << f.name;
    }
    Graph t = import_onnx(data_path("transformer_bf16.onnx"));
    for (const auto &kv : t.initializers)
        if (dtype_is_float(kv.second.dtype())) {
            EXPECT_EQ(kv.second.dtype(), DType::BF16) << kv.first;
        }
}

// After preparation only Casts read or write f16/bf16 values; inputs and outputs keep their types;
// the mixed graph's Casts to f16/bf16 survive (their rounding is the model's).
TEST(HalfPrecision, WideningLeavesHalfValuesOnlyAroundCasts) {
    for (const auto &f : half_fixtures()) {
        Graph g = prepared(f.name);
        for (const auto &kv : f.types) EXPECT_EQ(g.value(kv.first).dtype, kv.second) << f.name << " " << kv.first;
        for (const auto &kv : g.initializers) EXPECT_FALSE(dtype_is_half(kv.second.dtype())) << f.name << " " << kv.first;
        for (const auto &n : g.nodes) {
            if (n.op == "Cast") continue;
            for (const auto &v : n.inputs) EXPECT_TRUE(v.empty() || !dtype_is_half(g.value(v).dtype)) << n.describe();
            for (const auto &v : n.outputs) EXPECT_FALSE(dtype_is_half(g.value(v).dtype)) << n.describe();
        }
    }
    Graph m = prepared("mixed_casts");
    int to_half = 0;
    for (const auto &n : m.nodes) to_half += n.op == "Cast" && dtype_is_half(m.value(n.outputs[0]).dtype);
    EXPECT_EQ(to_half, 5);  // the model's four (x16, x2b, z, xb) and the one rounding Relu's output r
}

// The reference interpreter on the prepared graph gives PyTorch's outputs (computed in f32 from the
// stored weights and inputs, rounded to the output's type) within the output's tolerance.
TEST(HalfPrecision, ReferenceReproducesPyTorch) {
    for (const auto &f : half_fixtures()) {
        Graph g = prepared(f.name);
        std::map<std::string, OutputTolerance> tol;
        auto out = run_reference_with_tolerances(g, fixture_inputs(f.name, g), Precision::FP32, tol);
        for (const auto &o : g.outputs) {
            Tensor want = read_npy(data_path(f.name + "/expected_" + o + ".npy"));
            OutputError e = output_error(out.at(o), want);
            EXPECT_TRUE(e.passes(tol.at(o).rtol)) << f.name << " " << o << ": " << e.rel << " against "
                                                  << tol.at(o).describe();
        }
    }
}

// Each output's tolerance names the storage type that set its base.
TEST(HalfPrecision, ToleranceBaseIsTheStoredTypes) {
    Graph g = prepared("mixed_casts");
    OutputTolerance y = output_tolerance(g, "y", Precision::FP32, nullptr);
    OutputTolerance z = output_tolerance(g, "z", Precision::FP32, nullptr);
    EXPECT_EQ(y.storage, Precision::FP16);
    EXPECT_NEAR(y.base, 4 * std::ldexp(1.0, -11), 1e-15);
    EXPECT_EQ(z.storage, Precision::BF16);
    EXPECT_NEAR(z.base, 4 * std::ldexp(1.0, -8), 1e-15);
    EXPECT_NE(z.describe().find("bf16 storage"), std::string::npos) << z.describe();
    Graph plain = import_onnx(data_path("mlp.onnx"));
    PrepareOptions opts;
    prepare_graph(plain, opts);
    EXPECT_EQ(output_tolerance(plain, "y", Precision::FP32, nullptr).storage, Precision::FP32);
}

// Compiled for the CPU (every Func its own loop nest), each fixture matches the FP64 reference
// within its tolerance on random inputs; outputs come back in the model's types.
TEST(HalfPrecision, CompiledCpuMatchesTheReference) {
    for (const auto &f : half_fixtures()) {
        Graph g = prepared(f.name);
        auto in = random_inputs(g, 11);
        std::map<std::string, OutputTolerance> tol;
        auto ref = run_reference_with_tolerances(g, in, Precision::FP32, tol);
        LoweredPipeline lp = lower_graph(g);
        for (auto &fn : lp.funcs)
            if (!fn.is_extern) fn.func.compute_root();
        JitModel m(std::move(lp));
        auto out = m.run(in);
        for (const auto &o : g.outputs) {
            ASSERT_EQ(out.at(o).dtype(), f.types.at(o)) << f.name << " " << o;
            OutputError e = output_error(out.at(o), ref.at(o));
            EXPECT_TRUE(e.passes(tol.at(o).rtol)) << f.name << " " << o << ": " << e.rel << " against "
                                                  << tol.at(o).describe();
            EXPECT_GT(ref.at(o).to_doubles() != std::vector<double>(ref.at(o).numel(), 0.0), 0) << "all zero";
        }
    }
}

// The CLI end to end: the cost model's schedule checked against the reference, bf16 outputs saved
// as float32 .npy files.
TEST(HalfPrecision, CliRunsAndChecksEveryFixture) {
    for (const auto &f : half_fixtures()) {
        std::string out;
        std::string dir = testing::temp_path("half_" + f.name);
        int rc = testing::run_command(testing::loom_binary() + " run " + data_path(f.name + ".onnx") +
                                          " --schedule auto --check --inputs " + data_path(f.name) + " --save " + dir,
                                      out);
        EXPECT_EQ(rc, 0) << out;
        EXPECT_NE(out.find("ok"), std::string::npos) << out;
        for (const auto &kv : f.types) {
            if (!std::filesystem::exists(dir + "/" + kv.first + ".npy")) continue;
            Tensor t = read_npy(dir + "/" + kv.first + ".npy");
            EXPECT_EQ(t.dtype(), kv.second == DType::BF16 ? DType::F32 : kv.second) << f.name << " " << kv.first;
        }
        std::filesystem::remove_all(dir);
    }
}

// `loom compile <fixture>.onnx <flags> -o dir`, asserting it succeeds; returns the manifest's text.
std::string compile_fixture(const std::string &fixture, const std::string &flags, const std::string &dir) {
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " compile " + data_path(fixture + ".onnx") + " " + flags +
                                      " --force -o " + dir,
                                  out);
    EXPECT_EQ(rc, 0) << out;
    std::ifstream mf(dir + "/manifest.txt");
    return std::string((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
}

// A host artifact of the mixed graph takes and returns each port in its stored type (bf16 as its
// bits) through the C API, and matches the reference; the manifest names the types.
TEST(HalfPrecision, HostArtifactPassesHalfPortsThroughTheCApi) {
    std::string dir = testing::temp_path("half_artifact");
    std::string manifest = compile_fixture("mixed_casts", "--target host --schedule auto", dir);
    EXPECT_NE(manifest.find("output z f16 6 24"), std::string::npos) << manifest;
    EXPECT_NE(manifest.find("output r bf16 6 24"), std::string::npos) << manifest;

    Graph g = prepared("mixed_casts");
    auto in = random_inputs(g, 23);
    std::map<std::string, OutputTolerance> tol;
    auto ref = run_reference_with_tolerances(g, in, Precision::FP32, tol);
    testing::ArtifactApi api(dir + "/libmixed_casts.so", "mixed_casts");
    ASSERT_TRUE(api.ok()) << api.error;
    std::vector<Tensor> got;
    for (const auto &o : g.outputs) {
        got.emplace_back(g.value(o).dtype, g.value(o).shape);
        testing::poison(got.back());
    }
    void *m = api.create();
    const void *ins[] = {in.at("x").data()};
    void *outs[] = {got[0].data(), got[1].data(), got[2].data()};
    ASSERT_EQ(api.run(m, ins, outs), 0) << api.last_error();
    api.destroy(m);
    for (size_t k = 0; k < g.outputs.size(); k++) {
        OutputError e = output_error(got[k], ref.at(g.outputs[k]));
        EXPECT_TRUE(e.passes(tol.at(g.outputs[k]).rtol)) << g.outputs[k] << ": " << e.rel;
    }
    std::filesystem::remove_all(dir);
}

// On CUDA, a bf16 model under --precision bf16 is widened first, so cuDNN's fused attention
// recognizes its attention (compiled here; run on a GPU in bench/gpu/RESULTS_SERVING.md).
TEST(HalfPrecision, CudaBf16ModelFusesAttention) {
    std::string dir = testing::temp_path("half_cuda");
    std::string manifest = compile_fixture("transformer_bf16", "--target cuda --precision bf16", dir);
    EXPECT_TRUE(std::filesystem::exists(dir + "/transformer_bf16_cudnn_attention.cpp")) << manifest;
    EXPECT_NE(manifest.find("input x bf16"), std::string::npos) << manifest;
    std::filesystem::remove_all(dir);
}

TEST(HalfPrecision, Bf16NpyIsWrittenAsExactFloat32) {
    Tensor t = Tensor::from_doubles(DType::BF16, {3}, {1.5, -0.0078125, 3e38});
    Tensor back = parse_npy(serialize_npy(t), "t.npy");
    EXPECT_EQ(back.dtype(), DType::F32);
    for (int i = 0; i < 3; i++) EXPECT_EQ(back.get(i), t.get(i));
}

// A Cast to a type Loom lacks names the node, the type and the fix.
TEST(HalfPrecision, CastToAnUnsupportedTypeNamesTheNodeTheTypeAndTheFix) {
    Graph g = import_onnx(data_path("mixed_casts.onnx"));
    for (auto &n : g.nodes)
        if (n.name == "cast_z_f16") n.attrs["to"] = int64_t(4);  // UINT16
    std::string msg = testing::user_error_of([&] { prepare_graph(g, PrepareOptions{}); });
    EXPECT_NE(msg.find("cast_z_f16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("UINT16"), std::string::npos) << msg;
    EXPECT_NE(msg.find("re-export"), std::string::npos) << msg;
}

// An ONNX type Loom cannot store (float8) in an initializer names the tensor, the type and the fix.
TEST(HalfPrecision, UnsupportedInitializerTypeNamesTheTensorAndTheFix) {
    std::string path = testing::temp_path("float8.onnx");
    std::string out;
    // mixed_casts with W re-typed FLOAT8E4M3FN (17): its int32_data is then of an unknown type.
    ASSERT_EQ(testing::run_command("/usr/bin/python3 -c \"import onnx; m=onnx.load('" + data_path("mixed_casts.onnx") +
                                       "'); t=[i for i in m.graph.initializer if i.name=='W'][0]; t.data_type=17; "
                                       "onnx.save(m,'" + path + "')\"",
                                   out),
              0)
        << out;
    std::string msg = testing::user_error_of([&] { import_onnx(path); });
    EXPECT_NE(msg.find("'W'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(17)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;  // the types Loom takes
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom
