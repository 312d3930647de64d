// The output checker's tolerance (measure/output_tolerance.h): the rule's terms, a compiled deep
// model with a near-zero sigmoid output that passes, and a real bug in it that still fails.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/jit.h"
#include "graph_builder.h"
#include "lower/tanh_gelu.h"
#include "measure/output_tolerance.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::GraphBuilder;

constexpr int kLayers = 10, kWidth = 64, kRows = 16, kClasses = 8;

// x [16, 64] → ten Tanh(MatMul) layers → MatMul → + (−10) → Sigmoid: logits near −10, so the
// output is about 5e-5 and its error is the logits' absolute error (the text detector's shape).
GraphBuilder deep_sigmoid_model(double bug = 0) {
    GraphBuilder b;
    std::string h = b.input("x", {kRows, kWidth});
    for (int l = 0; l < kLayers; l++) {
        std::string w = b.random_constant("w" + std::to_string(l), {kWidth, kWidth}, 100 + l, -0.3, 0.3);
        if (bug != 0 && l == 3) {  // one weight off by a relative `bug`: a wrong index or a lost term would do as much
            Tensor t = *b.g.constant(w);
            t.set(5 * kWidth + 7, t.get(5 * kWidth + 7) * (1 + bug));
            b.g.set_constant(w, t);
        }
        h = b.node("Tanh", {b.node("MatMul", {h, w}, {kRows, kWidth})}, {kRows, kWidth});
    }
    std::string wo = b.random_constant("wo", {kWidth, kClasses}, 7, -1, 1);
    std::string logits = b.node("Add", {b.node("MatMul", {h, wo}, {kRows, kClasses}), b.scalar(-10)},
                                {kRows, kClasses});
    b.out("Sigmoid", {logits}, {kRows, kClasses});
    return b;
}

std::map<std::string, Tensor> inputs_of(const Graph &g) { return random_inputs(g, 5); }

// The stated bound behind running an exact GELU as cuBLASLt's tanh-form epilogue in BF16
// (lower/tanh_gelu.h): |gelu_tanh(x) − gelu_erf(x)| ≤ kTanhGeluDeviation · |x| everywhere, and on a
// linear layer's output the two forms differ by a small part of the BF16 tolerance the output
// checker enforces (a twentieth at most), so a FAIL of such an artifact still means a bug.
TEST(OutputTolerance, TanhGeluStandsForTheExactOneWithinBf16Rounding) {
    double worst = 0;
    for (int i = -200000; i <= 200000; i++) {
        const double x = i * 1e-4;  // [-20, 20]
        const double t = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        const double e = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        if (x != 0) worst = std::max(worst, std::fabs(t - e) / std::fabs(x));
    }
    EXPECT_LE(worst, kTanhGeluDeviation);
    EXPECT_GT(worst, kTanhGeluDeviation * 0.9) << "the bound is tight";
    for (double scale : {0.3, 1.0, 3.0}) {  // pre-activations of rms about 0.3, 1, 3
        Graph g[2];
        for (int form = 0; form < 2; form++) {
            GraphBuilder b;
            std::string h = b.node("MatMul", {b.input("x", {64, 256}), b.random_constant("w", {256, 128}, 3, -0.11, 0.11)},
                                   {64, 128});
            std::string sum = b.node("Add", {h, b.random_constant("bias", {128}, 4, -0.5, 0.5)}, {64, 128});
            b.out("Gelu", {sum}, {64, 128}, {{"approximate", std::string(form ? "tanh" : "none")}});
            g[form] = b.g;
        }
        std::map<std::string, Tensor> in;
        Tensor x(DType::F32, {64, 256});
        fill_random(x, 9, -scale * 1.7, scale * 1.7);
        in["x"] = x;
        const std::string out = g[0].outputs[0];
        const double err = output_error(run_reference(g[1], in).at(out), run_reference(g[0], in).at(out)).rel;
        const double rtol = output_tolerance(g[0], out, Precision::BF16, nullptr).rtol;
        EXPECT_LT(err, rtol / 20) << "scale " << scale;
        EXPECT_GT(err, 0) << "scale " << scale;
    }
}

TEST(OutputTolerance, DepthCountsAccumulatingOpsOnTheLongestPath) {
    GraphBuilder b = deep_sigmoid_model();
    const std::string out = b.g.outputs[0];
    EXPECT_EQ(accumulation_depth(b.g, out), kLayers + 1);  // the MatMuls; Tanh, Add, Sigmoid add none
    EXPECT_EQ(accumulation_depth(b.g, "x"), 0);
    EXPECT_EQ(sensitive_input(b.g, out), b.g.nodes[b.g.producer(out)].inputs[0]);

    GraphBuilder m;  // a MaxPool rounds nothing; an AveragePool and a ReduceMean accumulate
    std::string x = m.input("x", {1, 1, 8, 8});
    std::string p = m.node("MaxPool", {x}, {1, 1, 4, 4},
                           {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                            {"pads", std::vector<int64_t>{0, 0, 0, 0}}, {"dilations", std::vector<int64_t>{1, 1}},
                            {"ceil_mode", int64_t(0)}});
    std::string r = m.out("ReduceMean", {p}, {1, 1, 1, 1}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t(1)}});
    EXPECT_EQ(accumulation_depth(m.g, r), 1);
    EXPECT_EQ(sensitive_input(m.g, r), "");
}

TEST(OutputTolerance, TheRuleScalesWithPrecisionDepthAndOutputScale) {
    GraphBuilder b = deep_sigmoid_model();
    const std::string out = b.g.outputs[0];
    const double depth = std::sqrt((kLayers + 1) / 4.0);
    OutputTolerance fp32 = output_tolerance(b.g, out, Precision::FP32, nullptr);
    EXPECT_DOUBLE_EQ(fp32.rtol, 1e-5 * depth);
    EXPECT_EQ(fp32.sensitivity, 1);
    EXPECT_NEAR(output_tolerance(b.g, out, Precision::TF32, nullptr).rtol, 4 * std::ldexp(1.0, -11) * depth, 1e-12);
    EXPECT_NEAR(output_tolerance(b.g, out, Precision::FP16, nullptr).rtol, 4 * std::ldexp(1.0, -11) * depth, 1e-12);
    EXPECT_NEAR(output_tolerance(b.g, out, Precision::BF16, nullptr).rtol, 4 * std::ldexp(1.0, -8) * depth, 1e-12);

    Tensor logits = Tensor::from_doubles(DType::F64, {2}, {-12, 9});  // rms 10.6
    OutputTolerance s = output_tolerance(b.g, out, Precision::FP32, &logits);
    EXPECT_NEAR(s.sensitivity, std::sqrt((144 + 81) / 2.0), 1e-12);
    EXPECT_NEAR(s.rtol, 1e-5 * depth * s.sensitivity, 1e-15);
    EXPECT_NE(s.describe().find("Sigmoid"), std::string::npos) << s.describe();
    Tensor small = Tensor::from_doubles(DType::F64, {2}, {0.5, -0.5});  // logits within ±1 leave the base
    EXPECT_EQ(output_tolerance(b.g, out, Precision::FP32, &small).sensitivity, 1);
    Tensor huge = Tensor::from_doubles(DType::F64, {1}, {1e6});
    EXPECT_EQ(output_tolerance(b.g, out, Precision::BF16, &huge).rtol, 0.1);  // capped
}

// The case the rule is for, with FP32 rounding of the logits made explicit (deterministic on any
// host): a relative error of 2e-6 in logits near −10 is a 2e-5 relative error of the sigmoid,
// which a flat 1e-5 calls wrong; the rule (κ = the logits' rms) passes it.
TEST(OutputTolerance, RoundedLogitsOfANearZeroSigmoidPass) {
    GraphBuilder b = deep_sigmoid_model();
    const std::string out = b.g.outputs[0];
    std::map<std::string, OutputTolerance> tol;
    auto ref = run_reference_with_tolerances(b.g, inputs_of(b.g), Precision::FP32, tol);
    Graph with = b.g;
    with.outputs.push_back(sensitive_input(b.g, out));
    Tensor logits = run_reference(with, inputs_of(b.g)).at(with.outputs[1]);
    Tensor rounded(DType::F32, logits.shape());
    for (int64_t i = 0; i < logits.numel(); i++) {
        float x = (float)(logits.get(i) * (1 + ((i % 2) ? 2e-6 : -2e-6)));
        rounded.set(i, 1 / (1 + std::exp(-(double)x)));
    }
    OutputError e = output_error(rounded, ref.at(out));
    EXPECT_LT(ref.at(out).get(0), 1e-2);
    EXPECT_FALSE(e.passes(1e-5)) << e.rel;
    EXPECT_TRUE(e.passes(tol.at(out).rtol)) << e.rel << " against " << tol.at(out).describe();
}

// The compiled model passes its tolerance; the same model with one weight off by 1% (a bug)
// fails it, as does one wrong element of the output.
TEST(OutputTolerance, ACompiledModelPassesAndARealBugFails) {
    GraphBuilder b = deep_sigmoid_model();
    const std::string out = b.g.outputs[0];
    auto in = inputs_of(b.g);
    std::map<std::string, OutputTolerance> tol;
    auto ref = run_reference_with_tolerances(b.g, in, Precision::FP32, tol);
    const double rtol = tol.at(out).rtol;
    EXPECT_GT(tol.at(out).sensitivity, 5) << tol.at(out).describe();

    LoweredPipeline lp = lower_graph(b.g);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    Tensor compiled = m.run(in).at(out);
    OutputError ok = output_error(compiled, ref.at(out));
    EXPECT_TRUE(ok.passes(rtol)) << ok.rel << " against " << tol.at(out).describe();

    Tensor bugged = run_reference(deep_sigmoid_model(0.01).g, in).at(out);
    OutputError bug = output_error(bugged, ref.at(out));
    EXPECT_FALSE(bug.passes(rtol)) << bug.rel << " against " << tol.at(out).describe();

    Tensor one_wrong = compiled;
    one_wrong.set(3, one_wrong.get(3) * 1.5);
    EXPECT_FALSE(output_error(one_wrong, ref.at(out)).passes(rtol));

    Tensor nan = compiled;
    nan.set(0, NAN);
    EXPECT_FALSE(output_error(nan, ref.at(out)).passes(1));
}

// `loom compile` writes data/tolerance.txt, one line per output with the rule's terms.
TEST(OutputTolerance, CompileWritesTheToleranceFile) {
    namespace fs = std::filesystem;
    fs::path dir = loom::testing::temp_path("tolerance_mlp");
    fs::remove_all(dir);
    std::string output;
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " +
                                            loom::testing::data_path("mlp.onnx") + " -o " + dir.string() + " 2>&1",
                                        output);
    ASSERT_EQ(rc, 0) << output;
    std::ifstream f(dir / "data" / "tolerance.txt");
    std::stringstream ss;
    ss << f.rdbuf();
    // The MLP's outputs are two or three accumulating ops deep: the FP32 base alone.
    EXPECT_NE(ss.str().find(" 1.00e-05 (fp32, depth "), std::string::npos) << ss.str();
    fs::remove_all(dir);
}

TEST(OutputTolerance, PrecisionFlagErrorsNameTheFix) {
    std::string output;
    std::string model = loom::testing::data_path("mlp.onnx");
    int rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " + model +
                                            " --precision bf16 -o /nonexistent/x 2>&1",
                                        output);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("error: loom compile: --precision bf16 applies to cuBLAS/cuDNN on --target cuda only"),
              std::string::npos)
        << output;
    rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " + model +
                                        " --target cuda --precision half -o /nonexistent/x 2>&1",
                                    output);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("unknown precision 'half': use fp32, tf32, bf16 or fp16"), std::string::npos) << output;
    rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " + model +
                                        " --target cuda --precision bf16 --tf32 -o /nonexistent/x 2>&1",
                                    output);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("--tf32 is --precision tf32"), std::string::npos) << output;
    rc = loom::testing::run_command(loom::testing::loom_binary() + " compile " + model +
                                        " --target cuda --precision fp16 --no-cublas --no-cudnn -o /nonexistent/x 2>&1",
                                    output);
    EXPECT_EQ(rc, 1) << output;
    EXPECT_NE(output.find("drop --precision or one of them"), std::string::npos) << output;
}

}  // namespace
}  // namespace loom
