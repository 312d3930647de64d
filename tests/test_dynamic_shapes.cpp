// Dynamic shapes (graph/symbolic_shapes.h): symbolic dims through preparation, lowering, schedules
// and the JIT; one compile run at awkward sizes (1, primes, one less and one more than a tile) and
// checked against the reference interpreter prepared for that size alone, on random inputs with
// poisoned outputs (JitModel::run); and the user errors, each naming the culprit and the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "autoschedule/autoschedule.h"
#include "cli/input_binding.h"
#include "cli/model_loading.h"
#include "cli/scheduling.h"
#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/symbolic_shapes.h"
#include "graph_builder.h"
#include "lower/loop_scratch.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "schedule/size_specialization.h"
#include "test_util.h"

namespace loom {
namespace {

using testing::GraphBuilder;

// \p imported prepared with the input bindings \p flags (x=16x64 …), every dim symbolic when
// \p dynamic.
Graph prepared_with(const Graph &imported, const std::vector<std::string> &flags, bool dynamic = true) {
    Graph g = imported;
    PrepareOptions opts;
    for (const auto &f : flags) parse_input_binding(f, opts.bindings);
    opts.dynamic_all = dynamic;
    prepare_graph(g, opts);
    return g;
}

// The cost model's schedule on the fixed avx2_2core machine, whatever the host (the plans these
// tests assert do not depend on the build machine's CPU).
AutoscheduleFn fixed_avx2_2core() {
    const FixedMachine fm = machines::avx2_2core();
    return [fm](const LoweredPipeline &p, const Halide::Target &) { return auto_schedule(p, fm.target, fm.model); };
}

// The same on the fixed avx512_2core machine.
AutoscheduleFn fixed_avx512_2core() {
    const FixedMachine fm = machines::avx512_2core();
    return [fm](const LoweredPipeline &p, const Halide::Target &) { return auto_schedule(p, fm.target, fm.model); };
}

/// The dynamic transformer fixture and its one compile for every size, planned at 2x64x64 on the
/// fixed avx2_2core machine for \p target (\p short_sizes: with a second plan for short sequences).
struct TransformerEverySize {
    std::string path = testing::data_path("dynamic_transformer.onnx");
    Graph imported = import_onnx(path);
    Halide::Target target;
    cli::EverySizeModel em;
    TransformerEverySize(const Halide::Target &t, bool short_sizes) : target(t) {
        auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
        const AutoscheduleFn fixed = fixed_avx2_2core();
        em = cli::schedule_compiled_for_every_size(prepare_at({"x=2x64x64"}), prepare_at, "auto", target, path,
                                                   short_sizes, fixed);
    }
    /// The size specializations of the main plan, read before it is applied (applying splits the
    /// pipeline's Funcs), on a fresh lowering of the planned size.
    std::map<std::pair<std::string, int>, SizeSpecialization> specializations() const {
        LoweredPipeline fresh = lower_graph(prepared_with(imported, {"x=2x64x64"}), lowering_for_schedule({}, "auto"));
        return plan_size_specializations(em.main.schedule, fresh, machines::avx2_2core().target);
    }
};

// Runs \p m with random inputs (\p seed) at input x of \p shape, and expects output y within
// the tolerance of the reference interpreter on \p imported bound to that shape.
void expect_y_matches_reference(JitModel &m, const Graph &imported, const Shape &shape, int seed) {
    Graph gs = imported;
    PrepareOptions so;
    so.bindings = {{"x", shape}};
    prepare_graph(gs, so);
    auto ins = random_inputs(gs, seed);
    auto outs = m.run(ins);
    auto ref = run_reference(gs, ins);
    EXPECT_TRUE(testing::close(outs.at("y"), ref.at("y"), 1e-5, 1e-3)) << shape_str(shape);
}

TEST(SymDim, FoldsStaticPartsAndKeepsTheRest) {
    SymDim h = SymDim::symbol("H");
    EXPECT_EQ((SymDim(3) * 4 + 2).value(), 14);
    EXPECT_EQ(floordiv(h + 1, 2).str(), "(H + 1)/2");
    EXPECT_EQ(((h + 1) + 2).str(), "H + 3");
    EXPECT_EQ(((h - 3) + 3).str(), "H");
    EXPECT_EQ(floordiv(h * 4, 2).str(), "H*2");
    EXPECT_EQ(floordiv(floordiv(h, 2), 2).str(), "H/4");
    EXPECT_EQ(floordiv(h + 1, 2).eval({{"H", 7}}), 4);
    EXPECT_EQ(floordiv(h - 8, 4).eval({{"H", 5}}), -1);  // floors, as ONNX's size formulas do
    EXPECT_EQ(sym_shape_str({SymDim::symbol("N"), 3, floordiv(h + 1, 2)}), "Nx3x((H + 1)/2)");
}

TEST(SymDim, LeastSizesFollowTheModelsRequirements) {
    SymDim h = SymDim::symbol("H"), w = SymDim::symbol("W");
    DynamicDims d;
    d.symbols = {"H", "W"};
    d.ranges["H"] = DimRange{1, 2048};
    d.ranges["W"] = DimRange{40, 2048};
    // Sizes divisible by 32, as an FPN's adds ask of a detector's height and width.
    for (const SymDim &s : {h, w}) d.requirements.push_back({floordiv(s, 32) * 32, s, false, "Add"});
    d.requirements.push_back({h * w, SymDim(1), true, "both"});  // on two symbols: no bound of either
    auto least = d.least_sizes();
    EXPECT_EQ(least.at("H"), 32);
    EXPECT_EQ(least.at("W"), 64);  // the declared 40 raised to the first size the model accepts
}

/// An imported graph with input \p name of \p dims, where -1 dims are named by \p symbols.
void symbolic_input(GraphBuilder &b, const std::string &name, Shape dims, std::vector<std::string> symbols) {
    b.input(name, dims);
    ValueInfo &vi = b.g.values[name];
    vi.symbols = std::move(symbols);
    vi.has_shape = true;
}

/// Prepares \p imported for every size, compiles it once under \p spec (in at most \p max_segments
/// Pipelines; 0: as the JIT chooses), and runs that one model at each of \p sizes against the
/// reference interpreter on the graph prepared for that size alone. Returns the Pipelines it ran as.
int expect_one_compile_serves(const Graph &imported, const std::vector<InputBindings> &sizes,
                              const std::string &spec, const std::map<std::string, DimRange> &ranges = {},
                              int max_segments = 1) {
    Graph g = imported;
    PrepareOptions opts;
    opts.bindings = sizes.at(0);
    opts.dynamic_dims = ranges;
    opts.dynamic_all = ranges.empty();
    prepare_graph(g, opts);
    EXPECT_TRUE(g.dynamic.active());
    if (!g.dynamic.active()) return 0;
    Halide::Target t = host_target();
    cli::ScheduledModel sm = cli::schedule_model(g, spec, t, testing::data_path("dynamic_mlp.onnx"));
    JitModel m(sm.pipeline, t, max_segments);
    for (const auto &b : sizes) {
        Graph gs = imported;
        PrepareOptions so;
        so.bindings = b;
        prepare_graph(gs, so);
        auto ins = random_inputs(gs, 11);
        auto outs = m.run(ins);
        auto ref = run_reference(gs, ins);
        std::string at;
        for (const auto &in : gs.inputs) at += in + "=" + shape_str(gs.value(in).shape) + " ";
        for (const auto &[name, r] : ref) {
            EXPECT_TRUE(outs.count(name)) << name;
            if (!outs.count(name)) continue;
            EXPECT_EQ(outs.at(name).shape(), r.shape()) << spec << " at " << at;
            EXPECT_TRUE(testing::close(outs.at(name), r, 1e-5, 1e-3)) << spec << " at " << at << name;
        }
    }
    return m.segments();
}

std::vector<InputBindings> sizes_of(const std::string &input, const std::vector<Shape> &shapes) {
    std::vector<InputBindings> r;
    for (const auto &s : shapes) r.push_back({{input, s}});
    return r;
}

TEST(DynamicShapes, MlpBatchOneCompile) {
    Graph g = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    auto sizes = sizes_of("x", {{8, 64}, {1, 64}, {2, 64}, {7, 64}, {15, 64}, {16, 64}, {17, 64}, {64, 64}});
    for (const char *spec : {"eager", "auto"}) expect_one_compile_serves(g, sizes, spec);
}

TEST(DynamicShapes, CnnBatchHeightWidthOneCompile) {
    Graph g = import_onnx(testing::data_path("dynamic_cnn.onnx"));
    auto sizes = sizes_of("x", {{2, 3, 24, 40}, {1, 3, 8, 8}, {1, 3, 13, 17}, {3, 3, 31, 33}, {1, 3, 64, 48}});
    // Every dim open and undeclared: the size Params' ranges reach 2^30, where Halide 14's bounds
    // arithmetic on N*H*W products overflowed int64 and the inline schedule read a constant map.
    for (const char *spec : {"eager", "inline", "auto"}) expect_one_compile_serves(g, sizes, spec);
}

TEST(DynamicShapes, TransformerBatchAndSequenceOneCompile) {
    Graph g = import_onnx(testing::data_path("dynamic_transformer.onnx"));
    Graph p = g;
    PrepareOptions opts;
    opts.bindings = {{"x", {2, 16, 64}}};
    opts.dynamic_all = true;
    prepare_graph(p, opts);
    EXPECT_EQ(sym_shape_str(p.value("y").sym), "batchxseqx64");
    auto sizes = sizes_of("x", {{2, 16, 64}, {1, 1, 64}, {1, 7, 64}, {3, 15, 64}, {2, 17, 64}, {1, 33, 64}});
    for (const char *spec : {"eager", "auto"}) expect_one_compile_serves(g, sizes, spec);
}

// A model compiled for every size is cut into several Pipelines as a fixed-size one is: the buffers
// crossing a cut take each run's sizes (reallocated when they change), and both sides are compiled
// for a dense buffer of the Func's symbolic shape.
TEST(DynamicShapes, CutIntoSeveralPipelinesServesEverySize) {
    Graph cnn = import_onnx(testing::data_path("dynamic_cnn.onnx"));
    auto spatial = sizes_of("x", {{2, 3, 24, 40}, {1, 3, 8, 8}, {1, 3, 13, 17}, {3, 3, 31, 33}, {2, 3, 24, 40},
                                  {1, 3, 23, 25}, {1, 3, 64, 48}});
    for (const char *spec : {"eager", "auto"}) EXPECT_GT(expect_one_compile_serves(cnn, spatial, spec, {}, 4), 1) << spec;
    Graph tf = import_onnx(testing::data_path("dynamic_transformer.onnx"));
    auto seqs = sizes_of("x", {{2, 16, 64}, {1, 1, 64}, {1, 7, 64}, {3, 15, 64}, {2, 17, 64}, {1, 33, 64}});
    EXPECT_GT(expect_one_compile_serves(tf, seqs, "auto", {}, 4), 1);
    Graph mlp = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    auto batches = sizes_of("x", {{16, 64}, {1, 64}, {2, 64}, {7, 64}, {15, 64}, {17, 64}, {64, 64}});
    EXPECT_GT(expect_one_compile_serves(mlp, batches, "auto", {}, 3), 1);
}

// Where the declared ranges make every loop of a kernel long enough for its splits, the kernel is
// compiled once with the tails as written (no specialization and no guarded copy); a RoundUp split
// (which no size is known to divide) is guarded in that one copy. Checked at the range's lower end,
// at sizes no tile divides, and at the planned size.
TEST(DynamicShapes, LoopsLongEnoughAtEverySizeCompileOnce) {
    Graph imported = import_onnx(testing::data_path("dynamic_cnn.onnx"));
    Graph g = imported;
    PrepareOptions opts;
    opts.bindings = {{"x", {2, 3, 24, 40}}};
    opts.dynamic_dims = {{"batch", DimRange{1, 4}}, {"height", DimRange{24, 64}}, {"width", DimRange{24, 64}}};
    prepare_graph(g, opts);
    ASSERT_TRUE(g.dynamic.active());
    Halide::Target t = host_target();
    cli::ScheduledModel sm = cli::schedule_model(g, "auto", t, testing::data_path("dynamic_cnn.onnx"));
    std::vector<std::string> once;
    for (const auto &[when, stages] : sm.applied.specialized)
        if (when.rfind("every size", 0) == 0) once = stages;
    ASSERT_FALSE(once.empty()) << sm.applied.specializations_text("");
    for (const auto &lf : sm.pipeline.funcs) {
        if (std::find(once.begin(), once.end(), lf.name) == once.end()) continue;
        EXPECT_TRUE(sm.applied.funcs.at(lf.name).function().definition().specializations().empty()) << lf.name;
    }
    JitModel m(sm.pipeline, t, 1);
    for (Shape s : std::vector<Shape>{{1, 3, 24, 24}, {3, 3, 31, 33}, {1, 3, 25, 63}, {2, 3, 24, 40}, {4, 3, 64, 64}}) {
        expect_y_matches_reference(m, imported, s, 5);
    }
}

// A split the schedule itself writes GuardWithIf (the MLP's GEMM rows by 6 and 8) holds at every
// batch: it asks for no size long enough. Its last tile kept a guard per row inside the k loop
// (accumulators in memory) where a compile for one size folds them: a copy of the stage for the
// planned size's remainder and one for batch 1 fold them there (bench/DECISIONS.md#d128).
TEST(DynamicShapes, SplitsTheScheduleGuardsAskNothingOfTheSizes) {
    const std::string path = testing::data_path("dynamic_mlp.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const AutoscheduleFn fixed = fixed_avx2_2core();
    Halide::Target t = host_target();
    auto text_of = [&](int copies) {
        TailCopiesScope scope(copies);
        cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=16x64"}), prepare_at, "auto", t,
                                                                       path, false, fixed);
        return em.main.applied.specializations_text("");
    };
    // fc1 and fc2 ask nothing of the sizes; fc3, per tile of its wrapper (D135), its 8 rows, then
    // 4 in its short-rows copy (D144).
    const std::string fc3_rows = "specialized when size_batch >= 8 (tails as written; the guarded loops otherwise): "
                                 "fc3_gemm_out fc3_gemm fc3_gemm.update(0)";
    const std::string fc3_short = "specialized when size_batch >= 4 (tails as written; the guarded loops otherwise): "
                                  "fc3_gemm_out fc3_gemm fc3_gemm.update(0)";
    EXPECT_EQ(text_of(0), fc3_short + "\n" + fc3_rows + "\n");
    std::string text = text_of(2);
    for (const std::string want : {std::string("specialized when size_batch % 6 == 4 (tails as written; the guarded "
                                               "loops otherwise): fc1_gemm.update(0) fc2_gemm.update(0)"),
                                   std::string("specialized when size_batch == 1 (tails as written; the guarded loops "
                                               "otherwise): fc1_gemm.update(0) fc2_gemm.update(0)\n"),
                                   fc3_rows})
        EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=16x64"}), prepare_at, "auto", t,
                                                                   path, false, fixed);
    // By default (D136) the third copy folds batch 2's tile.
    std::string def = em.main.applied.specializations_text("");
    EXPECT_NE(def.find("specialized when size_batch == 2 (tails as written; the guarded loops otherwise): "
                       "fc1_gemm.update(0) fc2_gemm.update(0)"),
              std::string::npos)
        << def;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (int batch : {16, 1, 2, 4, 5, 6, 7, 10, 13, 17, 22, 64}) {
        expect_y_matches_reference(*m, imported, {batch, 64}, 5);
    }
}

// Tail copies (D128) go to a stage whose planned size has at most 4 of its row tiles (D136): the
// MLP planned at batch 16 (3 tiles of 6) gets them, planned at 64 (11 tiles) not; its one compile
// still runs every batch within the tolerance.
TEST(DynamicShapes, TailCopiesWhereTheLastTileIsAQuarterOfTheRows) {
    const std::string path = testing::data_path("dynamic_mlp.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const AutoscheduleFn fixed = fixed_avx2_2core();
    Halide::Target t = host_target();
    auto em_at = [&](const std::string &plan) {
        return cli::schedule_compiled_for_every_size(prepare_at({plan}), prepare_at, "auto", t, path, false, fixed);
    };
    std::string at16 = em_at("x=16x64").main.applied.specializations_text("");
    EXPECT_NE(at16.find("size_batch % 6 == 4"), std::string::npos) << at16;
    cli::EverySizeModel em = em_at("x=64x64");
    std::string at64 = em.main.applied.specializations_text("");
    EXPECT_EQ(at64.find("fc1_gemm.update(0)"), std::string::npos) << at64;
    EXPECT_EQ(at64.find("% 6 =="), std::string::npos) << at64;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (int batch : {64, 1, 2, 5, 63, 65}) {
        expect_y_matches_reference(*m, imported, {batch, 64}, 3);
    }
}

// The MLP's last GEMM (64 -> 10) at batch 16 has two row tiles of 8, too few for the cores' tasks:
// a compile for that size takes column panels at root, whose guarded rows keep the accumulators in
// memory. Compiled for every size, its rows move (batch 64 has 8 tiles), so it is computed per
// micro-kernel tile of a wrapper as at batch 64 (D135); a static plan is unchanged.
TEST(DynamicShapes, MovingGemmRowsComputePerWrapperTile) {
    const std::string path = testing::data_path("dynamic_mlp.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags, bool dynamic) {
        return prepared_with(imported, flags, dynamic);
    };
    const AutoscheduleFn fixed = fixed_avx2_2core();
    Halide::Target t = host_target();
    cli::ScheduledModel st = cli::schedule_model(prepare_at({"x=16x64"}, false), "auto", t, path, {}, fixed);
    std::string static_text = print_schedule(st.schedule);
    EXPECT_EQ(static_text.find("fc3_gemm.in()"), std::string::npos) << static_text;
    EXPECT_NE(static_text.find("column panels of 10"), std::string::npos) << static_text;
    auto dyn = [&](const std::vector<std::string> &f) { return prepare_at(f, true); };
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(dyn({"x=16x64"}), dyn, "auto", t, path, false, fixed);
    std::string text = print_schedule(em.main.schedule);
    for (const char *want : {"fc3_gemm.in() as fc3_gemm_out;", "fc3_gemm.compute_at(fc3_gemm_out, jo)",
                             "fc3_gemm_out.compute_root()\n    .split(j, jo, ji, 8)\n    .split(i, io, ii, 8)"})
        EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (int batch : {16, 1, 3, 7, 8, 9, 33, 64}) {
        Graph gs = prepare_at({"x=" + std::to_string(batch) + "x64"}, false);
        auto ins = random_inputs(gs, 7);
        auto outs = m->run(ins);
        auto ref = run_reference(gs, ins);
        EXPECT_TRUE(testing::close(outs.at("y"), ref.at("y"), 1e-5, 1e-3)) << "batch " << batch;
    }
}

// Planned at sequence 64 (on the fixed avx2_2core machine), the transformer's GEMM kernels need
// sequences long enough for their row splits; shorter ones run a second plan made at the range's
// small end (sequence 1), and the first plan then compiles no guarded copies. Both are checked
// against the reference on each side of the threshold.
TEST(DynamicShapes, ShortSizesRunASecondPlan) {
    TransformerEverySize tr(host_target(), true);
    const Graph &imported = tr.imported;
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const Halide::Target &t = tr.target;
    cli::EverySizeModel &em = tr.em;
    ASSERT_TRUE(em.short_sizes) << em.main.applied.specializations_text("");
    EXPECT_EQ(em.short_plan, "x=2x1x64");
    EXPECT_EQ(em.long_enough.text, "size_seq >= 16, size_seq >= 6, size_seq >= 8");
    for (const auto &[when, stages] : em.main.applied.specialized)
        EXPECT_EQ(when, "every size this plan runs at (its loops long enough)");
    for (const auto &lf : em.main.pipeline.funcs)
        EXPECT_TRUE(lf.func.function().definition().specializations().empty()) << lf.name;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    ASSERT_NE(m->short_sizes_model(), nullptr);
    for (Shape s : std::vector<Shape>{{2, 3, 64}, {1, 1, 64}, {2, 15, 64}, {1, 16, 64}, {3, 17, 64}, {2, 64, 64},
                                      {1, 7, 64}, {1, 100, 64}}) {
        Graph gs = imported;
        PrepareOptions so;
        so.bindings = {{"x", s}};
        prepare_graph(gs, so);
        auto ins = random_inputs(gs, 3);
        EXPECT_EQ(&m->model_for(ins) == m.get(), s[1] >= 16) << shape_str(s);
        auto outs = m->run(ins);
        auto ref = run_reference(gs, ins);
        EXPECT_TRUE(testing::close(outs.at("y"), ref.at("y"), 1e-5, 1e-3)) << shape_str(s);
    }
}

// A Func computed at its host's loop over channel blocks (a split of a loop that does not move)
// spans the host's whole moving width: vectorizing that whole loop "as written" in the host's
// specialization was refused by Halide (not a constant extent), as the detector's second plan
// (planned at 32x32) met. It stays a plain loop; the model compiles and is right at every size.
TEST(DynamicShapes, WholeLoopOutsideTheHostsMovingTilesStaysPlain) {
    GraphBuilder b;
    symbolic_input(b, "x", {-1, 4, -1, -1}, {"N", "", "H", "W"});
    b.output(b.node("Add", {b.node("Relu", {"x"}, {}), "x"}, {}));
    Graph g = b.g;
    PrepareOptions opts;
    opts.bindings = {{"x", {1, 4, 8, 16}}};
    opts.dynamic_all = true;
    prepare_graph(g, opts);
    LoweredPipeline lp = lower_graph(g, {});
    const std::string host = lp.output_funcs.at(0);
    std::string inner;
    for (const auto &lf : lp.funcs)
        if (lf.name != host && lf.vars.size() == 4) inner = lf.name;
    ASSERT_FALSE(inner.empty());
    std::string text = host + ".compute_root().split(c, co, ci, 2).reorder(w, h, ci, co, n).vectorize(w, 8);\n" +
                       inner + ".compute_at(" + host + ", co).vectorize(w);\n";
    Schedule s = parse_schedule(text);
    auto plan = plan_size_specializations(s, lp, host_target());
    auto it = plan.find({inner, -1});
    EXPECT_TRUE(it == plan.end() || !it->second.whole_loops);
    std::string path = testing::temp_path("whole_loop_outside_tiles.sched");
    std::ofstream(path) << text;
    auto sizes = sizes_of("x", {{1, 4, 8, 16}, {1, 4, 3, 5}, {2, 4, 9, 31}, {1, 4, 8, 8}});
    expect_one_compile_serves(b.g, sizes, path);
}

// A 1x1 conv computed per channel block of its epilogue over the epilogue's whole moving width,
// with `vectorize(w)` on both stages as a plan made at one size writes it (the detector's convs
// planned at 32x32 over rows 1-8 pixels wide): the loop has no constant extent, and it ran as scalars
// at every size with the accumulators in memory. It is now vectorized by a guarded split of the
// target's natural vector (8 floats on AVX2, at most the planned extent), and in the update the
// vectors' loop goes outside the reduction, so the accumulators stay at fixed addresses through it:
// in the lowered module of the fixed avx2_2core target the conv's stores are vectors and its
// reduction loop runs inside its column loop. The one compile is right at widths below, at, between
// and above the vector.
TEST(DynamicShapes, WholeMovingLoopOutsideTheHostsTilesVectorizesByAGuardedSplit) {
    GraphBuilder b;
    symbolic_input(b, "x", {-1, 4, -1, -1}, {"N", "", "H", "W"});
    b.output(b.node("Relu", {b.node("Conv", {"x", b.random_constant("w1", {8, 4, 1, 1}, 4)}, {})}, {}));
    Graph g = b.g;
    PrepareOptions opts;
    opts.bindings = {{"x", {1, 4, 8, 16}}};
    opts.dynamic_all = true;
    prepare_graph(g, opts);
    LoweredPipeline lp = lower_graph(g, {});
    const std::string host = lp.output_funcs.at(0);
    std::string conv, conv_halide;
    for (const auto &lf : lp.funcs)
        if (lf.name != host && lf.func.num_update_definitions() == 1) conv = lf.name, conv_halide = lf.func.name();
    ASSERT_FALSE(conv.empty());
    std::string text = host + ".compute_root().split(c, co, ci, 4).reorder(w, h, ci, co, n).vectorize(w, 8);\n" +
                       conv + ".compute_at(" + host + ", co).vectorize(w).unroll(c);\n" + conv +
                       ".update(0).reorder(w, c, r.x, r.y, r.z).vectorize(w).unroll(c);\n";
    const Halide::Target t = machines::avx2_2core().target;
    apply_schedule(parse_schedule(text), lp, t);
    SegmentedPipeline segs = segment_pipeline(lp, t, 1);
    ASSERT_EQ(segs.segments.size(), 1u);
    Halide::Pipeline &pipe = segs.segments[0].pipeline;
    struct Loops : public Halide::Internal::IRVisitor {
        using IRVisitor::visit;
        std::string name;
        int vector = 0, scalar = 0;
        bool reduction_inside_columns = false;
        std::vector<std::string> open, seen;
        void visit(const Halide::Internal::Store *op) override {
            if (op->name == name) (op->value.type().lanes() > 1 ? vector : scalar)++;
            IRVisitor::visit(op);
        }
        void visit(const Halide::Internal::For *op) override {
            const std::string update = name + ".s1.";
            if (op->name.rfind(update + "r", 0) == 0)
                for (const auto &o : open) reduction_inside_columns |= o.rfind(update + "w", 0) == 0;
            seen.push_back(op->name);
            open.push_back(op->name);
            IRVisitor::visit(op);
            open.pop_back();
        }
    } v;
    v.name = conv_halide;
    for (const auto &fn : pipe.compile_to_module(pipe.infer_arguments(), "whole_w", t).functions()) fn.body.accept(&v);
    std::string loops;
    for (const auto &l : v.seen) loops += " " + l;
    EXPECT_GT(v.vector, 0) << conv << ": its whole moving w ran as scalars (" << v.scalar << " scalar stores)";
    EXPECT_TRUE(v.reduction_inside_columns) << conv << ": its reduction is not inside its column loop:" << loops;
    std::string path = testing::temp_path("whole_moving_loop_vectorized.sched");
    std::ofstream(path) << text;
    auto sizes = sizes_of("x", {{1, 4, 8, 16}, {1, 4, 3, 1}, {1, 4, 2, 7}, {2, 4, 5, 8}, {1, 4, 3, 9}, {1, 4, 4, 33}});
    expect_one_compile_serves(b.g, sizes, path);
}

// A GEMM's accumulator computed at its wrapper's column loop `jo` (a split of a dim that does not
// move) lies inside the wrapper's row tiles `io` (a moving dim's split): it covers a 6-row tile,
// and in the specialization its whole row loop unrolls as the plan wrote it, as a compile for one
// size does. Before, any loop that was not itself a piece of a moving split counted as spanning the
// whole moving rows, and the rows stayed a loop (the accumulators in memory). Plan on the fixed
// avx2_2core machine; checked against the reference at sequences 1, the tile -1, +-0, +1 and prime.
TEST(DynamicShapes, AccumulatorInsideTheHostsRowTilesUnrollsItsRows) {
    TransformerEverySize tr(host_target(), false);
    const Graph &imported = tr.imported;
    const Halide::Target &t = tr.target;
    cli::EverySizeModel &em = tr.em;
    auto plan = tr.specializations();
    int tiles = 0;
    for (const auto &st : em.main.schedule.statements)
        for (const auto &c : st.calls) {
            // `g.compute_at(g_out, jo)` where g_out is g's wrapper: the GEMM micro-kernel.
            if (c.name != "compute_at" || c.args.size() < 2 || c.args[0].name != st.func + "_out") continue;
            tiles++;
            for (int stage : {-1, 0}) {
                auto it = plan.find({st.func, stage});
                ASSERT_NE(it, plan.end()) << st.func << " stage " << stage;
                EXPECT_TRUE(it->second.whole_loops) << st.func << " stage " << stage << " (" << it->second.text << ")";
            }
        }
    EXPECT_GE(tiles, 4) << "the plan no longer computes the GEMMs per tile of their wrappers";
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{2, 64, 64}, {1, 1, 64}, {2, 5, 64}, {1, 6, 64}, {3, 7, 64}, {1, 17, 64},
                                      {2, 15, 64}, {1, 16, 64}}) {
        expect_y_matches_reference(*m, imported, s, 7);
    }
}

// Planned at sequence 64 (fixed avx2_2core machine), the transformer's GEMM kernels tile their rows
// by 6 and take their specialization at `size_seq >= 6`; every shorter sequence ran the guarded copy,
// its tile's rows a loop of guards with the accumulators in memory. Such a kernel (its one condition
// the length of its row tiles) gets a copy with tiles of 3 rows at `size_seq >= 3`, where the rows
// are split by 3 and the accumulators' rows unroll; the attention's QK^T, whose columns move too
// (`size_seq >= 16`), and the softmax rows (a vector width, not a split) get none. Below half a
// tile, each of the sizes 1 and 2 gets a copy whose tile is the whole rows (split by 1, by 2): with
// them every size has a copy with its rows in registers, so the copy for 2 is taken unconditionally
// and the guarded copy is not compiled (bench/DECISIONS.md#d220). Sequences 1 to 7, 17 and 64
// against the reference.
TEST(DynamicShapes, ShortRowsTakeACopyWithHalfTiles) {
    TransformerEverySize tr(host_target(), false);
    const Graph &imported = tr.imported;
    const Halide::Target &t = tr.target;
    cli::EverySizeModel &em = tr.em;
    auto plan = tr.specializations();
    std::set<std::string> kernels;
    for (const auto &[key, sp] : plan) {
        if (sp.text != "size_seq >= 6") continue;
        ASSERT_EQ(sp.more.size(), 3u) << key.first;
        EXPECT_EQ(sp.more[0].second, "size_seq >= 3") << key.first;
        EXPECT_EQ(sp.more[1].second, std::string("size_seq == 1") + kWholeRowsNote) << key.first;
        EXPECT_EQ(sp.more[2].second, std::string("size_seq == 2") + kWholeRowsNote) << key.first;
        EXPECT_FALSE(Halide::Internal::is_const_one(sp.more[1].first)) << key.first;
        EXPECT_TRUE(Halide::Internal::is_const_one(sp.more[2].first)) << key.first << ": the guarded copy is compiled";
        EXPECT_EQ(sp.narrow, -1) << key.first;
        ASSERT_EQ(sp.more_factors.size(), 3u) << key.first;
        kernels.insert(key.first);
    }
    for (const char *wrapper : {"qkv_matmul_out", "proj_matmul_out", "ff2_matmul_out", "matmul_1_out"}) {
        auto it = plan.find({wrapper, -1});
        ASSERT_NE(it, plan.end()) << wrapper;
        ASSERT_EQ(it->second.more_factors.size(), 3u) << wrapper;
        const std::string rows = wrapper[0] == 'm' ? "h" : "i";
        for (int k = 0; k < 3; k++)
            EXPECT_EQ(it->second.more_factors[k], (std::map<std::string, int64_t>{{rows, k == 0 ? 3 : k}}))
                << wrapper << " copy " << k;
        EXPECT_TRUE(kernels.count(wrapper)) << wrapper;
    }
    for (const char *acc : {"qkv_matmul", "ff2_matmul"}) {
        auto it = plan.find({acc, 0});
        ASSERT_NE(it, plan.end()) << acc;
        EXPECT_TRUE(it->second.whole_loops) << acc;
        EXPECT_EQ(it->second.more.size(), 3u) << acc;
    }
    // QK^T's columns and the softmax row's `vectorize(w, 8)` move and are vectorized: no short copy
    // there, only the narrow one (D155), after a copy in vectors of 4 (half of avx2's 8, D233).
    auto qk = plan.find({"matmul_out", -1});
    ASSERT_NE(qk, plan.end());
    EXPECT_EQ(qk->second.text, "size_seq >= 16");
    ASSERT_EQ(qk->second.more.size(), 2u);
    EXPECT_EQ(qk->second.narrow, 1);
    EXPECT_EQ(qk->second.narrow_vector_lanes, (std::map<int, int64_t>{{0, 4}}));
    auto row = plan.find({"softmax_exp", -1});
    ASSERT_NE(row, plan.end());
    EXPECT_EQ(row->second.text, "size_seq >= 8");
    ASSERT_EQ(row->second.more.size(), 2u);
    EXPECT_EQ(row->second.narrow, 1);
    EXPECT_EQ(row->second.narrow_vector_lanes, (std::map<int, int64_t>{{0, 4}}));
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{2, 3, 64}, {1, 1, 64}, {2, 2, 64}, {3, 4, 64}, {1, 5, 64}, {2, 6, 64},
                                      {1, 7, 64}, {2, 17, 64}, {2, 64, 64}})
        expect_y_matches_reference(*m, imported, s, 5);
}

// On the fixed avx512_2core machine the MLP planned at batch 16 tiles fc1's and fc2's rows by 8 with
// a RoundUp split of a root Func (`size_batch % 8 == 0`), which leaves no half tile: each takes one
// tile of the whole rows at every batch below 8 (D223; before, 4-7 ran the guarded copy, all their
// rows in its guarded last tile) and no copy with the tails as written (D224: the guarded copy's
// full tiles are those tails). The wrapper GEMM fc3 keeps its tile, half tile and batches 1-3.
// Every batch below the tile, multiples of it and others against the reference.
TEST(DynamicShapes, DividedRowTilesCopyEverySizeBelowTheTile) {
    const std::string path = testing::data_path("dynamic_mlp.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const AutoscheduleFn fixed = fixed_avx512_2core();
    Halide::Target t = host_target();
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=16x64"}), prepare_at, "auto", t,
                                                                   path, false, fixed);
    LoweredPipeline fresh = lower_graph(prepare_at({"x=16x64"}), lowering_for_schedule({}, "auto"));
    auto plan = plan_size_specializations(em.main.schedule, fresh, t);
    for (const char *gemm : {"fc1_gemm", "fc2_gemm"}) {
        auto it = plan.find({gemm, 0});
        ASSERT_NE(it, plan.end()) << gemm << "\n" << print_schedule(em.main.schedule);
        const SizeSpecialization &sp = it->second;
        EXPECT_EQ(sp.text, "size_batch >= 8, size_batch % 8 == 0") << gemm;
        EXPECT_FALSE(sp.written_copy) << gemm;
        ASSERT_EQ(sp.more.size(), 7u) << gemm;
        ASSERT_EQ(sp.more_factors.size(), 7u) << gemm;
        for (int v = 1; v < 8; v++) {
            EXPECT_EQ(sp.more[v - 1].second, "size_batch == " + std::to_string(v) + kWholeRowsNote) << gemm;
            EXPECT_FALSE(Halide::Internal::is_const_one(sp.more[v - 1].first)) << gemm << " copy " << v;
            EXPECT_EQ(sp.more_factors[v - 1], (std::map<std::string, int64_t>{{"i", v}})) << gemm << " copy " << v;
        }
    }
    auto fc3 = plan.find({"fc3_gemm_out", -1});
    ASSERT_NE(fc3, plan.end());
    EXPECT_TRUE(fc3->second.written_copy);
    EXPECT_EQ(fc3->second.text, "size_batch >= 8");
    EXPECT_EQ(fc3->second.more.size(), 4u);  // the half tile, batches 1-3
    std::string text = em.main.applied.specializations_text("");
    EXPECT_NE(text.find("one tile of the whole rows at size_batch == 7: fc1_gemm.update(0) fc2_gemm.update(0)\n"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("size_batch % 8 == 0"), std::string::npos) << text;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (int batch : {16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 24, 33, 64})
        expect_y_matches_reference(*m, imported, {batch, 64}, 13);
}

// A row reduction whose length moves is not rfactored (D226): the transformer's softmax over the
// sequence, planned at 2x64x64 on the fixed avx512_2core machine, reduces its max and sum in vector
// partials when compiled for that size alone, and whole rows when compiled for every size (partials
// 16 wide left a guarded last step at every length 16 does not divide). Lengths below, between and
// above the partials' width against the reference.
TEST(DynamicShapes, MovingRowReductionsAreNotRfactored) {
    const std::string path = testing::data_path("dynamic_transformer.onnx");
    Graph imported = import_onnx(path);
    const AutoscheduleFn fixed = fixed_avx512_2core();
    Halide::Target t = host_target();
    cli::ScheduledModel st =
        cli::schedule_model(prepared_with(imported, {"x=2x64x64"}, false), "auto", t, path, {}, fixed);
    std::string static_text = print_schedule(st.schedule);
    for (const char *rf : {"softmax_max_rf", "softmax_sum_rf"})
        EXPECT_NE(static_text.find(rf), std::string::npos) << rf << "\n" << static_text;
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=2x64x64"}), prepare_at, "auto", t,
                                                                   path, false, fixed);
    std::string text = print_schedule(em.main.schedule);
    EXPECT_EQ(text.find("softmax_max_rf"), std::string::npos) << text;
    EXPECT_EQ(text.find("softmax_sum_rf"), std::string::npos) << text;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{2, 64, 64}, {1, 1, 64}, {2, 5, 64}, {1, 15, 64}, {2, 16, 64}, {2, 17, 64},
                                      {1, 100, 64}})
        expect_y_matches_reference(*m, imported, s, 17);
}

// The CNN fixture planned at 64x64 (fixed avx2_2core machine) vectorizes its stem conv, pools and
// depthwise conv along the width; below their tiles (width < 16 for the stem) the guarded copy ran
// those vectors as guarded scalar lanes, the accumulators in memory. Each such kernel gets a narrow
// copy taken below its tiles: its moving loops split by 1, none vectorized or unrolled, the loops
// that do not move as written; a kernel with a RoundUp split keeps the guarded copy only where its
// loops are long enough but the split does not divide. The channels-innermost conv, whose loops
// are long enough at every size, gets none. Narrow, odd and planned sizes against the reference.
TEST(DynamicShapes, NarrowSizesTakeACopyWithMovingLoopsSplitByOne) {
    const std::string path = testing::data_path("dynamic_cnn.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const AutoscheduleFn fixed = fixed_avx2_2core();
    Halide::Target t = host_target();
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=1x3x64x64"}), prepare_at, "auto", t,
                                                                   path, false, fixed);
    LoweredPipeline fresh = lower_graph(prepare_at({"x=1x3x64x64"}), lowering_for_schedule({}, "auto"));
    auto plan = plan_size_specializations(em.main.schedule, fresh, t);
    auto stem = plan.find({"stem_stem_0_conv", 0});
    ASSERT_NE(stem, plan.end()) << print_schedule(em.main.schedule);
    ASSERT_GE(stem->second.narrow, 0) << stem->second.text;
    ASSERT_LT(stem->second.narrow, (int)stem->second.more.size());
    EXPECT_EQ(stem->second.more[stem->second.narrow].second,
              "size_width < 16" + std::string(kNarrowCopyNote));
    EXPECT_TRUE(stem->second.narrow_loops.count("w")) << stem->second.text;
    EXPECT_FALSE(stem->second.narrow_loops.count("c")) << stem->second.text;
    EXPECT_FALSE(stem->second.narrow_loops.count("ci")) << stem->second.text;
    int narrow = 0;
    for (const auto &[key, sp] : plan) {
        if (sp.narrow >= 0) narrow++;
        if (key.first.rfind("down_down_0_conv", 0) == 0) EXPECT_LT(sp.narrow, 0) << key.first;
    }
    EXPECT_GE(narrow, 6);
    std::string text = em.main.applied.specializations_text("");
    EXPECT_NE(text.find("narrow copy at size_width < 16" + std::string(kNarrowCopyNote) + ": stem_stem_0_conv"),
              std::string::npos)
        << text;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{1, 3, 64, 64}, {1, 3, 8, 8}, {2, 3, 9, 11}, {1, 3, 15, 17}, {1, 3, 16, 16},
                                      {3, 3, 31, 33}, {1, 3, 40, 24}})
        expect_y_matches_reference(*m, imported, s, 9);
}

// Below its tiles, a kernel that vectorizes one moving loop ran its narrow copy as scalars, where
// that loop is often still a few vectors long (the detector's convs at 8 or 4 columns, vectors of 16
// in their plan: 9.6x its compile for 32x32). The CNN fixture planned at 64x64 on the fixed
// avx512_2core machine: its stem conv (columns in vectors of 16 and tiles of 32, `size_width % 32 ==
// 0`) takes, before its narrow copy, a copy in vectors of 8 where the width reaches 8 and one in
// vectors of 4 where it reaches 4 (half and a quarter of the 16-lane vector), whose column loops keep
// their splits and vectors, by those lanes at most, and whose other moving loops are narrowed; with
// the kind left out, none. Widths 8-17 (the fixture's least; its pools' rows 4-8 wide there take
// their copies in vectors of 4 and 8) and the planned size against the reference.
TEST(DynamicShapes, NarrowSizesTakeCopiesInNarrowerVectors) {
    const std::string path = testing::data_path("dynamic_cnn.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const FixedMachine fm = machines::avx512_2core();
    const AutoscheduleFn fixed = fixed_avx512_2core();
    Halide::Target t = host_target();
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at({"x=1x3x64x64"}), prepare_at, "auto", t,
                                                                   path, false, fixed);
    auto plan_of = [&] {
        LoweredPipeline fresh = lower_graph(prepare_at({"x=1x3x64x64"}), lowering_for_schedule({}, "auto"));
        return plan_size_specializations(em.main.schedule, fresh, fm.target);
    };
    auto plan = plan_of();
    auto stem = plan.find({"stem_stem_0_conv", 0});
    ASSERT_NE(stem, plan.end()) << print_schedule(em.main.schedule);
    const SizeSpecialization &sp = stem->second;
    ASSERT_GE(sp.narrow, 2) << sp.text;
    EXPECT_EQ(sp.narrow_vector_lanes, (std::map<int, int64_t>{{sp.narrow - 2, 8}, {sp.narrow - 1, 4}})) << sp.text;
    EXPECT_EQ(sp.more[sp.narrow - 2].second, "size_width >= 8" + narrow_vectors_note(8));
    EXPECT_EQ(sp.more[sp.narrow - 1].second, "size_width >= 4" + narrow_vectors_note(4));
    EXPECT_FALSE(Halide::Internal::is_const_one(sp.more[sp.narrow - 1].first));
    EXPECT_TRUE(sp.vector_loops.count("w")) << sp.text;
    EXPECT_FALSE(sp.vector_loops.count("c")) << sp.text;
    {
        SizeCopiesLeftOutScope without({"narrow-vectors"});
        auto old = plan_of().at({"stem_stem_0_conv", 0});
        EXPECT_TRUE(old.narrow_vector_lanes.empty());
        EXPECT_EQ(old.more.size() + 2, sp.more.size());
    }
    std::string text = em.main.applied.specializations_text("");
    EXPECT_NE(text.find("narrow copy in vectors of 4 at size_width >= 4: stem_stem_0_conv"), std::string::npos)
        << text;
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{1, 3, 64, 64}, {1, 3, 8, 8}, {1, 3, 9, 10}, {2, 3, 11, 11}, {1, 3, 12, 12},
                                      {1, 3, 13, 9}, {1, 3, 15, 15}, {1, 3, 16, 16}, {1, 3, 17, 17}, {1, 3, 8, 40}})
        expect_y_matches_reference(*m, imported, s, 11);
}

// A Func alone in its kernel whose RoundUp tile does not divide its planned extent (the detector's
// stage-2 convs: 40 columns in tiles of 32) was left guarded at every size, so below its tiles it
// ran its vectors as guarded scalar lanes. It now keeps its specialization's copies for short sizes
// (the narrow copy, D155, and those in narrower vectors, D233), its guarded copy still serving the
// sizes long enough, with no copy with the tails as written (that copy's sizes, the multiples of the
// tile, are the guarded copy's full tiles). The CNN fixture planned at 40x40 on the fixed
// avx512_2core machine; with the rule left out, no such stage has a copy. Sizes below, at and above
// the tiles against the reference.
TEST(DynamicShapes, UndividedTilesOfALoneFuncTakeNarrowCopies) {
    const std::string path = testing::data_path("dynamic_cnn.onnx");
    Graph imported = import_onnx(path);
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const FixedMachine fm = machines::avx512_2core();
    const AutoscheduleFn fixed = fixed_avx512_2core();
    Halide::Target t = host_target();
    const std::vector<std::string> planned = {"x=1x3x40x40"};
    cli::EverySizeModel em = cli::schedule_compiled_for_every_size(prepare_at(planned), prepare_at, "auto", t, path,
                                                                   false, fixed);
    auto plan_of = [&] {
        LoweredPipeline fresh = lower_graph(prepare_at(planned), lowering_for_schedule({}, "auto"));
        return plan_size_specializations(em.main.schedule, fresh, fm.target);
    };
    auto plan = plan_of();
    decltype(plan) old;
    {
        SizeCopiesLeftOutScope without({"undivided"});
        old = plan_of();
    }
    int undivided = 0;
    for (const auto &[key, sp] : plan) {
        if (old.count(key)) continue;
        undivided++;
        EXPECT_FALSE(sp.written_copy) << key.first;
        EXPECT_GE(sp.narrow, 0) << key.first << ": " << sp.text;
        EXPECT_NE(sp.text.find(" % "), std::string::npos) << key.first << ": " << sp.text;
    }
    EXPECT_GE(undivided, 1) << print_schedule(em.main.schedule);
    std::unique_ptr<JitModel> m = cli::compile_every_size(em, t);
    for (Shape s : std::vector<Shape>{{1, 3, 40, 40}, {1, 3, 8, 8}, {1, 3, 9, 12}, {2, 3, 16, 16}, {1, 3, 13, 21},
                                      {1, 3, 33, 31}, {1, 3, 64, 64}, {1, 3, 72, 80}})
        expect_y_matches_reference(*m, imported, s, 12);
}

/// Allocations inside loops of \p s whose size is not a constant and that are not on Halide's
/// pseudostack (MemoryType::Stack): a malloc and a free at each iteration.
std::vector<std::string> heap_allocations_in_loops(const Halide::Internal::Stmt &s) {
    using namespace Halide::Internal;
    struct Find : public IRVisitor {
        using IRVisitor::visit;
        int loops = 0;
        std::vector<std::string> found;
        void visit(const For *op) override {
            loops++;
            IRVisitor::visit(op);
            loops--;
        }
        void visit(const Allocate *op) override {
            if (loops > 0 && op->memory_type != Halide::MemoryType::Stack &&
                Allocate::constant_allocation_size(op->extents, op->name) == 0)
                found.push_back(op->name);
            IRVisitor::visit(op);
        }
    } f;
    s.accept(&f);
    return f.found;
}

TEST(DynamicShapes, ScratchOfSizeDependentExtentGoesToThePseudostack) {
    using namespace Halide::Internal;
    Halide::Expr n = Variable::make(Halide::Int(32), "size_seq");
    Stmt body = Evaluate::make(0);
    auto alloc = [&](const std::string &name, Halide::MemoryType m, Halide::Expr extent) {
        return Allocate::make(name, Halide::Float(32), m, {extent}, const_true(), body);
    };
    Stmt inside = Block::make(std::vector<Stmt>{alloc("row", Halide::MemoryType::Auto, n), alloc("tile", Halide::MemoryType::Auto, 16),
                               alloc("chosen", Halide::MemoryType::Heap, n)});
    Stmt s = Block::make(For::make("r", 0, n, ForType::Serial, Halide::DeviceAPI::None, inside),
                         alloc("whole", Halide::MemoryType::Auto, n));
    std::map<std::string, Halide::MemoryType> got;
    struct Types : public IRVisitor {
        using IRVisitor::visit;
        std::map<std::string, Halide::MemoryType> *out;
        void visit(const Allocate *op) override {
            (*out)[op->name] = op->memory_type;
            IRVisitor::visit(op);
        }
    } v;
    v.out = &got;
    loop_scratch_on_pseudostack(s).accept(&v);
    EXPECT_EQ(got.at("row"), Halide::MemoryType::Stack);    // size-dependent, in a loop: the pseudostack
    EXPECT_EQ(got.at("tile"), Halide::MemoryType::Auto);    // constant: Halide's choice (the stack)
    EXPECT_EQ(got.at("chosen"), Halide::MemoryType::Heap);  // the schedule's store_in stands
    EXPECT_EQ(got.at("whole"), Halide::MemoryType::Auto);   // once per run, outside every loop
}

TEST(DynamicShapes, TransformerRowsAllocateNothingPerIteration) {
    // The softmax rows (a row of size_seq floats per iteration of a fused row loop) and the GEMM
    // accumulators of the guarded copies were a malloc and a free per row or tile.
    TransformerEverySize tr(machines::avx2_2core().target, false);
    const Graph &imported = tr.imported;
    auto prepare_at = [&](const std::vector<std::string> &flags) { return prepared_with(imported, flags); };
    const Halide::Target &t = tr.target;
    cli::EverySizeModel &em = tr.em;
    int softmax_rows = 0;
    for (const auto &st : em.main.schedule.statements)
        for (const auto &c : st.calls)
            if (st.func == "softmax_exp" && c.name == "compute_at" && c.args.size() > 1 && c.args[1].name == "nchi")
                softmax_rows++;
    EXPECT_EQ(softmax_rows, 1) << "the plan no longer computes softmax_exp per row of softmax";
    for (int segments : {1, 3}) {
        SegmentedPipeline segs = segment_pipeline(em.main.pipeline, t, segments);
        std::vector<std::string> without_the_pass;
        for (auto &seg : segs.segments) {
            Halide::Module m = seg.pipeline.compile_to_module(seg.pipeline.infer_arguments(), "rows", t);
            for (const auto &fn : m.functions())
                EXPECT_EQ(heap_allocations_in_loops(fn.body), std::vector<std::string>{}) << fn.name;
            Halide::Pipeline plain(seg.pipeline.outputs());  // the same Funcs, no lowering pass
            for (const auto &fn : plain.compile_to_module(plain.infer_arguments(), "rows", t).functions())
                for (const auto &a : heap_allocations_in_loops(fn.body)) without_the_pass.push_back(a);
        }
        EXPECT_TRUE(std::count(without_the_pass.begin(), without_the_pass.end(), "softmax_exp"))
            << "the check no longer sees the per-row allocation it guards against";
    }
}

TEST(DynamicShapes, TransformerPlannedAtAShortSequence) {
    // Planned at sequence 3, the cost model splits the GEMM updates' rows by 3 with Auto tails
    // (RoundUp for an update's pure var): at sequence 17 that read the input past its end until the
    // specialization asked for sequences divisible by 3.
    Graph g = import_onnx(testing::data_path("dynamic_transformer.onnx"));
    auto sizes = sizes_of("x", {{2, 3, 64}, {2, 17, 64}, {1, 1, 64}, {1, 4, 64}, {3, 6, 64}, {1, 64, 64}});
    expect_one_compile_serves(g, sizes, "auto");
}

// Op families the real models use, each over dims that move: pooling with ceil_mode, resize,
// concat and slice along moving dims, pad, reductions and softmax over moving dims, a MatMul whose
// inner dim moves, a transpose and a reshape that merges moving dims, convolutions (1x1, padded 3x3,
// strided depthwise), the detector's ConvTransposes and pointwise activations.
TEST(DynamicShapes, OpFamiliesAtAwkwardSizes) {
    auto spatial = sizes_of("x", {{1, 4, 16, 20}, {1, 4, 1, 1}, {2, 4, 7, 5}, {1, 4, 15, 17}, {1, 4, 33, 2}});
    // A window of 2 or 3 needs that much input: the pools' smallest sizes are their windows.
    auto pooled = sizes_of("x", {{1, 4, 16, 20}, {1, 4, 3, 3}, {2, 4, 7, 5}, {1, 4, 15, 17}, {1, 4, 33, 4}});
    auto image = [&](const std::function<std::string(GraphBuilder &, const std::string &)> &body) {
        GraphBuilder b;
        symbolic_input(b, "x", {-1, 4, -1, -1}, {"N", "", "H", "W"});
        b.output(body(b, "x"));
        return b.g;
    };
    struct Case {
        const char *name;
        Graph g;
        bool pool = false;  ///< run at the pooled sizes
    };
    std::vector<Case> cases = {
        {"resize_nearest", image([](GraphBuilder &b, const std::string &x) {
             std::string scales = b.constant(Tensor::from_doubles(DType::F32, {4}, {1, 1, 2, 2}));
             return b.node("Resize", {x, "", scales}, {}, {{"mode", std::string("nearest")}});
         })},
        {"resize_linear", image([](GraphBuilder &b, const std::string &x) {
             std::string scales = b.constant(Tensor::from_doubles(DType::F32, {4}, {1, 1, 2, 2}));
             return b.node("Resize", {x, "", scales}, {}, {{"mode", std::string("linear")}});
         })},
        {"maxpool_ceil", image([](GraphBuilder &b, const std::string &x) {
             return b.node("MaxPool", {x}, {}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                                 {"strides", std::vector<int64_t>{2, 2}}, {"ceil_mode", int64_t(1)}});
         }), true},
        {"avgpool_padded_ceil", image([](GraphBuilder &b, const std::string &x) {
             // Its window count near the border depends on the size.
             return b.node("AveragePool", {x}, {}, {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                                     {"strides", std::vector<int64_t>{2, 2}},
                                                     {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                     {"ceil_mode", int64_t(1)}});
         }), true},
        {"avgpool", image([](GraphBuilder &b, const std::string &x) {
             return b.node("AveragePool", {x}, {}, {{"kernel_shape", std::vector<int64_t>{1, 1}},
                                                     {"strides", std::vector<int64_t>{1, 2}}});
         })},
        {"global_average_pool", image([](GraphBuilder &b, const std::string &x) {
             return b.node("GlobalAveragePool", {x}, {});
         })},
        {"concat_moving_axis", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Concat", {x, b.node("Relu", {x}, {})}, {}, {{"axis", int64_t(3)}});
         })},
        {"pad_reflect", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Pad", {x}, {}, {{"pads", std::vector<int64_t>{0, 0, 0, 1, 0, 0, 0, 1}},
                                            {"mode", std::string("edge")}});
         })},
        {"reduce_mean_spatial", image([](GraphBuilder &b, const std::string &x) {
             return b.node("ReduceMean", {x}, {}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t(1)}});
         })},
        {"softmax_moving_axis", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Softmax", {x}, {}, {{"axis", int64_t(3)}});
         })},
        {"transpose_reshape_matmul", image([](GraphBuilder &b, const std::string &x) {
             // [N, 4, H, W] -> [N, H, W, 4] -> [N, H*W, 4]; times its transpose: K = 4, then
             // [N, 4, H*W] x [N, H*W, 4]: an inner dim that moves.
             std::string t = b.node("Transpose", {x}, {}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
             std::string r = b.node("Flatten", {t}, {}, {{"axis", int64_t(1)}});
             (void)r;
             std::string rows = b.node("Reshape", {t, b.constant(Tensor::from_ints(DType::I64, {3}, {0, -1, 4}))}, {});
             std::string cols = b.node("Transpose", {rows}, {}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
             return b.node("MatMul", {cols, rows}, {});
         })},
        {"conv_1x1", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Conv", {x, b.random_constant("w1", {8, 4, 1, 1}, 4), b.random_constant("b1", {8}, 5)}, {},
                           {{"kernel_shape", std::vector<int64_t>{1, 1}}});
         })},
        {"conv_3x3_padded", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Conv", {x, b.random_constant("w3", {16, 4, 3, 3}, 6)}, {},
                           {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
         })},
        {"depthwise_conv_stride2", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Relu", {b.node("Conv", {x, b.random_constant("wd", {4, 1, 3, 3}, 7)}, {},
                                           {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"group", int64_t(4)},
                                            {"strides", std::vector<int64_t>{2, 2}},
                                            {"pads", std::vector<int64_t>{1, 1, 1, 1}}})}, {});
         })},
        {"conv_transpose_stride2", image([](GraphBuilder &b, const std::string &x) {
             // The detector's head: a 2x2 stride-2 ConvTranspose, then a 3x3 one with padding.
             std::string up = b.node("ConvTranspose", {x, b.random_constant("wt", {4, 8, 2, 2}, 8)}, {},
                                     {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
             return b.node("ConvTranspose", {up, b.random_constant("wt2", {8, 3, 3, 3}, 9), b.random_constant("bt2", {3}, 10)},
                           {}, {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                {"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"output_padding", std::vector<int64_t>{1, 1}}});
         })},
        {"hardswish_sigmoid", image([](GraphBuilder &b, const std::string &x) {
             return b.node("Mul", {b.node("HardSwish", {x}, {}), b.node("Sigmoid", {x}, {})}, {});
         })},
        {"layer_norm_moving_rows", image([](GraphBuilder &b, const std::string &x) {
             return b.node("LayerNormalization", {x, b.random_constant("scale", {4, 1, 1}, 3)}, {}, {{"axis", int64_t(1)}});
         })},
    };
    for (auto &c : cases) {
        SCOPED_TRACE(c.name);
        for (const char *spec : {"eager", "inline", "auto"}) expect_one_compile_serves(c.g, c.pool ? pooled : spatial, spec);
    }
}

TEST(DynamicShapes, StaticGraphIsUnchanged) {
    // A model with no dim left open prepares exactly as before: no symbols, no requirements.
    Graph g = import_onnx(testing::data_path("transformer.onnx"));
    Graph a = g, b = g;
    prepare_graph(a, PrepareOptions{});
    PrepareOptions opts;
    opts.dynamic_all = true;
    prepare_graph(b, opts);
    EXPECT_FALSE(b.dynamic.active());
    EXPECT_EQ(graph_fingerprint(a), graph_fingerprint(b));
}

// --- user errors -------------------------------------------------------------------------------

TEST(DynamicShapesErrors, SizeOutsideTheDeclaredRange) {
    Graph g = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    PrepareOptions opts;
    opts.dynamic_dims = {{"batch", {4, 32}}};
    prepare_graph(g, opts);
    EXPECT_EQ(g.dynamic.representative.at("batch"), 16);  // the middle of the range, a multiple of 4 as LO is
    Halide::Target t = host_target();
    JitModel m(cli::schedule_model(g, "eager", t, testing::data_path("dynamic_mlp.onnx")).pipeline, t);
    Tensor x(DType::F32, {2, 64});
    std::string e = testing::user_error_of([&] { m.run({{"x", x}}); });
    EXPECT_NE(e.find("dim 'batch' = 2 is outside its declared range 4..32"), std::string::npos) << e;
    EXPECT_NE(e.find("--dim batch=LO..HI"), std::string::npos) << e;
}

TEST(DynamicShapesErrors, UnknownDimNamed) {
    Graph g = import_onnx(testing::data_path("dynamic_cnn.onnx"));
    PrepareOptions opts;
    opts.dynamic_dims = {{"hieght", {8, 64}}};
    std::string e = testing::user_error_of([&] { prepare_graph(g, opts); });
    EXPECT_NE(e.find("--dim hieght"), std::string::npos) << e;
    EXPECT_NE(e.find("did you mean 'height'"), std::string::npos) << e;
}

TEST(DynamicShapesErrors, OpThatCannotMoveNamesItAndTheFix) {
    // A Split along a dim that moves: its pieces' sizes are fixed numbers.
    GraphBuilder b;
    symbolic_input(b, "x", {2, -1}, {"", "W"});
    Node n;
    n.op = "Split";
    n.name = "halves";
    n.inputs = {"x"};
    n.outputs = {"lo", "hi"};
    n.attrs["axis"] = int64_t(1);
    n.attrs["split"] = std::vector<int64_t>{3, 5};
    b.g.nodes.push_back(n);
    b.g.outputs = {"lo", "hi"};
    PrepareOptions opts;
    opts.bindings = {{"W", {8}}};
    opts.dynamic_all = true;
    std::string e = testing::user_error_of([&] { prepare_graph(b.g, opts); });
    EXPECT_NE(e.find("Split 'halves'"), std::string::npos) << e;
    EXPECT_NE(e.find("with --input"), std::string::npos) << e;
}

TEST(DynamicShapesErrors, SizesTheModelDoesNotAcceptNameTheNode) {
    // x + y with two symbols: they must agree at run time.
    GraphBuilder b;
    symbolic_input(b, "x", {-1, 4}, {"A", ""});
    symbolic_input(b, "y", {-1, 4}, {"B", ""});
    b.out("Add", {"x", "y"}, {}, {}, DType::F32, "sum");
    PrepareOptions opts;
    opts.bindings = {{"A", {8}}, {"B", {8}}};
    opts.dynamic_all = true;
    std::string e = testing::user_error_of([&] { prepare_graph(b.g, opts); });
    // Two symbols of one size at the plan but moved apart by the check: the sum's rule holds only
    // when they agree, and the second preparation says they need not.
    EXPECT_NE(e.find("dynamic shapes"), std::string::npos) << e;
    EXPECT_NE(e.find("--input"), std::string::npos) << e;
}

TEST(DynamicShapesCli, RunSeveralSizesOnOneCompile) {
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_transformer.onnx") +
                                      " --auto --input x=2x16x64 --input x=1x5x64 --input x=3x31x64 --check --repeats 1",
                                  out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(testing::count_of(out, "compiled once"), 1u) << out;
    EXPECT_EQ(testing::count_of(out, "  ok"), 3u) << out;
    EXPECT_NE(out.find("output y: batchxseqx64"), std::string::npos) << out;
    // Planned at seq 16, the stages take the schedule's own tails from some sequence length up
    // (schedule/size_specialization.h); 1x5 and 3x31 run on either side of it.
    EXPECT_NE(out.find("specialized when size_"), std::string::npos) << out;
}

TEST(DynamicShapesCli, BadDimFlag) {
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_mlp.onnx") +
                                      " --auto --dim batch=9..3",
                                  out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("error: bad --dim 'batch=9..3'; expected NAME=LO..HI"), std::string::npos) << out;
}

TEST(DynamicShapesCli, BenchGenericRowBesideTheSpecializedOne) {
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " bench " + testing::data_path("dynamic_mlp.onnx") +
                                      " --input x=3x64 --auto --generic --generic-plan x=16x64 --budget-ms 20",
                                  out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("auto generic"), std::string::npos) << out;
}

// `--generic-schedule FILE`: a schedule file compiled for every size is a row of its own, timed at
// the --input size beside the specialized compile of the same file.
TEST(DynamicShapesCli, BenchGenericScheduleFileIsARow) {
    const std::string model = testing::data_path("dynamic_mlp.onnx");
    const std::string sched = testing::temp_path("generic_row_mlp16.sched");
    std::string out;
    int rc = testing::run_command(testing::loom_binary() + " autoschedule " + model +
                                      " --machine avx2_2core --input x=16x64 --force -o " + sched,
                                  out);
    ASSERT_EQ(rc, 0) << out;
    rc = testing::run_command(testing::loom_binary() + " bench " + model + " --input x=5x64 --generic-plan x=16x64 " +
                                  "--schedule " + sched + " --generic-schedule " + sched + " --budget-ms 20",
                              out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("generic_row_mlp16.sched generic"), std::string::npos) << out;
    EXPECT_EQ(out.find("auto generic"), std::string::npos) << out;  // no other rows than those asked for
    // --generic-tail-copies: one row per count, in the same process.
    rc = testing::run_command(testing::loom_binary() + " bench " + model + " --input x=2x64 --generic-plan x=16x64 " +
                                  "--generic-tail-copies 0 --generic-tail-copies 3 --budget-ms 20",
                              out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("auto generic, 0 tail copies"), std::string::npos) << out;
    EXPECT_NE(out.find("auto generic, 3 tail copies"), std::string::npos) << out;
}

TEST(DynamicShapesCli, BenchGenericFlagsNameTheFix) {
    std::string out;
    // --generic-plan without --generic: the flag that describes a row that is not asked for.
    int rc = testing::run_command(testing::loom_binary() + " bench " + testing::data_path("dynamic_mlp.onnx") +
                                      " --input x=3x64 --auto --generic-plan x=16x64",
                                  out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("error: loom bench: --generic-plan, --dim and --small-size-plan describe the --generic row; "
                       "add --generic"),
              std::string::npos) << out;
    rc = testing::run_command(testing::loom_binary() + " bench " + testing::data_path("dynamic_mlp.onnx") +
                                  " --input x=3x64 --auto --small-size-plan",
                              out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("describe the --generic row; add --generic"), std::string::npos) << out;
    // loom run: a second plan needs a model compiled for every size.
    rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_mlp.onnx") +
                                  " --input x=3x64 --auto --small-size-plan",
                              out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("error: loom run: --small-size-plan adds a plan to a model compiled for every size; add "
                       "--dynamic or --dim NAME=LO..HI"),
              std::string::npos) << out;
    // A model with no symbolic input dim has no compile for every size.
    rc = testing::run_command(testing::loom_binary() + " bench " + testing::data_path("mlp.onnx") + " --auto --generic",
                              out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("has no symbolic input dim to keep open; drop --generic"), std::string::npos) << out;
}

// --- one artifact, many shapes (loom compile --dim, tools/loom_run --input, loom run --artifact) --------

/// A dynamic_cnn artifact (batch 1..4, height and width 8..64, planned at 2x3x24x40), cut into three
/// pipelines (LOOM_PIPELINES=3: its chain sizes the crossing buffers at each call), and a host
/// loom_run beside it, built once for the suite.
struct CnnArtifact {
    std::string dir, runner, out;
    int rc = -1;
    static const CnnArtifact &get() {
        static CnnArtifact a = [] {
            CnnArtifact c;
            c.dir = testing::temp_path("dyn_cnn_artifact");
            c.runner = testing::temp_path("dyn_loom_run");
            c.rc = testing::run_command("LOOM_PIPELINES=3 " + testing::loom_binary() + " compile " +
                                            testing::data_path("dynamic_cnn.onnx") +
                                            " --auto --dim batch=1..4 --dim height=8..64 --dim width=8..64 --input "
                                            "x=2x3x24x40 --force -o " + c.dir,
                                        c.out);
            std::string build;
            if (c.rc == 0)
                c.rc = testing::run_command(std::string("CUDA_HOME=/nonexistent sh ") + LOOM_SOURCE_DIR +
                                                "/tools/loom_run/build.sh " + c.runner, build);
            c.out += build;
            return c;
        }();
        return a;
    }
};

TEST(DynamicShapesArtifact, OneLibraryRunsAndChecksEverySize) {
    const CnnArtifact &a = CnnArtifact::get();
    ASSERT_EQ(a.rc, 0) << a.out;
    EXPECT_NE(a.out.find("every size (<name>_run_host_shaped)"), std::string::npos) << a.out;
    EXPECT_NE(a.out.find("(3 pipelines)"), std::string::npos) << a.out;
    std::string out;
    // Sizes the plan never saw, checked against the reference interpreter at each.
    int rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_cnn.onnx") +
                                      " --artifact " + a.dir + " --input x=1x3x8x8 --input x=3x3x31x33 --input "
                                      "x=4x3x64x17 --check --repeats 1",
                                  out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(testing::count_of(out, "  ok"), 3u) << out;
    EXPECT_NE(out.find("dim height 8..64"), std::string::npos) << out;
    // The standalone runner: the output's shape comes from the artifact.
    rc = testing::run_command(a.runner + " " + a.dir + " --input x=1x3x9x60 --reps 2 --warmup 1", out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("output y at x=1x3x9x60: 1x10, 0 NaN -> ok"), std::string::npos) << out;
    EXPECT_NE(out.find("ok=1"), std::string::npos) << out;
    // One process, sizes that grow and shrink: the crossing buffers kept per thread are replaced
    // when too small (a smaller call reuses a larger one).
    rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_cnn.onnx") +
                                  " --artifact " + a.dir + " --input x=1x3x8x8 --input x=4x3x64x64 --input x=2x3x11x9 "
                                  "--input x=3x3x47x61 --check --repeats 2",
                              out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(testing::count_of(out, "  ok"), 4u) << out;
}

TEST(DynamicShapesArtifact, SizeOutsideTheRangeNamesTheDimAndTheFix) {
    const CnnArtifact &a = CnnArtifact::get();
    ASSERT_EQ(a.rc, 0) << a.out;
    std::string out;
    int rc = testing::run_command(a.runner + " " + a.dir + " --input x=1x3x100x40", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("input 'x' dim 2 (height) = 100 is outside the range 8..64"), std::string::npos) << out;
    EXPECT_NE(out.find("--dim height=LO..HI covering 100"), std::string::npos) << out;
    rc = testing::run_command(testing::loom_binary() + " run " + testing::data_path("dynamic_cnn.onnx") + " --artifact " +
                                  a.dir + " --input x=5x3x24x40 --check",
                              out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("error: --artifact"), std::string::npos) << out;
    EXPECT_NE(out.find("dim 0 (batch) = 5 is outside the range 1..4"), std::string::npos) << out;
}

TEST(DynamicShapesArtifact, WrongRankAndFixedDimNameTheInput) {
    const CnnArtifact &a = CnnArtifact::get();
    ASSERT_EQ(a.rc, 0) << a.out;
    std::string out;
    int rc = testing::run_command(a.runner + " " + a.dir + " --input x=1x3x24", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("gives 3 dims, but input 'x' has 4 (batchx3xheightxwidth)"), std::string::npos) << out;
    rc = testing::run_command(a.runner + " " + a.dir + " --input x=1x4x24x40", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("input 'x' dim 1 is 4 but the model needs 3"), std::string::npos) << out;
    rc = testing::run_command(a.runner + " " + a.dir + " --input y=1x3x24x40", out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("the model has no input 'y'; its inputs: x"), std::string::npos) << out;
}

}  // namespace
}  // namespace loom
