// The auto-scheduler: its schedules are correct on every fixture (against the reference
// interpreter, outputs poisoned), deterministic, printable and parseable; and the decisions whose
// answer is known are made (a pointwise chain is one loop nest, a costly producer read by 8
// consumers is materialized, a one-output reduction is split with rfactor). Decisions are asserted
// on fixed machines of both x86 levels (machines::avx2_2core, avx512_2core), whatever CPU runs the
// suite; correctness JIT-runs the host's own schedules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "autoschedule/autoschedule.h"
#include "autoschedule/candidates.h"
#include "codegen/jit.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "schedule/schedule_validate.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

/// The model the host's own schedules are planned for (this host's vector width and registers,
/// fixed cores and caches): what check_auto JIT-runs. Decisions are asserted on fixed machines.
MachineModel host_machine() { return reference_machine(host_target(), 2); }

/// The cost model's plan for \p p on the fixed machine \p fm, for its own target (planning
/// compiles nothing): the same on every host.
AutoScheduleResult plan_on(const LoweredPipeline &p, const FixedMachine &fm, const ScheduleKnobs &knobs = {}) {
    return auto_schedule_with_plan(p, fm.target, fm.model, knobs);
}

/// The printed schedule of plan_on, for assertions on the comments that explain a decision.
std::string text_on(const LoweredPipeline &p, const FixedMachine &fm, const ScheduleKnobs &knobs = {}) {
    return print_schedule(plan_on(p, fm, knobs).schedule);
}

/// \p fm with its model changed by \p overrides ("llc_bytes=256K"), its target kept.
FixedMachine with(FixedMachine fm, std::initializer_list<const char *> overrides) {
    for (const char *o : overrides) override_machine(fm.model, o);
    return fm;
}

/// The two x86 levels at 2 cores: assertions that hold for both run on both.
std::vector<FixedMachine> both_levels() { return {machines::avx2_2core(), machines::avx512_2core()}; }

/// Every kernel's tiling, one line each, for failure messages.
std::string tilings(const AutoScheduleResult &r) {
    std::string s;
    for (const auto &[root, t] : r.tiling)
        s += str_cat(root, ": ", t.path, " lanes ", t.vector_lanes, " wrapper ", t.wrapper, " conv ", t.tile_w, "x",
                     t.tile_rows, "x", t.tile_channels, " gemm ", t.tile_m, "x", t.tile_n, " kc ", t.k_chunk,
                     " nc ", t.column_panel, " chunk ", t.partial_chunk, " vec ", t.partials_vectorized,
                     " split_serial ", t.split_serial, " serial_kernel ", t.serial_kernel,
                     " round_up ", t.round_up, " tasks ", t.tasks, "\n");
    return s;
}

/// The number of conv kernels tiled WT x HT x CB on the channel-tile path.
int channel_tiles(const AutoScheduleResult &r, int w, int rows, int channels) {
    int n = 0;
    for (const auto &[root, t] : r.tiling)
        n += t.path == "conv.channel_tile" && t.tile_w == w && t.tile_rows == rows && t.tile_channels == channels;
    return n;
}

/// Float lanes of one native vector of \p fm.
int lanes(const FixedMachine &fm) { return fm.model.vector_bytes / 4; }

/// Every call on stage \p stage (-1: the pure definition) of \p func, in file order.
std::vector<PrimitiveCall> calls_on(const Schedule &s, const std::string &func, int stage = -1) {
    std::vector<PrimitiveCall> out;
    for (const ScheduleStatement *st : s.statements_for(func))
        if (st->stage == stage) out.insert(out.end(), st->calls.begin(), st->calls.end());
    return out;
}

/// Whether stage \p stage of \p func has the call \p c (its name and arguments).
::testing::AssertionResult has_call(const Schedule &s, const std::string &func, int stage, const PrimitiveCall &c) {
    std::string seen;
    for (const PrimitiveCall &k : calls_on(s, func, stage)) {
        if (k == c) return ::testing::AssertionSuccess();
        seen += " ." + k.str();
    }
    return ::testing::AssertionFailure() << func << (stage >= 0 ? ".update(" + std::to_string(stage) + ")" : "")
                                         << " has no ." << c.str() << "; its calls:" << seen;
}

/// How many calls to primitive \p name stage \p stage of \p func has.
size_t calls_named(const Schedule &s, const std::string &func, int stage, const std::string &name) {
    size_t n = 0;
    for (const PrimitiveCall &k : calls_on(s, func, stage)) n += k.name == name;
    return n;
}

/// The front of a MobileNet block on \p x (1 x \p cin x \p hw x \p hw): a 1x1 conv "expand" to \p c
/// channels, its ReLU "expand_relu", and a \p k x \p k depthwise conv "dw" (pads k/2, \p stride),
/// weights drawn in [lo, hi) from seeds \p seed and seed + 1. Returns the depthwise conv's output.
std::string expand_relu_depthwise(loom::testing::GraphBuilder &b, const std::string &x, int64_t cin, int64_t c, int64_t hw, int64_t k,
                                  int64_t stride, uint64_t seed, double lo = -1, double hi = 1) {
    const int64_t out = (hw + 2 * (k / 2) - k) / stride + 1;
    std::string e = b.node("Conv", {x, b.random_constant("ex", {c, cin, 1, 1}, seed, lo, hi)}, {1, c, hw, hw},
                           {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
    std::string r = b.node("Relu", {e}, {1, c, hw, hw}, {}, DType::F32, "expand_relu");
    return b.node("Conv", {r, b.random_constant("w", {c, 1, k, k}, seed + 1, lo, hi)}, {1, c, out, out},
                  {{"kernel_shape", std::vector<int64_t>{k, k}},
                   {"pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2}},
                   {"strides", std::vector<int64_t>{stride, stride}},
                   {"group", c}},
                  DType::F32, "dw");
}

Graph fixture(const std::string &name) {
    Graph g = import_onnx(loom::testing::data_path(name + ".onnx"));
    prepare_graph(g);
    return g;
}

/// Auto-schedules \p g (for \p machine, default host_machine()), JIT-runs it on random inputs and
/// compares every output with the reference.
void check_auto(const Graph &g, const std::string &what, double rel = 1e-5, const MachineModel *machine = nullptr) {
    LoweredPipeline lp = lower_graph(g);
    Schedule s = auto_schedule(lp, host_target(), machine ? *machine : host_machine());
    SCOPED_TRACE(what + " schedule:\n" + print_schedule(s));
    std::map<std::string, Tensor> outs;
    auto in = random_inputs(g, 7);
    try {
        apply_schedule(s, lp, host_target());
        // Halide's warnings (a stage left unscheduled beside scheduled ones) reach std::cerr.
        std::ostringstream warnings;
        std::streambuf *saved = std::cerr.rdbuf(warnings.rdbuf());
        std::unique_ptr<JitModel> m;
        try {
            m = std::make_unique<JitModel>(std::move(lp));
        } catch (...) {
            std::cerr.rdbuf(saved);
            throw;
        }
        std::cerr.rdbuf(saved);
        EXPECT_EQ(warnings.str(), "") << what << ": Halide warned while compiling the auto schedule";
        outs = m->run(in);
    } catch (const std::exception &e) {
        FAIL() << what << ": " << e.what() << "\nschedule:\n" << print_schedule(s);
    }
    auto ref = run_reference(g, in);
    ASSERT_EQ(outs.size(), ref.size());
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, rel)) << what << " output " << name;
}

/// check_auto on the host's plan and, where the host's vectors are wider, on the AVX2 preset's plan
/// too (AVX2 code runs on an AVX-512 host), so that both x86 levels' schedules are run.
void check_auto_with_avx2(const Graph &g, const std::string &what) {
    check_auto(g, what);
    const MachineModel avx2 = machines::avx2_2core().model;
    if (host_machine().vector_bytes != avx2.vector_bytes) check_auto(g, what + ", 8-lane vectors", 1e-5, &avx2);
}

// \p g prepared, its plans on both x86 levels apply to the lowered pipeline, and check_auto_with_avx2.
void plans_apply_and_match(Graph &g, const std::string &what) {
    prepare_graph(g);
    for (const FixedMachine &fm : both_levels()) {
        LoweredPipeline lp = lower_graph(g);
        AutoScheduleResult res = plan_on(lp, fm);
        EXPECT_NO_THROW(apply_schedule(res.schedule, lp, host_target())) << fm.name << "\n" << print_schedule(res.schedule);
    }
    check_auto_with_avx2(g, what);
}

TEST(Autoschedule, FixturesMatchReference) {
    for (const char *name : {"sigmoid_affine", "sum_prologue", "softmax_rows", "layernorm_rows", "mlp",
                             "gelu_mlp", "cnn", "inverted_residual", "transformer"})
        check_auto(fixture(name), name);
}

using Builder = loom::testing::GraphBuilder;

TEST(Autoschedule, OddSizesAreCorrect) {
    // Sizes that divide nothing: every tail strategy the emitters pick must stay in bounds.
    Builder b;
    std::string x = b.input("x", {37, 45});
    std::string y = b.input("y", {45, 29});
    b.out("Relu", {b.node("MatMul", {x, y}, {37, 29})}, {37, 29});  // j-contiguous GEMM
    b.out("MatMul", {x, y}, {37, 29});                              // no epilogue
    std::string w = b.random_constant("w3", {29, 45}, 3);
    b.out("Gemm", {x, w}, {37, 29}, {{"transB", int64_t(1)}});           // dot-product GEMM
    std::string z = b.input("z", {33, 133});
    b.out("Softmax", {z}, {33, 133}, {{"axis", int64_t(1)}});
    b.out("ReduceSum", {z}, {}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t(0)}});
    b.out("ReduceSum", {z}, {133}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}});
    // Row sums big enough to run in parallel tasks of several rows, the row count no multiple of
    // the task (1001 = 31 * 32 + 9), with and without the reduced dim kept.
    std::string q = b.input("q", {1001, 1024});
    b.out("ReduceSum", {q}, {1001}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
    b.out("ReduceSum", {q}, {1001, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
    std::string t = b.input("t", {2, 3, 11, 13});
    std::string k = b.random_constant("w5", {4, 3, 3, 3}, 5);
    b.out("Relu", {b.node("Conv", {t, k}, {2, 4, 9, 11}, {{"kernel_shape", std::vector<int64_t>{3, 3}}})},
           {2, 4, 9, 11});
    prepare_graph(b.g);
    check_auto(b.g, "odd sizes");
}

TEST(Autoschedule, BigRowsAndGemmTilesAreCorrect) {
    Builder b;
    std::string x = b.input("x", {64, 1024});
    b.out("Softmax", {x}, {64, 1024}, {{"axis", int64_t(1)}});
    b.out("ReduceSum", {x}, {1}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t(0)}});
    std::string a = b.input("a", {96, 256});
    std::string w = b.random_constant("w9", {256, 160}, 9);
    std::string bias = b.random_constant("w10", {160}, 10);
    b.out("Relu", {b.node("Add", {b.node("MatMul", {a, w}, {96, 160}), bias}, {96, 160})}, {96, 160});
    b.out("MatMul", {a, w}, {96, 160});  // no epilogue
    prepare_graph(b.g);
    // K = 256: both micro-kernels unroll four k steps (odd K, in OddSizesAreCorrect, does not).
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        EXPECT_NE(text.find(".unroll(kii)"), std::string::npos) << fm.name << "\n" << text;
        EXPECT_NE(text.find(".unroll(kvi)"), std::string::npos) << fm.name << "\n" << text;
    }
    check_auto(b.g, "big rows");
}

// A one-row GEMM under an epilogue (a batch-1 Linear + ReLU) keeps k whole in its tile: no other
// row would reuse a chunk of B from L1, and chunks would cut B's panels into short streams.
TEST(Autoschedule, OneRowGemmUnderAnEpilogueKeepsKWhole) {
    Builder b;
    std::string a = b.input("a", {1, 1024});
    b.out("Relu", {b.node("MatMul", {a, b.random_constant("w", {1024, 512}, 13)}, {1, 512})}, {1, 512});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        EXPECT_NE(text.find("compute_at(relu"), std::string::npos) << fm.name << "\n" << text;
        ASSERT_EQ(r.tiling.size(), 1u) << tilings(r);  // one kernel: the GEMM in its epilogue's tiles
        KernelTiling t = r.tiling.begin()->second;
        EXPECT_EQ(t.path, "gemm.cache_blocked") << fm.name << "\n" << tilings(r);
        EXPECT_EQ(t.path.rfind("gemm.", 0), 0u) << fm.name << "\n" << tilings(r);
        EXPECT_EQ(t.k_chunk, 0) << fm.name << "\n" << tilings(r);  // k whole
        EXPECT_EQ(text.find("split(k, ko, ki"), std::string::npos) << fm.name << "\n" << text;
    }
    check_auto(b.g, "one-row gemm + relu");
}

// A GEMM with no epilogue and a short k (Q Kᵀ of attention heads, k = 32: its A and B strips fit in
// L1) is computed per micro-kernel tile of a wrapper, the graph output's wrapper realized in its
// place: the tile's initial value, k loop and store stay in registers. A dense B takes 4 rows x 4
// vectors; a B gathered through an inlined transpose keeps 8 rows x 2 vectors. A long k (512)
// keeps the root GEMM and its column panels.
TEST(Autoschedule, ShortKGemmIsComputedPerTileOfAWrapper) {
    Builder b;
    std::string q = b.input("q", {12, 64, 32});
    b.out("MatMul", {q, b.input("kt", {12, 32, 64})}, {12, 64, 64}, {}, DType::F32, "qk");
    std::string kt = b.node("Transpose", {b.input("k", {12, 64, 32})}, {12, 32, 64},
                            {{"perm", std::vector<int64_t>{0, 2, 1}}});
    b.out("MatMul", {q, kt}, {12, 64, 64}, {}, DType::F32, "qk_t");
    // Attention x V: k = 128, its 4x64 strips 34 KiB (up to 3/4 of L1).
    b.out("MatMul", {b.input("p", {12, 64, 128}), b.input("v", {12, 128, 64})}, {12, 64, 64}, {}, DType::F32, "av");
    std::string a = b.input("a", {64, 512});
    b.out("MatMul", {a, b.random_constant("w", {512, 64}, 12)}, {64, 64}, {}, DType::F32, "long_k");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text);
        EXPECT_TRUE(has_call(r.schedule, "qk", -1, {"in", {}, "qk_out"}));
        EXPECT_TRUE(has_call(r.schedule, "qk", -1, {"compute_at", {"qk_out", "jo"}}));
        EXPECT_TRUE(has_call(r.schedule, "qk_t", -1, {"in", {}, "qk_t_out"}));
        EXPECT_EQ(calls_named(r.schedule, "long_k", -1, "in"), 0u);
        EXPECT_EQ(r.tiling_of("long_k").path, "gemm.root_tiles") << tilings(r);  // at root, in column panels
        // The micro-kernels: on AVX-512 (32 registers) 4 rows x 4 vectors for a dense B, 8 rows x 2
        // vectors for a gathered one; on AVX2 (16 registers) 6 rows x 2 vectors for both.
        const bool avx512 = fm.name == "avx512_2core";
        SCOPED_TRACE(tilings(r));
        const int dense_m = avx512 ? 4 : 6, dense_n = avx512 ? 64 : 16, gathered_m = avx512 ? 8 : 6,
                  gathered_n = avx512 ? 32 : 16;
        for (const char *f : {"qk", "qk_t", "av"}) {
            KernelTiling t = r.tiling_of(f);
            EXPECT_EQ(t.path.rfind("gemm.", 0), 0u) << f;
            EXPECT_EQ(t.tile_m, std::string(f) == "qk_t" ? gathered_m : dense_m) << f;
            EXPECT_EQ(t.tile_n, std::string(f) == "qk_t" ? gathered_n : dense_n) << f;
            EXPECT_EQ(t.vector_lanes, avx512 ? 16 : 8) << f;
        }
    }
    check_auto(b.g, "short-k gemm");
}

// A GEMM with no epilogue whose columns no micro-kernel divides (a classifier's 200 columns on
// AVX-512; 196 on AVX2, not whole 8-lane vectors) and whose k is too long for its strips to stay
// in L1 (k = 256 on AVX-512; k = 768 on AVX2, where 6-row strips of 256 would fit) is blocked as
// under an epilogue, per tile of a wrapper whose tiles shift inwards, instead of one guarded
// vector per step at root (4.7x slower on 256x768 -> 1000). Both match the reference on this host.
TEST(Autoschedule, RaggedGemmIsTiledThroughAWrapper) {
    struct Case {
        FixedMachine fm;
        int64_t k, cols;
    };
    for (const Case &c : {Case{machines::avx512_2core(), 256, 200}, Case{machines::avx2_2core(), 768, 196}}) {
        const FixedMachine &fm = c.fm;
        const int64_t cols = c.cols;
        Builder b;
        std::string a = b.input("a", {96, c.k});
        b.out("MatMul", {a, b.random_constant("w", {c.k, cols}, 14)}, {96, cols}, {}, DType::F32, "head");
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        AutoScheduleResult r = plan_on(lp, fm);
        const Schedule &s = r.schedule;
        std::string text = print_schedule(s);
        SCOPED_TRACE(str_cat(fm.name, ", ", cols, " columns\n", text, tilings(r)));
        EXPECT_TRUE(has_call(s, "head", -1, {"in", {}, "head_out"}));
        EXPECT_TRUE(r.tiling_of("head").wrapper);
        EXPECT_NE(r.tiling_of("head").path, "gemm.root_ragged");
        EXPECT_EQ(text.find("GuardWithIf)\n    .split(i"), std::string::npos);  // not the ragged root path
        check_auto(b.g, str_cat("ragged gemm, ", cols, " columns"));
    }
}

// A GEMM whose columns do not fill one native vector (a classifier's 10 outputs on AVX-512, 16
// lanes) takes a micro-kernel of half vectors (8 lanes) with a guarded tail, as on AVX2; it fell to
// the generic schedule, whose update loaded and stored one accumulator vector per k step
// (bench/DECISIONS.md#d87-narrow-gemm-half-vectors). Columns under 8 keep the generic schedule.
TEST(Autoschedule, NarrowGemmTakesHalfVectors) {
    Builder b;
    std::string a = b.input("a", {64, 512});
    b.out("MatMul", {a, b.random_constant("w", {512, 10}, 21)}, {64, 10}, {}, DType::F32, "logits");
    b.out("MatMul", {a, b.random_constant("w4", {512, 4}, 22)}, {64, 4}, {}, DType::F32, "four");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + print_schedule(r.schedule) + tilings(r));
        EXPECT_NE(r.tiling_of("logits").path, "gemm.generic");
        EXPECT_EQ(r.tiling_of("logits").vector_lanes, 8);
        EXPECT_EQ(r.tiling_of("four").path, "gemm.generic");
    }
    check_auto(b.g, "narrow gemm");
}

// A Concat along the inner dim (a Split's gradient: dq, dk, dv side by side) read by two consumers
// vectorized along that dim is materialized, each input copied with plain vectors; inlined, every
// vector of its readers was a select over one gather per input
// (bench/DECISIONS.md#d94-inner-concat-materialized). A concat along an outer dim is still inlined.
TEST(Autoschedule, InnerConcatIsMaterialized) {
    Builder b;
    std::vector<std::string> parts, rows;
    for (int k = 0; k < 3; k++) {
        parts.push_back(b.node("Relu", {b.input("x" + std::to_string(k), {64, 128})}, {64, 128}, {}, DType::F32,
                               "part" + std::to_string(k)));
        rows.push_back(b.node("Relu", {b.input("r" + std::to_string(k), {64, 128})}, {64, 128}, {}, DType::F32,
                              "row" + std::to_string(k)));
    }
    std::string cat = b.node("Concat", parts, {64, 384}, {{"axis", int64_t(1)}}, DType::F32, "cat");
    b.out("ReduceSum", {cat}, {384}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}, DType::F32, "bias_grad");
    b.out("Neg", {cat}, {64, 384}, {}, DType::F32, "neg");
    std::string stacked = b.node("Concat", rows, {192, 128}, {{"axis", int64_t(0)}}, DType::F32, "stacked");
    b.out("Neg", {stacked}, {192, 128}, {}, DType::F32, "neg_rows");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + print_schedule(r.schedule));
        EXPECT_TRUE(has_call(r.schedule, "cat", -1, {"compute_root", {}}));
        EXPECT_EQ(calls_named(r.schedule, "cat", -1, "unroll"), 1u);  // one plain copy per input
        EXPECT_TRUE(has_call(r.schedule, "stacked", -1, {"compute_inline", {}}));
    }
    check_auto(b.g, "inner concat");
}

// A Linear whose weight is a graph input stored [N, K] (a training step's parameter: no blocked
// copy as for a constant) has no vectorizable root tile; with a k too long for one tile per
// micro-kernel it is still tiled through a wrapper whose micro-kernel gathers B, not left to the
// generic (scalar) schedule (bench/DECISIONS.md#d98-gemm-of-a-parameter-weight). It is correct.
//
// A training step reads such a weight through a Transpose (graph/passes.h
// transpose_gemm_value_weights): the transpose is then materialized, staged through a tile of
// dense loads, and the GEMM reads B along its rows with the plain micro-kernel
// (bench/DECISIONS.md#d90-transposed-gemm-operand-materialized). Both correct.
TEST(Autoschedule, GemmOfAnInputWeightIsTiledThroughAWrapper) {
    for (bool transposed : {false, true})
        for (const FixedMachine &fm : both_levels()) {
            Builder b;
            std::string a = b.input("a", {64, 512}), w = b.input("w", {256, 512});
            b.out("Gemm", {a, w}, {64, 256}, {{"transB", int64_t(1)}}, DType::F32, "fc");
            prepare_graph(b.g);
            if (transposed) ASSERT_EQ(transpose_gemm_value_weights(b.g), 1);
            LoweredPipeline lp = lower_graph(b.g);
            AutoScheduleResult r = plan_on(lp, fm);
            std::string text = print_schedule(r.schedule);
            SCOPED_TRACE(str_cat(fm.name, transposed ? " transposed\n" : "\n", text, tilings(r)));
            EXPECT_NE(r.tiling_of("fc").path, "gemm.generic");
            if (!transposed) {
                EXPECT_TRUE(has_call(r.schedule, "fc", -1, {"in", {}, "fc_out"}));
                EXPECT_TRUE(r.tiling_of("fc").wrapper);
            } else {
                const FuncDecision *d = r.plan.decision("fc_weight_transpose");
                ASSERT_NE(d, nullptr);
                EXPECT_EQ(d->placement, Placement::Root) << d->why;
                EXPECT_TRUE(has_call(r.schedule, "w", -1, {"in", {"fc_weight_transpose"}, "w_tile"}));
                EXPECT_GT(r.tiling_of("fc").tile_n, r.tiling_of("fc").vector_lanes);  // two vectors: no gathers
            }
            check_auto(b.g, transposed ? "gemm of a transposed input weight" : "gemm of an input weight");
        }
}

// A batched Linear's weight gradient as autodiff emits it: X [4, 16, 32] and dY [4, 16, 24]
// reshaped to their 64 rows, dW = X2^T dY2. Each Reshape keeps its source's rows, and is read only
// as a GEMM operand (X2 through the inlined transpose as A, dY2 as B): both are inlined, so the
// GEMM reads the rows in place instead of a stored copy of each
// (bench/DECISIONS.md#d141-row-reshapes-of-gemm-operands-inlined). A Reshape that merges the inner
// dims (a Flatten) is not such a reshape. Correct.
TEST(Autoschedule, RowReshapesOfGemmOperandsAreInlined) {
    for (const FixedMachine &fm : both_levels()) {
        Builder b;
        std::string x = b.node("Tanh", {b.input("x", {4, 16, 32})}, {4, 16, 32}, {}, DType::F32, "act");
        std::string g = b.node("Relu", {b.input("g", {4, 16, 24})}, {4, 16, 24}, {}, DType::F32, "grad_act");
        std::string x2 = b.node("Reshape", {x}, {64, 32}, {{"shape", std::vector<int64_t>{64, 32}}}, DType::F32, "x_rows");
        std::string g2 = b.node("Reshape", {g}, {64, 24}, {{"shape", std::vector<int64_t>{64, 24}}}, DType::F32, "g_rows");
        std::string xt = b.node("Transpose", {x2}, {32, 64}, {{"perm", std::vector<int64_t>{1, 0}}}, DType::F32, "x_t");
        b.out("MatMul", {xt, g2}, {32, 24}, {}, DType::F32, "dw");
        std::string flat = b.node("Reshape", {g}, {4, 384}, {{"shape", std::vector<int64_t>{4, 384}}}, DType::F32, "g_flat");
        b.out("MatMul", {flat, b.input("w", {384, 8})}, {4, 8}, {}, DType::F32, "head");
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(str_cat(fm.name, "\n", print_schedule(r.schedule)));
        for (std::string f : {"x_rows", "g_rows"}) {
            const FuncDecision *d = r.plan.decision(f);
            ASSERT_NE(d, nullptr) << f;
            EXPECT_EQ(d->placement, Placement::Inline) << f << ": " << d->why;
            EXPECT_NE(d->why.find("a reshape of whole rows read as an operand of a GEMM"), std::string::npos) << d->why;
        }
        const FuncDecision *d = r.plan.decision("g_flat");
        if (d) EXPECT_EQ(d->why.find("a reshape of whole rows"), std::string::npos) << d->why;
        check_auto(b.g, "row reshapes of GEMM operands");
    }
}

// A one-row GEMM without epilogue (a batch-1 Linear's matrix-vector product) has one row tile:
// its column panels (or column tiles) are the parallel loop, not the rows. It is correct.
TEST(Autoschedule, OneRowGemmIsParallelOverColumns) {
    Builder b;
    std::string a = b.input("a", {1, 512});
    std::string w = b.random_constant("w", {512, 2048}, 11);
    b.out("MatMul", {a, w}, {1, 2048});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        EXPECT_TRUE(text.find(".parallel(jb)") != std::string::npos || text.find(".parallel(jo)") != std::string::npos)
            << fm.name << "\n" << text;
        EXPECT_EQ(text.find(".parallel(io)"), std::string::npos) << fm.name << "\n" << text;
    }
    check_auto(b.g, "one-row gemm");
}

// A classifier at batch 1 (Gemm 1x512 -> 1000): its 2 MB of weights count in the kernel's
// traffic, so it is not taken for a few microseconds of work and run on one core. With one row
// tile, each core sums the products of its own block of B's rows (rfactor over k: 256 rows each on
// two cores) and the partial rows are added; on one core k stays outside the column vectors,
// which stream every row of B in order. Both are correct.
TEST(Autoschedule, RaggedOneRowGemmCountsItsWeightsAndSplitsRowsOfBOverTheCores) {
    Builder b;
    std::string a = b.input("a", {1, 512});
    std::string w = b.random_constant("w", {1000, 512}, 13), bias = b.random_constant("bias", {1000}, 14);
    b.out("Gemm", {a, w, bias}, {1, 1000}, {{"transB", int64_t(1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text);
        ASSERT_EQ(r.plan.kernels.size(), 1u);
        EXPECT_GE(r.plan.kernels[0].bytes_read, 1000.0 * 512 * 4);
        EXPECT_FALSE(r.tiling_of(r.plan.kernels[0].root).serial_kernel) << tilings(r);
        EXPECT_NE(text.find(".split(k, ko, ki, 256).rfactor(ko, t) as "), std::string::npos);
        EXPECT_NE(text.find(".reorder(ji, jo, ki, i, t)"), std::string::npos);
        EXPECT_NE(text.find(".parallel(t)"), std::string::npos);
        std::string one_core = text_on(lp, with(fm, {"cores=1"}));
        EXPECT_EQ(one_core.find("rfactor"), std::string::npos) << one_core;
        EXPECT_NE(one_core.find(".reorder(ji, jo, k, i, jt)"), std::string::npos) << one_core;
    }
    MachineModel two = host_machine(), one = host_machine();
    two.cores = 2;
    one.cores = 1;
    check_auto(b.g, "ragged one-row gemm, rows of B over 2 cores", 1e-5, &two);
    check_auto(b.g, "ragged one-row gemm, 1 core", 1e-5, &one);
}

// A Transpose whose input rows are long, moving more than a quarter of the LLC (256 KiB here),
// copies tiles of its input first (`x.in(out)`, dense loads) and gathers from them, with guarded
// tails on both tile dims; a permutation of short rows (NCHW -> NHWC of 12-wide rows) keeps the
// plain vectorized loop, and so does the long one beside a 32 MiB LLC. All match the reference.
TEST(Autoschedule, TransposeOfLongRowsIsStagedByTiles) {
    for (bool long_rows : {true, false}) {
        Builder b;
        Shape in = long_rows ? Shape{264, 300} : Shape{2, 16, 8, 12};
        Shape out = long_rows ? Shape{300, 264} : Shape{2, 8, 12, 16};
        std::vector<int64_t> perm = long_rows ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 2, 3, 1};
        std::string x = b.input("x", in);
        b.out("Transpose", {x}, out, {{"perm", perm}});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            std::string text = text_on(lp, with(fm, {"llc_bytes=256K"}));
            SCOPED_TRACE(fm.name + "\n" + text);
            EXPECT_EQ(text.find("x.in(") != std::string::npos, long_rows);
            if (long_rows) {
                EXPECT_NE(text.find(", 128, TailStrategy::GuardWithIf)"), std::string::npos);
                EXPECT_NE(text.find(".compute_at("), std::string::npos);
                std::string in_llc = text_on(lp, fm);
                EXPECT_EQ(in_llc.find("x.in("), std::string::npos) << in_llc;
            }
        }
        MachineModel small_llc = host_machine();
        small_llc.llc_bytes = 256 << 10;
        check_auto(b.g, long_rows ? "transpose of long rows" : "permute of short rows", 1e-5, &small_llc);
    }
}

// A max down the rows of a matrix (per column) walks the rows in strips of several vectors, one
// register accumulator each, unrolled; a batched GEMM with batches enough for the cores runs the
// batch var in parallel. Both match the reference.
TEST(Autoschedule, ColumnReductionStripsAndBatchedGemmParallelOverBatches) {
    Builder b;
    std::string x = b.input("x", {512, 2048});
    b.out("ReduceMax", {x}, {2048}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}});
    std::string q = b.input("q", {16, 128, 64}), k = b.input("k", {16, 64, 128});
    b.out("MatMul", {q, k}, {16, 128, 128});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + text);
        EXPECT_NE(text.find(str_cat(".split(ii, iu, iv, ", lanes(fm), ")")), std::string::npos);
        EXPECT_NE(text.find(".unroll(iu)"), std::string::npos);
        EXPECT_NE(text.find(".parallel(b);"), std::string::npos);
    }
    check_auto(b.g, "column max and batched gemm");
}

// A depthwise conv that is a graph output computes its padded input per channel block, where its
// update runs in parallel, not in a pass of its own, its rows rounded up to whole tiles; it
// matches the reference.
TEST(Autoschedule, DepthwiseOutputConvPadsPerChannelBlock) {
    Builder b;
    std::string x = b.input("x", {2, 32, 20, 20});
    std::string w = b.random_constant("wdw", {32, 1, 3, 3}, 12);
    b.out("Conv", {x, w}, {2, 32, 20, 20},
          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
           {"group", int64_t(32)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    const std::string conv = lp.output_funcs.at(0);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        const Schedule &s = r.schedule;
        std::string text = print_schedule(s);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
        EXPECT_EQ(r.tiling_of(conv).pad_per, "channel block");
        EXPECT_EQ(text.find("_pad.compute_root()"), std::string::npos);
        // Computed per row of its wrapper, realized in the output's place (no pass of initial values).
        EXPECT_TRUE(has_call(s, conv, -1, {"in", {}, conv + "_out"}));
        EXPECT_TRUE(has_call(s, conv, -1, {"compute_at", {conv + "_out", "h"}}));
        // Its 20-wide rows are tiles of 16 rounded up (a row buffer of its own; the pad clamps reads).
        EXPECT_EQ(r.tiling_of(conv).path, "conv.depthwise_output");
        EXPECT_TRUE(r.tiling_of(conv).round_up);
        EXPECT_EQ(r.tiling_of(conv).tile_w, 16);
        EXPECT_NE(text.find(".split(w, wo, wi, 16, TailStrategy::RoundUp)"), std::string::npos);
    }
    check_auto(b.g, "depthwise output conv");
}

// A residual block's tail: its last 1x1 conv and the stride-2 downsample conv of the block's input
// both computed per tile of the add + ReLU epilogue. Every conv of the kernel gets a loop nest
// there; the one left unscheduled ran as Halide's default (per point of its consumer, scalar) and
// took 59% of ResNet-50. Channel counts a multiple of the weight block and not (24: other paths).
TEST(Autoschedule, EveryConvOfAnEpilogueIsComputedPerTile) {
    for (int64_t cout : {128, 24}) {
        Builder b;
        std::string a = b.input("a", {1, 64, 7, 7});
        std::string x = b.input("x", {1, 64, 14, 14});
        std::string w1 = b.random_constant("w1", {cout, 64, 1, 1}, 21);
        std::string w2 = b.random_constant("w2", {cout, 64, 1, 1}, 22);
        std::string last = b.node("Conv", {a, w1}, {1, cout, 7, 7}, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
        std::string down = b.node("Conv", {x, w2}, {1, cout, 7, 7},
                                  {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{2, 2}}});
        b.out("Relu", {b.node("Add", {last, down}, {1, cout, 7, 7})}, {1, cout, 7, 7});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        std::vector<std::string> convs;
        for (const auto &f : lp.funcs)
            if (f.op == "Conv" && !f.update_rvars.empty()) convs.push_back(f.name);
        ASSERT_EQ(convs.size(), 2u);
        const std::string root = lp.output_funcs.at(0);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult r = plan_on(lp, fm);
            std::string text = print_schedule(r.schedule);
            SCOPED_TRACE(str_cat(fm.name, ", ", cout, " channels\n", text, tilings(r)));
            for (const std::string &c : convs) {
                EXPECT_EQ(calls_named(r.schedule, c, -1, "compute_at"), 1u) << c;
                EXPECT_NE(text.find(c + ".compute_at(" + root + ","), std::string::npos) << c;
                EXPECT_EQ(calls_named(r.schedule, c, 0, "vectorize"), 1u) << c << ": its update is vectorized";
            }
        }
        check_auto(b.g, str_cat("residual tail, ", cout, " channels"));
    }
}

// Output channels a multiple of 8 but not of 16 (120 and 40, as MobileNetV3 and EfficientNet have
// them): lowering blocks the weights by 24 or 8, and on AVX2 the conv is channel-tiled by whole
// blocks, no channel computed past the last; on AVX-512 a vector would straddle two blocks, so not.
// Here the conv feeds a hard-swish that the depthwise conv's padded input takes in, so the conv is
// a kernel of its own (as in MobileNetV3).
TEST(Autoschedule, ChannelsNotAMultipleOf16TileInBlocksOf24Or8) {
    for (int64_t C : {120, 40}) {
        Builder b;
        std::string x = b.input("x", {1, 64, 28, 28});
        std::string conv = b.node("Conv", {x, b.random_constant("w", {C, 64, 1, 1}, 61), b.random_constant("bias", {C}, 62)},
                                  {1, C, 28, 28}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
        std::string hs = b.node("HardSigmoid", {conv}, {1, C, 28, 28}, {{"alpha", 1.0f / 6}, {"beta", 0.5f}});
        std::string act = b.node("Mul", {conv, hs}, {1, C, 28, 28});
        b.out("Conv", {act, b.random_constant("wdw", {C, 1, 3, 3}, 63)}, {1, C, 28, 28},
              {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
               {"group", C}});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult r = plan_on(lp, fm);
            std::string text = print_schedule(r.schedule);
            SCOPED_TRACE(fm.name + " C=" + std::to_string(C) + "\n" + text + tilings(r));
            KernelTiling t = r.tiling_of("expand");
            if (fm.name == "avx2_2core") {
                EXPECT_EQ(t.path, "conv.channel_tile");
                EXPECT_EQ(t.tile_channels, C == 120 ? 24 : 8);
                const std::string csplit = str_cat(".split(c, co, ci, ", C == 120 ? 24 : 8, ")");
                EXPECT_NE(text.find(csplit), std::string::npos) << "whole blocks, no padding channels: " << csplit;
            } else {
                EXPECT_NE(t.path, "conv.channel_tile");  // a 16-lane vector spans two blocks
            }
        }
        check_auto_with_avx2(b.g, "channels in blocks of 24 or 8");
    }
}

// A learned 2x upsampling (ConvTranspose, kernel = stride = 2) reduces over input channels only
// (one input channel: none), and the cost model's schedules of it, with a ReLU epilogue, a 2x3
// variant and a one-channel one, match the reference on both x86 levels.
TEST(Autoschedule, UpsamplingConvTransposeMatchesTheReference) {
    Builder b;
    std::string x = b.input("x", {1, 24, 20, 20});
    std::string up = b.node("ConvTranspose", {x, b.random_constant("w", {24, 24, 2, 2}, 81), b.random_constant("bias", {24}, 82)},
                            {1, 24, 40, 40}, {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
                            DType::F32, "up");
    std::string r = b.node("Relu", {up}, {1, 24, 40, 40});
    std::string up23 = b.node("ConvTranspose", {r, b.random_constant("w2", {24, 1, 2, 3}, 83)}, {1, 1, 80, 120},
                              {{"kernel_shape", std::vector<int64_t>{2, 3}}, {"strides", std::vector<int64_t>{2, 3}}},
                              DType::F32, "up23");
    // One input channel (a pooling gradient's scatter): no reduction at all.
    b.out("ConvTranspose", {up23, b.random_constant("w3", {1, 1, 2, 2}, 84)}, {1, 1, 160, 240},
          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}, DType::F32, "up1");
    plans_apply_and_match(b.g, "upsampling ConvTranspose");
}

// The plan of \p g on fixed machine \p fm with channels-innermost layouts on or off
// (ScheduleKnobs::stage_conv_inputs; off is --nchw-conv-inputs), its schedule's text, and the
// lowered pipeline it applies to.
struct LayoutPlan {
    LoweredPipeline lp;
    AutoScheduleResult res;
    std::string text;
};
LayoutPlan plan_with_layouts(const Graph &g, const FixedMachine &fm, bool on) {
    LayoutPlan out{lower_graph(g), {}, {}};
    ScheduleKnobs knobs;
    knobs.stage_conv_inputs = on;
    out.res = plan_on(out.lp, fm, knobs);
    out.text = print_schedule(out.res.schedule);
    return out;
}

// A 1x1 conv over many input channels at a small image (ResNet-50's 7x7 bottleneck) reads its input
// from a channels-innermost copy (`in`, stored (c, w, h, n)) on both x86 levels where the producer
// is stored NCHW for another reader (here the graph output); one over 64 channels at 56x56, or to
// 64 channels (few FMAs per copied input), reads the NCHW producer; the knob (--nchw-conv-inputs)
// turns the copy off. Every schedule matches the reference.
TEST(Autoschedule, OneByOneConvsOverManyChannelsReadAChannelsInnermostCopy) {
    Builder b;
    std::string x = b.input("x", {1, 1024, 7, 7});
    std::string stem = b.node("Relu", {x}, {1, 1024, 7, 7}, {}, DType::F32, "stem");
    b.output(stem);
    std::string c1 = b.node("Conv", {stem, b.random_constant("w1", {256, 1024, 1, 1}, 95), b.random_constant("b1", {256}, 96)},
                            {1, 256, 7, 7}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "bottleneck");
    b.out("Relu", {c1}, {1, 256, 7, 7});
    std::string y = b.input("y", {1, 64, 56, 56});
    std::string ry = b.node("Relu", {y}, {1, 64, 56, 56}, {}, DType::F32, "wide");
    std::string up = b.node("Conv", {ry, b.random_constant("w2", {256, 64, 1, 1}, 97)}, {1, 256, 56, 56},
                            {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
    std::string ru = b.node("Relu", {up}, {1, 256, 56, 56});
    b.out("Conv", {ru, b.random_constant("w3", {64, 256, 1, 1}, 98)}, {1, 64, 56, 56},
          {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "reduce");
    prepare_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        for (bool stage : {true, false}) {
            LayoutPlan p = plan_with_layouts(b.g, fm, stage);
            const LoweredPipeline &lp = p.lp;
            const std::string &text = p.text;
            const Schedule &s = p.res.schedule;
            SCOPED_TRACE(fm.name + (stage ? " staged" : " unstaged") + "\n" + text);
            EXPECT_EQ(text.find("stem.in(bottleneck) as bottleneck_in;") != std::string::npos, stage);
            if (stage) EXPECT_NE(text.find("bottleneck_in.compute_root()\n    .reorder_storage(c, w, h, n)"), std::string::npos);
            EXPECT_EQ(text.find(".in(expand)"), std::string::npos) << "64 input channels: the tile's lines fit L1";
            EXPECT_EQ(text.find(".in(reduce)"), std::string::npos) << "64 output channels: the copy does not pay";
            EXPECT_NO_THROW(apply_schedule(s, lp, host_target()));
        }
    }
    check_auto_with_avx2(b.g, "channels-innermost 1x1 conv inputs");
}

// A pointwise kernel read only by a channel-tiled 1x1 conv over many channels (ShuffleNetV2's last
// channel shuffle before conv5, 464 -> 1024 at 7x7) stores its output channels innermost, its loops
// vectorised over channels, and the conv reads it with no copy; --nchw-conv-inputs keeps it NCHW.
// Both x86 levels' plans match the reference.
TEST(Autoschedule, PointwiseKernelsReadByOneByOneConvsStoreChannelsInnermost) {
    Builder b;
    std::string x = b.input("x", {1, 464, 7, 7});
    std::string shuffle = b.node("Relu", {x}, {1, 464, 7, 7}, {}, DType::F32, "shuffle");
    std::string c5 = b.node("Conv", {shuffle, b.random_constant("w5", {1024, 464, 1, 1}, 131, -0.1, 0.1)},
                            {1, 1024, 7, 7}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "conv5");
    b.out("Relu", {c5}, {1, 1024, 7, 7}, {}, DType::F32, "conv5_relu");
    prepare_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        for (bool on : {true, false}) {
            LayoutPlan p = plan_with_layouts(b.g, fm, on);
            const LoweredPipeline &lp = p.lp;
            const std::string &text = p.text;
            const AutoScheduleResult &res = p.res;
            SCOPED_TRACE(fm.name + (on ? "" : " --nchw-conv-inputs") + "\n" + text);
            ASSERT_EQ(res.plan.decision("shuffle")->kernel, "shuffle") << "the pointwise Func is its own kernel";
            EXPECT_EQ(text.find("\nshuffle.compute_root().reorder_storage(c, w, h, n).reorder(c, w, h, n).vectorize(c, " +
                                std::to_string(fm.model.vector_bytes / 4) + ")") != std::string::npos, on);
            EXPECT_EQ(text.find(".in(conv5)"), std::string::npos) << "no copy: the producer is stored so or the knob is off";
            EXPECT_NO_THROW(apply_schedule(res.schedule, lp, host_target()));
        }
    }
    check_auto_with_avx2(b.g, "pointwise kernel stored channels innermost");
}

// A bottleneck block at 14x14: the 3x3 conv's output and the block's output (after the residual
// Add) are read only by channel-tiled 1x1 convs and by the Add inside a channel tile, so both are
// stored channels innermost and the next 1x1 conv reads no copy; the 1x1 conv's output, read by the
// 3x3 conv's padded input a row at a time, stays NCHW, and so does the pointwise stem. A 1x1 conv's
// input channels are unrolled by four. --nchw-conv-inputs (the knob off) keeps every layout NCHW.
// Every plan matches the reference.
TEST(Autoschedule, ConvOutputsReadByOneByOneConvsAreStoredChannelsInnermost) {
    Builder b;
    const auto k1 = std::vector<int64_t>{1, 1}, k3 = std::vector<int64_t>{3, 3}, p1 = std::vector<int64_t>{1, 1, 1, 1};
    std::string x = b.input("x", {1, 512, 14, 14});
    std::string stem = b.node("Relu", {x}, {1, 512, 14, 14}, {}, DType::F32, "stem");
    std::string a = b.node("Conv", {stem, b.random_constant("wa", {64, 512, 1, 1}, 121, -0.1, 0.1), b.random_constant("ba", {64}, 122)},
                           {1, 64, 14, 14}, {{"kernel_shape", k1}}, DType::F32, "a");
    std::string ar = b.node("Relu", {a}, {1, 64, 14, 14}, {}, DType::F32, "a_relu");
    std::string c3 = b.node("Conv", {ar, b.random_constant("wb", {64, 64, 3, 3}, 123, -0.1, 0.1), b.random_constant("bb", {64}, 124)},
                            {1, 64, 14, 14}, {{"kernel_shape", k3}, {"pads", p1}}, DType::F32, "b");
    std::string br = b.node("Relu", {c3}, {1, 64, 14, 14}, {}, DType::F32, "b_relu");
    std::string c = b.node("Conv", {br, b.random_constant("wc", {512, 64, 1, 1}, 125, -0.1, 0.1)}, {1, 512, 14, 14},
                           {{"kernel_shape", k1}}, DType::F32, "c");
    std::string sum = b.node("Add", {c, stem}, {1, 512, 14, 14}, {}, DType::F32, "residual");
    std::string block = b.node("Relu", {sum}, {1, 512, 14, 14}, {}, DType::F32, "block");
    std::string next = b.node("Conv", {block, b.random_constant("wn", {256, 512, 1, 1}, 126, -0.1, 0.1)}, {1, 256, 14, 14},
                              {{"kernel_shape", k1}}, DType::F32, "next");
    b.out("Relu", {next}, {1, 256, 14, 14}, {}, DType::F32, "next_relu");
    prepare_graph(b.g);
    const std::string innermost = ".compute_root()\n    .reorder_storage(c, w, h, n)";
    for (const FixedMachine &fm : both_levels()) {
        for (bool on : {true, false}) {
            LayoutPlan p = plan_with_layouts(b.g, fm, on);
            const LoweredPipeline &lp = p.lp;
            const std::string &text = p.text;
            const Schedule &s = p.res.schedule;
            SCOPED_TRACE(fm.name + (on ? "" : " --nchw-conv-inputs") + "\n" + text);
            EXPECT_EQ(text.find("\nb_relu" + innermost) != std::string::npos, on) << "read by the 1x1 conv c only";
            EXPECT_EQ(text.find("\nblock" + innermost) != std::string::npos, on) << "read by the 1x1 conv next only";
            EXPECT_EQ(text.find("\na_relu" + innermost), std::string::npos) << "read by b's padded input";
            EXPECT_EQ(text.find("\nstem" + innermost), std::string::npos) << "a pointwise kernel";
            EXPECT_EQ(text.find(".in(next)"), std::string::npos) << "block is stored channels innermost or the knob is off";
            EXPECT_NE(text.find("next.update(0).split(r.z, rzo, rzi, 4)\n    .reorder(c, w, h, rzi, r.x, r.y, rzo)"),
                      std::string::npos);
            EXPECT_TRUE(has_call(s, "next", 0, {"unroll", {"rzi"}}));
            EXPECT_EQ(text.find("b.update(0).split(r.z"), std::string::npos) << "a 3x3 conv keeps its channel loop";
            EXPECT_NO_THROW(apply_schedule(s, lp, host_target()));
        }
        check_auto(b.g, "channels-innermost conv outputs, " + fm.name, 1e-5, &fm.model);
    }
}

// AVX2's channel tile at 7x7 is 4 (w) x 1 (rows): two rows of 2 or 3 pixels would recompute a third
// to a half of the image (ShiftInwards tiles); at 14x14 the two-row tile divides the image and
// stays; AVX-512's tile at 7x7 is one row of 7 x two channel blocks (D198). A 1x1 conv over one vector of output channels per
// block (232: not a multiple of 16) takes one whole row of 7 on AVX2, 7 accumulators, where 4 x 2
// would recompute 31%. All schedules match the reference.
TEST(Autoschedule, Avx2ChannelTilesAt7x7RecomputeLittle) {
    Builder b;
    std::string x = b.input("x", {1, 512, 7, 7});
    std::string r = b.node("Relu", {x}, {1, 512, 7, 7});
    std::string c7 = b.node("Conv", {r, b.random_constant("w7", {512, 512, 3, 3}, 101)}, {1, 512, 7, 7},
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                            DType::F32, "small");
    b.out("Relu", {c7}, {1, 512, 7, 7});
    std::string y = b.input("y", {1, 256, 14, 14});
    std::string ry = b.node("Relu", {y}, {1, 256, 14, 14});
    std::string c14 = b.node("Conv", {ry, b.random_constant("w14", {256, 256, 3, 3}, 102)}, {1, 256, 14, 14},
                             {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                             DType::F32, "mid");
    b.out("Relu", {c14}, {1, 256, 14, 14});
    std::string z = b.input("z", {1, 232, 7, 7});
    std::string rz = b.node("Relu", {z}, {1, 232, 7, 7});
    std::string c1 = b.node("Conv", {rz, b.random_constant("w1", {232, 232, 1, 1}, 103, -0.1, 0.1)}, {1, 232, 7, 7},
                            {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "narrow");
    b.out("Relu", {c1}, {1, 232, 7, 7});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult res = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + tilings(res));
        KernelTiling t7, t14;
        for (const auto &[root, t] : res.tiling)
            if (t.path == "conv.channel_tile" && res.plan.decision("narrow")->kernel != root)
                (t.tile_channels && res.plan.decision("small")->kernel == root ? t7 : t14) = t;
        if (fm.name == "avx2_2core") {
            EXPECT_EQ(std::make_pair(t7.tile_w, t7.tile_rows), std::make_pair(4, 1));
            EXPECT_EQ(std::make_pair(t14.tile_w, t14.tile_rows), std::make_pair(2, 2));
            const KernelTiling tn = res.tiling_of(res.plan.decision("narrow")->kernel);
            EXPECT_EQ(tn.path, "conv.channel_tile");
            EXPECT_EQ(std::make_tuple(tn.tile_w, tn.tile_rows, tn.tile_channels), std::make_tuple(7, 1, 8));
        } else {  // two channel blocks of one row (D198)
            EXPECT_EQ(std::make_tuple(t7.tile_w, t7.tile_rows, t7.tile_channels), std::make_tuple(7, 1, 32));
        }
    }
    check_auto_with_avx2(b.g, "7x7 channel tiles");
}

// A 1x1 conv of 64 input channels over 56-wide rows is channel-tiled on AVX2 as on AVX-512, its
// output stored channels innermost for the 1x1 conv reading it, so the tile's stores are whole
// vectors; the 256-channel conv after it stays channel-tiled. Both match the reference.
TEST(Autoschedule, ShortReductionsOverWideRowsTileChannels) {
    Builder b;
    std::string x = b.input("x", {1, 64, 56, 56});
    std::string r = b.node("Relu", {x}, {1, 64, 56, 56});
    std::string up = b.node("Conv", {r, b.random_constant("w1", {256, 64, 1, 1}, 111), b.random_constant("b1", {256}, 112)},
                            {1, 256, 56, 56}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
    std::string ru = b.node("Relu", {up}, {1, 256, 56, 56}, {}, DType::F32, "expand_relu");
    std::string down = b.node("Conv", {ru, b.random_constant("w2", {64, 256, 1, 1}, 113)}, {1, 64, 56, 56},
                              {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "reduce");
    b.out("Relu", {down}, {1, 64, 56, 56}, {}, DType::F32, "reduce_relu");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult res = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + tilings(res));
        EXPECT_EQ(res.tiling_of("expand_relu").path, "conv.channel_tile");
        EXPECT_EQ(res.tiling_of("reduce_relu").path, "conv.channel_tile");
        EXPECT_TRUE(has_call(res.schedule, "expand_relu", -1, {"reorder_storage", {"c", "w", "h", "n"}}));
        EXPECT_FALSE(has_call(res.schedule, "reduce_relu", -1, {"reorder_storage", {"c", "w", "h", "n"}}))
            << "a graph output stays NCHW";
    }
    check_auto_with_avx2(b.g, "short reductions along wide rows");
}

// A squeeze-excitation's 1x1 convs on one pixel take the channel tile: the expanding conv
// (48 -> 1152) though its reduction is shorter than the channel-tile threshold (its NCHW stores are
// channels innermost, D190), and on AVX-512 a squeezing conv to 168 channels (weights in blocks of
// 24, no whole 16-lane vector) in half vectors (D193). Both blocks match the reference.
TEST(Autoschedule, OnePixelConvsTileChannels) {
    struct Case { int64_t C, S; const char *tiled; int avx512_lanes; };
    for (const Case &k : {Case{1152, 48, "expand", 16}, Case{672, 168, "squeeze", 8}}) {
        Builder b;
        std::string x = b.input("x", {1, k.C, 7, 7});
        std::string p = b.node("GlobalAveragePool", {x}, {1, k.C, 1, 1});
        std::string sq = b.node("Conv", {p, b.random_constant("w1", {k.S, k.C, 1, 1}, 121), b.random_constant("b1", {k.S}, 122)},
                                {1, k.S, 1, 1}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "squeeze");
        std::string a = b.node("Relu", {sq}, {1, k.S, 1, 1}, {}, DType::F32, "squeeze_relu");
        std::string ex = b.node("Conv", {a, b.random_constant("w2", {k.C, k.S, 1, 1}, 123), b.random_constant("b2", {k.C}, 124)},
                                {1, k.C, 1, 1}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
        std::string s = b.node("Sigmoid", {ex}, {1, k.C, 1, 1});
        b.out("Mul", {x, s}, {1, k.C, 7, 7});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " C=" + std::to_string(k.C) + "\n" + tilings(res));
            int tiled_lanes = 0;
            for (const auto &[root, t] : res.tiling)
                if (root.find(k.tiled) != std::string::npos && t.path == "conv.channel_tile") tiled_lanes = t.vector_lanes;
            EXPECT_EQ(tiled_lanes, fm.name == "avx512_2core" ? k.avx512_lanes : 8)
                << k.tiled << " is vectorized over its output channels";
        }
        check_auto_with_avx2(b.g, "squeeze-excitation on one pixel");
    }
}

// A graph of one 1x1 conv named "pointwise" (\p cin -> \p cout channels at \p hw x \p hw, random
// weights and bias from \p seed and seed + 1) and a ReLU, its output.
static void pointwise_conv_relu(Builder &b, int64_t cin, int64_t cout, int64_t hw, uint64_t seed) {
    std::string x = b.input("x", {1, cin, hw, hw});
    std::string c = b.node("Conv", {x, b.random_constant("w", {cout, cin, 1, 1}, seed), b.random_constant("bias", {cout}, seed + 1)},
                           {1, cout, hw, hw}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "pointwise");
    b.out("Relu", {c}, {1, cout, hw, hw});
}

// ShuffleNetV2's stage 4: 1x1 convs over 232 channels (weights blocked by 8, no 16-lane vector per
// block). At 7x7 a row tile fills 7 of 16 lanes, so AVX-512 tiles the channels in 8-lane vectors;
// at 14x14 the row tile fills 14 of 16 and stays (D195). Both match the reference.
TEST(Autoschedule, NarrowRowConvsTileChannelsInHalfVectors) {
    struct Case { int64_t HW; const char *avx512_path; int avx512_lanes; };
    for (const Case &k : {Case{7, "conv.channel_tile", 8}, Case{14, "", 0}}) {
        Builder b;
        pointwise_conv_relu(b, 232, 232, k.HW, 141);
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " " + std::to_string(k.HW) + "x" + std::to_string(k.HW) + "\n" + tilings(res));
            std::string path;
            int lanes = 0;
            for (const auto &[root, t] : res.tiling)
                if (t.path.rfind("conv.", 0) == 0) path = t.path, lanes = t.vector_lanes;
            if (fm.name == "avx512_2core") {
                if (*k.avx512_path) {
                    EXPECT_EQ(path, k.avx512_path);
                    EXPECT_EQ(lanes, k.avx512_lanes);
                } else {
                    EXPECT_NE(path, "conv.channel_tile") << "14-wide rows fill a row tile's vectors";
                }
            } else {
                EXPECT_EQ(path, "conv.channel_tile");
                EXPECT_EQ(lanes, 8);
            }
        }
        check_auto_with_avx2(b.g, "a 1x1 conv over 232 channels");
    }
}

// A 3x3 conv over 64 channels, ReLU after it. With 32 registers (AVX-512), at stride 2 (each tap
// broadcasts new inputs) and at 7x7 (two rows of 7 would recompute an eighth row) its channel tile
// is one row of 7 pixels x two 16-channel blocks; at 14x14, stride 1, two rows x one block. With 16
// registers (AVX2) its 16-channel blocks in two 8-lane vectors everywhere (D198). All match the
// reference.
TEST(Autoschedule, StridedAnd7x7ConvsTakeTwoChannelBlocks) {
    struct Case { int64_t in_hw, stride, out_hw; int avx512_rows, avx512_channels; };
    for (const Case &k : {Case{28, 2, 14, 1, 32}, Case{7, 1, 7, 1, 32}, Case{14, 1, 14, 2, 16}}) {
        Builder b;
        std::string x = b.input("x", {1, 64, k.in_hw, k.in_hw});
        std::string c = b.node("Conv", {x, b.random_constant("w", {64, 64, 3, 3}, 161), b.random_constant("bias", {64}, 162)},
                               {1, 64, k.out_hw, k.out_hw},
                               {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                {"strides", std::vector<int64_t>{k.stride, k.stride}}},
                               DType::F32, "conv3x3");
        b.out("Relu", {c}, {1, 64, k.out_hw, k.out_hw});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        const std::string what = std::to_string(k.out_hw) + "x" + std::to_string(k.out_hw) + " stride " + std::to_string(k.stride);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " " + what + "\n" + tilings(res));
            const KernelTiling *t = nullptr;
            for (const auto &[root, kt] : res.tiling)
                if (kt.path == "conv.channel_tile") t = &kt;
            ASSERT_NE(t, nullptr);
            const bool avx512 = fm.name == "avx512_2core";
            EXPECT_EQ(t->tile_channels, avx512 ? k.avx512_channels : 16);
            if (avx512) {
                EXPECT_EQ(t->tile_w, 7);
                EXPECT_EQ(t->tile_rows, k.avx512_rows);
            }
        }
        check_auto_with_avx2(b.g, "a 3x3 conv at " + what);
    }
}

// A channel-tiled conv at 7x7 whose output is stored NCHW (a graph output): rows of 28 bytes, so
// tasks of rows would share every cache line of every plane between cores. With more than one core
// its tasks are channel blocks; at 28x28 (112-byte rows) they stay rows (D197). Both match the
// reference.
TEST(Autoschedule, NarrowNchwChannelTilesSplitTasksByChannels) {
    struct Case { int64_t HW; const char *tasks; };
    for (const Case &k : {Case{7, "channel_blocks"}, Case{28, "rows"}}) {
        Builder b;
        pointwise_conv_relu(b, 96, 192, k.HW, 151);
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " " + std::to_string(k.HW) + "x" + std::to_string(k.HW) + "\n" + tilings(res));
            std::string tasks;
            for (const auto &[root, t] : res.tiling)
                if (t.path == "conv.channel_tile") tasks = t.tasks;
            EXPECT_EQ(tasks, k.tasks);
        }
        check_auto_with_avx2(b.g, "a 1x1 conv stored NCHW");
    }
}

// MobileNetV3-large's second block: a stride-2 depthwise conv vectorized over channels stores its
// output NCHW for a 1x1 conv to 24 channels (no channel tile). Rounding that conv's 56-wide rows up
// to 64 would widen the depthwise output's planes to 14 KiB apart and fold its vectors' lanes into
// two L1 sets (D191): the row tail is guarded instead, and the block matches the reference.
TEST(Autoschedule, RowsReadFromChannelVectorizedNchwOutputsAreNotRoundedUp) {
    Builder b;
    std::string x = b.input("x", {1, 16, 112, 112});
    std::string c = expand_relu_depthwise(b, x, 16, 64, 112, 3, 2, 131);
    std::string h = b.node("Relu", {c}, {1, 64, 56, 56}, {}, DType::F32, "dw_relu");
    std::string pj = b.node("Conv", {h, b.random_constant("pw", {24, 64, 1, 1}, 133)}, {1, 24, 56, 56},
                            {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "project");
    std::string n = b.node("Conv", {pj, b.random_constant("nw", {72, 24, 1, 1}, 134)}, {1, 72, 56, 56},
                           {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "next");
    b.out("Relu", {n}, {1, 72, 56, 56});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    const FixedMachine fm = machines::avx512_2core();
    AutoScheduleResult res = plan_on(lp, fm);
    std::string text = print_schedule(res.schedule);
    SCOPED_TRACE(text + tilings(res));
    ASSERT_EQ(res.tiling_of("dw_relu").path, "conv.depthwise_channels");
    EXPECT_EQ(text.find("dw_relu.compute_root()\n    .reorder_storage"), std::string::npos) << "dw_relu stays NCHW";
    EXPECT_FALSE(res.tiling_of("project").round_up) << "project's 56-wide rows are not rounded up";
    check_auto_with_avx2(b.g, "a 1x1 conv reading a channel-vectorized NCHW output");
}

// A stride-2 depthwise conv vectorized over channels whose output a 1x1 conv to 24 channels reads
// NCHW. At 14x14 (56-byte rows, 6 channel blocks) two cores writing tasks of rows would share cache
// lines of every plane: with two cores its tasks are channel blocks; at 28x28 (112-byte rows) and on
// one core they stay rows (D199). All match the reference.
TEST(Autoschedule, NarrowNchwDepthwiseOutputsSplitTasksByChannels) {
    struct Case { int64_t in_hw; const char *two_core_tasks; };
    for (const Case &k : {Case{28, "channel_blocks"}, Case{56, "rows"}}) {
        Builder b;
        std::string x = b.input("x", {1, 16, k.in_hw, k.in_hw});
        const int64_t out = k.in_hw / 2;
        std::string c = expand_relu_depthwise(b, x, 16, 96, k.in_hw, 3, 2, 171);
        std::string h = b.node("Relu", {c}, {1, 96, out, out}, {}, DType::F32, "dw_relu");
        std::string pj = b.node("Conv", {h, b.random_constant("pw", {24, 96, 1, 1}, 173)}, {1, 24, out, out},
                                {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "project");
        b.out("Relu", {pj}, {1, 24, out, out});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        FixedMachine one_core = machines::avx512_2core();
        one_core.model.cores = 1;
        one_core.name = "avx512, one core";
        for (const FixedMachine &fm : {machines::avx512_2core(), one_core}) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " " + std::to_string(out) + "x" + std::to_string(out) + "\n" + tilings(res));
            ASSERT_EQ(res.tiling_of("dw_relu").path, "conv.depthwise_channels");
            EXPECT_EQ(res.tiling_of("dw_relu").tasks, fm.model.cores > 1 ? k.two_core_tasks : "rows");
        }
        check_auto_with_avx2(b.g, "a depthwise conv stored NCHW at " + std::to_string(out) + "x" + std::to_string(out));
    }
}

// A Linear with a bias over rows that fit one micro-kernel tile (a text line of 8 steps, 4 rows) and
// columns that two vectors do not divide (80, 100): Halide 14 compiled the guarded two-vector column
// tile wrong there (all NaN, or sums doubled). Such a GEMM takes one vector of columns per tile
// (D231), and every plan matches the reference, on both x86 levels.
TEST(Autoschedule, GuardedColumnTilesOverOneRowTileMatchTheReference) {
    struct Case { int64_t rows, cols; };
    for (const Case &k : {Case{8, 80}, Case{4, 100}, Case{8, 96}}) {
        Builder b;
        std::string x = b.input("x", {1, k.rows, 120});
        std::string mm = b.node("MatMul", {x, b.random_constant("w", {120, k.cols}, 181)}, {1, k.rows, k.cols}, {},
                                DType::F32, "linear");
        b.out("Add", {mm, b.random_constant("bias", {k.cols}, 182)}, {1, k.rows, k.cols});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        const std::string what = std::to_string(k.rows) + "x" + std::to_string(k.cols);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            SCOPED_TRACE(fm.name + " " + what + "\n" + tilings(res));
            const KernelTiling t = res.tiling_of(res.plan.decision("linear")->kernel);
            const int V = fm.model.vector_bytes / 4;
            EXPECT_EQ(t.tile_n, k.cols % (2 * V) == 0 ? 2 * V : V);
        }
        check_auto_with_avx2(b.g, "a Linear with a bias, " + what);
    }
}

// An inner dimension of 1 (an outer product, as a rank-1 update or an attention over one key writes
// it) is no reduction: MatMul, batched MatMul and Gemm with K = 1 are pure Funcs, and the cost
// model's schedules of them apply and match the reference on both x86 levels.
TEST(Autoschedule, OuterProductsWithInnerDimOneMatchTheReference) {
    Builder b;
    std::string a = b.input("a", {8, 1});
    std::string mm = b.node("MatMul", {a, b.random_constant("b", {1, 48}, 91)}, {8, 48}, {}, DType::F32, "outer");
    std::string gm = b.node("Gemm", {mm, b.random_constant("g", {48, 1}, 92)}, {8, 1}, {}, DType::F32, "squeeze");
    b.out("Gemm", {gm, b.random_constant("h", {1, 20}, 93), b.random_constant("c", {20}, 94)}, {8, 20},
          {{"alpha", 0.5f}}, DType::F32, "outer_bias");
    std::string q = b.input("q", {3, 7, 1});
    b.out("MatMul", {q, b.input("k", {3, 1, 5})}, {3, 7, 5}, {}, DType::F32, "batched");
    plans_apply_and_match(b.g, "outer products");
}

// A guarded row tail runs as scalar code on AVX2 and as masked vectors on AVX-512, both slower than
// computing the tile's last columns into a rounded-up row: a conv's rows wider than a vector and no
// multiple of the tile are rounded up (20 -> 24 with 8 lanes, 20 -> 32 with 16) on both.
TEST(Autoschedule, ConvRowTailsRoundUp) {
    Builder b;
    std::string x = b.input("x", {1, 20, 20, 20});
    std::map<std::string, AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                              {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    std::string c1 = b.node("Conv", {x, b.random_constant("w1", {20, 20, 3, 3}, 71)}, {1, 20, 20, 20}, attrs,
                            DType::F32, "inner");
    b.out("Conv", {c1, b.random_constant("w2", {20, 20, 3, 3}, 72)}, {1, 20, 20, 20}, attrs, DType::F32, "outer");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
        EXPECT_EQ(r.tiling_of("inner").path, "conv.root_tiles");
        EXPECT_TRUE(r.tiling_of("inner").round_up);
        EXPECT_FALSE(r.tiling_of("outer").round_up);  // a graph output keeps its exact bounds
        EXPECT_EQ(loom::testing::count_of(text, "inner.update(0).split(w, wo, wi, 16, TailStrategy::RoundUp)"), 1u);
        EXPECT_EQ(loom::testing::count_of(text, "GuardWithIf"), 1u);  // the output's tail only
    }
    check_auto_with_avx2(b.g, "conv row tails");
}

// A root conv whose channel count has few small factors (ShuffleNet's 116 = 4 x 29) takes rows
// into its tile until it holds 8 accumulators, where one row of 4 channels held 4; a height the
// rows do not divide keeps one row. The schedules are correct.
TEST(Autoschedule, RootConvTilesOfFewChannelsTakeRows) {
    Builder b;
    std::map<std::string, AttrValue> pw = {{"kernel_shape", std::vector<int64_t>{1, 1}}};
    std::map<std::string, AttrValue> dw = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                           {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                           {"group", int64_t(116)}};
    for (int64_t hw : {14, 7}) {
        const std::string s = std::to_string(hw);
        std::string x = b.input("x" + s, {1, 116, hw, hw});
        std::string c = b.node("Conv", {x, b.random_constant("w" + s, {116, 116, 1, 1}, 80 + hw)}, {1, 116, hw, hw},
                               pw, DType::F32, "pw" + s);
        b.out("Conv", {c, b.random_constant("d" + s, {116, 1, 3, 3}, 90 + hw)}, {1, 116, hw, hw}, dw, DType::F32,
              "dw" + s);
    }
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
        EXPECT_EQ(r.tiling_of("pw14").path, "conv.root_tiles");
        EXPECT_EQ(r.tiling_of("pw14").tile_rows, 2);
        EXPECT_EQ(r.tiling_of("pw7").tile_rows, 1);
        EXPECT_EQ(loom::testing::count_of(text, "x 2 (rows) x 4 (channels): 8 vector accumulators"), 1u);
        EXPECT_NE(text.find("pw14.update(0)"), std::string::npos);
        EXPECT_NE(text.find(".unroll(hi)"), std::string::npos);
    }
    check_auto_with_avx2(b.g, "root conv tiles of 116 channels");
}

// A depthwise conv with no epilogue of its own (its HardSwish read by a squeeze-excitation pool
// and scale) whose plan inlines its padded input: the input is computed per channel block of the
// conv's tiles, not inlined into every tap (a clamped index and a select per tap, a gather per
// lane). One core, so that no epilogue kernel takes the conv.
TEST(Autoschedule, InlinedPadOfARootConvIsComputedPerChannelBlock) {
    Builder b;
    std::string x = b.input("x", {1, 672, 14, 14});  // MobileNetV3-large's features.12
    std::string c = b.node("Conv", {x, b.random_constant("w", {672, 1, 5, 5}, 43)}, {1, 672, 14, 14},
                           {{"kernel_shape", std::vector<int64_t>{5, 5}},
                            {"pads", std::vector<int64_t>{2, 2, 2, 2}},
                            {"group", int64_t(672)}},
                           DType::F32, "dw");
    std::string h = b.node("HardSwish", {c}, {1, 672, 14, 14});
    std::string g = b.node("GlobalAveragePool", {h}, {1, 672, 1, 1});
    b.out("Mul", {h, g}, {1, 672, 14, 14});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    int per_block = 0;
    for (FixedMachine fm : {machines::avx2_2core(), machines::avx512_16core()}) {
        fm.model.cores = 1;
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
        EXPECT_EQ(r.tiling_of("dw").path, "conv.root_tiles");
        EXPECT_EQ(text.find("dw_pad.compute_inline()"), std::string::npos);
        per_block += text.find("dw_pad.compute_at(dw, co)") != std::string::npos;
    }
    EXPECT_GE(per_block, 1);  // the AVX-512 plan inlined it before
    check_auto_with_avx2(b.g, "depthwise conv of an SE block, its pad per channel block");
}

// MobileNetV3-large's features.4: a 1x1 expansion conv, its ReLU, a 5x5 depthwise conv whose
// output a squeeze-excitation pool and scale read (no epilogue: the conv is at root). The plan
// makes the pad a kernel with the ReLU inlined into it; the pad, with the ReLU, is computed per
// channel block of the depthwise conv's tasks (a block reads only its own channels), not in a
// root pass of its own (D143). On both ISAs; it matches the reference.
TEST(Autoschedule, PadWithInlinedProducersOfARootDepthwiseConvIsComputedPerChannelBlock) {
    Builder b;
    std::string x = b.input("x", {1, 24, 28, 28});
    std::string c = expand_relu_depthwise(b, x, 24, 72, 28, 5, 1, 44);
    std::string h = b.node("Relu", {c}, {1, 72, 28, 28});
    std::string g = b.node("GlobalAveragePool", {h}, {1, 72, 1, 1});
    b.out("Mul", {h, g}, {1, 72, 28, 28});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult res = plan_on(lp, fm);
        std::string text = print_schedule(res.schedule);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(res));
        EXPECT_EQ(res.tiling_of("dw").path, "conv.root_tiles");
        EXPECT_EQ(text.find("dw_pad.compute_root()"), std::string::npos);
        EXPECT_EQ(text.find("dw_pad.compute_inline()"), std::string::npos);
        EXPECT_NE(text.find("dw_pad.compute_at(dw, co)"), std::string::npos);
        EXPECT_NE(text.find("expand_relu.compute_inline()"), std::string::npos);
    }
    check_auto_with_avx2(b.g, "root depthwise conv, its pad with the ReLU before it per channel block");
}

// The same block at stride 2 (MobileNetV3-large's features.4 at 28x28): the depthwise conv, at the
// root of its kernel, is vectorized over channels per tile of a wrapper `dw_out` (stored NCHW for
// the pool), a task per channel block, its padded input with the ReLU inlined stored channels
// innermost and sliding down the block's rows, the expansion channel-tiled to store its output so (AVX2: AVX-512 does not
// channel-tile 72 channels). With the knob off (--nchw-conv-inputs) it keeps its root tiles. Both
// plans match the reference on both ISAs.
TEST(Autoschedule, StridedRootDepthwiseConvIsVectorizedOverChannelsThroughAWrapper) {
    Builder b;
    std::string x = b.input("x", {1, 24, 28, 28});
    std::string c = expand_relu_depthwise(b, x, 24, 72, 28, 5, 2, 46, -0.3, 0.3);
    std::string h = b.node("Relu", {c}, {1, 72, 14, 14});
    std::string g = b.node("GlobalAveragePool", {h}, {1, 72, 1, 1});
    b.out("Mul", {h, g}, {1, 72, 14, 14});
    prepare_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        for (bool on : {true, false}) {
            LayoutPlan p = plan_with_layouts(b.g, fm, on);
            const LoweredPipeline &lp = p.lp;
            const std::string &text = p.text;
            const AutoScheduleResult &res = p.res;
            const Schedule &s = res.schedule;
            SCOPED_TRACE(fm.name + (on ? "" : " --nchw-conv-inputs") + "\n" + text + tilings(res));
            ASSERT_EQ(res.plan.decision("dw")->kernel, "dw");
            // AVX-512 blocks 72 channels by 8, not a 16-lane vector: the expansion is not channel-tiled,
            // so nothing stores the depthwise conv's source channels innermost.
            const bool dwc = on && fm.name == "avx2_2core";
            EXPECT_EQ(res.tiling_of("dw").path, dwc ? "conv.depthwise_channels" : "conv.root_tiles");
            EXPECT_EQ(res.tiling_of("dw").wrapper, dwc);
            EXPECT_EQ(has_call(s, "dw", -1, {"in", {}, "dw_out"}), dwc);
            // 14x14 rows are shorter than a cache line: a task per channel block (D199)
            EXPECT_EQ(has_call(s, "dw", -1, {"compute_at", {"dw_out", "wo"}}), dwc);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"store_at", {"dw_out", "co"}}), dwc);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"compute_at", {"dw_out", "h"}}), dwc);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"reorder_storage", {"c", "w", "h", "n"}}), dwc);
            EXPECT_FALSE(has_call(s, "dw_out", -1, {"reorder_storage", {"c", "w", "h", "n"}})) << "the pool reads it";
            const std::string ex_root = res.plan.decision("expand")->kernel;
            EXPECT_EQ(res.tiling_of(ex_root).path == "conv.channel_tile", dwc);
            EXPECT_NO_THROW(apply_schedule(s, lp, host_target()));
        }
        check_auto(b.g, "strided root depthwise conv vectorized over channels, " + fm.name, 1e-5, &fm.model);
    }
}

// An EfficientNet block at stride 2 (1x1 expansion 24 -> 64, SiLU, 5x5 depthwise conv, SiLU, 1x1
// projection) beside a MobileNetV2 one at stride 1 (3x3, ReLU). The strided 5x5 depthwise conv is
// vectorized over its channels: its padded input, with the expansion's SiLU inlined, is stored
// channels innermost and slides down each task's rows; the expansion conv (24 input channels) is
// channel-tiled so that its output is stored so, and so is the depthwise block's output, which only
// the channel-tiled projection reads. The 3x3 stride-1 conv keeps its NCHW channel blocks, and so
// does every conv with the knob off (--nchw-conv-inputs). Every plan matches the reference.
TEST(Autoschedule, StridedDepthwiseConvsAreVectorizedOverChannels) {
    Builder b;
    const auto k1 = std::vector<int64_t>{1, 1};
    auto silu = [&](const std::string &v, const Shape &s, const std::string &name) {
        return b.node("Mul", {v, b.node("Sigmoid", {v}, s)}, s, {}, DType::F32, name);
    };
    std::string x = b.input("x", {1, 24, 28, 28});
    std::string e = b.node("Conv", {x, b.random_constant("we", {64, 24, 1, 1}, 131, -0.3, 0.3), b.random_constant("be", {64}, 132)},
                           {1, 64, 28, 28}, {{"kernel_shape", k1}}, DType::F32, "expand");
    std::string ea = silu(e, {1, 64, 28, 28}, "expand_act");
    std::string d = b.node("Conv", {ea, b.random_constant("wd", {64, 1, 5, 5}, 133, -0.3, 0.3), b.random_constant("bd", {64}, 134)},
                           {1, 64, 14, 14},
                           {{"kernel_shape", std::vector<int64_t>{5, 5}}, {"pads", std::vector<int64_t>{2, 2, 2, 2}},
                            {"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t(64)}},
                           DType::F32, "dw");
    std::string da = silu(d, {1, 64, 14, 14}, "dw_act");
    std::string pr = b.node("Conv", {da, b.random_constant("wp", {32, 64, 1, 1}, 135, -0.2, 0.2)}, {1, 32, 14, 14},
                            {{"kernel_shape", k1}}, DType::F32, "project");
    b.out("Relu", {pr}, {1, 32, 14, 14}, {}, DType::F32, "project_relu");
    std::string y = b.input("y", {1, 24, 28, 28});
    std::string e2 = b.node("Conv", {y, b.random_constant("we2", {64, 24, 1, 1}, 136, -0.3, 0.3)}, {1, 64, 28, 28},
                            {{"kernel_shape", k1}}, DType::F32, "expand2");
    std::string r2 = b.node("Relu", {e2}, {1, 64, 28, 28}, {}, DType::F32, "expand2_relu");
    std::string d2 = b.node("Conv", {r2, b.random_constant("wd2", {64, 1, 3, 3}, 137, -0.3, 0.3)}, {1, 64, 28, 28},
                            {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                             {"group", int64_t(64)}},
                            DType::F32, "dw2");
    std::string d2r = b.node("Relu", {d2}, {1, 64, 28, 28}, {}, DType::F32, "dw2_relu");
    b.out("Conv", {d2r, b.random_constant("wp2", {32, 64, 1, 1}, 138, -0.2, 0.2)}, {1, 32, 28, 28}, {{"kernel_shape", k1}},
          DType::F32, "project2");
    prepare_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        for (bool on : {true, false}) {
            LayoutPlan p = plan_with_layouts(b.g, fm, on);
            const LoweredPipeline &lp = p.lp;
            const std::string &text = p.text;
            const AutoScheduleResult &res = p.res;
            const Schedule &s = res.schedule;
            SCOPED_TRACE(fm.name + (on ? "" : " --nchw-conv-inputs") + "\n" + text + tilings(res));
            const std::string dw_root = res.plan.decision("dw")->kernel, ex_root = res.plan.decision("expand")->kernel;
            EXPECT_EQ(dw_root, "dw_act");
            EXPECT_EQ(res.tiling_of(dw_root).path, on ? "conv.depthwise_channels" : "conv.depthwise_blocks");
            EXPECT_EQ(res.tiling_of(res.plan.decision("dw2")->kernel).path, "conv.depthwise_blocks") << "3x3 at stride 1";
            EXPECT_EQ(res.tiling_of(ex_root).path == "conv.channel_tile", on) << "24 input channels: rows, but for dw";
            const std::string ex_out = ex_root == "expand" ? "expand_out" : ex_root;
            EXPECT_EQ(has_call(s, ex_out, -1, {"reorder_storage", {"c", "w", "h", "n"}}), on);
            EXPECT_EQ(has_call(s, "dw_act", -1, {"reorder_storage", {"c", "w", "h", "n"}}), on);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"store_at", {"dw_act", "ho"}}), on);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"compute_at", {"dw_act", "hi"}}), on);
            EXPECT_EQ(has_call(s, "dw_pad", -1, {"reorder_storage", {"c", "w", "h", "n"}}), on);
            EXPECT_EQ(has_call(s, "dw", -1, {"compute_at", {"dw_act", "co"}}), on);
            EXPECT_EQ(text.find("expand_act.compute_inline()") != std::string::npos || ex_root == "expand_act", true);
            EXPECT_FALSE(has_call(s, "dw2_pad", -1, {"reorder_storage", {"c", "w", "h", "n"}}));
            EXPECT_NO_THROW(apply_schedule(s, lp, host_target()));
        }
        check_auto(b.g, "depthwise convs vectorized over channels, " + fm.name, 1e-5, &fm.model);
    }
}

// An FPN's smoothing conv (DBNet): its padded input is the nearest 2x upsample of a coarser level
// plus a lateral, which the plan inlines into the pad. The pad, with them, is computed per task of
// the channel-tiled conv (its rows in cache for every channel block), not in a root pass whose
// rows every channel block read back from memory (D125); the compute_inline of the upsample and
// the add stay in the schedule, and it matches the reference.
TEST(Autoschedule, ConvPadWithInlinedProducersIsComputedPerTask) {
    Builder b;
    std::string lateral = b.input("lateral", {1, 96, 40, 40});
    std::string coarse = b.input("coarse", {1, 96, 20, 20});
    std::string scales = b.constant(Tensor::from_doubles(DType::F32, {4}, {1, 1, 2, 2}));
    std::string up = b.node("Resize", {coarse, "", scales}, {1, 96, 40, 40}, {{"mode", std::string("nearest")}},
                            DType::F32, "up");
    std::string sum = b.node("Add", {lateral, up}, {1, 96, 40, 40}, {}, DType::F32, "sum");
    std::string conv = b.node("Conv", {sum, b.random_constant("w", {32, 96, 3, 3}, 71)}, {1, 32, 40, 40},
                              {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}},
                              DType::F32, "smooth");
    b.out("Relu", {conv}, {1, 32, 40, 40});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
        ASSERT_NE(r.plan.decision("smooth"), nullptr);
        const KernelTiling t = r.tiling_of(r.plan.decision("smooth")->kernel);
        EXPECT_EQ(t.path, "conv.channel_tile");
        EXPECT_EQ(t.pad_per, "task");
        EXPECT_EQ(text.find("smooth_pad.compute_root()"), std::string::npos);
        EXPECT_NE(text.find("smooth_pad.compute_at("), std::string::npos);
        EXPECT_NE(text.find("up.compute_inline()"), std::string::npos);
        EXPECT_NE(text.find("sum.compute_inline()"), std::string::npos);
    }
    check_auto_with_avx2(b.g, "FPN smoothing conv, its fused pad per task");
}

// A pool's small window (3x3 = 9 taps) is unrolled inside the vectorized update, so that the
// accumulator stays in a register; the schedule is correct.
TEST(Autoschedule, SmallWindowsAreUnrolled) {
    Builder b;
    std::string x = b.input("x", {4, 16, 40, 40});
    b.out("MaxPool", {x}, {4, 16, 20, 20},
          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
           {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    const std::string pool = lp.output_funcs.at(0);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + text);
        EXPECT_NE(text.find(".unroll(r.x)"), std::string::npos);
        EXPECT_NE(text.find(".unroll(r.y)"), std::string::npos);
        EXPECT_EQ(text.find(".in() as"), std::string::npos);  // 100 KB of output: in L2 anyway
        // An output larger than L2 (64 KiB here) is computed per row of its wrapper.
        Schedule s = plan_on(lp, with(fm, {"l2_bytes=64K"})).schedule;
        EXPECT_TRUE(has_call(s, pool, -1, {"in", {}, pool + "_out"})) << print_schedule(s);
        EXPECT_TRUE(has_call(s, pool, -1, {"compute_at", {pool + "_out", "h"}})) << print_schedule(s);
    }
    check_auto(b.g, "3x3 max pool");
    MachineModel small_l2 = host_machine();
    small_l2.l2_bytes = 64 << 10;
    check_auto(b.g, "3x3 max pool per row of its wrapper", 1e-5, &small_l2);
}

// An AveragePool's window sums, which its output divides point for point, are computed per row of
// the output (one kernel, the sums in L1), with the window unrolled in the vectorized update.
TEST(Autoschedule, AveragePoolSumsArePerRowOfTheOutput) {
    Builder b;
    std::string x = b.input("x", {2, 8, 30, 46});
    b.out("AveragePool", {x}, {2, 8, 15, 23},
          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}, DType::F32, "pool");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + print_schedule(r.schedule));
        ASSERT_EQ(r.plan.kernels.size(), 1u);
        EXPECT_EQ(r.plan.kernels[0].funcs.size(), 2u);
        EXPECT_TRUE(has_call(r.schedule, "pool_sum", -1, {"compute_at", {"pool", "h"}}));
        EXPECT_TRUE(has_call(r.schedule, "pool_sum", 0, {"unroll", {"r.x"}}));
    }
    check_auto(b.g, "average pool");
}

// A reduction's parallel loop skips outer dims of extent 1: a keepdims column sum [1, N] runs its
// column strips in parallel, a batch-1 MaxPool its channels (both ran serially).
TEST(Autoschedule, ReductionsSkipUnitDimsForTheirParallelLoop) {
    Builder b;
    std::string x = b.input("x", {512, 1024});
    b.out("ReduceSum", {x}, {1, 1024}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}}, DType::F32,
          "colsum");
    std::string y = b.input("y", {1, 32, 112, 112});
    b.out("MaxPool", {y}, {1, 32, 56, 56},
          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
           {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, DType::F32, "pool");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        Schedule s = plan_on(lp, fm).schedule;
        SCOPED_TRACE(fm.name + "\n" + print_schedule(s));
        EXPECT_TRUE(has_call(s, "colsum", 0, {"parallel", {"jo"}}));
        EXPECT_FALSE(has_call(s, "colsum", 0, {"parallel", {"i"}}));
        EXPECT_TRUE(has_call(s, "pool", 0, {"parallel", {"c"}}));
    }
    check_auto(b.g, "unit outer dims");
}

// Statistics over several whole dims are fused and rfactored into vector partial sums, not summed
// one scalar at a time: an InstanceNorm's H x W (its variance also reads the mean, which walks no
// block) per row of the output, a GroupNorm's channels of a group x H x W (the block starts at the
// group's first channel) in their own kernels.
TEST(Autoschedule, NormStatisticsOverSeveralDimsAreVectorized) {
    Builder b;
    std::string x = b.input("x", {2, 16, 9, 13});
    b.out("InstanceNormalization", {x, b.random_constant("s1", {16}, 15), b.random_constant("b1", {16}, 16)},
          {2, 16, 9, 13}, {}, DType::F32, "inorm");
    b.out("GroupNormalization", {x, b.random_constant("s2", {16}, 17), b.random_constant("b2", {16}, 18)},
          {2, 16, 9, 13}, {{"num_groups", int64_t(4)}}, DType::F32, "gnorm");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        Schedule s = plan_on(lp, fm).schedule;
        SCOPED_TRACE(fm.name + "\n" + print_schedule(s));
        for (const char *stat : {"inorm_mean", "inorm_var"}) {
            ASSERT_FALSE(calls_on(s, stat, 0).empty()) << stat;
            EXPECT_EQ(calls_on(s, stat, 0)[0], PrimitiveCall("fuse", {"r.x", "r.y", "rfused"})) << stat;
        }
        for (const char *stat : {"gnorm_mean", "gnorm_var"}) {
            ASSERT_GE(calls_on(s, stat, 0).size(), 2u) << stat;
            EXPECT_EQ(calls_on(s, stat, 0)[0], PrimitiveCall("fuse", {"r.x", "r.y", "rfused"})) << stat;
            EXPECT_EQ(calls_on(s, stat, 0)[1], PrimitiveCall("fuse", {"rfused", "r.z", "rfused2"})) << stat;
        }
    }
    check_auto(b.g, "instance and group norms");
}

// A Softmax over a middle axis ([B, S, D], axis 1) keeps its statistics in one kernel: computed per
// block of the output (S x D, in L2), vectorized along D in strips, not in kernels of their own
// that each read the input from memory.
TEST(Autoschedule, MiddleAxisSoftmaxIsOneKernel) {
    Builder b;
    std::string x = b.input("x", {6, 40, 384});
    b.out("Softmax", {x}, {6, 40, 384}, {{"axis", int64_t(1)}}, DType::F32, "sm");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        SCOPED_TRACE(fm.name + "\n" + text);
        ASSERT_EQ(r.plan.kernels.size(), 1u);
        EXPECT_EQ(r.plan.kernels[0].funcs.size(), 4u);
        ASSERT_NE(r.plan.decision("sm_max"), nullptr);
        EXPECT_EQ(r.plan.decision("sm_max")->placement, Placement::Row);
        EXPECT_EQ(r.plan.decision("sm_max")->row_depth, 1);
        const std::vector<PrimitiveCall> sum = calls_on(r.schedule, "sm_sum", 0);
        ASSERT_FALSE(sum.empty());
        ASSERT_GE(sum[0].args.size(), 3u);
        EXPECT_EQ(sum[0].name, "split");
        EXPECT_EQ(std::vector<ScheduleArg>(sum[0].args.begin(), sum[0].args.begin() + 3),
                  (std::vector<ScheduleArg>{"j", "jo", "ji"}));
    }
    check_auto(b.g, "middle-axis softmax");
}

// A reduction kernel over rows that no vector divides (an ArgMax over 1000 logits on AVX-512,
// 1004 on AVX2) takes one vector of partials with a guarded last step; a row kernel's statistics
// (a Softmax over the same rows) are left to LLVM's own vectorizer. Both match the reference.
TEST(Autoschedule, RaggedRowReductionsAreVectorized) {
    for (const auto &[fm, cols] :
         {std::pair{machines::avx512_2core(), int64_t(1000)}, std::pair{machines::avx2_2core(), int64_t(1004)}}) {
        Builder b;
        std::string x = b.input("x", {40, cols});
        b.out("ReduceMax", {x}, {40}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}, DType::F32, "rmax");
        b.out("Softmax", {x}, {40, cols}, {{"axis", int64_t(1)}}, DType::F32, "sm");
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        Schedule s = plan_on(lp, fm).schedule;
        SCOPED_TRACE(str_cat(fm.name, ", ", cols, " columns\n", print_schedule(s)));
        ASSERT_FALSE(calls_on(s, "rmax", 0).empty());
        EXPECT_EQ(calls_on(s, "rmax", 0)[0],
                  PrimitiveCall("split", {"r.x", "rxo", "rxi", lanes(fm), ScheduleArg::tail("GuardWithIf")}));
        EXPECT_EQ(calls_named(s, "sm_max", 0, "split"), 0u);
        check_auto(b.g, str_cat("ragged row reductions, ", cols, " columns"));
    }
}

TEST(Autoschedule, Deterministic) {
    Graph g = fixture("transformer");
    LoweredPipeline a = lower_graph(g), c = lower_graph(g);
    for (const FixedMachine &fm : both_levels()) EXPECT_EQ(text_on(a, fm), text_on(c, fm)) << fm.name;
}

TEST(Autoschedule, PrintsAndParsesBack) {
    for (const char *name : {"softmax_rows", "mlp", "transformer"}) {
        LoweredPipeline lp = lower_graph(fixture(name));
        for (const FixedMachine &fm : both_levels()) {
            Schedule s = plan_on(lp, fm).schedule;
            Schedule back = parse_schedule(print_schedule(s), name);
            EXPECT_EQ(back, s) << name << " on " << fm.name;
            EXPECT_EQ(print_schedule(back), print_schedule(s)) << name << " on " << fm.name;
        }
    }
}

TEST(Autoschedule, PointwiseChainIsOneLoopNest) {
    Builder b;
    Shape s{256, 512};
    std::string x = b.input("x", s);
    std::string v = b.node("Mul", {x, x}, s);
    v = b.node("Add", {v, x}, s);
    v = b.node("Sigmoid", {v}, s);
    v = b.out("Relu", {v}, s);
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        FusionPlan plan = plan_fusion(lp, fm.model);
        ASSERT_EQ(plan.kernels.size(), 1u) << fm.name;
        EXPECT_EQ(plan.kernels[0].name, "fused_mul_add_sigmoid_relu");
        for (const auto &d : plan.decisions)
            if (d.func != plan.kernels[0].root) {
                EXPECT_EQ(d.placement, Placement::Inline) << d.func << " on " << fm.name;
            }
    }
}

TEST(Autoschedule, CostlyProducerWithManyConsumersIsMaterialized) {
    Builder b;
    Shape s{256, 512};
    std::string x = b.input("x", s);
    std::string e = b.node("Erf", {x}, s);
    std::vector<std::string> outs;
    for (int k = 0; k < 8; k++) b.out("Mul", {e, b.input("y" + std::to_string(k), s)}, s);
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    const LoweredFunc *erf = nullptr;
    for (const auto &f : lp.funcs)
        if (f.op == "Erf") erf = &f;
    ASSERT_NE(erf, nullptr);
    for (const FixedMachine &fm : both_levels()) {
        FusionPlan plan = plan_fusion(lp, fm.model);
        const FuncDecision *d = plan.decision(erf->name);
        EXPECT_NE(d->placement, Placement::Inline) << fm.name << ": " << d->why;
    }
    // One cheap producer with one consumer is inlined.
    Builder c;
    std::string xx = c.input("x", s);
    c.out("Neg", {c.node("Abs", {xx}, s)}, s);
    prepare_graph(c.g);
    LoweredPipeline lc = lower_graph(c.g);
    for (const FixedMachine &fm : both_levels()) EXPECT_EQ(plan_fusion(lc, fm.model).kernels.size(), 1u) << fm.name;
}

// With 16 threads the threshold is 8x two threads': a kernel of some tens of microseconds runs
// serially on the 16-core machine and in parallel on the 2-core one (MobileNetV3-small ran slower
// on 16 threads than on one, every small kernel forking every core).
TEST(Autoschedule, SerialThresholdGrowsWithThreads) {
    Builder b;
    Shape s{128, 1024};
    std::string x = b.input("x", s);
    std::string sum = b.node("ReduceSum", {x}, {128, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
    b.out("Div", {b.node("Exp", {x}, s), sum}, s);
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    AutoScheduleResult two = plan_on(lp, machines::avx512_2core()), sixteen = plan_on(lp, machines::avx512_16core());
    std::string t2 = print_schedule(two.schedule), t16 = print_schedule(sixteen.schedule);
    EXPECT_NE(t2.find(".parallel("), std::string::npos) << t2;
    EXPECT_EQ(t16.find(".parallel("), std::string::npos) << t16;
    EXPECT_NE(t16.find("less than 160 us is not worth waking the thread pool"), std::string::npos) << t16;
    check_auto(b.g, "serial threshold", 1e-4);  // float32 sums of 1024 exponentials
}

// Waking the thread pool costs microseconds: a kernel with less work than kMinParallelMicros on one
// core runs serially (the tiny transformer fixture: 0.070 -> 0.029 ms), a big one stays parallel.
TEST(Autoschedule, TinyKernelsRunSerially) {
    for (int64_t rows : {8, 2048}) {
        Builder b;
        Shape s{rows, 1024};
        std::string x = b.input("x", s);
        std::string sum = b.node("ReduceSum", {x}, {rows, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
        b.out("Div", {b.node("Exp", {x}, s), sum}, s);
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult r = plan_on(lp, fm);
            std::string text = print_schedule(r.schedule);
            EXPECT_EQ(text.find(".parallel(") == std::string::npos, rows == 8) << fm.name << "\n" << text;
            ASSERT_FALSE(r.tiling.empty());
            for (const auto &[root, t] : r.tiling) EXPECT_EQ(t.serial_kernel, rows == 8) << fm.name << " " << root;
        }
        if (rows == 8) check_auto(b.g, "a tiny row kernel");
    }
}

// A conv whose rows are narrower than a vector (ResNet-18's 7x7 and 14x14 stages) computes each row
// as one vector rounded up, not a vector plus a scalar tail; the graph output keeps its exact
// bounds. Both convs match the reference.
// (20 channels: not a multiple of 8, so the weights stay dense and the tile runs along rows.)
TEST(Autoschedule, NarrowConvRowsAreOneVectorRoundedUp) {
    Builder b;
    std::string x = b.input("x", {1, 20, 7, 7});
    std::map<std::string, AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                              {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    std::string w1 = b.random_constant("w1", {20, 20, 3, 3}, 21), w2 = b.random_constant("w2", {20, 20, 3, 3}, 22);
    std::string c1 = b.node("Conv", {x, w1}, {1, 20, 7, 7}, attrs);
    b.out("Conv", {c1, w2}, {1, 20, 7, 7}, attrs);
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {  // 8 and 16 lanes: both wider than 7
        AutoScheduleResult r = plan_on(lp, fm);
        std::string text = print_schedule(r.schedule);
        int rounded = 0;  // the inner conv's 7-wide rows rounded up to a vector
        for (const auto &[root, t] : r.tiling) rounded += t.path.rfind("conv.", 0) == 0 && t.round_up;
        EXPECT_EQ(rounded, 1) << fm.name << "\n" << text << tilings(r);
        EXPECT_NE(text.find("TailStrategy::RoundUp"), std::string::npos) << fm.name << "\n" << text;
    }
    check_auto(b.g, "narrow conv rows");
}

// A depthwise conv under its epilogue (MobileNetV2's conv + clip, read by a 1x1 conv) runs a task
// per block of 8 channels with every row inside, its 14-wide rows (stride 1) and 7-wide rows
// (stride 2) rounded up to whole vectors (of 16 lanes, or 8 on AVX2), the taps unrolled, the
// padded input computed per task, the first one's with the clip before it inlined into it (D143:
// no pass of its own); the file it writes validates without warnings (the rounded rows read
// through the clamping pad).
// Where the epilogue is a graph output its rows keep their width (no rounding); where it is not,
// the stride-2 conv, whose padded input reads the channel-tiled 1x1 conv's output, is vectorized
// over channels instead (D153). All match the reference.
TEST(Autoschedule, DepthwiseConvUnderAnEpilogueRunsChannelBlocks) {
    for (bool output : {false, true}) {
        Builder b;
        std::string x = b.input("x", {2, 16, 14, 14});
        std::string ex = b.random_constant("ex", {32, 16, 1, 1}, 35);  // MobileNetV2's expansion
        x = b.node("Conv", {x, ex}, {2, 32, 14, 14}, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
        x = b.node("Clip", {x, b.scalar(0), b.scalar(6)}, {2, 32, 14, 14});
        std::map<std::string, AttrValue> dw = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                               {"group", int64_t(32)}};
        std::string c = x;
        for (int64_t stride : {1, 2}) {
            const int64_t o = stride == 1 ? 14 : 7;
            auto attrs = dw;
            attrs["strides"] = std::vector<int64_t>{stride, stride};
            std::string w = b.random_constant("w" + std::to_string(stride), {32, 1, 3, 3}, 30 + stride);
            std::string conv = b.node("Conv", {c, w}, {2, 32, o, o}, attrs);
            std::string lo = b.scalar(0), hi = b.scalar(6);
            c = output && stride == 2 ? b.out("Clip", {conv, lo, hi}, {2, 32, o, o})
                                      : b.node("Clip", {conv, lo, hi}, {2, 32, o, o});
            if (stride == 1) {  // a 1x1 conv reads the clip, as MobileNetV2's projection does
                std::string mid = b.random_constant("mid", {32, 32, 1, 1}, 34);
                c = b.node("Conv", {c, mid}, {2, 32, 14, 14}, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
            }
        }
        if (!output) {
            std::string pw = b.random_constant("pw", {16, 32, 1, 1}, 33);
            b.out("Conv", {c, pw}, {2, 16, 7, 7}, {{"kernel_shape", std::vector<int64_t>{1, 1}}});
        }
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            Schedule sch = plan_on(lp, fm).schedule;
            std::string text = print_schedule(sch);
            SCOPED_TRACE(fm.name + "\n" + text);
            const size_t blocks = output ? 2u : 1u;
            EXPECT_EQ(loom::testing::count_of(text, "depthwise conv in blocks of 8 channels: a task per block"), blocks);
            EXPECT_EQ(loom::testing::count_of(text, "depthwise conv vectorized over channels"), 2u - blocks);
            // Both pads are computed per task: the one the plan inlines, and the one the plan
            // materializes with the clip inlined into it (per row of a task, vectorized over channels).
            EXPECT_EQ(loom::testing::count_of(text, "padded input computed per channel block of"), blocks);
            EXPECT_EQ(loom::testing::count_of(text, "padded input stored channels innermost per task"), 2u - blocks);
            EXPECT_EQ(loom::testing::count_of(text, "_pad.compute_inline()"), 0u);
            EXPECT_EQ(loom::testing::count_of(text, "_pad.compute_root()"), 0u);
            EXPECT_EQ(loom::testing::count_of(text, "(14-wide rows rounded up)"), 1u);
            EXPECT_EQ(loom::testing::count_of(text, "(7-wide rows rounded up)"), 0u);
            // The taps run innermost around one vector per channel of the block, so that the
            // block's accumulators stay in registers.
            EXPECT_EQ(loom::testing::count_of(text, ".reorder(wi, r.x, r.y, r.z, c, wo)"), blocks);
            std::vector<std::string> warnings;
            validate_schedule(sch, lp, fm.target, &warnings);
            EXPECT_TRUE(warnings.empty()) << warnings.front();
        }
        check_auto(b.g, output ? "depthwise convs, the second one's clip a graph output" : "depthwise convs");
    }
}

// A conv with no epilogue whose output outgrows half of L2 (a 1x1 conv to 64 channels at 112x112,
// 3.2 MB; its ReLU inlined into the next conv's padded input) is computed per row block of a
// `<conv>_out` wrapper, its initial value per tile instead of a pass through memory; a small one
// (at 14x14) keeps its root tiles. On both ISAs; the schedules are correct.
TEST(Autoschedule, LargeRootConvsArePerRowBlockOfAWrapper) {
    for (int64_t width : {112, 14}) {
        Builder b;
        std::string x = b.input("x", {1, 16, width, width});
        std::string c = b.node("Conv", {x, b.random_constant("pw", {64, 16, 1, 1}, 93)}, {1, 64, width, width},
                               {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
        std::string r = b.node("Relu", {c}, {1, 64, width, width});
        std::map<std::string, AttrValue> dw = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                               {"group", int64_t(64)}};
        b.out("Conv", {r, b.random_constant("dw", {64, 1, 3, 3}, 94)}, {1, 64, width, width}, dw);
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult res = plan_on(lp, fm);
            std::string text = print_schedule(res.schedule);
            SCOPED_TRACE(fm.name + " width " + std::to_string(width) + "\n" + text + tilings(res));
            const bool large = width == 112;
            EXPECT_EQ(res.tiling_of("expand").path, large ? "conv.row_blocks" : "conv.root_tiles");
            EXPECT_EQ(res.tiling_of("expand").wrapper, large);
            EXPECT_EQ(loom::testing::count_of(text, "expand.in() as expand_out;"), large ? 1u : 0u);
        }
        check_auto_with_avx2(b.g, "a 1x1 conv read through a ReLU by a depthwise conv");
    }
}

// A padded input whose rows hold under 4 vectors (a depthwise conv's 14-wide input, 16 padded) is
// copied in scalar code: every vector of such a row meets the border and reads through clamped
// indices (a gather per lane). A 112-wide one keeps its vectors. On both ISAs; the schedules are
// correct.
TEST(Autoschedule, NarrowPaddedRowsAreCopiedInScalarCode) {
    for (int64_t width : {14, 112}) {
        Builder b;
        const int64_t C = width == 14 ? 64 : 16;
        std::string x = b.input("x", {1, C, width, width});
        std::string a = b.node("Relu", {x}, {1, C, width, width});
        std::map<std::string, AttrValue> dw = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                               {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                               {"group", C}};
        std::string c = b.node("Conv", {a, b.random_constant("dw", {C, 1, 3, 3}, 91)}, {1, C, width, width}, dw,
                               DType::F32, "dwconv");
        b.out("Conv", {c, b.random_constant("pw", {C, C, 1, 1}, 92)}, {1, C, width, width},
              {{"kernel_shape", std::vector<int64_t>{1, 1}}});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        const LoweredFunc *pad = lp.find("dwconv_pad");
        ASSERT_NE(pad, nullptr);
        EXPECT_TRUE(pad->padded_input);
        for (const FixedMachine &fm : both_levels()) {
            std::string text = print_schedule(plan_on(lp, fm).schedule);
            SCOPED_TRACE(fm.name + " width " + std::to_string(width) + "\n" + text);
            std::string stmt;  // the pad's statement, up to its ';'
            size_t at = text.find("\ndwconv_pad.");
            ASSERT_NE(at, std::string::npos);
            stmt = text.substr(at, text.find(';', at) - at);
            EXPECT_EQ(stmt.find(".vectorize(w") == std::string::npos, width == 14) << stmt;
        }
        check_auto_with_avx2(b.g, "a depthwise conv's padded input");
    }
}

// Convs with weights blocked by 16 channels are vectorized over output channels: a tile of
// pixels x 16 channels, the conv stored channels-innermost at the tile of its epilogue (ReLU, a
// residual Add) or of a `<conv>_out` wrapper when it has none; small weights put the row blocks
// outer (the padded input per task), large ones the channel blocks; a conv with under 64 terms per
// output keeps the row tiles. A graph output with no epilogue
// (here a 1x1, stride 2) keeps the row tiles (an output is computed at root) over blocked weights.
// Widths and heights that the tile does not divide (7 and 9 rows in pairs, 30 = 5 x 6 wide) and every
// conv match the reference.
TEST(Autoschedule, BlockedConvsTileOutputChannels) {
    Builder b;
    std::string x = b.input("x", {2, 8, 7, 7}), y = b.input("y", {1, 8, 9, 30});
    auto attrs = [](int64_t k, int64_t s) {
        std::map<std::string, AttrValue> a = {{"kernel_shape", std::vector<int64_t>{k, k}},
                                              {"strides", std::vector<int64_t>{s, s}}};
        if (k == 3) a["pads"] = std::vector<int64_t>{1, 1, 1, 1};
        return a;
    };
    std::string w1 = b.random_constant("w1", {32, 8, 3, 3}, 51), b1 = b.random_constant("b1", {32}, 52);
    std::string w2 = b.random_constant("w2", {32, 32, 3, 3}, 53), w3 = b.random_constant("w3", {16, 8, 3, 3}, 54);
    std::string w4 = b.random_constant("w4", {16, 16, 1, 1}, 55);
    std::string c1 = b.node("Conv", {x, w1, b1}, {2, 32, 7, 7}, attrs(3, 1), DType::F32, "stem");
    std::string r1 = b.node("Relu", {c1}, {2, 32, 7, 7});
    std::string c2 = b.node("Conv", {r1, w2}, {2, 32, 7, 7}, attrs(3, 1));
    b.out("Relu", {b.node("Add", {c2, r1}, {2, 32, 7, 7})}, {2, 32, 7, 7});  // residual epilogue
    // 1.2 MB of weights (over half of the test machine's L2): channel blocks outer, a task per
    // channel block (8 of them, 4 per core); with 2 channel blocks (1024 -> 32), a task per row
    // block of a channel block.
    std::string z = b.input("z", {1, 256, 7, 7}), w5 = b.random_constant("w5", {128, 256, 3, 3}, 56);
    b.out("Relu", {b.node("Conv", {z, w5}, {1, 128, 7, 7}, attrs(3, 1))}, {1, 128, 7, 7});
    std::string z2 = b.input("z2", {1, 1024, 7, 7}), w7 = b.random_constant("w7", {32, 1024, 3, 3}, 58);
    b.out("Relu", {b.node("Conv", {z2, w7}, {1, 32, 7, 7}, attrs(3, 1))}, {1, 32, 7, 7});
    std::string c3 = b.node("Conv", {y, w3}, {1, 16, 9, 30}, attrs(3, 1));
    // 27 terms per output (3 channels x 3x3), under kMinChannelTileTerms: row tiles.
    std::string q = b.input("q", {1, 3, 9, 30}), w6 = b.random_constant("w6", {16, 3, 3, 3}, 57);
    b.out("Relu", {b.node("Conv", {q, w6}, {1, 16, 9, 30}, attrs(3, 1), DType::F32, "short")}, {1, 16, 9, 30});
    b.out("Conv", {b.node("Relu", {c3}, {1, 16, 9, 30}), w4}, {1, 16, 5, 15}, attrs(1, 2), DType::F32,
          "head");  // no epilogue, a graph output
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + text);
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(tilings(r));
        if (fm.name == "avx512_2core") {  // one vector per channel block; at 7x7 two blocks of one row (D198)
            EXPECT_GE(channel_tiles(r, 7, 1, 32), 1);
            EXPECT_GE(channel_tiles(r, 6, 2, 16), 1);
        } else {  // two vectors per channel block, unrolled; at 7x7, 4x1 pixels (8 accumulators of 16
                  // registers) recompute least (D81), and the 30-wide rows take 5x1
            EXPECT_GE(channel_tiles(r, 4, 1, 16), 1);
            EXPECT_GE(channel_tiles(r, 5, 1, 16), 1);
            EXPECT_EQ(channel_tiles(r, 3, 2, 16), 0);
        }
        ASSERT_NE(r.plan.decision("short"), nullptr);
        EXPECT_EQ(r.tiling_of(r.plan.decision("short")->kernel).path, "conv.row_blocks");  // 27 terms: row tiles
        EXPECT_EQ(r.tiling_of("head").path.rfind("conv.", 0), 0u);
        EXPECT_FALSE(r.tiling_of("head").wrapper);
        EXPECT_NE(text.find(".reorder_storage(c, w, h, n)"), std::string::npos);
        std::set<std::string> tasks;
        for (const auto &[root, t] : r.tiling) tasks.insert(t.tasks);
        EXPECT_TRUE(tasks.count("rows"));                    // the channel blocks inside
        EXPECT_TRUE(tasks.count("channel_blocks"));          // 256->128: its row blocks inside
        EXPECT_TRUE(tasks.count("channel_and_row_blocks"));  // 1024->32
        EXPECT_TRUE(std::any_of(r.tiling.begin(), r.tiling.end(), [](const auto &kt) { return kt.second.pad_per == "task"; }));
        EXPECT_NE(text.find(".in() as stem_out"), std::string::npos);  // read by two kernels
        EXPECT_EQ(text.find(".in() as head_out"), std::string::npos);  // 16 terms: row tiles
    }
    check_auto_with_avx2(b.g, "blocked convs");
}

// ScheduleKnobs::conv_unroll_taps: a channel-tiled 3x3 conv unrolls its taps by default and keeps
// them loops without (`loom autoschedule --loop-conv-taps`); both match the reference, and the
// candidates that --tune times include the looped one.
// A channel-tiled conv that is a graph output with no epilogue is computed per tile of its wrapper
// (realized in the output's place), as one with an epilogue is per tile of the epilogue. A 1x1
// conv's tile is two channel blocks (AVX-512: two vectors) by one row of pixels; on AVX2 one
// channel block (two vectors) by 3x2 pixels (12 accumulators: a 3x3 conv gets 8, whose next tap's
// inputs LLVM keeps in registers too).
TEST(Autoschedule, OutputConvTilesChannelsThroughItsWrapper) {
    Builder b;
    std::string x = b.input("x", {2, 64, 7, 9});
    b.out("Conv", {x, b.random_constant("w", {32, 64, 1, 1}, 58), b.random_constant("bias", {32}, 59)},
          {2, 32, 7, 9}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "head");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        Schedule s = plan_on(lp, fm).schedule;
        std::string text = print_schedule(s);
        SCOPED_TRACE(fm.name + "\n" + text);
        EXPECT_TRUE(has_call(s, "head", -1, {"in", {}, "head_out"}));
        EXPECT_TRUE(has_call(s, "head", -1, {"compute_at", {"head_out", "wo"}}));
        AutoScheduleResult r = plan_on(lp, fm);
        KernelTiling t = r.tiling_of("head");
        SCOPED_TRACE(tilings(r));
        EXPECT_EQ(t.path, "conv.channel_tile");
        EXPECT_TRUE(t.wrapper);
        const bool avx512 = fm.name == "avx512_2core";
        EXPECT_EQ(t.tile_w, avx512 ? 7 : 3);
        EXPECT_EQ(t.tile_rows, avx512 ? 1 : 2);
        EXPECT_EQ(t.tile_channels, avx512 ? 32 : 16);
        EXPECT_EQ(t.vector_lanes, avx512 ? 16 : 8);
    }
    check_auto(b.g, "output conv");
}

TEST(Autoschedule, ConvTapsUnrolledByDefaultLoopedOnRequest) {
    Builder b;
    std::string x = b.input("x", {1, 32, 14, 14}), w = b.random_constant("w", {32, 32, 3, 3}, 61);
    std::map<std::string, AttrValue> a = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                          {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    b.out("Relu", {b.node("Conv", {x, w}, {1, 32, 14, 14}, a, DType::F32, "c")}, {1, 32, 14, 14});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    ScheduleKnobs looped;
    looped.conv_unroll_taps = false;
    for (const FixedMachine &fm : both_levels()) {
        SCOPED_TRACE(fm.name);
        std::string unrolled = text_on(lp, fm);
        EXPECT_NE(unrolled.find(".unroll(r.x)"), std::string::npos) << unrolled;
        AutoScheduleResult r = plan_on(lp, fm, looped);
        std::string text = print_schedule(r.schedule);
        EXPECT_EQ(text.find(".unroll(r.x)"), std::string::npos) << text;
        EXPECT_EQ(text.find(".unroll(r.y)"), std::string::npos) << text;
        int tiled = 0;  // still tiled
        for (const auto &[root, t] : r.tiling) tiled += t.path == "conv.channel_tile";
        EXPECT_GE(tiled, 1) << tilings(r);
        bool offered = false;
        for (const auto &c : schedule_candidates(lp, fm.target, fm.model)) offered |= c.label == "conv taps looped";
        EXPECT_TRUE(offered);
    }
    check_auto(b.g, "conv with unrolled taps");
    // The host's looped schedule, applied and run on poisoned outputs.
    LoweredPipeline lp2 = lower_graph(b.g);
    Schedule s = auto_schedule_with_plan(lp2, host_target(), host_machine(), looped).schedule;
    apply_schedule(s, lp2, host_target());
    JitModel m(std::move(lp2));
    auto in = random_inputs(b.g, 9);
    auto outs = m.run(in);
    auto ref = run_reference(b.g, in);
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t)) << name;
}

// Row statistics over short rows take vector partial sums of at least four steps when the row
// allows (a 64-wide LayerNorm on AVX-512: 16 lanes x 4 steps, not 32 x 2), else two (32 wide:
// 16 x 2); on AVX2, 16 x 4 and 8 x 4. Both match the reference.
TEST(Autoschedule, ShortRowPartialsTakeFourSteps) {
    Builder b;
    for (int64_t w : {64, 32}) {
        std::string x = b.input("x" + std::to_string(w), {96, w});
        std::string g = b.random_constant("g" + std::to_string(w), {w}, 70 + w), c = b.random_constant("c" + std::to_string(w), {w}, 80 + w);
        b.out("Tanh", {b.node("LayerNormalization", {x, g, c}, {96, w}, {{"axis", int64_t(-1)}})}, {96, w});
    }
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    // Every (vector partial sums, steps) pair the plan chose for a row statistic.
    auto partials = [&](const FixedMachine &fm) {
        AutoScheduleResult r = plan_on(lp, fm);
        std::set<std::pair<int, int64_t>> got;
        for (const auto &[root, t] : r.tiling)
            for (const auto &[func, ps] : t.partial_sums) got.insert(ps);
        return got;
    };
    {
        auto got = partials(machines::avx512_2core());
        EXPECT_TRUE(got.count({16, 4}));
        EXPECT_TRUE(got.count({16, 2}));
        for (const auto &ps : got) EXPECT_NE(ps.first, 32);
    }
    {
        auto got = partials(machines::avx2_2core());
        EXPECT_TRUE(got.count({16, 4}));
        EXPECT_TRUE(got.count({8, 4}));
        for (const auto &ps : got) EXPECT_NE(ps.first, 32);
    }
    check_auto(b.g, "short row statistics");
}

// A wide row kernel whose output reads row-broadcast vectors (a LayerNorm's scale and shift) runs,
// on a machine with 32 vector registers, tiles of rows: the statistics at the tile, their partials stored lanes innermost (else every
// partial vector is a strided gather), the tile's rows innermost under each vector step, and
// longer parallel tasks. Rows with nothing broadcast (Softmax) and short rows (64 wide) keep one
// row at a time. All match the reference, ragged row counts included (98 rows: tiles of 2).
TEST(Autoschedule, WideRowsWithBroadcastParametersAreTiled) {
    Builder b;
    std::string x = b.input("x", {256, 2048});
    std::string g = b.random_constant("g", {2048}, 21), c = b.random_constant("c", {2048}, 22);
    b.out("LayerNormalization", {x, g, c}, {256, 2048}, {{"axis", int64_t(-1)}});
    std::string x2 = b.input("x2", {98, 1024});
    std::string g2 = b.random_constant("g2", {1024}, 23), c2 = b.random_constant("c2", {1024}, 24);
    b.out("Tanh", {b.node("LayerNormalization", {x2, g2, c2}, {98, 1024}, {{"axis", int64_t(-1)}})}, {98, 1024});
    std::string s = b.input("s", {256, 2048});
    b.out("Softmax", {s}, {256, 2048}, {{"axis", int64_t(1)}});
    std::string x3 = b.input("x3", {96, 64});
    std::string g3 = b.random_constant("g3", {64}, 25), c3 = b.random_constant("c3", {64}, 26);
    b.out("LayerNormalization", {x3, g3, c3}, {96, 64}, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    // Tiles need 32 vector registers (AVX-512); with AVX2's 16 the rows stay one at a time.
    const FixedMachine wide = machines::avx512_2core(), narrow = machines::avx2_2core();
    EXPECT_EQ(text_on(lp, narrow).find("row-broadcast"), std::string::npos);
    std::string text = text_on(lp, wide);
    EXPECT_EQ(loom::testing::count_of(text, "row-broadcast vector"), 2u) << text;  // the two wide LayerNorms only
    EXPECT_EQ(loom::testing::count_of(text, ".reorder_storage(u, "), 4u) << text;  // mean and var partials of each
    // 4 MB moved, more than the L2s: the 256-row LayerNorm prefetches its next tile, of 4 rows.
    EXPECT_NE(text.find(".split(ii, ii_tile, ii_r, 4)"), std::string::npos) << text;
    EXPECT_NE(text.find(".prefetch(x, j, j, "), std::string::npos) << text;
    EXPECT_NE(text.find(".split(ii, ii_tile, ii_r, 2)"), std::string::npos) << text;  // 98 rows
    EXPECT_NE(text.find("compute_at(layernormalization_0, ii_tile)"), std::string::npos) << text;
    check_auto(b.g, "tiled LayerNorm rows", 1e-5, &wide.model);  // the AVX-512 plan, run on this host
}

// Row kernels hand each core long runs of contiguous rows: tasks of 1 MB (kTaskElems), here 64
// rows of 4096 (8 rows before: Softmax 2048x4096 on the 2-core EPYC 1.413 -> 1.276 ms, paired),
// still at least 8 tasks a core (a 512-row softmax gets 32-row tasks).
TEST(Autoschedule, RowTasksAreAMegabyte) {
    for (int64_t rows : {2048, 512}) {
        Builder b;
        std::string x = b.input("x", {rows, 4096});
        b.out("Softmax", {x}, {rows, 4096}, {{"axis", int64_t(1)}});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        std::string want = rows == 2048 ? "split(i, io, ii, 64)" : "split(i, io, ii, 32)";
        for (const FixedMachine &fm : both_levels()) {
            std::string text = text_on(lp, fm);
            EXPECT_NE(text.find(want), std::string::npos) << rows << " rows on " << fm.name << ": " << text;
        }
    }
}

// A mean over the two inner dims of NCHW (a global average pool) fuses its two RVars into one
// dense run and rfactors it into a vector of partial sums per output, with a guarded tail where
// the run (7 x 7 = 49) is not a multiple of the vector; a reduction over dims that are not one
// dense block (axes 1 and 3) is not fused. Both match the reference.
TEST(Autoschedule, ReductionOverInnerDimsFusesItsRVars) {
    for (bool block : {true, false}) {
        Builder b;
        std::string x = b.input("x", {8, 64, 7, 7});
        std::vector<int64_t> axes = block ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{1, 3};
        Shape out = block ? Shape{8, 64} : Shape{8, 7};
        b.out("ReduceMean", {x}, out, {{"axes", axes}, {"keepdims", int64_t(0)}});
        prepare_graph(b.g);
        LoweredPipeline lp = lower_graph(b.g);
        for (const FixedMachine &fm : both_levels()) {
            AutoScheduleResult r = plan_on(lp, fm);
            std::string text = print_schedule(r.schedule);
            SCOPED_TRACE(fm.name + "\n" + text + tilings(r));
            EXPECT_EQ(text.find(".fuse(r.x, r.y, ") != std::string::npos, block);
            if (block) {
                EXPECT_NE(text.find(", TailStrategy::GuardWithIf)\n    .rfactor("), std::string::npos);
                int fused = 0;  // the reduction vars fused, partial sums in vector lanes
                for (const auto &[root, t] : r.tiling)
                    for (const auto &[func, ps] : t.partial_sums) fused += ps.first == fm.model.vector_bytes / 4 && ps.second == 0;
                EXPECT_EQ(fused, 1);
            }
        }
        check_auto(b.g, block ? "mean over H x W" : "mean over C and W", 1e-5);
    }
}

// A global average pool of a conv's 14-wide rows (a squeeze-excitation block): the conv may store
// its rows rounded up to whole vectors, so the pool does not fuse H and W into one run (each lane
// would be a gather) but sums vectors of a divisor of the row, 7 lanes on AVX2, 14 on AVX-512.
TEST(Autoschedule, PoolOfComputedRowsSumsVectorsWithinARow) {
    Builder b;
    std::string x = b.input("x", {1, 24, 14, 14});
    std::string c = b.node("Conv", {x, b.random_constant("w", {24, 1, 3, 3}, 41)}, {1, 24, 14, 14},
                           {{"kernel_shape", std::vector<int64_t>{3, 3}},
                            {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                            {"group", int64_t(24)}});
    std::string h = b.node("HardSwish", {c}, {1, 24, 14, 14});
    std::string g = b.node("GlobalAveragePool", {h}, {1, 24, 1, 1}, {}, DType::F32, "pool");
    b.out("Mul", {h, g}, {1, 24, 14, 14});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = print_schedule(plan_on(lp, fm).schedule);
        SCOPED_TRACE(fm.name + "\n" + text);
        const std::string lanes = fm.model.vector_bytes == 64 ? "14" : "7";
        EXPECT_EQ(text.find("pool.update(0).fuse("), std::string::npos);
        EXPECT_NE(text.find("pool.update(0).split(r.x, rxo, rxi, " + lanes + ").rfactor(rxi, u)"), std::string::npos);
    }
    check_auto_with_avx2(b.g, "squeeze-excitation pool of a conv's rows");
}

// MobileNetV3's hard-swish as PyTorch exports it, Mul(conv, HardSigmoid(conv)), after a 1x1 conv:
// prepared, it is one HardSwish node, and the conv is computed per tile of it (one kernel). As a
// diamond the conv had two consumers and was a pass of its own, and the gate a second pass.
TEST(Autoschedule, ConvWithExportedHardSwishIsOneKernel) {
    Builder b;
    std::string x = b.input("x", {1, 40, 14, 14});
    std::string c = b.node("Conv", {x, b.random_constant("w", {120, 40, 1, 1}, 43)}, {1, 120, 14, 14},
                           {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "conv");
    std::string g = b.node("HardSigmoid", {c}, {1, 120, 14, 14}, {{"alpha", 1.0 / 6}, {"beta", 0.5}});
    b.out("Mul", {c, g}, {1, 120, 14, 14}, {}, DType::F32, "act");
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = print_schedule(plan_on(lp, fm).schedule);
        SCOPED_TRACE(fm.name + "\n" + text);
        EXPECT_NE(text.find("conv.compute_at(act"), std::string::npos) << "the conv is computed per tile of the activation";
        EXPECT_EQ(text.find("hardsigmoid"), std::string::npos);
    }
    check_auto_with_avx2(b.g, "1x1 conv + exported hard-swish");
}

TEST(Autoschedule, OneOutputReductionIsSplit) {
    Builder b;
    std::string x = b.input("x", {512, 1024});
    b.out("ReduceSum", {x}, {}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t(0)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        Schedule s = plan_on(lp, fm).schedule;
        bool rfactor = false, parallel = false;
        for (const auto &st : s.statements)
            for (const auto &c : st.calls) {
                rfactor |= c.name == "rfactor";
                parallel |= c.name == "parallel" && !c.as_name.size() && st.func != lp.funcs.back().name;
            }
        EXPECT_TRUE(rfactor) << fm.name << "\n" << print_schedule(s);
        EXPECT_TRUE(parallel) << fm.name << "\n" << print_schedule(s);
    }
}

// Accuracy of a split reduction: a mean of 2^24 squares (positive terms, so rounding errors add up)
// is split so that no accumulator adds more than 4096 terms; it matches the reference to 1e-6. With
// 16 chunks of 16 lanes (65536 terms each) it was 8.8e-6 on the suite's mse, near the 1e-5 bound.
TEST(Autoschedule, LongSumsKeepAccumulatorsShort) {
    Builder b;
    Shape s = {1 << 24};
    std::string x = b.input("x", s);
    b.out("ReduceMean", {b.node("Mul", {x, x}, s)}, {1}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    for (const FixedMachine &fm : both_levels()) {
        std::string text = text_on(lp, fm);
        size_t at = text.find("split(r.x, rxo, rxi, ");
        ASSERT_NE(at, std::string::npos) << fm.name << "\n" << text;
        long chunk = std::stol(text.substr(at + 21));
        EXPECT_LE(chunk / lanes(fm), 4096) << fm.name << "\n" << text;  // terms per accumulator (chunk / lanes)
    }
    check_auto(b.g, "mean of 2^24 squares", 1e-6);
}

TEST(Autoschedule, RowStatisticsAreComputedPerRow) {
    LoweredPipeline lp = lower_graph(fixture("softmax_rows"));
    for (const FixedMachine &fm : both_levels()) {
        FusionPlan plan = plan_fusion(lp, fm.model);
        ASSERT_EQ(plan.kernels.size(), 1u) << fm.name;
        EXPECT_EQ(plan.kernels[0].kind, KernelKind::Rows);
        for (const auto &d : plan.decisions)
            if (d.func != plan.kernels[0].root) {
                EXPECT_EQ(d.placement, Placement::Row) << d.func << " on " << fm.name;
            }
    }
}

// A costly pointwise producer read by a row statistic and by the row's output (Softmax's
// exponentials, an Exp normalised by its row sum) is computed once per row into a buffer in cache;
// a cheap one (Abs) is inlined into both readers. Both schedules are correct.
TEST(Autoschedule, CostlyRowProducerIsBufferedPerRowCheapOneInlined) {
    LoweredPipeline sm = lower_graph(fixture("softmax_rows"));
    for (const FixedMachine &fm : both_levels()) {
        FusionPlan sp = plan_fusion(sm, fm.model);
        const FuncDecision *ex = sp.decision("softmax_exp");
        ASSERT_NE(ex, nullptr);
        EXPECT_EQ(ex->placement, Placement::Row) << fm.name << ": " << ex->why;
        // The defaults still inline it: eager Softmax is one pass over its output, as before.
        EXPECT_TRUE(has_call(eager_schedule(sm, fm.target), "softmax_exp", -1, {"compute_inline"})) << fm.name;
    }

    // Small rows (numerics) and rows too big for a cheap materialization (where the buffer's
    // score, not the traffic, decides).
    for (const std::string op : {"Exp", "Abs"}) {
        for (int64_t rows : {64, 8192}) {
            Builder b;
            Shape s{rows, 1024};
            std::string x = b.input("x", s);
            std::string e = b.node(op, {x}, s);
            std::string sum = b.node("ReduceSum", {e}, {rows, 1},
                                     {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
            b.out("Div", {e, sum}, s);
            prepare_graph(b.g);
            LoweredPipeline lp = lower_graph(b.g);
            for (const FixedMachine &fm : both_levels()) {
                FusionPlan plan = plan_fusion(lp, fm.model);
                ASSERT_EQ(plan.kernels.size(), 1u) << op << " on " << fm.name;
                for (const auto &f : lp.funcs) {
                    if (f.op != op) continue;
                    const FuncDecision *d = plan.decision(f.name);
                    EXPECT_EQ(d->placement, op == "Exp" ? Placement::Row : Placement::Inline)
                        << op << " on " << fm.name << ": " << d->why;
                    if (op == "Exp" && rows > 64) {
                        EXPECT_NE(d->why.find("per-row buffer"), std::string::npos) << fm.name << ": " << d->why;
                    }
                }
            }
            if (rows == 64) check_auto(b.g, op + " over its row sum", 1e-5);
        }
    }
}

// An attention-shaped Softmax ([2, 24, 128, 128], rows over the last dim) buffers its
// exponentials per 512-byte row: the buffer's row is the statistics' (depth 3), not the
// block under the outer dim (1.5 MB), which does not fit in half of L2. Rows that short prefetch
// nothing.
TEST(Autoschedule, ShortRowsOfAFourDimSoftmaxBufferTheirExponentials) {
    Builder b;
    Shape s{2, 24, 128, 128};
    std::string x = b.input("x", s);
    b.out("Softmax", {x}, s, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    std::string exp_name;
    for (const auto &f : lp.funcs)
        if (f.name.size() > 4 && f.name.compare(f.name.size() - 4, 4, "_exp") == 0) exp_name = f.name;
    for (const FixedMachine &fm : both_levels()) {
        AutoScheduleResult r = plan_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + print_schedule(r.schedule));
        const FuncDecision *ex = r.plan.decision(exp_name);
        ASSERT_NE(ex, nullptr) << "no exponentials Func";
        EXPECT_EQ(ex->placement, Placement::Row) << ex->why;
        EXPECT_EQ(calls_named(r.schedule, exp_name, -1, "compute_at"), 1u);
        EXPECT_EQ(print_schedule(r.schedule).find("prefetch"), std::string::npos);
    }
    check_auto(b.g, "attention-shaped softmax", 1e-5);
}

// The row buffer of a costly pointwise Func (Softmax's exponentials) prefetches the next row of
// the input it reads, one row (256 vector steps of 4096 floats on AVX-512) ahead; a LayerNorm
// whose bytes fit in the L2s and inputs that are not read point for point (a broadcast row) are
// not prefetched.
// Prefetching past the last row is harmless (NonFaulting): the schedule is still correct.
TEST(Autoschedule, CostlyRowBufferPrefetchesTheNextRow) {
    Builder b;
    Shape s{33, 4096}, row{1, 4096};
    std::string x = b.input("x", s), bias = b.input("bias", row);
    std::string xb = b.node("Add", {x, bias}, s);
    b.out("Softmax", {xb}, s, {{"axis", int64_t(-1)}});
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    LoweredPipeline ln = lower_graph(fixture("layernorm_rows"));
    for (const FixedMachine &fm : both_levels()) {  // one row ahead: 256 steps of 16 lanes, 512 of 8
        std::string text = text_on(lp, fm);
        SCOPED_TRACE(fm.name + "\n" + text);
        std::string want = str_cat("prefetch(x, j, j, ", 4096 / lanes(fm), ", NonFaulting)");
        EXPECT_NE(text.find(want), std::string::npos);
        EXPECT_EQ(text.find("prefetch(bias"), std::string::npos);
        EXPECT_EQ(text.find(".prefetch("), text.rfind(".prefetch(")) << "one prefetch only";
        EXPECT_EQ(text_on(ln, fm).find("prefetch"), std::string::npos) << text_on(ln, fm);
    }
    check_auto(b.g, "softmax over x + bias with the next row prefetched", 1e-5);
}

TEST(Autoschedule, MachineModelOverridesAndCacheFile) {
    MachineModel m = host_machine();
    override_machine(m, "cores=8");
    override_machine(m, "l2_bytes=1M");
    EXPECT_EQ(m.cores, 8);
    EXPECT_EQ(m.l2_bytes, 1 << 20);
    try {
        override_machine(m, "coers=2");
        FAIL() << "no error";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("did you mean 'cores'"), std::string::npos) << e.what();
    }
    std::string path = loom::testing::temp_path("machine_test.txt");
    std::ofstream(path) << "copy_gbps=30.5\ngflops=200\ncpu=test cpu\n";
    MachineModel d = detect_machine(host_target(), path);
    EXPECT_TRUE(d.measured);
    EXPECT_DOUBLE_EQ(d.copy_gbps, 30.5);
    EXPECT_DOUBLE_EQ(d.gflops, 200);
}

// The presets are fixed: the same model and target on every host, each level's vector width and
// registers from its target; an unknown name is a UserError naming it and listing the presets.
TEST(Autoschedule, MachinePresetsAreFixedAndNamed) {
    const FixedMachine avx2 = machines::by_name("avx2_2core"), avx512 = machines::by_name("avx512_2core");
    const FixedMachine big = machines::by_name("avx512_16core");
    EXPECT_EQ(avx2.target.to_string(), "x86-64-linux-avx-avx2-f16c-fma-sse41");
    EXPECT_TRUE(avx512.target.has_feature(Halide::Target::AVX512_Skylake)) << avx512.target.to_string();
    EXPECT_EQ(big.target, avx512.target);
    EXPECT_EQ(lanes(avx2), 8);
    EXPECT_EQ(avx2.model.vector_registers, 16);
    EXPECT_EQ(lanes(avx512), 16);
    EXPECT_EQ(avx512.model.vector_registers, 32);
    EXPECT_EQ(avx2.model.cores, 2);
    EXPECT_EQ(big.model.cores, 16);
    for (const FixedMachine &fm : machines::all()) {
        EXPECT_EQ(fm.model.l2_bytes, 2 << 20) << fm.name;
        EXPECT_EQ(fm.model.llc_bytes, 32 << 20) << fm.name;
        EXPECT_FALSE(fm.model.measured) << fm.name;
        EXPECT_EQ(fm.model.describe().rfind(fm.name + " preset: ", 0), 0u) << fm.model.describe();
    }
    MachineModel m = avx2.model;
    override_machine(m, "cores=4");
    EXPECT_EQ(m.describe().rfind("avx2_2core preset + cores=4: 4 cores, 32-byte vectors", 0), 0u) << m.describe();
    EXPECT_EQ(reference_machine(avx2.target, 2).describe().find("preset"), std::string::npos);
    try {
        machines::by_name("avx3_2core");
        FAIL() << "no error";
    } catch (const UserError &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("unknown machine preset 'avx3_2core'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("did you mean 'avx2_2core'"), std::string::npos) << msg;
        for (const FixedMachine &fm : machines::all()) EXPECT_NE(msg.find(fm.name), std::string::npos) << msg;
    }
    MachineOptions o = parse_machine_options({"avx512_16core", "cores=8", "l2_bytes=1M"});
    ASSERT_TRUE(o.preset.has_value());
    EXPECT_EQ(o.preset->name, "avx512_16core");
    EXPECT_EQ(o.overrides, (std::vector<std::string>{"cores=8", "l2_bytes=1M"}));
    EXPECT_FALSE(parse_machine_options({"cores=8"}).preset.has_value());
    EXPECT_THROW(parse_machine_options({"cores=8", "avx2_2core"}), UserError);
}

// `loom autoschedule --machine PRESET [key=value …]` plans for the preset and records its target and
// model in the header, on any host; a preset that contradicts --target, or that goes with flags
// that run the model here, is a user error saying what to drop.
TEST(Autoschedule, CommandPlansForAPreset) {
    const std::string model = loom::testing::data_path("sum_prologue.onnx");
    const std::string base = loom::testing::loom_binary() + " autoschedule " + model;
    std::string log;
    for (const FixedMachine &fm : machines::all()) {
        ASSERT_EQ(loom::testing::run_command(base + " --machine " + fm.name, log), 0) << log;
        Schedule got = parse_schedule(log, "stdout");
        EXPECT_EQ(got.target, fm.target.to_string()) << log;
        LoweredPipeline lp = lower_graph(fixture("sum_prologue"));
        Schedule want = plan_on(lp, fm).schedule;
        EXPECT_EQ(got.statements, want.statements) << fm.name << "\n" << log;
        EXPECT_NE(log.find("# auto-scheduled by loom's cost model for " + fm.name + " preset: "), std::string::npos)
            << log;
    }
    ASSERT_EQ(loom::testing::run_command(base + " --machine avx2_2core cores=4 --report", log), 0) << log;
    EXPECT_NE(log.find("machine: avx2_2core preset + cores=4: 4 cores, 32-byte vectors"), std::string::npos) << log;
    // --target may repeat the preset's target, not contradict it.
    ASSERT_EQ(loom::testing::run_command(base + " --machine avx2_2core --target x86-64-linux-avx-avx2-f16c-fma-sse41",
                                         log), 0) << log;
    EXPECT_EQ(loom::testing::run_command(base + " --machine avx512_2core --target x86-64-linux-avx-avx2-f16c-fma-sse41",
                                         log), 1) << log;
    EXPECT_NE(log.find("error: loom autoschedule --machine avx512_2core plans for target " +
                       machines::avx512_2core().target.to_string() + ", not --target x86-64-linux-avx-avx2-f16c-fma-sse41"),
              std::string::npos) << log;
    EXPECT_NE(log.find("drop --target"), std::string::npos) << log;
    EXPECT_EQ(loom::testing::run_command(base + " --machine avx512_2core --target cuda", log), 1) << log;
    EXPECT_NE(log.find("drop --target"), std::string::npos) << log;
    for (const char *runs : {"--profile", "--tune 2"}) {
        EXPECT_EQ(loom::testing::run_command(base + " --machine avx2_2core " + runs, log), 1) << log;
        const std::string flag = std::string(runs).substr(0, std::string(runs).find(' '));
        EXPECT_NE(log.find("--machine avx2_2core with " + flag), std::string::npos) << log;
        EXPECT_NE(log.find("drop the preset"), std::string::npos) << log;
    }
    EXPECT_EQ(loom::testing::run_command(base + " --machine avx3_2core", log), 1) << log;
    EXPECT_NE(log.find("error: unknown machine preset 'avx3_2core'; did you mean 'avx2_2core'? presets:"), std::string::npos)
        << log;
    EXPECT_NE(log.find("avx512_16core: 16 cores"), std::string::npos) << log;
    EXPECT_EQ(loom::testing::run_command(base + " --machine cores=4 avx2_2core", log), 1) << log;
    EXPECT_NE(log.find("a preset goes first"), std::string::npos) << log;
}

TEST(Autoschedule, CommandWritesOnceAndReports) {
    namespace fs = std::filesystem;
    std::string dir = loom::testing::temp_path("autosched_cli");
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string out = dir + "/m.sched", log;
    std::string base = loom::testing::loom_binary() + " autoschedule " + loom::testing::data_path("sum_prologue.onnx");
    ASSERT_EQ(loom::testing::run_command(base + " -o " + out, log), 0) << log;
    ASSERT_TRUE(fs::exists(out));
    EXPECT_NE(loom::testing::run_command(base + " -o " + out, log), 0);
    EXPECT_NE(log.find("--force"), std::string::npos) << log;
    ASSERT_EQ(loom::testing::run_command(base + " -o " + out + " --force --report --dot " + dir + "/g.dot", log), 0)
        << log;
    EXPECT_NE(log.find("fused_add_mul_sum"), std::string::npos) << log;
    EXPECT_TRUE(fs::exists(dir + "/g.dot"));
    EXPECT_TRUE(fs::exists(dir + "/g.before.dot"));
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(parse_schedule(text, out));
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// The cost model's decisions move with the machine (cores, caches, probed bandwidth and FLOP
// rate), and so do the loop nests it writes: every fixture's auto-schedule must be a schedule
// Halide accepts on every machine, the presets' included, not just the test machine. (The CNN's
// conv tile once pointed compute_at at a row var it had fused into the parallel var, on a probed
// 404-GFLOP/s VM only.)
TEST(Autoschedule, FixturesScheduleOnManyMachines) {
    const std::vector<std::vector<std::string>> variants = {
        {"cores=1"}, {"cores=2", "gflops=404", "copy_gbps=27.8"}, {"cores=4", "l2_bytes=256K"},
        {"cores=8", "l2_bytes=1M", "gflops=1500"}, {"cores=16", "l2_bytes=2M", "copy_gbps=100"},
        {"cores=64", "l2_bytes=8M", "gflops=5000", "copy_gbps=300"}};
    for (const char *name : {"cnn", "cnn_opset9", "mlp", "gelu_mlp", "transformer", "layernorm_rows",
                             "softmax_rows", "sum_prologue", "sigmoid_affine"}) {
        Graph g = fixture(name);
        for (const auto &overrides : variants) {
            MachineModel m = host_machine();
            std::string label = name;
            for (const auto &o : overrides) override_machine(m, o), label += " " + o;
            LoweredPipeline lp = lower_graph(g);
            Schedule s = auto_schedule(lp, host_target(), m);
            EXPECT_NO_THROW(apply_schedule(s, lp, host_target())) << label << "\n" << print_schedule(s);
        }
        for (const FixedMachine &fm : machines::all()) {  // each preset's plan, for its own target
            LoweredPipeline lp = lower_graph(g);
            Schedule s = plan_on(lp, fm).schedule;
            EXPECT_NO_THROW(apply_schedule(s, lp, fm.target)) << name << " on " << fm.name << "\n" << print_schedule(s);
        }
    }
}

}  // namespace
}  // namespace loom
