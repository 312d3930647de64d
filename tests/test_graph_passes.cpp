// Graph passes: binding, canonical form, shape inference, folding, Conv+BN, CSE, DCE, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autoschedule/autoschedule.h"
#include "cli/input_binding.h"
#include "codegen/jit.h"
#include "graph/gelu_recognition.h"
#include "graph/passes.h"
#include "lower/tanh_gelu.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "support/error.h"
#include "graph_builder.h"
#include "test_util.h"

using namespace loom;

namespace {

// A tiny graph builder: inputs, constants and nodes by name.
struct Builder {
    Graph g;
    Builder() { g.name = "t"; }
    Builder &input(const std::string &n, Shape s, DType t = DType::F32, std::vector<std::string> syms = {}) {
        ValueInfo &v = g.values[n];
        v.name = n, v.dtype = t, v.shape = s, v.symbols = syms;
        g.inputs.push_back(n);
        return *this;
    }
    Builder &constant(const std::string &n, Tensor t) {
        g.set_constant(n, t);
        return *this;
    }
    Node &node(const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs) {
        Node n;
        n.name = op + "_" + std::to_string(g.nodes.size());
        n.op = op, n.inputs = ins, n.outputs = outs;
        for (auto &o : outs) g.values[o].name = o;
        g.nodes.push_back(n);
        return g.nodes.back();
    }
    Builder &output(const std::string &n) {
        g.outputs.push_back(n);
        return *this;
    }
};

Tensor ints(std::vector<int64_t> v) { return Tensor::from_ints(DType::I64, {(int64_t)v.size()}, v); }

std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const UserError &e) {
        return e.what();
    }
    return "<no error>";
}

}  // namespace

// Gemm with transB=1 reading a graph value (a training step's parameter) reads it through a
// Transpose node and transB=0; a constant B is left to pretranspose_gemm_weights. Same outputs.
TEST(GraphPasses, GemmOfAValueWeightReadsItThroughATranspose) {
    loom::testing::GraphBuilder b;
    std::string y = b.out("Gemm", {b.input("a", {3, 4}), b.input("w", {5, 4}), b.input("c", {5})}, {3, 5},
                          {{"transB", int64_t(1)}, {"alpha", 0.5}});
    b.out("Gemm", {y, b.random_constant("k", {2, 5}, 7)}, {3, 2}, {{"transB", int64_t(1)}});
    Graph g = b.g;
    EXPECT_EQ(transpose_gemm_value_weights(g), 1);
    g.validate();
    int transposes = 0;
    for (const Node &n : g.nodes) {
        if (n.op == "Transpose") {
            transposes++;
            EXPECT_EQ(n.inputs[0], "w");
            EXPECT_EQ(g.value(n.outputs[0]).shape, (Shape{4, 5}));
        }
        if (n.op == "Gemm" && n.inputs[0] == "a") EXPECT_EQ(n.get_int("transB", 1), 0);
        if (n.op == "Gemm" && n.inputs[0] != "a") EXPECT_EQ(n.get_int("transB", 0), 1);  // the constant
    }
    EXPECT_EQ(transposes, 1);
    auto in = random_inputs(b.g, 5);
    auto want = run_reference(b.g, in), got = run_reference(g, in);
    for (const auto &o : b.g.outputs) EXPECT_TRUE(loom::testing::close(got.at(o), want.at(o), 1e-6, 1e-5)) << o;
}

TEST(GraphPasses, ShapeGatherConcatReshapeChainFolds) {
    // The exporter pattern: Reshape(x, Concat(Gather(Shape(x), 0), [-1])).
    Builder b;
    b.input("x", {-1, 4, 6}, DType::F32, {"batch", "", ""});
    b.constant("zero", Tensor::from_ints(DType::I64, {}, {0}));
    b.constant("minus1", ints({-1}));
    b.constant("ax0", ints({0}));
    b.node("Shape", {"x"}, {"s"});
    b.node("Gather", {"s", "zero"}, {"n"});
    b.node("Unsqueeze", {"n", "ax0"}, {"n1"});
    b.node("Concat", {"n1", "minus1"}, {"shape"}).attrs["axis"] = int64_t(0);
    b.node("Reshape", {"x", "shape"}, {"y"});
    b.node("Relu", {"y"}, {"z"});
    b.output("z");
    b.g.opset = 13;
    PrepareOptions o;
    parse_input_binding("batch=3", o.bindings);
    prepare_graph(b.g, o);
    ASSERT_EQ(b.g.nodes.size(), 2u);
    EXPECT_EQ(b.g.nodes[0].op, "Reshape");
    EXPECT_EQ(b.g.nodes[0].inputs.size(), 1u);
    EXPECT_EQ(b.g.nodes[0].get_ints("shape"), (std::vector<int64_t>{3, 24}));
    EXPECT_EQ(b.g.value("z").shape, (Shape{3, 24}));
}

TEST(GraphPasses, UnboundSymbolicDimNamesItAndTheFlag) {
    Builder b;
    b.input("x", {-1, 8}, DType::F32, {"batch", ""});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    std::string msg = error_of([&] { prepare_graph(b.g); });
    EXPECT_NE(msg.find("'batch'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--input batch=N"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--input x=1x8"), std::string::npos) << msg;
}

TEST(GraphPasses, BadInputFlagsAreUserErrors) {
    InputBindings bb;
    EXPECT_NE(error_of([&] { parse_input_binding("x", bb); }).find("expected NAME=DIMS"), std::string::npos);
    EXPECT_NE(error_of([&] { parse_input_binding("x=3xq", bb); }).find("'q'"), std::string::npos);
    Builder b;
    b.input("x", {2, 8});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    PrepareOptions o;
    parse_input_binding("xx=2x8", o.bindings);
    std::string msg = error_of([&] { prepare_graph(b.g, o); });
    EXPECT_NE(msg.find("did you mean 'x'"), std::string::npos) << msg;
}

TEST(GraphPasses, BroadcastMismatchNamesNodeAndShapes) {
    Builder b;
    b.input("a", {2, 3}).input("c", {4, 3});
    b.node("Add", {"a", "c"}, {"y"}).name = "my_add";
    b.output("y");
    std::string msg = error_of([&] { prepare_graph(b.g); });
    EXPECT_NE(msg.find("Add 'my_add'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2x3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4x3"), std::string::npos) << msg;
}

TEST(GraphPasses, ConvChannelMismatchAndMissingAttribute) {
    Builder b;
    b.input("x", {1, 3, 8, 8});
    Tensor w(DType::F32, {4, 2, 3, 3});
    b.constant("w", w);
    b.node("Conv", {"x", "w"}, {"y"}).name = "conv1";
    b.output("y");
    std::string msg = error_of([&] { prepare_graph(b.g); });
    EXPECT_NE(msg.find("conv1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 channels"), std::string::npos) << msg;

    Builder c;
    c.input("x", {1, 3, 8, 8});
    c.node("MaxPool", {"x"}, {"y"}).name = "pool";
    c.output("y");
    msg = error_of([&] { prepare_graph(c.g); });
    EXPECT_NE(msg.find("'kernel_shape'"), std::string::npos) << msg;
}

TEST(GraphPasses, CycleAndUndefinedTensorAreNamed) {
    Builder b;
    b.input("x", {2});
    b.node("Add", {"x", "q"}, {"p"}).name = "n1";
    b.node("Relu", {"p"}, {"q"}).name = "n2";
    b.output("q");
    std::string msg = error_of([&] { prepare_graph(b.g); });
    EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;

    Builder c;
    c.input("x", {2});
    c.node("Add", {"x", "nowhere"}, {"y"}).name = "adder";
    c.output("y");
    msg = error_of([&] { prepare_graph(c.g); });
    EXPECT_NE(msg.find("'nowhere'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("adder"), std::string::npos) << msg;
}

TEST(GraphPasses, CanonicalAttributesAcrossOpsets) {
    // Opset 13 forms: axes and split as inputs, Clip min/max as inputs, Slice as inputs.
    Builder b;
    b.g.opset = 13;
    b.input("x", {4, 6});
    b.constant("axes", ints({-1}));
    b.constant("split", ints({2, 4}));
    b.constant("lo", Tensor::scalar(DType::F32, -0.5));
    b.constant("st", ints({1})), b.constant("en", ints({INT64_MAX})), b.constant("sax", ints({0}));
    b.node("ReduceSum", {"x", "axes"}, {"r"}).attrs["keepdims"] = int64_t(0);
    b.node("Split", {"x", "split"}, {"s0", "s1"}).attrs["axis"] = int64_t(1);
    b.node("Clip", {"s1", "lo", ""}, {"c"});
    b.node("Slice", {"x", "st", "en", "sax"}, {"sl"});
    b.output("r").output("s0").output("c").output("sl");
    prepare_graph(b.g);
    const Node *rs = nullptr, *sp = nullptr, *cl = nullptr, *sl = nullptr;
    for (auto &n : b.g.nodes) {
        if (n.op == "ReduceSum") rs = &n;
        if (n.op == "Split") sp = &n;
        if (n.op == "Clip") cl = &n;
        if (n.op == "Slice") sl = &n;
    }
    ASSERT_TRUE(rs && sp && cl && sl);
    EXPECT_EQ(rs->get_ints("axes"), (std::vector<int64_t>{1}));
    EXPECT_EQ(rs->inputs.size(), 1u);
    EXPECT_EQ(b.g.value("r").shape, (Shape{4}));
    EXPECT_EQ(sp->get_ints("split"), (std::vector<int64_t>{2, 4}));
    EXPECT_EQ(b.g.value("s1").shape, (Shape{4, 4}));
    EXPECT_DOUBLE_EQ(cl->get_float("min", 0), -0.5);
    EXPECT_TRUE(std::isinf(cl->get_float("max", 0)));
    EXPECT_EQ(sl->get_ints("starts"), (std::vector<int64_t>{1, 0}));
    EXPECT_EQ(b.g.value("sl").shape, (Shape{3, 6}));
}

TEST(GraphPasses, ConvBatchNormFoldingIsExact) {
    Builder b;
    b.input("x", {1, 2, 5, 5});
    Tensor w(DType::F32, {3, 2, 3, 3}), bias(DType::F32, {3});
    fill_random(w, 1), fill_random(bias, 2);
    Tensor sc(DType::F32, {3}), sh(DType::F32, {3}), mean(DType::F32, {3}), var(DType::F32, {3});
    fill_random(sc, 3), fill_random(sh, 4), fill_random(mean, 5), fill_random(var, 6, 0.5, 2.0);
    b.constant("w", w).constant("b", bias).constant("sc", sc).constant("sh", sh).constant("m", mean).constant("v", var);
    Node &c = b.node("Conv", {"x", "w", "b"}, {"c"});
    c.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    b.node("BatchNormalization", {"c", "sc", "sh", "m", "v"}, {"y"});
    b.output("y");
    Graph unfolded = b.g;
    PrepareOptions no_fold;
    no_fold.fold_conv_bn = false;
    prepare_graph(unfolded, no_fold);
    prepare_graph(b.g);
    ASSERT_EQ(b.g.nodes.size(), 1u);
    EXPECT_EQ(b.g.nodes[0].op, "Conv");
    EXPECT_EQ(unfolded.nodes.size(), 2u);
    auto ins = random_inputs(b.g, 7);
    auto a = run_reference(b.g, ins), r = run_reference(unfolded, ins);
    EXPECT_TRUE(loom::testing::close(a.at("y"), r.at("y"), 1e-6, 1e-5));
}

// A 2x2 stride-2 ConvTranspose (a learned upsampling) with a BatchNormalization after it becomes a
// 1x1 Conv and a DepthToSpace, the BN folded in, with the values of the ConvTranspose and the BN:
// the same graph with the weight given as an input (which nothing rewrites) is the reference. An
// overlapping ConvTranspose beside it (kernel 3, stride 2) keeps its op. The compiled model agrees.
TEST(GraphPasses, UpsamplingConvTransposeBecomesConvAndDepthToSpace) {
    Tensor w(DType::F32, {3, 4, 2, 2}), w3(DType::F32, {3, 2, 3, 3}), bias(DType::F32, {4});
    fill_random(w, 1), fill_random(w3, 2), fill_random(bias, 3);
    Tensor sc(DType::F32, {4}), sh(DType::F32, {4}), mean(DType::F32, {4}), var(DType::F32, {4});
    fill_random(sc, 4), fill_random(sh, 5), fill_random(mean, 6), fill_random(var, 7, 0.5, 2.0);
    auto build = [&](bool weight_as_input) {
        Builder b;
        b.input("x", {1, 3, 5, 7});
        if (weight_as_input) b.input("w", {3, 4, 2, 2});
        else b.constant("w", w);
        b.constant("w3", w3).constant("b", bias).constant("sc", sc).constant("sh", sh).constant("m", mean).constant("v", var);
        Node &up = b.node("ConvTranspose", {"x", "w", "b"}, {"u"});
        up.attrs["kernel_shape"] = std::vector<int64_t>{2, 2};
        up.attrs["strides"] = std::vector<int64_t>{2, 2};
        b.node("BatchNormalization", {"u", "sc", "sh", "m", "v"}, {"y"});
        Node &ov = b.node("ConvTranspose", {"x", "w3"}, {"z"});
        ov.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
        ov.attrs["strides"] = std::vector<int64_t>{2, 2};
        ov.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
        ov.attrs["output_padding"] = std::vector<int64_t>{1, 1};
        b.output("y").output("z");
        prepare_graph(b.g);
        return b.g;
    };
    Graph g = build(false), kept = build(true);
    auto count = [](const Graph &gr, const std::string &op) {
        return std::count_if(gr.nodes.begin(), gr.nodes.end(), [&](const Node &n) { return n.op == op; });
    };
    EXPECT_EQ(count(g, "DepthToSpace"), 1);
    EXPECT_EQ(count(g, "Conv"), 1);
    EXPECT_EQ(count(g, "ConvTranspose"), 1);
    EXPECT_EQ(count(g, "BatchNormalization"), 0);
    EXPECT_EQ(count(kept, "ConvTranspose"), 2);
    EXPECT_EQ(g.value("y").shape, (Shape{1, 4, 10, 14}));
    auto ins = random_inputs(g, 8);
    auto kept_ins = ins;
    kept_ins["w"] = w;
    auto got = run_reference(g, ins), want = run_reference(kept, kept_ins);
    for (const char *out : {"y", "z"}) EXPECT_TRUE(loom::testing::close(got.at(out), want.at(out), 1e-6, 1e-5)) << out;
    LoweredPipeline lp = lower_graph(g);
    apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
    JitModel m(std::move(lp));
    auto outs = m.run(ins);
    for (const char *out : {"y", "z"}) EXPECT_TRUE(loom::testing::close(outs.at(out), want.at(out), 1e-5)) << out;
}

// A DepthToSpace whose channels are not a multiple of blocksize^2, or with an unknown mode, is a
// user error naming the node, the numbers and what would be valid.
TEST(GraphPasses, DepthToSpaceErrorsNameTheNodeAndTheFix) {
    Builder b;
    b.input("x", {1, 6, 4, 4});
    Node &n = b.node("DepthToSpace", {"x"}, {"y"});
    n.attrs["blocksize"] = int64_t(2);
    const std::string name = n.name;
    b.output("y");
    Graph bad_mode = b.g;
    std::string msg = error_of([&] { prepare_graph(b.g); });
    EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(6 in 1x6x4x4)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("multiple of blocksize^2 = 4"), std::string::npos) << msg;
    bad_mode.nodes[0].attrs["mode"] = std::string("RDC");
    bad_mode.value("x").shape = {1, 8, 4, 4};
    msg = error_of([&] { prepare_graph(bad_mode); });
    EXPECT_NE(msg.find("mode='RDC' is not supported; valid: DCR, CRD"), std::string::npos) << msg;
}

// The same for a grouped, overlapping ConvTranspose: its weight is [C, M/group, k...], so each
// input channel's slice folds with the scales of its group's output channels.
TEST(GraphPasses, ConvTransposeBatchNormFoldingIsExact) {
    Builder b;
    b.input("x", {1, 4, 5, 6});
    Tensor w(DType::F32, {4, 3, 3, 3}), bias(DType::F32, {6});
    fill_random(w, 1), fill_random(bias, 2);
    Tensor sc(DType::F32, {6}), sh(DType::F32, {6}), mean(DType::F32, {6}), var(DType::F32, {6});
    fill_random(sc, 3), fill_random(sh, 4), fill_random(mean, 5), fill_random(var, 6, 0.5, 2.0);
    b.constant("w", w).constant("b", bias).constant("sc", sc).constant("sh", sh).constant("m", mean).constant("v", var);
    Node &c = b.node("ConvTranspose", {"x", "w", "b"}, {"c"});
    c.attrs["group"] = int64_t(2);
    c.attrs["strides"] = std::vector<int64_t>{2, 2};
    c.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    b.node("BatchNormalization", {"c", "sc", "sh", "m", "v"}, {"y"});
    b.output("y");
    Graph unfolded = b.g;
    PrepareOptions no_fold;
    no_fold.fold_conv_bn = false;
    prepare_graph(unfolded, no_fold);
    prepare_graph(b.g);
    ASSERT_EQ(b.g.nodes.size(), 1u);
    EXPECT_EQ(b.g.nodes[0].op, "ConvTranspose");
    EXPECT_EQ(unfolded.nodes.size(), 2u);
    auto ins = random_inputs(b.g, 7);
    auto a = run_reference(b.g, ins), r = run_reference(unfolded, ins);
    EXPECT_TRUE(loom::testing::close(a.at("y"), r.at("y"), 1e-6, 1e-5));
}

// ReLU6 as PyTorch exports it (Relu, then Clip(0, 6)) becomes one Clip of the Relu's input, with
// the same values; a Clip that may go below zero, or a Relu read elsewhere too, keeps its Relu.
TEST(GraphPasses, ReluBeforeNonNegativeClipIsAbsorbed) {
    Builder b;
    b.input("x", {4, 8});
    b.node("Relu", {"x"}, {"r"});
    b.node("Clip", {"r"}, {"c"}).attrs = {{"min", 0.0}, {"max", 6.0}};
    b.node("Relu", {"x"}, {"r2"});
    b.node("Clip", {"r2"}, {"neg"}).attrs = {{"min", -1.0}, {"max", 1.0}};  // the Relu matters here
    b.node("Relu", {"c"}, {"r3"});
    b.node("Clip", {"r3"}, {"d"}).attrs = {{"min", 0.5}, {"max", 2.0}};
    b.node("Add", {"r3", "neg"}, {"e"});  // r3 is read twice: its Relu stays
    b.node("Add", {"d", "e"}, {"y"});
    b.output("y");
    Graph g = b.g;
    EXPECT_EQ(absorb_relu_into_clip(g), 2);
    prepare_graph(b.g);
    std::map<std::string, int> ops;
    for (const auto &n : b.g.nodes) ops[n.op]++;
    EXPECT_EQ(ops["Relu"], 2) << "the Relu before Clip(0, 6) is gone; r2's and r3's stay";
    EXPECT_EQ(ops["Clip"], 3);
    for (const auto &n : b.g.nodes)
        if (n.op == "Clip" && n.get_float("min", -1) == 0.0) EXPECT_EQ(n.inputs[0], "x");

    // Values: clip(x, 0, 6) of the rewired graph equals min(max(relu(x), 0), 6) on inputs of both
    // signs and past 6.
    Builder u;
    u.input("x", {4, 8});
    u.node("Relu", {"x"}, {"r"});
    u.node("Clip", {"r"}, {"y"}).attrs = {{"min", 0.0}, {"max", 6.0}};
    u.output("y");
    prepare_graph(u.g);
    ASSERT_EQ(u.g.nodes.size(), 1u);
    auto ins = random_inputs(u.g, 11);
    Tensor &x = ins.at("x");
    for (int64_t i = 0; i < x.numel(); i++) x.set(i, x.get(i) * 8);
    Tensor y = run_reference(u.g, ins).at("y");
    int below = 0, above = 0;
    for (int64_t i = 0; i < y.numel(); i++) {
        double v = x.get(i);
        below += v < 0, above += v > 6;
        EXPECT_EQ(y.get(i), std::min(std::max(std::max(v, 0.0), 0.0), 6.0)) << i;
    }
    EXPECT_GT(below, 0);
    EXPECT_GT(above, 0);
}

TEST(GraphPasses, CseMergesAndDceRemoves) {
    Builder b;
    b.input("x", {8});
    b.node("Exp", {"x"}, {"e1"});
    b.node("Exp", {"x"}, {"e2"});
    b.node("Add", {"e1", "e2"}, {"y"});
    b.node("Tanh", {"x"}, {"unused"});
    b.output("y");
    prepare_graph(b.g);
    ASSERT_EQ(b.g.nodes.size(), 2u);
    EXPECT_EQ(b.g.nodes[1].inputs[0], b.g.nodes[1].inputs[1]);
}

TEST(GraphPasses, OldSoftmaxOverInnerAxesIsRewritten) {
    Builder b;
    b.g.opset = 11;
    b.input("x", {2, 3, 4});
    b.node("Softmax", {"x"}, {"y"});  // opset < 13 default axis 1: softmax over 3*4 elements
    b.output("y");
    Graph g = b.g;
    prepare_graph(g);
    ASSERT_EQ(g.nodes.size(), 3u);
    EXPECT_EQ(g.nodes[1].op, "Softmax");
    EXPECT_EQ(g.value(g.nodes[1].outputs[0]).shape, (Shape{2, 12}));
    auto out = run_reference(g, random_inputs(g, 3)).at("y");
    double s = 0;
    for (int64_t i = 0; i < 12; i++) s += out.get(i);
    EXPECT_NEAR(s, 1.0, 1e-12);
}

TEST(GraphPasses, IdentityAndDropoutRemoved) {
    Builder b;
    b.input("x", {3});
    b.node("Identity", {"x"}, {"a"});
    b.node("Dropout", {"a"}, {"d"});
    b.node("Relu", {"d"}, {"y"});
    b.node("Identity", {"y"}, {"out"});  // a graph output: kept as a copy
    b.output("out");
    prepare_graph(b.g);
    ASSERT_EQ(b.g.nodes.size(), 2u);
    EXPECT_EQ(b.g.nodes[0].op, "Relu");
    EXPECT_EQ(b.g.nodes[0].inputs[0], "x");
    EXPECT_EQ(b.g.nodes[1].op, "Reshape");
}

TEST(GraphPasses, GemmWeightsArePretransposedExactly) {
    Builder b;
    b.input("x", {3, 5});
    Tensor w(DType::F32, {4, 5}), bias(DType::F32, {4});
    fill_random(w, 11), fill_random(bias, 12);
    b.constant("w", w).constant("bias", bias);
    Node &n = b.node("Gemm", {"x", "w", "bias"}, {"y"});
    n.attrs["transB"] = int64_t(1);
    b.output("y");
    Graph plain = b.g;
    plain.topo_sort();
    bind_input_shapes(plain, {});
    infer_shapes_and_fold(plain);
    prepare_graph(b.g);
    ASSERT_EQ(b.g.nodes.size(), 1u);
    EXPECT_EQ(b.g.nodes[0].get_int("transB", -1), 0);
    EXPECT_EQ(b.g.value(b.g.nodes[0].inputs[1]).shape, (Shape{5, 4}));
    auto ins = random_inputs(b.g, 5);
    EXPECT_TRUE(loom::testing::close(run_reference(b.g, ins).at("y"), run_reference(plain, ins).at("y"), 1e-12, 1e-12));
}

// recognize_gelu: PyTorch's opset-13 export of F.gelu(x, approximate='tanh') (x·x, ·x, ·0.044715,
// +x, ·√(2/π), Tanh, +1, ·x, ·0.5) becomes one Gelu node, found by evaluating the region; a
// following scale stays a node of its own; the result still matches the reference of the
// decomposed graph. The Erf form, and a region one of whose values is read elsewhere, stay as they are.
namespace {
struct GeluGraph {
    loom::testing::GraphBuilder b;
    std::string y;
    GeluGraph(bool tanh_form, double scale, bool leak) {
        Shape s = {32, 64};
        std::string x = b.node("MatMul", {b.input("x", {32, 48}), b.random_constant("w", {48, 64}, 3)}, s);
        auto c = [&](double v) { return b.scalar(v); };
        std::string inner;
        if (tanh_form) {
            std::string cube = b.node("Mul", {x, b.node("Mul", {x, x}, s)}, s);
            std::string t = b.node("Add", {x, b.node("Mul", {c(0.044715), cube}, s)}, s);
            inner = b.node("Tanh", {b.node("Mul", {c(0.7978845608028654), t}, s)}, s);
            if (leak) b.output(inner);
        } else {
            inner = b.node("Erf", {b.node("Div", {x, c(1.4142135381698608)}, s)}, s);
        }
        y = b.node("Mul", {c(0.5), b.node("Mul", {x, b.node("Add", {c(1.0), inner}, s)}, s)}, s);
        if (scale != 1) y = b.node("Mul", {y, c(scale)}, s);
        b.output(y);
    }
    int count(const Graph &g, const std::string &op) const {
        int n = 0;
        for (const auto &node : g.nodes) n += node.op == op;
        return n;
    }
};
}  // namespace

TEST(GraphPasses, TanhGeluRegionBecomesOneGeluNode) {
    GeluGraph gg(true, 0.6, false);
    Graph g = gg.b.g;
    prepare_graph(g);
    ASSERT_EQ(gg.count(g, "Gelu"), 1) << "one Gelu node";
    EXPECT_EQ(gg.count(g, "Tanh"), 0);
    EXPECT_EQ(gg.count(g, "Mul"), 1) << "the scale after the GELU stays";
    for (const auto &n : g.nodes) {
        if (n.op == "Gelu") EXPECT_EQ(n.get_string("approximate", ""), "tanh");
    }
    // Loom on the prepared graph against the reference of the decomposed one, on random data.
    std::map<std::string, Tensor> in;
    Tensor x(DType::F32, {32, 48});
    fill_random(x, 11, -2, 2);
    in["x"] = x;
    JitModel m(lower_graph(g));
    auto out = m.run(in);
    auto ref = run_reference(gg.b.g, in);
    EXPECT_TRUE(loom::testing::close(out.at(gg.y), ref.at(gg.y), 1e-5));
}

// The region search is bounded (depth and size from the root): a GELU between two long scalar
// chains (5000 elementwise nodes before and after, every value a candidate root) is still found, and
// the pass stays linear in the chain (it was cubic: each root grew over the whole chain after it).
TEST(GraphPasses, GeluRecognitionStaysLinearOnLongElementwiseChains) {
    loom::testing::GraphBuilder b;
    Shape s = {4, 8};
    std::string v = b.input("x", s);
    auto chain = [&](int n) {
        for (int i = 0; i < n; i++) v = b.node(i % 2 ? "Add" : "Mul", {v, b.scalar(i % 2 ? 0.001 : 1.0001)}, s);
    };
    chain(5000);
    std::string x = v;
    auto c = [&](double k) { return b.scalar(k); };
    std::string cube = b.node("Mul", {x, b.node("Mul", {x, x}, s)}, s);
    std::string t = b.node("Add", {x, b.node("Mul", {c(0.044715), cube}, s)}, s);
    std::string th = b.node("Tanh", {b.node("Mul", {c(0.7978845608028654), t}, s)}, s);
    v = b.node("Mul", {c(0.5), b.node("Mul", {x, b.node("Add", {c(1.0), th}, s)}, s)}, s);
    chain(5000);
    b.output(v);
    Graph g = b.g;
    EXPECT_EQ(recognize_gelu(g), 1);
    int gelus = 0, tanhs = 0;
    for (const auto &n : g.nodes) {
        gelus += n.op == "Gelu";
        tanhs += n.op == "Tanh";
    }
    EXPECT_EQ(gelus, 1);
    EXPECT_EQ(tanhs, 0);
    EXPECT_EQ(g.nodes.size(), 10001u) << "the chains untouched, the region one node";
}

TEST(GraphPasses, ErfGeluAndLeakyRegionsAreLeftAlone) {
    for (bool leak : {false, true}) {
        GeluGraph gg(leak, 1.0, leak);
        Graph g = gg.b.g;
        prepare_graph(g);
        EXPECT_EQ(gg.count(g, "Gelu"), 0) << (leak ? "the Tanh value is also a graph output" : "Erf form");
        EXPECT_EQ(gg.count(g, leak ? "Tanh" : "Erf"), 1);
    }
}

// fuse_linear_exact_gelu: x · W + b then the exact GELU as torch.onnx writes nn.Linear and F.gelu
// (MatMul, Add, Div by √2, Erf, +1, ·x, ·0.5) becomes Gemm(x, W, b) → Gelu('none') on the prepared
// graph (fuse_linear_exact_gelu, which `loom compile` runs for CUDA in BF16), computing the same
// function; prepare_graph alone leaves it, and where the sum is read elsewhere, the bias is no
// constant or the product is not a matrix, the pass changes nothing.
namespace {
struct LinearGeluGraph {
    loom::testing::GraphBuilder b;
    std::string y, sum;
    LinearGeluGraph(Shape xs, bool constant_bias, bool leak_sum) {
        const int64_t N = 64;
        Shape s = xs;
        s.back() = N;
        std::string h = b.node("MatMul", {b.input("x", xs), b.random_constant("w", {xs.back(), N}, 3)}, s);
        std::string bias = constant_bias ? b.random_constant("bias", {N}, 4) : b.input("bias", {N});
        sum = b.node("Add", {h, bias}, s);
        auto c = [&](double v) { return b.scalar(v); };
        std::string e = b.node("Erf", {b.node("Div", {sum, c(1.4142135381698608)}, s)}, s);
        y = b.node("Mul", {b.node("Mul", {sum, b.node("Add", {e, c(1.0)}, s)}, s), c(0.5)}, s);
        b.output(y);
        if (leak_sum) b.output(sum);
    }
    std::vector<std::string> ops(const Graph &g) const {
        std::vector<std::string> r;
        for (const auto &n : g.nodes) r.push_back(n.op);
        return r;
    }
};
}  // namespace

TEST(GraphPasses, LinearBiasExactGeluBecomesGemmAndGelu) {
    LinearGeluGraph lg({32, 48}, true, false);
    Graph plain = lg.b.g;
    prepare_graph(plain);
    EXPECT_EQ(lg.ops(plain), (std::vector<std::string>{"MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"}))
        << "prepare_graph leaves the exact form as written";
    Graph fused = plain;
    EXPECT_EQ(fuse_linear_exact_gelu(fused), 1);
    fused.validate();
    ASSERT_EQ(lg.ops(fused), (std::vector<std::string>{"Gemm", "Gelu"}));
    const Node &gemm = fused.nodes[0], &gelu = fused.nodes[1];
    EXPECT_EQ(gemm.inputs, (std::vector<std::string>{"x", "w", "bias"}));
    EXPECT_EQ(gemm.get_int("transB", -1), 0);
    EXPECT_EQ(gelu.get_string("approximate", ""), "none");
    EXPECT_EQ(gelu.outputs[0], lg.y);
    auto ins = random_inputs(fused, 5);
    const Tensor want = run_reference(plain, ins).at(lg.y);
    // The same function up to the exported √2, a float32 constant (the Gelu node divides by √2 itself).
    EXPECT_TRUE(loom::testing::close(run_reference(fused, ins).at(lg.y), want, 1e-7, 1e-7));
    JitModel m(lower_graph(fused));  // and Loom's CPU lowering of the fused graph
    EXPECT_TRUE(loom::testing::close(m.run(ins).at(lg.y), want, 1e-5));
}

TEST(GraphPasses, LinearExactGeluStaysWhereItCannotFuse) {
    struct Case {
        const char *why;
        Shape x;
        bool constant_bias, leak_sum;
    };
    for (const Case &c : {Case{"the sum is also a graph output", {32, 48}, true, true},
                          Case{"the bias is a graph input", {32, 48}, false, false},
                          Case{"the product is [2, 16, 64], no matrix", {2, 16, 48}, true, false}}) {
        LinearGeluGraph lg(c.x, c.constant_bias, c.leak_sum);
        Graph g = lg.b.g;
        prepare_graph(g);
        EXPECT_EQ(fuse_linear_exact_gelu(g), 0) << c.why;
        EXPECT_EQ(lg.ops(g).front(), "MatMul") << c.why;
        for (const auto &n : g.nodes) EXPECT_NE(n.op, "Gemm") << c.why;
    }
}

// A bf16 model's nn.Linear then F.gelu (torch.onnx: Gemm, then the erf region with bf16 constants,
// √2 as 1.4140625), widened by prepare_graph, becomes Gemm → Gelu('none') only with BF16's slack
// (exact_gelu_region_slack: its √2 puts it 2.6e-5·|x| off the exact GELU, past the float32 match);
// the Gemm stays as it is, the Casts of the model's input and output too. A √2 rounded further
// (1.40625, 2^-6: 1.3e-3·|x| off) is no exact GELU even with the slack.
TEST(GraphPasses, Bf16LinearExactGeluBecomesGeluWithBf16Slack) {
    const double slack = exact_gelu_region_slack(Precision::BF16);
    EXPECT_GT(slack, 2.6e-5);
    EXPECT_EQ(exact_gelu_region_slack(Precision::FP32), 0.0);
    auto ops = [](const Graph &g) {
        std::vector<std::string> r;
        for (const auto &n : g.nodes) r.push_back(n.op);
        return r;
    };
    loom::testing::GraphBuilder b;
    const std::string y = loom::testing::bf16_linear(b, "gelu", 32, 48, 64);
    Graph plain = b.g;
    prepare_graph(plain);
    Graph strict = plain;
    EXPECT_EQ(fuse_linear_exact_gelu(strict), 0) << "a bf16 √2 is no float32 match";
    Graph fused = plain;
    ASSERT_EQ(fuse_linear_exact_gelu(fused, slack), 1);
    fused.validate();
    EXPECT_EQ(ops(fused), (std::vector<std::string>{"Cast", "Gemm", "Gelu", "Cast"}));
    EXPECT_EQ(fused.nodes[1].inputs[0], fused.nodes[0].outputs[0]) << "the Gemm reads the widened input";
    EXPECT_EQ(fused.nodes[2].get_string("approximate", ""), "none");
    auto ins = random_inputs(fused, 5);
    EXPECT_TRUE(loom::testing::close(run_reference(fused, ins).at(y), run_reference(plain, ins).at(y), 1e-2, 1e-2))
        << "the same function to bf16's rounding";

    loom::testing::GraphBuilder far;
    loom::testing::bf16_linear(far, "gelu", 32, 48, 64, 1.40625);
    prepare_graph(far.g);
    EXPECT_EQ(fuse_linear_exact_gelu(far.g, slack), 0);
}

// recognize_swish: PyTorch's opset-13 hard-swish (x * HardSigmoid(x), alpha 1/6) and SiLU
// (x * Sigmoid(x)), the gate on either side of the Mul, become one HardSwish / Swish node reading
// x; the prepared graph, run by Loom, matches the reference of the exported one on random data.
// Gates that compute something else, or are read elsewhere, are left as written.
TEST(GraphPasses, GatedActivationsBecomeOneSwishNode) {
    loom::testing::GraphBuilder b;
    Shape s = {2, 8, 5, 6};
    std::string x = b.input("x", s);
    std::string x3 = b.node("Mul", {x, b.scalar(4.0)}, s);  // [-4, 4): both clamps of hard-swish
    std::string hs = b.node("HardSigmoid", {x3}, s, {{"alpha", 1.0 / 6}, {"beta", 0.5}});
    std::string hswish = b.out("Mul", {x3, hs}, s, {}, DType::F32, "hswish");
    std::string silu = b.out("Mul", {b.node("Sigmoid", {x3}, s), x3}, s, {}, DType::F32, "silu");
    // Left alone: ONNX's default HardSigmoid (alpha 0.2), a gate of another value (a
    // squeeze-excitation scale), a gate also read by an Add, a gate that is a graph output.
    b.out("Mul", {x3, b.node("HardSigmoid", {x3}, s, {{"alpha", 0.2}, {"beta", 0.5}})}, s);
    b.out("Mul", {x3, b.node("Sigmoid", {x}, s)}, s);
    std::string shared = b.node("Sigmoid", {x3}, s);
    b.out("Add", {b.node("Mul", {x3, shared}, s), shared}, s);
    std::string seen = b.out("Sigmoid", {x3}, s);
    b.out("Mul", {seen, x3}, s);
    Graph g = b.g;
    prepare_graph(g);
    std::map<std::string, int> ops;
    for (const auto &n : g.nodes) {
        ops[n.op]++;
        if (n.name == "hswish") {
            EXPECT_EQ(n.op, "HardSwish");
        }
        if (n.name == "silu") {
            EXPECT_EQ(n.op, "Swish");
            EXPECT_EQ(n.get_float("alpha", 0), 1.0);
        }
        if (n.op == "HardSwish" || n.op == "Swish") {
            EXPECT_EQ(n.inputs, std::vector<std::string>{x3});
        }
    }
    EXPECT_EQ(ops["HardSwish"], 1);
    EXPECT_EQ(ops["Swish"], 1);
    EXPECT_EQ(ops["HardSigmoid"], 1) << "alpha 0.2 is no hard-swish";
    EXPECT_EQ(ops["Sigmoid"], 3) << "the other value's gate, the shared gate and the output gate stay";
    std::map<std::string, Tensor> in;
    Tensor xv(DType::F32, s);
    fill_random(xv, 17, -1, 1);
    in["x"] = xv;
    JitModel m(lower_graph(g));
    auto out = m.run(in);
    auto ref = run_reference(b.g, in);
    for (const std::string &o : {hswish, silu}) EXPECT_TRUE(loom::testing::close(out.at(o), ref.at(o), 1e-5)) << o;
}

// recognize_group_norm: PyTorch's export of nn.GroupNorm (Reshape to [N, G, -1], InstanceNormalization
// with per-group scale and bias, Reshape back, the affine Mul and Add) becomes one
// GroupNormalization node with the InstanceNormalization's name; Loom's auto schedule of the
// prepared graph matches the reference of the exported one. A reshape whose value is read elsewhere
// keeps the pattern as it is.
TEST(GraphPasses, GroupNormExportBecomesOneNode) {
    for (bool leak : {false, true}) {
        loom::testing::GraphBuilder b;
        Shape s = {2, 16, 5, 7};
        std::string x = b.input("x", s);
        std::string g3 = b.constant(Tensor::from_ints(DType::I64, {3}, {2, 4, -1}));
        std::string g4 = b.constant(Tensor::from_ints(DType::I64, {4}, {2, 16, 5, 7}));
        std::string r1 = b.node("Reshape", {x, g3}, {2, 4, 140});
        std::string in = b.node("InstanceNormalization", {r1, b.random_constant("gs", {4}, 21, 0.5, 1.5),
                                                          b.random_constant("gb", {4}, 22)},
                                {2, 4, 140}, {{"epsilon", 1e-5}}, DType::F32, "inorm");
        std::string r2 = b.node("Reshape", {in, g4}, s);
        std::string y = b.node("Add", {b.node("Mul", {r2, b.random_constant("gamma", {16, 1, 1}, 23)}, s),
                                       b.random_constant("beta", {16, 1, 1}, 24)}, s);
        b.output(y);
        if (leak) b.output(r1);
        Graph g = b.g;
        prepare_graph(g);
        int groups = 0, instance = 0;
        for (const auto &n : g.nodes) {
            if (n.op == "GroupNormalization") {
                groups++;
                EXPECT_EQ(n.name, "inorm");
                EXPECT_EQ(n.get_int("num_groups", 0), 4);
            }
            instance += n.op == "InstanceNormalization";
        }
        EXPECT_EQ(groups, leak ? 0 : 1);
        EXPECT_EQ(instance, leak ? 1 : 0);
        std::map<std::string, Tensor> ins;
        Tensor xv(DType::F32, s);
        fill_random(xv, 25, -2, 3);
        ins["x"] = xv;
        LoweredPipeline lp = lower_graph(g);
        apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
        JitModel m(std::move(lp));
        auto out = m.run(ins);
        auto ref = run_reference(b.g, ins);
        EXPECT_TRUE(loom::testing::close(out.at(y), ref.at(y), 1e-5)) << (leak ? "left alone" : "rewritten");
    }
}
