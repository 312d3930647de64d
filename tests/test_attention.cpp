// Fused attention: recognize_attention finds scaled-dot-product attention as exporters write it
// (scale after the product or on its operands, with and without a mask) and leaves near misses
// alone; the FusedAttention node's reference equals the unfused ops'; its lowering (online softmax
// over key tiles) matches the reference at awkward sizes (one key, primes, a ragged last tile, a
// mask hiding whole tiles) computed at root and under a flash-style schedule that keeps only a
// query tile × key tile block of scores.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "codegen/jit.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "autoschedule/autoschedule.h"
#include "autoschedule/machine_model.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_parser.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;
using Builder = loom::testing::GraphBuilder;

enum class ScaleAt { Product, Operands, None };

/// softmax(q·kᵀ · scale [+ mask]) · v over batch dims \p batch, as exporters write it: kᵀ from a
/// Transpose of k, the scale a Mul after the product (or Muls of √scale on q and kᵀ), the mask an
/// Add of an input of shape \p mask (empty: none).
struct AttentionGraph {
    Builder b;
    std::string out;
    AttentionGraph(Shape batch, int64_t Sq, int64_t Sk, int64_t d, int64_t dv, Shape mask = {},
                   ScaleAt where = ScaleAt::Product, double scale = 0.125) {
        auto sh = [&](std::initializer_list<int64_t> t) {
            Shape s = batch;
            s.insert(s.end(), t);
            return s;
        };
        const int r = (int)batch.size() + 2;
        std::string q = b.input("q", sh({Sq, d})), k = b.input("k", sh({Sk, d})), v = b.input("v", sh({Sk, dv}));
        std::vector<int64_t> perm;
        for (int i = 0; i < r - 2; i++) perm.push_back(i);
        perm.push_back(r - 1);
        perm.push_back(r - 2);
        std::string kt = b.node("Transpose", {k}, sh({d, Sk}), {{"perm", perm}});
        if (where == ScaleAt::Operands) {
            q = b.node("Mul", {q, b.scalar(std::sqrt(scale))}, sh({Sq, d}));
            kt = b.node("Mul", {b.scalar(std::sqrt(scale)), kt}, sh({d, Sk}));
        }
        std::string s = b.node("MatMul", {q, kt}, sh({Sq, Sk}));
        if (where == ScaleAt::Product) s = b.node("Div", {s, b.scalar(1 / scale)}, sh({Sq, Sk}));
        if (!mask.empty()) s = b.node("Add", {b.input("mask", mask), s}, sh({Sq, Sk}));
        std::string p = b.node("Softmax", {s}, sh({Sq, Sk}), {{"axis", int64_t(r - 1)}}, DType::F32, "/attn/Softmax");
        out = b.out("MatMul", {p, v}, sh({Sq, dv}));
    }
};

/// prepare_graph with attention fusion in \p mode.
void prepare(Graph &g, AttentionFusion mode = AttentionFusion::Halide) {
    PrepareOptions o;
    o.attention = mode;
    prepare_graph(g, o);
}

int count_op(const Graph &g, const std::string &op) {
    int n = 0;
    for (const auto &node : g.nodes) n += node.op == op;
    return n;
}

/// Random inputs; a mask input gets -inf on every key of the first tile for odd queries, and on
/// one key in seven elsewhere.
std::map<std::string, Tensor> inputs_of(const Graph &g, uint64_t seed) {
    auto in = random_inputs(g, seed);
    if (auto it = in.find("mask"); it != in.end()) {
        Tensor &m = it->second;
        const Shape &s = m.shape();
        const int64_t Sk = s.back(), Sq = s.size() >= 2 ? s[s.size() - 2] : 1;
        for (int64_t e = 0; e < m.numel(); e++) {
            int64_t j = e % Sk, i = (e / Sk) % Sq;
            if (j + 1 < Sk && ((i % 2 == 1 && j < 64) || (e % 7 == 3))) m.set(e, -INFINITY);
        }
    }
    return in;
}

/// Prepares a copy of \p g (attention fused), lowers it, applies \p schedule (empty: every Func
/// at root), runs it and compares with the reference of the unfused graph.
void check_fused(const Graph &unfused, const std::string &schedule, uint64_t seed = 3, bool autoschedule = false) {
    auto in = inputs_of(unfused, seed);
    auto want = run_reference(unfused, in);
    Graph g = unfused;
    prepare(g);
    ASSERT_EQ(count_op(g, "FusedAttention"), 1);
    ASSERT_EQ(count_op(g, "Softmax"), 0);
    auto fused_ref = run_reference(g, in);
    LoweredPipeline lp = lower_graph(g);
    if (autoschedule) {
        AutoScheduleResult r = auto_schedule_with_plan(lp, host_target(), reference_machine(host_target(), 2));
        int attention_kernels = 0;
        for (const auto &k : r.plan.kernels) attention_kernels += k.name == "fused_attention";
        EXPECT_EQ(attention_kernels, 1);
        for (const auto &f : lp.funcs)
            if (f.op == "FusedAttention" && f.name.size() > 3 && f.name.compare(f.name.size() - 3, 3, "_qk") == 0) {
                auto stmts = r.schedule.statements_for(f.name);
                ASSERT_FALSE(stmts.empty());
                EXPECT_NE(stmts.front()->calls.front().name.find("compute_at"), std::string::npos)
                    << "the scores are computed per key tile, never at root";
            }
        apply_schedule(r.schedule, lp, host_target());
    } else if (schedule.empty()) {
        for (auto &f : lp.funcs) f.func.compute_root();
    } else {
        apply_schedule(parse_schedule(schedule), lp, host_target());
    }
    JitModel m(std::move(lp));
    auto got = m.run(in);
    for (const auto &o : unfused.outputs) {
        EXPECT_TRUE(close(fused_ref.at(o), want.at(o), 1e-12)) << "the fused node's reference";
        EXPECT_TRUE(close(got.at(o), want.at(o)));
    }
}

// The query tile (8 rows of h) computes its key tiles' statistics; each key tile's keys, values,
// scores, max and probabilities are computed inside it (rank-4 names: n, c, h = query, w; rank-5
// d = query or key tile, h = key tile or d, w = column or key in the tile).
const char *kFlashSchedule = R"(
attn_softmax.split(h, ho, hi, 8, GuardWithIf).reorder(w, hi, ho, c, n).parallel(c);
attn_softmax.update(0).split(h, ho, hi, 8, GuardWithIf).reorder(w, hi, t, ho, c, n).parallel(c);
attn_softmax_weight.compute_at(attn_softmax, ho);
attn_softmax_sum.compute_at(attn_softmax, ho);
attn_softmax_rescale.compute_at(attn_softmax, ho);
attn_softmax_max.compute_at(attn_softmax, ho);
attn_softmax_tile_stats.compute_at(attn_softmax, ho);
attn_softmax_tile_stats.update(0).reorder(w, r, d, h, c, n);
attn_softmax_prob.compute_at(attn_softmax_tile_stats, h);
attn_softmax_tile_max.compute_at(attn_softmax_tile_stats, h);
attn_softmax_qk.compute_at(attn_softmax_tile_stats, h);
attn_softmax_qk.update(0).reorder(w, k, d, h, c, n).vectorize(w, 8, GuardWithIf);
attn_softmax_keys.compute_at(attn_softmax_tile_stats, h);
attn_softmax_values.compute_at(attn_softmax_tile_stats, h);
)";

TEST(Attention, ExportedPatternsBecomeOneNode) {
    for (ScaleAt where : {ScaleAt::Product, ScaleAt::Operands, ScaleAt::None}) {
        AttentionGraph a({2, 3}, 5, 7, 4, 6, {2, 1, 1, 7}, where);
        Graph g = a.b.g;
        prepare(g);
        EXPECT_EQ(count_op(g, "FusedAttention"), 1);
        EXPECT_EQ(count_op(g, "MatMul"), 0);
        EXPECT_EQ(count_op(g, "Mul") + count_op(g, "Div"), 0) << "the scale is the node's attribute";
        for (const auto &n : g.nodes) {
            if (n.op == "FusedAttention") {
                EXPECT_NEAR(n.get_float("scale", 0), where == ScaleAt::None ? 1.0 : 0.125, 1e-7);
            }
        }
    }
}

TEST(Attention, NearMissesAreLeftAlone) {
    {  // the scores are also a graph output
        AttentionGraph a({2}, 5, 7, 4, 6);
        a.b.output(a.b.g.nodes[a.b.g.producer(a.b.g.nodes[a.b.g.producer(a.out)].inputs[0])].inputs[0]);
        Graph g = a.b.g;
        prepare(g);
        EXPECT_EQ(count_op(g, "FusedAttention"), 0);
    }
    {  // off by default (training, and the CPU unless LOOM_FUSE_ATTENTION=1)
        AttentionGraph a({2}, 5, 7, 4, 6);
        Graph g = a.b.g;
        prepare_graph(g);
        EXPECT_EQ(count_op(g, "FusedAttention"), 0);
    }
    {  // cuDNN takes no mask and no head size that is not a multiple of 8
        AttentionGraph masked({2, 3}, 5, 7, 8, 8, {2, 1, 1, 7}), odd({2, 3}, 5, 7, 4, 4), fits({2, 3}, 5, 7, 64, 64);
        for (auto *a : {&masked, &odd, &fits}) {
            Graph g = a->b.g;
            prepare(g, AttentionFusion::Cudnn);
            EXPECT_EQ(count_op(g, "FusedAttention"), a == &fits ? 1 : 0);
        }
    }
}

TEST(Attention, FusedMatchesReferenceAtRootAtAwkwardSizes) {
    check_fused(AttentionGraph({2, 3}, 13, 67, 7, 5).b.g, "");
    check_fused(AttentionGraph({2, 3}, 13, 131, 8, 8, {2, 1, 1, 131}).b.g, "");
    check_fused(AttentionGraph({3}, 1, 1, 3, 2).b.g, "");                       // one query, one key
    check_fused(AttentionGraph({1, 2}, 1, 29, 16, 16, {1, 1, 1, 29}).b.g, "");  // decode step
    check_fused(AttentionGraph({5}, 17, 64, 4, 4, {17, 64}, ScaleAt::Operands).b.g, "");  // rank 3, 2-D mask
}

TEST(Attention, FlashScheduleMatchesReference) {
    check_fused(AttentionGraph({2, 3}, 37, 131, 16, 16).b.g, kFlashSchedule);
    check_fused(AttentionGraph({2, 3}, 37, 131, 16, 16, {2, 1, 1, 131}).b.g, kFlashSchedule);
    check_fused(AttentionGraph({1, 2}, 1, 1, 8, 8).b.g, kFlashSchedule);
    check_fused(AttentionGraph({1, 4}, 64, 64, 64, 64, {1, 1, 64, 64}).b.g, kFlashSchedule);
}

TEST(Attention, AutoScheduleIsOneFlashKernelAndMatchesReference) {
    check_fused(AttentionGraph({2, 3}, 37, 131, 16, 16).b.g, "", 5, true);
    check_fused(AttentionGraph({2, 3}, 13, 67, 7, 5, {2, 1, 1, 67}).b.g, "", 5, true);
    check_fused(AttentionGraph({3}, 1, 1, 3, 2).b.g, "", 5, true);
}

}  // namespace
}  // namespace loom
