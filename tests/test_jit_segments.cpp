// A JIT model cut into several Pipelines at compute_root boundaries (codegen/jit_segments.h):
// cut fixtures match the reference (outputs poisoned) run after run; cuts never separate a Func
// from what is computed, stored or wrapped inside another root; a segment that reads a crossing
// buffer past its extents falls back to one pipeline; the environment override is checked.
#include <gtest/gtest.h>

#include <mutex>
#include <tuple>

#include <cstdlib>

#include <sched.h>

#include "autoschedule/autoschedule.h"
#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "codegen/openmp_threading.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_printer.h"
#include "support/cores.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

Graph fixture(const std::string &name) {
    Graph g = import_onnx(loom::testing::data_path(name + ".onnx"));
    prepare_graph(g);
    return g;
}

void expect_matches_reference(JitModel &m, const Graph &g, uint64_t seed, const std::string &what) {
    auto in = random_inputs(g, seed);
    auto outs = m.run(in);
    auto ref = run_reference(g, in);
    ASSERT_EQ(outs.size(), ref.size()) << what;
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-5)) << what << " output " << name;
}

// The fixtures cut into up to 4 pipelines match the reference. MobileNetV2's inverted residual has
// no cut since its depthwise conv computes its padded input per task (D143): that kernel rounds
// its rows up (on both ISAs), and the cut model keeps a kernel that computes past its extents in
// one pipeline with the buffers it reads and the kernels that read it; it runs as one pipeline.
TEST(JitSegments, CutFixturesMatchTheReference) {
    for (const char *name : {"cnn", "transformer", "inverted_residual", "mlp"}) {
        const bool cuttable = std::string(name) != "inverted_residual";
        Graph g = fixture(name);
        LoweredPipeline lp = lower_graph(g);
        apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
        JitModel m(std::move(lp), host_target(), 4);
        EXPECT_EQ(m.segments() > 1, cuttable) << name << ": " << m.segments() << " segments";
        // Twice, other inputs: the buffers between pipelines are allocated once and reused.
        expect_matches_reference(m, g, 11, name);
        expect_matches_reference(m, g, 12, name);
        // Every segment's parallel loops follow the threading choice (each Pipeline has its own
        // handlers).
        set_jit_threading(Threading::OpenMP);
        expect_matches_reference(m, g, 13, std::string(name) + " on OpenMP");
        set_jit_threading(Threading::Halide);
        EXPECT_EQ(m.segments() > 1, cuttable) << name << " changed its segments";
    }
}

TEST(JitSegments, EagerScheduleIsCutAtEveryNode) {
    Graph g = fixture("transformer");
    LoweredPipeline lp = lower_graph(g);
    for (auto &f : lp.funcs) f.func.compute_root();
    CutPlan plan = plan_cuts(lp, 1000, 1);
    // Every root is a whole buffer; a cut fits before each but the first.
    ASSERT_GT(plan.roots.size(), 10u);
    EXPECT_EQ(plan.cuts.size(), plan.roots.size() - 1);
    EXPECT_EQ(plan_cuts(lp, 1000, 1).cuts, plan.cuts);  // deterministic
    JitModel m(std::move(lp), host_target(), 1000);
    EXPECT_EQ(m.segments(), (int)plan.roots.size());
    expect_matches_reference(m, g, 3, "transformer, eager, one pipeline per Func");
}

/// x → relu → tanh → sigmoid (output), each a Func of its own.
struct Chain {
    loom::testing::GraphBuilder b;
    LoweredPipeline lp;
    Halide::Func a, t, s;
    Chain(Shape shape = {6, 10}) {
        std::string x = b.input("x", shape);
        std::string v = b.node("Relu", {x}, shape);
        v = b.node("Tanh", {v}, shape);
        b.out("Sigmoid", {v}, shape);
        lp = lower_graph(b.g);
        a = lp.funcs[0].func, t = lp.funcs[1].func, s = lp.funcs[2].func;
        a.compute_root();
        t.compute_root();
        s.compute_root();
    }
    std::vector<bool> legal() { return plan_cuts(lp, 3, 1).legal_before; }
};

TEST(JitSegments, CutsFollowWhatIsComputedInsideWhat) {
    {
        Chain c;
        EXPECT_EQ(c.legal(), (std::vector<bool>{false, true, true}));
        CutPlan plan = plan_cuts(c.lp, 3, 1);
        EXPECT_EQ(plan.cuts, (std::vector<int>{1, 2}));
        EXPECT_EQ(describe_cuts(plan), "pipeline 1 of 3 (1 computed Funcs): " + c.a.name() +
                                           "\npipeline 2 of 3 (1 computed Funcs): " + c.t.name() +
                                           "\npipeline 3 of 3 (1 computed Funcs): " + c.s.name() + "\n");
    }
    {
        // tanh inside sigmoid's rows: two roots, sigmoid reads relu's whole buffer through tanh.
        Chain c;
        c.t.compute_at(c.s, Halide::Var("i"));
        CutPlan plan = plan_cuts(c.lp, 3, 1);
        EXPECT_EQ(plan.roots, (std::vector<std::string>{c.a.name(), c.s.name()}));
        EXPECT_EQ(plan.legal_before, (std::vector<bool>{false, true}));
    }
    {
        // relu wrapped for tanh (its rows staged by a wrapper tanh computes): relu is not a whole
        // buffer any more, so it never crosses a cut.
        Chain c;
        c.a.in(c.t).compute_at(c.t, Halide::Var("i"));
        EXPECT_EQ(c.legal(), (std::vector<bool>{false, false, true}));
    }
    {
        // relu stored at root but computed inside tanh's rows: relu belongs to tanh's group.
        Chain c;
        c.a.store_root().compute_at(c.t, Halide::Var("i"));
        CutPlan plan = plan_cuts(c.lp, 3, 1);
        EXPECT_EQ(plan.roots, (std::vector<std::string>{c.t.name(), c.s.name()}));
    }
}

TEST(JitSegments, ACrossingBufferKeepsItsProducersStorageOrder) {
    // tanh stored column-major (reorder_storage, as Li2018 stores channels innermost): the buffer
    // between the pipelines keeps that layout; relu, a graph output too, keeps the caller's.
    Chain c;
    c.b.output(c.b.g.nodes[0].outputs[0]);
    c.lp = lower_graph(c.b.g);
    for (auto &f : c.lp.funcs) f.func.compute_root();
    c.lp.funcs[1].func.reorder_storage(Halide::Var("i"), Halide::Var("j"));
    SegmentedPipeline sp = cut_pipeline(c.lp, plan_cuts(c.lp, 3, 1));
    ASSERT_EQ(sp.boundaries.size(), 2u);
    for (const auto &bd : sp.boundaries) {
        bool tanh = bd.func == c.lp.funcs[1].name;
        EXPECT_EQ(bd.storage_order, tanh ? (std::vector<int>{1, 0}) : (std::vector<int>{0, 1})) << bd.func;
        EXPECT_EQ(bd.strides, tanh ? (std::vector<int>{6, 1}) : (std::vector<int>{1, 10})) << bd.func;
    }
    Graph g = c.b.g;
    JitModel m(std::move(c.lp), host_target(), 3);
    ASSERT_EQ(m.segments(), 3);
    expect_matches_reference(m, g, 21, "column-major buffer across a cut");
    EXPECT_EQ(m.segments(), 3);
}

TEST(JitSegments, AFuncThatComputesPastItsExtentsIsNotCutFromWhatItReads) {
    // tanh's RoundUp split computes 12 columns of 10, so it reads relu past its extent: in one
    // pipeline Halide computes relu over 12 columns, but relu's buffer across a cut holds 10. The
    // plan keeps the two together (a host or CUDA artifact has no fallback); a split that divides
    // (5 of 10) or guards its tail keeps the cut.
    for (auto [factor, tail, cuttable] : {std::tuple{4, Halide::TailStrategy::RoundUp, false},
                                          std::tuple{5, Halide::TailStrategy::RoundUp, true},
                                          std::tuple{4, Halide::TailStrategy::GuardWithIf, true}}) {
        Chain c;
        c.t.split(Halide::Var("j"), Halide::Var("jo"), Halide::Var("ji"), factor, tail);
        EXPECT_EQ(c.legal()[1], cuttable) << factor;
        Graph g = c.b.g;
        JitModel m(std::move(c.lp), host_target(), 3);
        // Not cuttable: tanh's own buffer is 12 columns too, so it cannot cross the other cut either.
        EXPECT_EQ(m.segments(), cuttable ? 3 : 1) << factor;
        expect_matches_reference(m, g, 5, "split by " + std::to_string(factor));
        EXPECT_EQ(m.segments(), cuttable ? 3 : 1) << "no fallback needed";
    }
}

// \p b's graph, auto-scheduled for the AVX2 preset (its schedule holding \p must_schedule): the
// cut right after its root "stem" stays legal, the JIT cuts it into several pipelines, and they
// match the reference with no fallback to one pipeline.
void expect_cut_after_stem(loom::testing::GraphBuilder &b, uint64_t seed, const std::string &what,
                           const std::string &must_schedule = "") {
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    Schedule s = auto_schedule(lp, host_target(), machines::avx2_2core().model);
    ASSERT_NE(print_schedule(s).find(must_schedule), std::string::npos) << print_schedule(s);
    apply_schedule(s, lp, host_target());
    CutPlan plan = plan_cuts(lp, 8, 1);
    bool stem_cut = false;
    for (size_t k = 1; k < plan.roots.size(); k++)
        stem_cut |= plan.roots[k - 1] == "stem" && plan.legal_before[k];
    EXPECT_TRUE(stem_cut) << describe_cuts(plan);
    Graph g = b.g;
    JitModel m(std::move(lp), host_target(), 8);
    const int segments = m.segments();
    EXPECT_GT(segments, 1);
    expect_matches_reference(m, g, seed, what);
    EXPECT_EQ(m.segments(), segments) << "no fallback to one pipeline";
}

// A 120-channel conv, channel-tiled through its wrapper in blocks of 24 (AVX2 plans), computes
// nothing past an extent, so the conv's input still crosses a cut (the text detector's JIT compile
// took 99 s in 5 pipelines while channel tiles rounded such convs up to whole 16-channel blocks).
TEST(JitSegments, AChannelTiledConvKeepsTheCutBeforeIt) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {1, 64, 14, 14});
    std::string r = b.node("Relu", {x}, {1, 64, 14, 14}, {}, DType::F32, "stem");
    std::string conv = b.node("Conv", {r, b.random_constant("w", {120, 64, 1, 1}, 61), b.random_constant("bias", {120}, 62)},
                              {1, 120, 14, 14}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "expand");
    std::string hs = b.node("HardSigmoid", {conv}, {1, 120, 14, 14}, {{"alpha", 1.0f / 6}, {"beta", 0.5f}});
    std::string act = b.node("Mul", {conv, hs}, {1, 120, 14, 14});
    b.out("Conv", {act, b.random_constant("wdw", {120, 1, 3, 3}, 63)}, {1, 120, 14, 14},
          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t(120)}});
    expect_cut_after_stem(b, 31, "120-channel conv across a cut");
}

// A 1x1 conv reading a channels-innermost copy of its input (`stem.in(conv)` at root, the cost
// model's staging) while a residual Add reads the stem itself: the stem still crosses a cut as a
// whole buffer, the copy stays with the conv, and the cut model matches the reference (the copies
// tied ResNet-50's blocks together and its JIT compile took 4x longer).
TEST(JitSegments, AConsumersRootCopyKeepsTheCutBeforeIt) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {1, 1024, 7, 7});
    std::string stem = b.node("Relu", {x}, {1, 1024, 7, 7}, {}, DType::F32, "stem");
    std::string conv = b.node("Conv", {stem, b.random_constant("w", {1024, 1024, 1, 1}, 71), b.random_constant("bias", {1024}, 72)},
                              {1, 1024, 7, 7}, {{"kernel_shape", std::vector<int64_t>{1, 1}}}, DType::F32, "bottleneck");
    std::string sum = b.node("Add", {conv, stem}, {1, 1024, 7, 7});
    b.out("Relu", {sum}, {1, 1024, 7, 7});
    expect_cut_after_stem(b, 41, "1x1 conv reading a root copy across a cut", "stem.in(bottleneck) as bottleneck_in;");
}

TEST(JitSegments, AGlobalWrapperCrossesACutAsAWholeBuffer) {
    // tanh computed per row of its global wrapper (`tanh.in()`, as the cost model wraps a conv to
    // compute it in row blocks): the wrapper has tanh's shape, and sigmoid, which reads tanh
    // through it, may be cut from it (the text detector's FPN, all wrapped convs, compiled as one
    // pipeline of 22 Funcs).
    Chain c;
    Halide::Func w = c.t.in();
    w.compute_root();
    c.t.compute_at(w, Halide::Var("i"));
    CutPlan plan = plan_cuts(c.lp, 3, 1);
    EXPECT_EQ(plan.roots, (std::vector<std::string>{c.a.name(), w.name(), c.s.name()}));
    EXPECT_EQ(plan.legal_before, (std::vector<bool>{false, true, true}));
    SegmentedPipeline sp = cut_pipeline(c.lp, plan);
    ASSERT_EQ(sp.boundaries.size(), 2u);
    const SegmentBoundary *crossing = nullptr;
    for (const auto &bd : sp.boundaries)
        if (bd.func == w.name()) crossing = &bd;
    ASSERT_NE(crossing, nullptr);
    EXPECT_EQ(crossing->extents, (std::vector<int>{10, 6}));
    Graph g = c.b.g;
    JitModel m(std::move(c.lp), host_target(), 3);
    ASSERT_EQ(m.segments(), 3);
    expect_matches_reference(m, g, 21, "global wrapper across a cut");
    expect_matches_reference(m, g, 22, "global wrapper across a cut, second run");
    EXPECT_EQ(m.segments(), 3) << "no fallback to one pipeline";
}

TEST(JitSegments, AGraphOutputReadAcrossACutIsReadFromTheCallersBuffer) {
    // relu is an output and sigmoid's segment reads it: from the output tensor of this run.
    Chain c;
    c.b.output(c.b.g.nodes[0].outputs[0]);
    c.lp = lower_graph(c.b.g);
    for (auto &f : c.lp.funcs) f.func.compute_root();
    Graph g = c.b.g;
    JitModel m(std::move(c.lp), host_target(), 3);
    ASSERT_EQ(m.segments(), 3);
    expect_matches_reference(m, g, 8, "graph output across a cut");
    expect_matches_reference(m, g, 9, "graph output across a cut, second run");
    EXPECT_EQ(m.segments(), 3);
}

TEST(JitSegments, TheJitCutsLargeModelsOnTheCpuOnly) {
    Graph g = fixture("transformer");
    LoweredPipeline lp = lower_graph(g);
    SegmentLimits cpu = default_segment_limits(lp, host_target());
    EXPECT_GT(cpu.max_segments, 1);
    EXPECT_EQ(cpu.min_funcs, kMinFuncsPerSegment);
    EXPECT_EQ(default_segment_limits(lp, Halide::Target("x86-64-linux-cuda")).max_segments, 1);
    // An artifact's chain keeps device buffers between pipelines: it cuts CUDA models too.
    EXPECT_GT(default_segment_limits(lp, Halide::Target("x86-64-linux-cuda"), SegmentRunner::Artifact).max_segments, 1);
    // A small model stays one pipeline by default.
    Chain c;
    EXPECT_TRUE(plan_cuts(c.lp, cpu.max_segments, cpu.min_funcs).cuts.empty());
}

TEST(JitSegments, CompilesUseTheCoresTheProcessMayRunOnCostliestFirst) {
    // Confined to one core (as `taskset -c 0` or a container's cpuset would), Loom counts one, so
    // it neither compiles on nor plans for the machine's other cores; on that one core the
    // segments' compiles run costliest first, so that a long one never starts last.
    cpu_set_t all, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
    EXPECT_EQ(usable_cores(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    const int confined = usable_cores();
    std::vector<size_t> started;
    std::mutex m;
    run_in_parallel(4, [&](size_t k) {
        std::lock_guard<std::mutex> lock(m);
        started.push_back(k);
    }, {1, 3, 9, 2});
    // On one core the JIT still cuts into kJitSegments pipelines (smaller ones lower faster);
    // an artifact takes twice the cores, at least 8.
    Graph g = fixture("transformer");
    LoweredPipeline lp = lower_graph(g);
    const SegmentLimits jit = default_segment_limits(lp, host_target());
    const SegmentLimits artifact = default_segment_limits(lp, host_target(), SegmentRunner::Artifact);
    ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
    EXPECT_EQ(confined, 1);
    EXPECT_EQ(jit.max_segments, kJitSegments);
    EXPECT_EQ(artifact.max_segments, 8);
    EXPECT_EQ(started, (std::vector<size_t>{2, 1, 3, 0}));
}

TEST(JitSegments, BadEnvironmentOverrideNamesTheVariableAndTheFix) {
    Chain c;
    for (const char *bad : {"0", "four", "-2", ""}) {
        setenv("LOOM_PIPELINES", bad, 1);
        try {
            default_segment_limits(c.lp, host_target());
            ADD_FAILURE() << "LOOM_PIPELINES='" << bad << "' accepted";
        } catch (const UserError &e) {
            std::string msg = e.what();
            EXPECT_NE(msg.find("LOOM_PIPELINES='" + std::string(bad) + "'"), std::string::npos) << msg;
            EXPECT_NE(msg.find("LOOM_PIPELINES=1"), std::string::npos) << msg;
        }
    }
    setenv("LOOM_PIPELINES", "2", 1);
    SegmentLimits two = default_segment_limits(c.lp, host_target());
    // The override never cuts a GPU pipeline, and a bad value is refused on every target.
    SegmentLimits gpu = default_segment_limits(c.lp, Halide::Target("x86-64-linux-cuda"));
    setenv("LOOM_PIPELINES", "zero", 1);
    EXPECT_THROW(default_segment_limits(c.lp, Halide::Target("x86-64-linux-cuda")), UserError);
    unsetenv("LOOM_PIPELINES");
    EXPECT_EQ(two.max_segments, 2);
    EXPECT_EQ(two.min_funcs, 1);
    EXPECT_EQ(gpu.max_segments, 1);
    EXPECT_EQ(segment_pipeline(c.lp, Halide::Target("x86-64-linux-cuda"), 3).segments.size(), 1u);
}

}  // namespace
}  // namespace loom
