// Pooling, Reduce*/ArgMax/ArgMin and the normalisations: the stages a schedule places (names, one
// update each) and numerics against the reference interpreter on random data with odd sizes,
// size-1 dims, keepdims and multi-axis variants, ceil_mode and count_include_pad both ways.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/jit.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;
using Ints = std::vector<int64_t>;

/// Every node of these graphs is a graph output (checked against the reference).
using Builder = loom::testing::GraphBuilder;

/// JIT-runs \p g (every Func compute_root, or only those with updates and the outputs when
/// \p fuse) on \p in and compares every output with the reference.
void check_inputs(const Graph &g, const std::map<std::string, Tensor> &in, bool fuse = false,
                  double rel_tol = 1e-5) {
    auto ref = run_reference(g, in);
    LoweredPipeline lp = lower_graph(g);
    for (auto &f : lp.funcs)
        if (!fuse || f.is_output || f.func.has_update_definition()) f.func.compute_root();
    JitModel m(std::move(lp));
    auto out = m.run(in);
    for (const auto &o : g.outputs) {
        SCOPED_TRACE("output " + o + " of " + g.nodes[g.producer(o)].name);
        EXPECT_TRUE(close(out.at(o), ref.at(o), rel_tol));
    }
}

void check(const Graph &g, uint64_t seed, bool fuse = false) {
    check_inputs(g, random_inputs(g, seed), fuse);
}

/// Pool output extent as ONNX/PyTorch define it (a ceil_mode window must start inside the input
/// or its begin pad).
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
    int64_t room = in + pb + pe - d * (k - 1) - 1;
    int64_t o = (ceil ? (room + s - 1) / s : room / s) + 1;
    if (ceil && (o - 1) * s >= in + pb) o--;
    return o;
}

TEST(OpsPool, MaxAndAverage) {
    Builder b;
    std::string x = b.input("x", {2, 3, 10, 11});
    auto attrs = [](Ints k, Ints s, Ints d, Ints p, int64_t ceil, int64_t cip) {
        return std::map<std::string, AttrValue>{{"kernel_shape", k}, {"strides", s},
                                                {"dilations", d}, {"pads", p},
                                                {"ceil_mode", ceil}, {"count_include_pad", cip}};
    };
    b.out("MaxPool", {x},
           {2, 3, pool_out(10, 3, 2, 1, 1, 0, false), pool_out(11, 3, 2, 1, 1, 1, false)},
           attrs({3, 3}, {2, 2}, {1, 1}, {1, 1, 0, 1}, 0, 0), DType::F32, "/pool/MaxPool");
    b.out("MaxPool", {x},
           {2, 3, pool_out(10, 3, 2, 2, 0, 0, true), pool_out(11, 2, 3, 1, 0, 0, true)},
           attrs({3, 2}, {2, 3}, {2, 1}, {0, 0, 0, 0}, 1, 0));
    for (int64_t cip : {0, 1}) {
        b.out("AveragePool", {x},
               {2, 3, pool_out(10, 3, 2, 1, 1, 1, true), pool_out(11, 3, 2, 1, 2, 0, true)},
               attrs({3, 3}, {2, 2}, {1, 1}, {1, 2, 1, 0}, 1, cip));
        b.out("AveragePool", {x},
               {2, 3, pool_out(10, 2, 3, 2, 1, 0, true), pool_out(11, 4, 1, 1, 0, 2, false)},
               attrs({2, 4}, {3, 1}, {2, 1}, {1, 0, 0, 2}, 1, cip));
    }
    b.out("GlobalAveragePool", {x}, {2, 3, 1, 1});
    b.out("GlobalMaxPool", {x}, {2, 3, 1, 1});
    check(b.g, 101);
    check(b.g, 102, /*fuse=*/true);

    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *mp = lp.find("pool_maxpool");
    ASSERT_NE(mp, nullptr);
    EXPECT_EQ(mp->update_rvars, (std::vector<std::vector<std::string>>{{"r.x", "r.y"}}));
    ASSERT_NE(lp.find("pool_maxpool_pad"), nullptr);
    ASSERT_NE(lp.find("averagepool_2_sum"), nullptr);
    EXPECT_TRUE(lp.find("averagepool_2")->is_pointwise);
    EXPECT_EQ(lp.find("globalaveragepool_6")->func.num_update_definitions(), 1);
}

TEST(OpsPool, OneAndThreeD) {
    Builder b;
    std::string x1 = b.input("x1", {1, 2, 13});
    std::string x3 = b.input("x3", {1, 2, 5, 6, 7});
    b.out("MaxPool", {x1}, {1, 2, pool_out(13, 3, 2, 1, 1, 1, true)},
           {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}},
            {"ceil_mode", int64_t(1)}});
    b.out("AveragePool", {x3},
           {1, 2, pool_out(5, 2, 2, 1, 1, 0, false), pool_out(6, 3, 1, 1, 1, 1, false),
            pool_out(7, 2, 2, 1, 0, 1, true)},
           {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{2, 1, 2}},
            {"pads", Ints{1, 1, 0, 0, 1, 1}}, {"ceil_mode", int64_t(1)},
            {"count_include_pad", int64_t(1)}});
    b.out("GlobalAveragePool", {x3}, {1, 2, 1, 1, 1});
    check(b.g, 111);
}

TEST(OpsReduce, AllKinds) {
    Builder b;
    std::string x = b.input("x", {3, 5, 7});
    std::string x4 = b.input("x4", {2, 1, 5, 3});
    auto red = [](Ints axes, int64_t keep) {
        return std::map<std::string, AttrValue>{{"axes", axes}, {"keepdims", keep}};
    };
    b.out("ReduceSum", {x}, {3, 1, 7}, red({1}, 1), DType::F32, "/head/ReduceSum");
    b.out("ReduceMean", {x}, {5}, red({0, 2}, 0));
    b.out("ReduceMax", {x}, {3, 5}, red({2}, 0));
    b.out("ReduceMin", {x}, {}, red({0, 1, 2}, 0));
    b.out("ReduceProd", {x}, {3, 1, 7}, red({1}, 1));
    b.out("ReduceL2", {x}, {3, 1, 1}, red({1, 2}, 1));
    b.out("ReduceSum", {x4}, {2, 5}, red({1, 3}, 0));
    b.out("ReduceMean", {x4}, {1, 1, 1, 1}, red({0, 1, 2, 3}, 1));
    b.out("ReduceMax", {x4}, {2, 1, 1, 3}, red({1, 2}, 1));
    check(b.g, 201);
    check(b.g, 202, /*fuse=*/true);

    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *f = lp.find("head_reducesum");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->vars, (std::vector<std::string>{"b", "i", "j"}));
    EXPECT_EQ(f->update_rvars, (std::vector<std::vector<std::string>>{{"r.x"}}));
    EXPECT_EQ(lp.find("reducemean_1")->update_rvars,
              (std::vector<std::vector<std::string>>{{"r.x", "r.y"}}));
    ASSERT_NE(lp.find("reducel2_5_sum"), nullptr);
    EXPECT_EQ(lp.funcs.size(), 10u);  // one Func per node, plus ReduceL2's sum
}

TEST(OpsReduce, Integers) {
    Builder b;
    std::string x = b.input("x", {4, 5}, DType::I32);
    b.out("ReduceSum", {x}, {4}, {{"axes", Ints{1}}, {"keepdims", int64_t(0)}}, DType::I32);
    b.out("ReduceMax", {x}, {1, 5}, {{"axes", Ints{0}}, {"keepdims", int64_t(1)}}, DType::I32);
    b.out("ArgMin", {x}, {4}, {{"axis", int64_t(1)}, {"keepdims", int64_t(0)}}, DType::I64);
    check(b.g, 211);
}

TEST(OpsReduce, ArgMaxArgMinTies) {
    Builder b;
    std::string x = b.input("x", {4, 9, 5});
    auto arg = [](int64_t axis, int64_t keep, int64_t last) {
        return std::map<std::string, AttrValue>{
            {"axis", axis}, {"keepdims", keep}, {"select_last_index", last}};
    };
    b.out("ArgMax", {x}, {4, 1, 5}, arg(1, 1, 0), DType::I64, "/head/ArgMax");
    b.out("ArgMax", {x}, {4, 5}, arg(1, 0, 1), DType::I64);
    b.out("ArgMin", {x}, {4, 9}, arg(2, 0, 0), DType::I64);
    b.out("ArgMin", {x}, {1, 9, 5}, arg(0, 1, 1), DType::I64);
    // Few distinct values so that ties (first vs last index) are common.
    Tensor t(DType::F32, {4, 9, 5});
    fill_random(t, 221, -2, 3);
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, std::floor(t.get(i)));
    check_inputs(b.g, {{"x", t}});
    check(b.g, 222);  // and without ties

    LoweredPipeline lp = lower_graph(b.g);
    EXPECT_NE(lp.find("head_argmax_max"), nullptr);
    EXPECT_EQ(lp.find("head_argmax")->dtype, DType::I64);
    EXPECT_NE(lp.find("argmin_2_min"), nullptr);
}

TEST(OpsNorm, Softmax) {
    Builder b;
    std::string x = b.input("x", {3, 5, 7});
    b.out("Softmax", {x}, {3, 5, 7}, {{"axis", int64_t(2)}}, DType::F32, "/attn/Softmax");
    b.out("Softmax", {x}, {3, 5, 7}, {{"axis", int64_t(0)}});
    b.out("LogSoftmax", {x}, {3, 5, 7}, {{"axis", int64_t(1)}});
    std::string x1 = b.input("x1", {1, 9});
    b.out("Softmax", {x1}, {1, 9}, {{"axis", int64_t(1)}});
    check(b.g, 301);
    check(b.g, 302, /*fuse=*/true);

    LoweredPipeline lp = lower_graph(b.g);
    for (const char *n : {"attn_softmax_max", "attn_softmax_sum", "attn_softmax"})
        ASSERT_NE(lp.find(n), nullptr) << n;
    EXPECT_EQ(lp.find("attn_softmax_max")->extents, (Shape{3, 5, 1}));
    EXPECT_EQ(lp.find("attn_softmax_sum")->update_rvars,
              (std::vector<std::vector<std::string>>{{"r.x"}}));
    EXPECT_TRUE(lp.find("attn_softmax")->is_pointwise);
}

TEST(OpsNorm, LayerNorm) {
    Builder b;
    std::string x = b.input("x", {3, 5, 7});
    std::string s57 = b.random_constant("s57", {5, 7}, 401), b57 = b.input("b57", {5, 7});
    std::string s7 = b.input("s7", {7});
    b.out("LayerNormalization", {x, s57, b57}, {3, 5, 7},
           {{"axis", int64_t(1)}, {"epsilon", 1e-5}}, DType::F32, "ln");
    b.out("LayerNormalization", {x, s7}, {3, 5, 7}, {{"axis", int64_t(2)}, {"epsilon", 1e-3}});
    check(b.g, 411);
    check(b.g, 412, /*fuse=*/true);
    auto in = random_inputs(b.g, 413);
    Tensor &t = in.at("x");
    // Rows far from zero: float32 sums round at ulp(1000) ~ 6e-5 (so 1e-5 is out of reach), but
    // E[x^2] - mean^2 would lose everything; the two-pass variance stays near 1e-4.
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, 1000.0 + t.get(i));
    check_inputs(b.g, in, false, 2e-3);

    LoweredPipeline lp = lower_graph(b.g);
    for (const char *n : {"ln_mean", "ln_var", "ln"}) ASSERT_NE(lp.find(n), nullptr) << n;
    EXPECT_EQ(lp.find("ln_var")->extents, (Shape{3, 1, 1}));
    EXPECT_EQ(lp.find("ln_var")->update_rvars,
              (std::vector<std::vector<std::string>>{{"r.x", "r.y"}}));
}

TEST(OpsNorm, LayerNormStatisticsOutputs) {
    // The optional Mean and InvStdDev outputs are the statistics Funcs themselves (keepdims shape).
    Builder b;
    std::string x = b.input("x", {2, 3, 5});
    std::string s = b.input("s", {3, 5});
    std::string y = b.out("LayerNormalization", {x, s}, {2, 3, 5},
                           {{"axis", int64_t(1)}, {"epsilon", 1e-5}}, DType::F32, "ln");
    Node &n = b.g.nodes.back();
    for (const char *extra : {"ln_mean_out", "ln_invstd_out"}) {
        n.outputs.push_back(extra);
        b.g.values[extra] = ValueInfo{extra, DType::F32, {2, 1, 1}, {}, true};
        b.g.outputs.push_back(extra);
    }
    check(b.g, 421);
    LoweredPipeline lp = lower_graph(b.g);
    EXPECT_TRUE(lp.find("ln_mean")->is_output);
    EXPECT_TRUE(lp.find("ln_invstd")->is_output);
    (void)y;
}

TEST(OpsNorm, BatchInstanceGroup) {
    Builder b;
    std::string x = b.input("x", {2, 6, 3, 5});
    // BatchNorm, all statistics constant: folded into per-channel Buffers.
    std::string sc = b.random_constant("sc", {6}, 501), bi = b.random_constant("bi", {6}, 502);
    std::string mu = b.random_constant("mu", {6}, 503), va = b.random_constant("va", {6}, 504, 0.5, 2);
    b.out("BatchNormalization", {x, sc, bi, mu, va}, {2, 6, 3, 5}, {{"epsilon", 1e-5}},
           DType::F32, "bn");
    // BatchNorm with runtime scale and mean: scale/shift Funcs.
    std::string rsc = b.input("rsc", {6}), rmu = b.input("rmu", {6});
    b.out("BatchNormalization", {x, rsc, bi, rmu, va}, {2, 6, 3, 5}, {{"epsilon", 1e-3}},
           DType::F32, "bn2");
    std::string s6 = b.input("s6", {6}), b6 = b.random_constant("b6", {6}, 505);
    b.out("InstanceNormalization", {x, s6, b6}, {2, 6, 3, 5}, {{"epsilon", 1e-5}},
           DType::F32, "inorm");
    b.out("GroupNormalization", {x, s6, b6}, {2, 6, 3, 5},
           {{"num_groups", int64_t(3)}, {"epsilon", 1e-5}}, DType::F32, "gn");
    std::string s3 = b.random_constant("s3", {3}, 506), b3 = b.input("b3", {3});
    b.out("GroupNormalization", {x, s3, b3}, {2, 6, 3, 5},
           {{"num_groups", int64_t(3)}, {"epsilon", 1e-5}});
    b.out("GroupNormalization", {x, s6, b6}, {2, 6, 3, 5},
           {{"num_groups", int64_t(1)}, {"epsilon", 1e-5}});
    std::string x3 = b.input("x3", {1, 4, 11});  // 1-D instance norm, odd length
    std::string s4 = b.random_constant("s4", {4}, 507), b4 = b.random_constant("b4", {4}, 508);
    b.out("InstanceNormalization", {x3, s4, b4}, {1, 4, 11}, {{"epsilon", 1e-5}});
    check(b.g, 511);
    check(b.g, 512, /*fuse=*/true);

    LoweredPipeline lp = lower_graph(b.g);
    EXPECT_TRUE(lp.find("bn")->is_pointwise);
    EXPECT_EQ(lp.find("bn_scale"), nullptr);  // constants: Buffers, not Funcs
    EXPECT_NE(lp.find("bn2_scale"), nullptr);
    EXPECT_NE(lp.find("bn2_shift"), nullptr);
    for (const char *n : {"inorm_mean", "inorm_var", "gn_mean", "gn_var"})
        ASSERT_NE(lp.find(n), nullptr) << n;
    EXPECT_EQ(lp.find("gn_mean")->extents, (Shape{2, 3, 1, 1}));
    EXPECT_EQ(lp.find("gn_var")->update_rvars,
              (std::vector<std::vector<std::string>>{{"r.x", "r.y", "r.z"}}));
    EXPECT_EQ(lp.find("inorm_var")->update_rvars,
              (std::vector<std::vector<std::string>>{{"r.x", "r.y"}}));
}

}  // namespace
}  // namespace loom
