// Horizontal fusion of slices (graph/passes.h, fuse_horizontal_slices): K isomorphic chains over a
// Split's slices, joined by a Concat, become one chain over [..., K, n]. The fused graph must
// compute what the unfused one does (reference interpreter on both, random inputs), compile and
// run (auto schedule, outputs poisoned), and graphs that do not match exactly stay as they are.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "autoschedule/autoschedule.h"
#include "graph/passes.h"
#include "graph_builder.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "schedule/schedule_apply.h"

using namespace loom;
using loom::testing::GraphBuilder;
using Ints = std::vector<int64_t>;

namespace {

constexpr int kRows = 6, kSlices = 3, kWidth = 8;

// Random per-slice constant of \p n elements (never zero).
std::string random_const(GraphBuilder &b, int64_t n, unsigned seed, double lo, double hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(n);
    for (auto &x : v) x = d(rng);
    return b.constant(Tensor::from_doubles(DType::F32, {n}, v));
}

// x [kRows, kSlices*kWidth] → Split → per slice f(slice, k) → Concat → Relu (output).
GraphBuilder split_graph(const std::function<std::string(GraphBuilder &, const std::string &, int)> &chain) {
    GraphBuilder b;
    std::string x = b.input("x", {kRows, kSlices * kWidth});
    Node split;
    split.name = "split";
    split.op = "Split";
    split.inputs = {x};
    split.attrs["axis"] = int64_t(1);
    split.attrs["split"] = Ints(kSlices, kWidth);
    for (int k = 0; k < kSlices; k++) {
        std::string o = "slice" + std::to_string(k);
        split.outputs.push_back(o);
        b.g.values[o] = ValueInfo{o, DType::F32, {kRows, kWidth}, {}, true};
    }
    b.g.nodes.push_back(split);
    std::vector<std::string> parts;
    for (int k = 0; k < kSlices; k++) parts.push_back(chain(b, split.outputs[k], k));
    std::string cat = b.node("Concat", parts, {kRows, kSlices * kWidth}, {{"axis", int64_t(1)}});
    b.out("Relu", {cat}, {kRows, kSlices * kWidth});
    return b;
}

// LayerNormalization with its own scale and bias per slice, then tanh.
std::string ln_op_chain(GraphBuilder &b, const std::string &s, int k) {
    std::string scale = random_const(b, kWidth, 10 + k, 0.5, 1.5), bias = random_const(b, kWidth, 20 + k, -0.3, 0.3);
    std::string ln = b.node("LayerNormalization", {s, scale, bias}, {kRows, kWidth},
                            {{"axis", int64_t(1)}, {"epsilon", 1e-5}});
    return b.node("Tanh", {ln}, {kRows, kWidth});
}

// The same LayerNorm written out as exporters decompose it (shared eps, per-slice affine).
std::string ln_decomposed_chain(GraphBuilder &b, const std::string &s, int k) {
    const std::string eps = "eps";  // one constant shared by every chain (kept as is by the pass)
    if (!b.g.constant(eps)) {
        b.g.set_constant(eps, Tensor::scalar(DType::F32, 1e-5));
        b.g.values[eps].has_shape = true;
    }
    std::string two = b.scalar(2.0);
    Ints last = {1};
    std::string mean = b.node("ReduceMean", {s}, {kRows, 1}, {{"axes", last}, {"keepdims", int64_t(1)}});
    std::string d = b.node("Sub", {s, mean}, {kRows, kWidth});
    std::string sq = b.node("Pow", {d, two}, {kRows, kWidth});
    std::string var = b.node("ReduceMean", {sq}, {kRows, 1}, {{"axes", last}, {"keepdims", int64_t(1)}});
    std::string sd = b.node("Sqrt", {b.node("Add", {var, eps}, {kRows, 1})}, {kRows, 1});
    std::string n = b.node("Div", {d, sd}, {kRows, kWidth});
    std::string g = b.node("Mul", {n, random_const(b, kWidth, 30 + k, 0.5, 1.5)}, {kRows, kWidth});
    return b.node("Add", {g, random_const(b, kWidth, 40 + k, -0.3, 0.3)}, {kRows, kWidth});
}

int count_op(const Graph &g, const std::string &op) {
    int n = 0;
    for (const auto &node : g.nodes) n += node.op == op;
    return n;
}

// Prepares \p b's graph with and without the fusion; checks the fused one has one chain and
// computes the same as the unfused one, and that it compiles and runs under the auto schedule.
void check_fused(const GraphBuilder &b, const std::string &chain_op) {
    Graph fused = b.g, plain = b.g;
    prepare_graph(fused);
    PrepareOptions off;
    off.horizontal_fusion = false;
    prepare_graph(plain, off);
    EXPECT_EQ(count_op(fused, "Split"), 0);
    EXPECT_EQ(count_op(fused, "Concat"), 0);
    EXPECT_EQ(count_op(fused, chain_op), count_op(plain, chain_op) / kSlices) << chain_op;
    auto in = random_inputs(plain, 5);
    auto want = run_reference(plain, in), got = run_reference(fused, in);
    for (const auto &[name, t] : want) EXPECT_TRUE(loom::testing::close(got.at(name), t, 1e-9)) << name;
    LoweredPipeline p = lower_graph(fused);
    apply_schedule(auto_schedule(p, host_target(), detect_machine(host_target())), p, host_target());
    JitModel m(std::move(p));
    auto outs = m.run(in);
    for (const auto &[name, t] : want) EXPECT_TRUE(loom::testing::close(outs.at(name), t)) << name;
}

}  // namespace

TEST(HorizontalFusion, LayerNormOpSlicesBecomeOneChain) { check_fused(split_graph(ln_op_chain), "LayerNormalization"); }

TEST(HorizontalFusion, DecomposedLayerNormSlicesBecomeOneChain) {
    GraphBuilder b = split_graph(ln_decomposed_chain);
    check_fused(b, "ReduceMean");
    // Each slice has its own Pow exponent 2 (as exporters write it): equal constants stay one
    // scalar, so the fused Pow still lowers to x * x; the per-slice affine is stacked to [K, n].
    Graph g = b.g;
    prepare_graph(g);
    int pows = 0, stacked_muls = 0;
    for (const auto &n : g.nodes) {
        const Tensor *c = n.inputs.size() > 1 ? g.constant(n.inputs[1]) : nullptr;
        if (n.op == "Pow") {
            pows++;
            ASSERT_NE(c, nullptr);
            EXPECT_EQ(c->numel(), 1);
            EXPECT_EQ(c->get(0), 2.0);
        }
        if (n.op == "Mul" && c) stacked_muls += c->numel() == kSlices * kWidth;
    }
    EXPECT_EQ(pows, 1);
    EXPECT_EQ(stacked_muls, 1);
}

// Chains that differ (one slice takes a Relu where the others take a Tanh), or a chain value used
// outside its chain, leave the graph as it was.
TEST(HorizontalFusion, NonMatchingChainsAreLeftAlone) {
    auto different = [](GraphBuilder &b, const std::string &s, int k) {
        return b.node(k == 1 ? "Relu" : "Tanh", {s}, {kRows, kWidth});
    };
    Graph g = split_graph(different).g;
    prepare_graph(g);
    EXPECT_EQ(count_op(g, "Split"), 1);
    EXPECT_EQ(count_op(g, "Concat"), 1);

    GraphBuilder leak = split_graph([](GraphBuilder &b, const std::string &s, int) {
        return b.node("Tanh", {s}, {kRows, kWidth});
    });
    for (const auto &n : leak.g.nodes)
        if (n.op == "Tanh") {
            leak.g.outputs.push_back(n.outputs[0]);  // one slice's tanh is also a graph output
            break;
        }
    prepare_graph(leak.g);
    EXPECT_EQ(count_op(leak.g, "Split"), 1);
}
