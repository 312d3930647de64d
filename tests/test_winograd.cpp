// Winograd F(2x2, 3x3) as a graph rewrite (graph/winograd_rewrite.h): numerics against the direct
// conv on the reference interpreter and compiled, at awkward sizes; which convs it takes; its knob.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "autoschedule/autoschedule.h"
#include "autoschedule/machine_model.h"
#include "cli/model_loading.h"
#include "codegen/jit.h"
#include "graph/passes.h"
#include "graph/winograd_rewrite.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "test_util.h"

using namespace loom;

namespace {

struct ConvCase {
    int64_t N, C, K, H, W;
    bool bias;
};

/// x -> Conv 3x3 (pads 1) [+ bias] -> Relu -> y, and the conv's output, plus x's first K
/// channels added to it (a residual reader of the conv), as a second output z. ONNX form.
Graph conv_graph(const ConvCase &c, uint64_t seed) {
    Graph g;
    g.name = "wino";
    g.values["x"] = ValueInfo{"x", DType::F32, {c.N, c.C, c.H, c.W}, {}, true, {}};
    g.inputs.push_back("x");
    Tensor w(DType::F32, {c.K, c.C, 3, 3}), b(DType::F32, {c.K});
    fill_random(w, seed, -0.5, 0.5);
    fill_random(b, seed + 1);
    g.set_constant("w", w);
    if (c.bias) g.set_constant("b", b);
    auto add = [&](const std::string &op, std::vector<std::string> in, const std::string &out) -> Node & {
        Node n;
        n.name = op + "_" + out;
        n.op = op, n.inputs = std::move(in), n.outputs = {out};
        g.values[out].name = out;
        g.nodes.push_back(n);
        return g.nodes.back();
    };
    Node &conv = add("Conv", c.bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"}, "c");
    conv.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
    conv.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    add("Relu", {"c"}, "y");
    add("Tanh", {"c"}, "z");
    g.outputs = {"y", "z"};
    return g;
}

Graph prepared(Graph g, bool winograd) {
    PrepareOptions o;
    o.winograd = winograd;
    prepare_graph(g, o);
    return g;
}

int64_t count_op(const Graph &g, const std::string &op, int64_t group = -1) {
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [&](const Node &n) { return n.op == op && (group < 0 || n.get_int("group", 1) == group); });
}

}  // namespace

// Odd sides (the last tile half outside), one pixel, batch 2, channels no multiple of 8, with and
// without bias: the rewritten graph computes the direct conv on the reference interpreter, and
// compiled under the auto schedule (outputs poisoned by the JIT) too.
TEST(Winograd, RewriteComputesTheDirectConv) {
    const ConvCase cases[] = {{1, 8, 8, 7, 9, true}, {1, 13, 11, 1, 1, true}, {2, 10, 12, 6, 5, false},
                              {1, 24, 20, 15, 16, true}, {1, 8, 9, 6, 8, true}};  // the last: no crop
    uint64_t seed = 11;
    for (const ConvCase &c : cases) {
        SCOPED_TRACE(str_cat("N", c.N, " C", c.C, " K", c.K, " ", c.H, "x", c.W, c.bias ? " bias" : ""));
        Graph direct = prepared(conv_graph(c, seed), false), wino = prepared(conv_graph(c, seed), true);
        seed += 7;
        EXPECT_EQ(count_op(direct, "Conv", 1), 1);
        EXPECT_EQ(count_op(wino, "Conv", 1), 0);
        EXPECT_EQ(count_op(wino, "Conv", 16), 1);
        EXPECT_EQ(count_op(wino, "DepthToSpace"), 1);
        EXPECT_EQ(wino.value("y").shape, (Shape{c.N, c.K, c.H, c.W}));
        auto in = random_inputs(direct, seed);
        auto want = run_reference(direct, in), got = run_reference(wino, in);
        for (const char *o : {"y", "z"}) EXPECT_TRUE(loom::testing::close(got.at(o), want.at(o), 1e-6, 1e-5)) << o;

        LoweredPipeline lp = lower_graph(wino);
        apply_schedule(auto_schedule(lp, host_target(), machines::avx2_2core().model), lp, host_target());
        JitModel m(std::move(lp));
        auto outs = m.run(in);
        for (const char *o : {"y", "z"}) EXPECT_TRUE(loom::testing::close(outs.at(o), want.at(o), 1e-5)) << o;
    }
}

// Only float 3x3 stride-1 dilation-1 single-group convs with pads 1 and a constant filter of at
// least 8 channels each way: the others keep their graph node for node.
TEST(Winograd, OtherConvsAreLeftAlone) {
    auto with = [](const std::function<void(Graph &)> &edit) {
        Graph g = conv_graph({1, 16, 16, 8, 8, true}, 3);
        edit(g);
        Graph direct = prepared(g, false), wino = prepared(g, true);
        return std::make_pair(direct.nodes.size(), wino.nodes.size());
    };
    auto conv = [](Graph &g) -> Node & { return g.nodes[0]; };
    std::vector<std::function<void(Graph &)>> edits = {
        [&](Graph &g) { conv(g).attrs["strides"] = std::vector<int64_t>{2, 2}; },
        [&](Graph &g) { conv(g).attrs["dilations"] = std::vector<int64_t>{2, 2}; },
        [&](Graph &g) { conv(g).attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0}; },
        [&](Graph &g) {  // two groups
            conv(g).attrs["group"] = int64_t(2);
            Tensor w(DType::F32, {16, 8, 3, 3});
            fill_random(w, 5);
            g.set_constant("w", w);
        },
        [&](Graph &g) {  // the filter is an input
            g.initializers.erase("w");
            g.values["w"] = ValueInfo{"w", DType::F32, {16, 16, 3, 3}, {}, true, {}};
            g.inputs.push_back("w");
        },
        [&](Graph &g) {  // 4 output channels
            Tensor w(DType::F32, {4, 16, 3, 3}), b(DType::F32, {4});
            fill_random(w, 6), fill_random(b, 7);
            g.set_constant("w", w), g.set_constant("b", b);
        },
    };
    for (size_t i = 0; i < edits.size(); i++) {
        auto [direct, wino] = with(edits[i]);
        EXPECT_EQ(direct, wino) << "edit " << i;
    }
    auto [direct, wino] = with([](Graph &) {});
    EXPECT_GT(wino, direct);
}

// LOOM_WINOGRAD=1 turns the rewrite on where the CLI prepares a model, 0 or unset leaves it off,
// anything else is a user error naming the variable and its values.
TEST(Winograd, KnobIsTheEnvironmentVariable) {
    const char *old = std::getenv("LOOM_WINOGRAD");
    const std::string saved = old ? old : "";
    auto groups16 = [](const char *v) {
        if (v) setenv("LOOM_WINOGRAD", v, 1);
        else unsetenv("LOOM_WINOGRAD");
        return count_op(cli::prepare_model(conv_graph({1, 16, 16, 8, 8, true}, 3), {}), "Conv", 16);
    };
    EXPECT_EQ(groups16(nullptr), 0);
    EXPECT_EQ(groups16("0"), 0);
    EXPECT_EQ(groups16("1"), 1);
    setenv("LOOM_WINOGRAD", "yes", 1);
    std::string msg = loom::testing::user_error_of([&] { cli::prepare_model(conv_graph({1, 16, 16, 8, 8, true}, 3), {}); });
    EXPECT_NE(msg.find("LOOM_WINOGRAD='yes' is neither 0 nor 1"), std::string::npos) << msg;
    if (old) setenv("LOOM_WINOGRAD", saved.c_str(), 1);
    else unsetenv("LOOM_WINOGRAD");
}
