// MatMul, Gemm, Conv and ConvTranspose lowering: the Func structure a schedule relies on (names,
// one update over "k" / "r"), and numerics against the reference interpreter on random data with
// odd sizes, size-1 dims, broadcasting, strides, dilations, groups and asymmetric pads.
#include <gtest/gtest.h>

#include "codegen/jit.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_builtin.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

/// Every node of these graphs is a graph output (checked against the reference).
using Builder = loom::testing::GraphBuilder;

/// Lowers, compute_roots every Func (pads inlined when \p inline_pads), JIT-runs on random inputs
/// and compares every output with the reference.
void check(const Graph &g, uint64_t seed, bool inline_pads = false, const LowerOptions &lo = {}) {
    auto in = random_inputs(g, seed);
    auto ref = run_reference(g, in);
    LoweredPipeline lp = lower_graph(g, lo);
    for (auto &f : lp.funcs) {
        bool pad = f.name.size() > 4 && f.name.compare(f.name.size() - 4, 4, "_pad") == 0;
        if (pad && inline_pads) continue;
        f.func.compute_root();
    }
    JitModel m(std::move(lp));
    auto out = m.run(in);
    for (const auto &o : g.outputs) {
        SCOPED_TRACE("output " + o + " of " + g.nodes[g.producer(o)].name);
        EXPECT_TRUE(close(out.at(o), ref.at(o)));
    }
}

/// Output extent of a conv/pool dim (floor mode).
int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
    return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

/// Output extent of a transposed conv dim.
int64_t convt_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                  int64_t op) {
    return (in - 1) * s + d * (k - 1) + 1 + op - pb - pe;
}

using Ints = std::vector<int64_t>;

TEST(OpsLinalg, MatMulStructure) {
    Builder b;
    std::string a = b.input("a", {5, 7}), w = b.random_constant("w", {7, 3}, 1);
    std::string y = b.out("MatMul", {a, w}, {5, 3}, {}, DType::F32, "/fc/MatMul");
    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *f = lp.find("fc_matmul");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->vars, (std::vector<std::string>{"i", "j"}));
    ASSERT_EQ(f->update_rvars.size(), 1u);
    EXPECT_EQ(f->update_rvars[0], (std::vector<std::string>{"k"}));
    EXPECT_EQ(f->func.num_update_definitions(), 1);
    EXPECT_EQ(f->func.update_args(0).size(), 2u);
    EXPECT_EQ(lp.funcs.size(), 1u);  // no anonymous or epilogue Funcs

    // A schedule can tile i/j, split k and vectorize: Halide accepts it and the result holds.
    Halide::Func fn = f->func;
    Halide::Var i("i"), j("j"), io, jo, ii, ji;
    Halide::RVar k("k$x"), ko, ki;
    fn.compute_root().tile(i, j, io, jo, ii, ji, 2, 2, Halide::TailStrategy::GuardWithIf);
    fn.update(0).split(k, ko, ki, 4, Halide::TailStrategy::GuardWithIf).reorder(ki, i, j, ko)
        .vectorize(j, 2, Halide::TailStrategy::GuardWithIf);
    auto in = random_inputs(b.g, 3);
    auto ref = run_reference(b.g, in);
    JitModel m(std::move(lp));
    EXPECT_TRUE(close(m.run(in).at(y), ref.at(y)));
}

TEST(OpsLinalg, MatMulShapes) {
    Builder b;
    std::string a = b.input("a", {5, 7}), w = b.input("w", {7, 3});
    std::string a4 = b.input("a4", {2, 1, 3, 5}), b3 = b.input("b3", {4, 5, 6});
    std::string v = b.input("v", {7}), a3 = b.input("a3", {3, 5, 7});
    std::string c = b.random_constant("c", {7, 1}, 5);
    b.out("MatMul", {a, w}, {5, 3});
    b.out("MatMul", {a4, b3}, {2, 4, 3, 6});  // batch broadcast both ways
    b.out("MatMul", {v, w}, {3});             // 1-D left
    b.out("MatMul", {a, v}, {5});             // 1-D right
    b.out("MatMul", {v, v}, {});              // both 1-D: a scalar
    b.out("MatMul", {a3, w}, {3, 5, 3});      // batched left, matrix right
    b.out("MatMul", {a3, c}, {3, 5, 1});      // N = 1, constant right
    check(b.g, 11);
}

TEST(OpsLinalg, Gemm) {
    Builder b;
    std::string A = b.input("A", {5, 7}), At = b.input("At", {7, 5});
    std::string B = b.input("B", {7, 9}), Bt = b.random_constant("Bt", {9, 7}, 2);
    std::string c9 = b.input("c9", {9}), c51 = b.input("c51", {5, 1});
    std::string c59 = b.random_constant("c59", {5, 9}, 3), c1 = b.random_constant("c1", {1}, 4);
    b.out("Gemm", {A, B}, {5, 9});
    b.out("Gemm", {A, B, c9}, {5, 9});
    b.out("Gemm", {At, Bt, c51}, {5, 9}, {{"transA", int64_t(1)}, {"transB", int64_t(1)}});
    b.out("Gemm", {A, Bt, c59}, {5, 9},
           {{"transB", int64_t(1)}, {"alpha", 0.5}, {"beta", 2.0}});
    b.out("Gemm", {At, B, c1}, {5, 9}, {{"transA", int64_t(1)}, {"beta", -1.5}});
    b.out("Gemm", {A, B, c9}, {5, 9}, {{"beta", 0.0}});
    check(b.g, 12);

    // Gemm with bias stays one Func: the bias is the init.
    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *f = lp.find("gemm_1");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->update_rvars, (std::vector<std::vector<std::string>>{{"k"}}));
    EXPECT_EQ(lp.funcs.size(), 6u);
}

/// The constant Buffers a Func reads, directly or through the Funcs it calls.
std::vector<Halide::Buffer<>> constant_buffers(const Halide::Func &f) {
    struct Images : Halide::Internal::IRGraphVisitor {
        std::vector<Halide::Buffer<>> found;
        using IRGraphVisitor::visit;
        void visit(const Halide::Internal::Call *c) override {
            if (c->call_type == Halide::Internal::Call::Image && c->image.defined()) found.push_back(c->image);
            IRGraphVisitor::visit(c);
        }
    } v;
    auto funcs = Halide::Internal::find_transitive_calls(f.function());
    for (auto &[name, fn] : funcs) {
        for (const auto &e : fn.values()) e.accept(&v);
        for (const auto &u : fn.updates())
            for (const auto &e : u.values()) e.accept(&v);
    }
    return v.found;
}

// A constant matrix with 1 KiB rows is stored with 64 bytes after each row (so that a GEMM's B
// strip does not map to one L1 set) and reads the same values: the padded Gemm matches the
// reference; the same graph lowered without padding has dense rows. (Column panels, below, take
// precedence for a GEMM's B; they are off here.)
TEST(OpsLinalg, ConstantRowsArePaddedOffCuda) {
    Builder b;
    std::string A = b.input("A", {37, 128}), Bt = b.random_constant("Bt", {256, 128}, 5);
    b.out("Gemm", {A, Bt}, {37, 256}, {{"transB", int64_t(1)}});
    prepare_graph(b.g);  // B^T becomes a [128, 256] constant: rows of 1 KiB
    LowerOptions rows;
    rows.block_matmul_weights = false;
    check(b.g, 13, false, rows);
    for (bool pad : {true, false}) {
        LowerOptions lo = rows;
        lo.pad_constant_rows = pad;
        LoweredPipeline lp = lower_graph(b.g, lo);
        auto bufs = constant_buffers(lp.funcs.back().func);
        ASSERT_EQ(bufs.size(), 1u);
        EXPECT_EQ(bufs[0].dim(0).extent(), 256);
        EXPECT_EQ(bufs[0].dim(1).stride(), pad ? 256 + 16 : 256);
    }
}

// A GEMM's constant B ([K, N], N a multiple of 16) is read from column panels [N/16][K][16]: a
// MatMul with a batched A, and a Gemm with alpha and a bias, match the reference; the panel buffer
// holds B's values; 24 columns stay as stored; with the option off (CUDA, the eager and inline
// baselines) B is read as stored.
TEST(OpsLinalg, GemmWeightsAreStoredInColumnPanels) {
    Builder b;
    std::string A = b.input("A", {2, 5, 40}), B = b.random_constant("B", {40, 48}, 61);
    b.out("MatMul", {A, B}, {2, 5, 48}, {}, DType::F32, "mm");
    std::string A2 = b.input("A2", {7, 40}), C = b.random_constant("C", {48}, 62);
    b.out("Gemm", {A2, B, C}, {7, 48}, {{"alpha", 0.5}}, DType::F32, "gemm");
    std::string B3 = b.random_constant("B3", {40, 24}, 63);
    b.out("MatMul", {A2, B3}, {7, 24}, {}, DType::F32, "narrow");
    check(b.g, 43);
    const std::vector<double> bv = b.g.constant(B)->to_doubles();
    auto buffer_of = [&](const LoweredPipeline &lp, const std::string &f, size_t n) {
        for (auto &buf : constant_buffers(lp.find(f)->func))
            if (buf.number_of_elements() == n) return buf;
        return Halide::Buffer<>();
    };
    for (const char *spec : {"auto", "eager"}) {
        SCOPED_TRACE(spec);
        const bool on = std::string(spec) == "auto";
        LoweredPipeline lp = lower_graph(b.g, lowering_for_schedule({}, spec));
        for (const char *f : {"mm", "gemm"}) {
            Halide::Buffer<> wb = buffer_of(lp, f, bv.size());
            ASSERT_TRUE(wb.defined()) << f;
            ASSERT_EQ(wb.dimensions(), on ? 3 : 2) << f;
            if (!on) continue;
            EXPECT_EQ((std::vector<int>{wb.dim(0).extent(), wb.dim(1).extent(), wb.dim(2).extent()}),
                      (std::vector<int>{16, 40, 3}));
            Halide::Buffer<float> wf(wb);
            for (int k : {0, 17, 39})
                for (int j : {0, 15, 16, 47}) EXPECT_EQ(wf(j % 16, k, j / 16), (float)bv[k * 48 + j]) << f;
        }
        Halide::Buffer<> nb = buffer_of(lp, "narrow", 40 * 24);
        ASSERT_TRUE(nb.defined());
        EXPECT_EQ(nb.dimensions(), 2);
    }
}

// On the CPU a 2-D conv of one group with constant float weights reads them blocked by output
// channels ([C_out/B][C_in][kH][kW][B]): B = 16 for a multiple of 16, else 24 (three AVX2 vectors)
// or 8 for a multiple of those, so that a tile vectorized over channels loads each weight vector
// densely and computes no padding channels. The blocked convs (strided, dilated, asymmetric pads,
// bias; 1x1) match the reference, the buffer holds the graph's weights in that order, a
// 20-channel conv keeps dense weights, and without the option (CUDA, or the eager and inline
// baselines: lowering_for_schedule) none is blocked.
TEST(OpsLinalg, ConvWeightsAreBlockedByOutputChannelsOffCuda) {
    Builder b;
    std::string x = b.input("x", {2, 5, 9, 11});
    std::string w1 = b.random_constant("w1", {32, 5, 3, 3}, 31), b1 = b.random_constant("b1", {32}, 32);
    b.out("Conv", {x, w1, b1}, {2, 32, conv_out(9, 3, 2, 1, 1, 2), conv_out(11, 3, 1, 2, 0, 1)},
          {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}},
           {"pads", Ints{1, 0, 2, 1}}, {"group", int64_t(1)}},
          DType::F32, "/enc/conv1/Conv");
    std::string w2 = b.random_constant("w2", {16, 5, 1, 1}, 33);
    b.out("Conv", {x, w2}, {2, 16, 9, 11}, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "pointwise");
    std::string w3 = b.random_constant("w3", {24, 5, 3, 3}, 34);
    b.out("Conv", {x, w3}, {2, 24, 9, 11}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
          DType::F32, "by24");
    std::string w5 = b.random_constant("w5", {40, 5, 1, 1}, 36);
    b.out("Conv", {x, w5}, {2, 40, 9, 11}, {{"kernel_shape", Ints{1, 1}}}, DType::F32, "by8");
    std::string w4 = b.random_constant("w4", {20, 5, 3, 3}, 35);
    b.out("Conv", {x, w4}, {2, 20, 9, 11}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
          DType::F32, "dense");
    check(b.g, 41);
    check(b.g, 42, /*inline_pads=*/true);
    const std::vector<double> w = b.g.constant(w1)->to_doubles();
    for (bool on : {true, false}) {
        SCOPED_TRACE(on ? "blocked" : "option off");
        LowerOptions lo;
        lo.block_conv_weights = on;
        LoweredPipeline lp = lower_graph(b.g, lo);
        const LoweredFunc *f1 = lp.find("enc_conv1_conv"), *f2 = lp.find("pointwise"), *f3 = lp.find("by24"),
                          *f4 = lp.find("dense"), *f5 = lp.find("by8");
        ASSERT_TRUE(f1 && f2 && f3 && f4 && f5);
        EXPECT_EQ(f1->conv_weight_block, on ? 16 : 0);
        EXPECT_EQ(f2->conv_weight_block, on ? 16 : 0);
        EXPECT_EQ(f3->conv_weight_block, on ? 24 : 0);  // 24 channels: one block of three AVX2 vectors
        EXPECT_EQ(f5->conv_weight_block, on ? 8 : 0);   // 40: five blocks of one
        EXPECT_EQ(f4->conv_weight_block, 0);            // 20: no multiple of 8
        if (on) {
            // [C_out / 24][C_in][kH][kW][24]: every lane holds its channel's weight (no padding).
            const std::vector<double> w3v = b.g.constant(w3)->to_doubles();
            Halide::Buffer<> pb;
            for (auto &buf : constant_buffers(f3->func))
                if (buf.dimensions() == 5) pb = buf;
            ASSERT_TRUE(pb.defined());
            EXPECT_EQ(pb.dim(4).extent(), 1);
            EXPECT_EQ(pb.dim(0).extent(), 24);
            Halide::Buffer<float> pf(pb);
            for (int o : {0, 17, 23})
                for (int ci : {0, 4})
                    EXPECT_EQ(pf(o, 2, 1, ci, 0), (float)w3v[((o * 5 + ci) * 3 + 1) * 3 + 2]) << o;
        }
        Halide::Buffer<> wb;
        for (auto &buf : constant_buffers(f1->func))
            if (buf.number_of_elements() == w.size()) wb = buf;
        ASSERT_TRUE(wb.defined());
        ASSERT_EQ(wb.dimensions(), on ? 5 : 4);
        if (!on) continue;
        EXPECT_EQ((std::vector<int>{wb.dim(0).extent(), wb.dim(1).extent(), wb.dim(2).extent(), wb.dim(3).extent(),
                                    wb.dim(4).extent()}),
                  (std::vector<int>{16, 3, 3, 5, 2}));
        Halide::Buffer<float> wf(wb);
        for (int o : {0, 7, 16, 31})
            for (int ci : {0, 4})
                for (int ky : {0, 2})
                    for (int kx : {0, 1})
                        EXPECT_EQ(wf(o % 16, kx, ky, ci, o / 16), (float)w[((o * 5 + ci) * 3 + ky) * 3 + kx]);
    }
    // The baselines (eager, inline) are lowered with the graph's layout; the rest blocked.
    for (const char *spec : {"", "eager", "inline", "auto", "my.cpu.sched"}) {
        LoweredPipeline lp = lower_graph(b.g, lowering_for_schedule({}, spec));
        bool baseline = std::string(spec).empty() || std::string(spec) == "eager" || std::string(spec) == "inline";
        EXPECT_EQ(lp.find("enc_conv1_conv")->conv_weight_block, baseline ? 0 : 16) << spec;
    }
}

TEST(OpsLinalg, Conv2D) {
    Builder b;
    std::string x = b.input("x", {2, 6, 9, 11});
    // Strided, dilated, asymmetric pads, bias.
    std::string w1 = b.random_constant("w1", {4, 6, 3, 3}, 21), b1 = b.random_constant("b1", {4}, 22);
    b.out("Conv", {x, w1, b1},
           {2, 4, conv_out(9, 3, 2, 1, 1, 2), conv_out(11, 3, 1, 2, 0, 1)},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}},
            {"pads", Ints{1, 0, 2, 1}}, {"group", int64_t(1)}},
           DType::F32, "/enc/conv1/Conv");
    // Grouped (3 groups of 2 channels), runtime weights, no bias.
    std::string w2 = b.input("w2", {6, 2, 3, 2});
    b.out("Conv", {x, w2}, {2, 6, conv_out(9, 3, 1, 1, 0, 1), conv_out(11, 2, 2, 1, 1, 0)},
           {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{1, 2}}, {"dilations", Ints{1, 1}},
            {"pads", Ints{0, 1, 1, 0}}, {"group", int64_t(3)}});
    // Depthwise with channel multiplier 2, pads 1.
    std::string w3 = b.random_constant("w3", {12, 1, 3, 3}, 23), b3 = b.input("b3", {12});
    b.out("Conv", {x, w3, b3}, {2, 12, 9, 11},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"dilations", Ints{1, 1}},
            {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(6)}});
    // 1x1, no pads.
    std::string w4 = b.random_constant("w4", {5, 6, 1, 1}, 24);
    b.out("Conv", {x, w4}, {2, 5, 9, 11},
           {{"kernel_shape", Ints{1, 1}}, {"strides", Ints{1, 1}}, {"dilations", Ints{1, 1}},
            {"pads", Ints{0, 0, 0, 0}}, {"group", int64_t(1)}});
    check(b.g, 31);
    check(b.g, 32, /*inline_pads=*/true);

    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *f = lp.find("enc_conv1_conv");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->vars, (std::vector<std::string>{"n", "c", "h", "w"}));
    EXPECT_EQ(f->update_rvars, (std::vector<std::vector<std::string>>{{"r.x", "r.y", "r.z"}}));
    const LoweredFunc *pad = lp.find("enc_conv1_conv_pad");
    ASSERT_NE(pad, nullptr);
    EXPECT_TRUE(pad->is_pointwise);
    EXPECT_EQ(pad->extents, (Shape{2, 6, 12, 12}));
    EXPECT_EQ(f->producers, (std::vector<std::string>{"enc_conv1_conv_pad"}));
    EXPECT_EQ(lp.find("conv_3_pad"), nullptr);  // no pads, no pad Func
}

// With channels_last_depthwise_filters (on by default: the CPU's layout) a depthwise conv's
// constant filter is read from [kH][kW][C_out] (channels innermost, one block of every channel),
// the values the graph's [C_out][1][kH][kW] holds; outputs match the reference with the option on
// and off (a multiplier of 2, strided, padded). Grouped convs with several input channels per
// group and runtime filters keep the graph's layout.
TEST(OpsLinalg, DepthwiseFiltersChannelsInnermost) {
    Builder b;
    std::string x = b.input("x", {2, 6, 9, 11});
    std::string w1 = b.random_constant("w1", {12, 1, 3, 3}, 51), b1 = b.random_constant("b1", {12}, 52);
    b.out("Conv", {x, w1, b1}, {2, 12, 9, 11},
          {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t(6)}}, DType::F32, "dw");
    std::string w2 = b.random_constant("w2", {6, 1, 5, 5}, 53);
    b.out("Conv", {x, w2}, {2, 6, conv_out(9, 5, 2, 1, 2, 2), conv_out(11, 5, 2, 1, 2, 2)},
          {{"kernel_shape", Ints{5, 5}}, {"strides", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}, {"group", int64_t(6)}},
          DType::F32, "dw_strided");
    std::string w3 = b.random_constant("w3", {6, 2, 3, 3}, 54);
    b.out("Conv", {x, w3}, {2, 6, 7, 9}, {{"kernel_shape", Ints{3, 3}}, {"group", int64_t(3)}}, DType::F32, "grouped");
    LowerOptions lo;
    lo.channels_last_depthwise_filters = true;
    check(b.g, 55, false, lo);
    check(b.g, 56, /*inline_pads=*/true, lo);
    LoweredPipeline lp = lower_graph(b.g, lo);
    const std::vector<double> w = b.g.constant(w1)->to_doubles();
    Halide::Buffer<> wb;
    for (auto &buf : constant_buffers(lp.find("dw")->func))
        if (buf.dimensions() == 5) wb = buf;
    ASSERT_TRUE(wb.defined()) << "dw reads its filter through a channels-innermost copy";
    EXPECT_EQ((std::vector<int>{wb.dim(0).extent(), wb.dim(1).extent(), wb.dim(2).extent(), wb.dim(3).extent(),
                                wb.dim(4).extent()}),
              (std::vector<int>{12, 3, 3, 1, 1}));
    Halide::Buffer<float> wf(wb);
    for (int o : {0, 5, 11})
        for (int ky : {0, 2})
            for (int kx : {0, 1, 2}) EXPECT_EQ(wf(o, kx, ky, 0, 0), (float)w[(o * 3 + ky) * 3 + kx]) << o;
    for (auto &buf : constant_buffers(lp.find("grouped")->func)) EXPECT_EQ(buf.dimensions(), 4) << "grouped";
    LowerOptions off;
    off.channels_last_depthwise_filters = false;
    check(b.g, 57, false, off);
    for (auto &buf : constant_buffers(lower_graph(b.g, off).find("dw")->func))
        EXPECT_LT(buf.dimensions(), 5) << "option off: the graph's filter and bias";
    bool taps_last = false;
    for (auto &buf : constant_buffers(lower_graph(b.g).find("dw")->func)) taps_last |= buf.dimensions() == 5;
    EXPECT_TRUE(taps_last) << "the default lowering stores the filter channels innermost";
}

TEST(OpsLinalg, Conv1D3D) {
    Builder b;
    std::string x1 = b.input("x1", {1, 3, 13});
    std::string w1 = b.random_constant("w1", {5, 3, 4}, 41), b1 = b.random_constant("b1", {5}, 42);
    b.out("Conv", {x1, w1, b1}, {1, 5, conv_out(13, 4, 3, 2, 2, 1)},
           {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}, {"dilations", Ints{2}},
            {"pads", Ints{2, 1}}, {"group", int64_t(1)}});
    std::string x3 = b.input("x3", {1, 4, 5, 6, 7});
    std::string w3 = b.random_constant("w3", {3, 4, 2, 3, 2}, 43);
    b.out("Conv", {x3, w3},
           {1, 3, conv_out(5, 2, 1, 1, 1, 0), conv_out(6, 3, 2, 1, 0, 2), conv_out(7, 2, 1, 2, 1, 1)},
           {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{1, 2, 1}}, {"dilations", Ints{1, 1, 2}},
            {"pads", Ints{1, 0, 1, 0, 2, 1}}, {"group", int64_t(1)}});
    // 3-D conv, 2 groups (weights for 4 input channels split in two).
    std::string w4 = b.random_constant("w4", {2, 2, 1, 1, 3}, 44);
    b.out("Conv", {x3, w4}, {1, 2, 5, 6, 5},
           {{"kernel_shape", Ints{1, 1, 3}}, {"strides", Ints{1, 1, 1}}, {"dilations", Ints{1, 1, 1}},
            {"pads", Ints{0, 0, 0, 0, 0, 0}}, {"group", int64_t(2)}});
    check(b.g, 51);
}

TEST(OpsLinalg, ConvTranspose) {
    Builder b;
    std::string x = b.input("x", {2, 4, 5, 6});
    // Stride 2, output_padding, asymmetric pads, bias.
    std::string w1 = b.random_constant("w1", {4, 3, 3, 3}, 61), b1 = b.random_constant("b1", {3}, 62);
    b.out("ConvTranspose", {x, w1, b1},
           {2, 3, convt_out(5, 3, 2, 1, 1, 0, 1), convt_out(6, 3, 2, 1, 1, 1, 0)},
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"dilations", Ints{1, 1}},
            {"pads", Ints{1, 1, 0, 1}}, {"output_padding", Ints{1, 0}}, {"group", int64_t(1)}});
    // Two groups, dilation, stride (3, 1), runtime weights.
    std::string w2 = b.input("w2", {4, 2, 2, 3});
    b.out("ConvTranspose", {x, w2},
           {2, 4, convt_out(5, 2, 3, 2, 0, 1, 2), convt_out(6, 3, 1, 1, 2, 0, 0)},
           {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{3, 1}}, {"dilations", Ints{2, 1}},
            {"pads", Ints{0, 2, 1, 0}}, {"output_padding", Ints{2, 0}}, {"group", int64_t(2)}});
    // 1-D, stride 2, kernel 4.
    std::string x1 = b.input("x1", {1, 3, 7});
    std::string w3 = b.random_constant("w3", {3, 5, 4}, 63);
    b.out("ConvTranspose", {x1, w3}, {1, 5, convt_out(7, 4, 2, 1, 1, 2, 1)},
           {{"kernel_shape", Ints{4}}, {"strides", Ints{2}}, {"dilations", Ints{1}},
            {"pads", Ints{1, 2}}, {"output_padding", Ints{1}}, {"group", int64_t(1)}});
    // Kernel = stride (a learned upsampling, 2x2 stride 2 and 2x3 stride (2, 3)): one tap per
    // output, the reduction over input channels only.
    std::string w5 = b.random_constant("w5", {4, 3, 2, 2}, 64), b5 = b.random_constant("b5", {3}, 65);
    b.out("ConvTranspose", {x, w5, b5}, {2, 3, 10, 12}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
          DType::F32, "up2");
    std::string w6 = b.random_constant("w6", {4, 2, 2, 3}, 66);
    b.out("ConvTranspose", {x, w6}, {2, 2, 10, 18}, {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 3}}},
          DType::F32, "up23");
    // Grouped kernel = stride: two groups of two input channels, and one group per channel with
    // four input channels each (a MaxPool's gradient, one-hot taps).
    std::string w7 = b.random_constant("w7", {4, 3, 2, 2}, 67);
    b.out("ConvTranspose", {x, w7}, {2, 6, 10, 12},
          {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"group", int64_t(2)}}, DType::F32, "up2_groups");
    std::string w8 = b.random_constant("w8", {4, 1, 2, 2}, 68);
    b.out("ConvTranspose", {x, w8}, {2, 1, 10, 12},
          {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"group", int64_t(1)}}, DType::F32, "up2_one");
    std::string w9 = b.random_constant("w9", {4, 1, 2, 2}, 69);
    b.out("ConvTranspose", {x, w9}, {2, 2, 10, 12},
          {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"group", int64_t(2)}}, DType::F32, "up2_depth");
    std::string w10 = b.random_constant("w10", {4, 1, 2, 2}, 70);
    b.out("ConvTranspose", {x, w10}, {2, 4, 10, 12},
          {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"group", int64_t(4)}}, DType::F32, "up2_dw");
    check(b.g, 71);
    LoweredPipeline lp = lower_graph(b.g);
    for (const char *name : {"up2", "up23", "up2_groups", "up2_depth"}) {
        const LoweredFunc *f = lp.find(name);
        ASSERT_TRUE(f) << name;
        ASSERT_EQ(f->update_rvars.size(), 1u);
        EXPECT_EQ(f->update_rvars[0].size(), 1u) << name << ": the taps are no reduction";
    }
}

}  // namespace
}  // namespace loom
