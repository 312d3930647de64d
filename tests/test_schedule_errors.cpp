// One test per schedule user error: each message names file:line:col, the culprit and what would
// be valid. Validation runs before anything touches Halide.
#include <gtest/gtest.h>

#include "codegen/jit.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "schedule/primitives/families.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_header.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"

#include "graph_builder.h"
#include "schedule_test_pipeline.h"
#include "test_util.h"

using namespace loom;


static const Halide::Target kCpu("x86-64-linux-avx2");
static const Halide::Target kCuda("x86-64-linux-avx2-cuda-cuda_capability_80");

// The message validate_schedule throws for \p text, read as file \p file, on \p p ("" if it is legal).
static std::string error_in(const LoweredPipeline &p, const std::string &text, const std::string &file,
                            const Halide::Target &target = kCpu) {
    try {
        validate_schedule(parse_schedule(text, file), p, target);
    } catch (const UserError &e) {
        return e.what();
    }
    return "";
}

// The same on the small test pipeline (schedule_test_pipeline.h), as mlp.cpu.sched.
static std::string error_of(const std::string &text, const Halide::Target &target = kCpu) {
    return error_in(make_pipeline().p, text, "mlp.cpu.sched", target);
}

#define EXPECT_STARTS(msg, prefix) EXPECT_EQ((msg).substr(0, std::string(prefix).size()), prefix) << (msg)
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

// The language's table (schedule.cpp) and the actions table (primitives/actions.cpp) are kept by
// name: a primitive the parser accepts but nothing applies would fail only when a schedule uses it.
TEST(SchedulePrimitives, EveryPrimitiveOfTheLanguageHasAnApplyAction) {
    std::vector<std::string> names = primitive_names();
    EXPECT_GE(names.size(), 29u);
    for (const auto &name : names) {
        const sched_internal::PrimitiveActions *actions = sched_internal::find_primitive_actions(name);
        ASSERT_NE(actions, nullptr) << name;
        EXPECT_NE(actions->apply, nullptr) << name;
    }
    EXPECT_EQ(sched_internal::find_primitive_actions("no_such_primitive"), nullptr);
}

TEST(ScheduleErrors, UnknownFuncDidYouMean) {
    std::string m = error_of("c.compute_root();\n\n    bb.compute_root();\n");
    EXPECT_STARTS(m, "mlp.cpu.sched:3:5: unknown func 'bb'; did you mean 'b'?");
    m = error_of("zzzzzz.compute_root();");
    EXPECT_HAS(m, "funcs are: a, b, c, tot, g, nz");
}

TEST(ScheduleErrors, UnknownStage) {
    EXPECT_STARTS(error_of("c.update(0).parallel(i);"),
                  "mlp.cpu.sched:1:1: c.update(0): c has no update stages; schedule its pure definition");
    EXPECT_STARTS(error_of("b.update(2).parallel(i);"), "mlp.cpu.sched:1:1: b.update(2): b has update stages 0..0");
}

TEST(ScheduleErrors, WrongArityInCode) {
    TestPipeline t = make_pipeline();
    Schedule s;
    s.statements.push_back(ScheduleStatement("b").add("split", {"j", "jo"}));
    try {
        validate_schedule(s, t.p, kCpu);
        FAIL();
    } catch (const UserError &e) {
        EXPECT_STARTS(std::string(e.what()), "<schedule>: b.split(j, jo): split takes 4 to 5 arguments, not 2; "
                                             "expected split(var, outer, inner, factor[, TailStrategy])");
    }
}

TEST(ScheduleErrors, UnknownVarListsVars) {
    std::string m = error_of("b.compute_root()\n    .split(jj, jo, ji, 8);");
    EXPECT_STARTS(m, "mlp.cpu.sched:2:12: b.split(jj, jo, ji, 8): unknown var 'jj'; did you mean 'j'? vars of b: i, j");
    m = error_of("b.update(0).vectorize(kk, 8);");
    EXPECT_HAS(m, "unknown var 'kk'; did you mean 'k'? vars of b.update(0): i, j, k");
}

TEST(ScheduleErrors, NonPositiveFactor) {
    std::string m = error_of("b.split(j, jo, ji, 0);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:20: b.split(j, jo, ji, 0): split factor must be positive, not 0");
    EXPECT_HAS(error_of("b.vectorize(j, -8);"), "vectorize factor must be positive, not -8");
}

TEST(ScheduleErrors, ReusedVarName) {
    std::string m = error_of("b.split(j, i, ji, 8);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:12: b.split(j, i, ji, 8): var 'i' already exists in b; pick a new name "
                     "(vars now: i, j)");
    EXPECT_HAS(error_of("b.split(j, jo, ji, 8).split(i, jo, ii, 2);"), "var 'jo' already exists in b");
}

TEST(ScheduleErrors, ReorderOfMissingOrRepeatedVars) {
    EXPECT_STARTS(error_of("b.reorder(j, q);"),
                  "mlp.cpu.sched:1:14: b.reorder(j, q): unknown var 'q'; did you mean 'i'? vars of b: i, j");
    EXPECT_HAS(error_of("b.reorder(j, j);"), "'j' appears twice; list each var once");
}

TEST(ScheduleErrors, ParallelOverReductionVar) {
    std::string m = error_of("b.compute_root();\nb.update(0).parallel(k);");
    EXPECT_STARTS(m, "mlp.cpu.sched:2:22: b.update(0).parallel(k): k is a reduction var that b.update(0) does not "
                     "write by, so parallel would race; valid: parallel over a pure var (j, i), rfactor(k, <new var>) "
                     "first, or atomic() before it if the update is associative");
    // atomic() makes it legal for an associative update (a sum) …
    EXPECT_EQ(error_of("b.update(0).atomic().parallel(k);"), "");
    // … but not for nz(i) = nz(i) * x + 1.
    m = error_of("nz.update(0).atomic().vectorize(k);");
    EXPECT_HAS(m, "mlp.cpu.sched:1:23: nz.update(0).vectorize(k): k is a reduction var and the update of nz is not "
                  "associative");
}

TEST(ScheduleErrors, ComputeAtNonConsumerListsLegalLocations) {
    std::string m = error_of("a.compute_at(c, i);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:3: a.compute_at(c, i): c does not consume a; legal: b.{i, j, k}, root");
    // With b inlined into c, c's loops become legal for a.
    EXPECT_EQ(error_of("b.compute_at(c, j);\na.compute_at(c, i);"), "");
    m = error_of("a.compute_at(b, q);");
    EXPECT_HAS(m, "b has no var 'q'; did you mean 'i'? legal: b.{i, j, k}, root");
    m = error_of("c.compute_at(b, i);");
    EXPECT_HAS(m, "c.compute_at(b, i): c is an output; it can only be computed at root");
    m = error_of("a.compute_at(bb, i);");
    EXPECT_HAS(m, "mlp.cpu.sched:1:14: a.compute_at(bb, i): unknown func 'bb'; did you mean 'b'? legal: b.{i, j, k}, root");
}

// An output is computed at root; the message names the wrapper that lets it be computed per tile,
// and once wrapped, the wrapper is the output (root only) and the Func may go inside its loops.
TEST(ScheduleErrors, OutputComputeAtNamesTheWrapper) {
    std::string m = error_of("tot.compute_at(c, i);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:5: tot.compute_at(c, i): tot is an output; it can only be computed at root. "
                     "To compute it per tile (a reduction's initial value and updates in one loop nest), wrap it "
                     "first: tot.in() as tot_out; then tot.compute_at(tot_out, <a var of tot_out>)");
    EXPECT_EQ(error_of("tot.in() as tot_out;\ntot_out.split(j, jo, ji, 8);\ntot.compute_at(tot_out, jo);"), "");
    EXPECT_HAS(error_of("tot.in() as tot_out;\ntot_out.compute_inline();"),
               "tot_out.compute_inline(): tot_out is an output and cannot be inlined");
    EXPECT_HAS(error_of("tot.in() as tot_out;\ntot_out.compute_at(c, i);"),
               "tot_out.compute_at(c, i): tot_out is an output; it can only be computed at root");
    // Wrapping for one consumer leaves the output an output.
    EXPECT_HAS(error_of("b.in(c) as b_c;\nb.compute_at(b_c, i);\nc.compute_at(b_c, i);"),
               "c is an output; it can only be computed at root");
}

// An op helper the defaults inline (Softmax's exponentials) has no loops until the file places it.
TEST(ScheduleErrors, ComputeAtUnplacedOpHelper) {
    Graph g = import_onnx(loom::testing::data_path("softmax_rows.onnx"));
    prepare_graph(g);
    LoweredPipeline lp = lower_graph(g);
    auto error = [&](const std::string &text) { return error_in(lp, text, "rows.cpu.sched"); };
    std::string m = error("softmax_max.compute_at(softmax_exp, i);");
    EXPECT_STARTS(m, "rows.cpu.sched:1:13: softmax_max.compute_at(softmax_exp, i): softmax_exp is a helper of its op, "
                     "inlined unless the file places it, and has no loops; place it first (e.g. "
                     "softmax_exp.compute_root()); legal: root");
    // Placed, its loops are legal; and the defaults still let the statistics sit at the output's rows.
    EXPECT_EQ(error("softmax_exp.compute_root();\nsoftmax_max.compute_at(softmax_exp, i);"), "");
    EXPECT_EQ(error("softmax_max.compute_at(softmax, i);\nsoftmax_sum.compute_at(softmax, i);"), "");
}

TEST(ScheduleErrors, ComputeAtCycle) {
    std::string m = error_of("a.compute_at(b, i);\nb.compute_at(a, i);");
    EXPECT_HAS(m, "mlp.cpu.sched:1:3: a.compute_at(b, i): cycle: b is itself computed inside a; legal: root");
    EXPECT_HAS(error_of("a.compute_at(a, i);"), "a Func cannot be computed at itself");
}

TEST(ScheduleErrors, GpuPrimitiveOnCpuTarget) {
    std::string m = error_of("c.compute_root()\n    .gpu_tile(i, j, io, jo, ii, ji, 8, 8);");
    EXPECT_STARTS(m, "mlp.cpu.sched:2:6: c.gpu_tile(i, j, io, jo, ii, ji, 8, 8): target x86-64-linux-avx2 has no GPU; "
                     "GPU primitives need a GPU target");
    EXPECT_EQ(error_of("c.compute_root().gpu_tile(j, i, jo, io, ji, ii, 32, 8);", kCuda), "");
}

TEST(ScheduleErrors, GpuLanesOnCpuTarget) {
    std::string m = error_of("c.compute_root().split(j, jo, ji, 32).gpu_lanes(ji);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:39: c.gpu_lanes(ji): target x86-64-linux-avx2 has no GPU; "
                     "GPU primitives need a GPU target");
    EXPECT_EQ(error_of("c.compute_root().split(j, jo, ji, 32).gpu_lanes(ji).gpu_blocks(jo);", kCuda), "");
}

// gpu_max_registers: a GPU primitive, whole-Func, with ptxas's range; the message names the range.
TEST(ScheduleErrors, GpuMaxRegistersRangeAndTarget) {
    std::string m = error_of("c.compute_root().gpu_tile(j, i, jo, io, ji, ii, 32, 8).gpu_max_registers(8);", kCuda);
    EXPECT_STARTS(m, "mlp.cpu.sched:1:");
    EXPECT_HAS(m, "gpu_max_registers(8): registers per thread must be in 16..255");
    EXPECT_HAS(m, "got 8");
    m = error_of("c.compute_root().gpu_max_registers(32);");
    EXPECT_HAS(m, "has no GPU; GPU primitives need a GPU target");
    m = error_of("c.update(0).gpu_max_registers(32);", kCuda);
    EXPECT_NE(m, "") << "a Func-level primitive after update(k) is an error";
    EXPECT_EQ(error_of("c.compute_root().gpu_tile(j, i, jo, io, ji, ii, 32, 8).gpu_max_registers(32);", kCuda), "");
}

TEST(ScheduleErrors, CpuParallelOnGpuTarget) {
    std::string m = error_of("c.compute_root().parallel(i);", kCuda);
    EXPECT_STARTS(m, "mlp.cpu.sched:1:18: c.parallel(i): on GPU target");
    EXPECT_HAS(m, "would run on the host CPU; valid: gpu_tile(…)");
    // A root Func without any GPU mapping is not an error: the default mapping applies.
    TestPipeline t = make_pipeline();
    Schedule s = parse_schedule("c.compute_root();\nb.compute_root();", "mlp.cuda.sched");
    fill_defaults(s, t.p, kCuda);
    EXPECT_NO_THROW(validate_schedule(s, t.p, kCuda));
    bool mapped = false;
    for (const auto &st : s.statements)
        if (st.func == "c")
            for (const auto &c : st.calls) mapped |= c.name == "gpu_tile";
    EXPECT_TRUE(mapped);
}

TEST(ScheduleErrors, RfactorOnPureVar) {
    std::string m = error_of("b.update(0).rfactor(j, u) as b_part;");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:21: b.update(0).rfactor(j, u) as b_part: j is a pure var; rfactor takes "
                     "reduction vars of b.update(0): k");
    EXPECT_HAS(error_of("nz.update(0).rfactor(k, u) as nz_part;"), "the update of nz is not associative");
    EXPECT_HAS(error_of("b.update(0).rfactor(k, u) as a;"), "a Func named 'a' already exists");
}

TEST(ScheduleErrors, BadTailStrategyAndMemoryType) {
    std::string m = error_of("b.split(j, jo, ji, 8, TailStrategy::RoundUpp);");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:23: b.split(j, jo, ji, 8, TailStrategy::RoundUpp): 'TailStrategy::RoundUpp' is "
                     "not a TailStrategy; did you mean 'RoundUp'? valid: RoundUp, GuardWithIf, Predicate, "
                     "PredicateLoads, PredicateStores, ShiftInwards, Auto");
    EXPECT_HAS(error_of("b.split(j, jo, ji, 8, Guard);"), "'Guard' is not a TailStrategy");
    EXPECT_HAS(error_of("b.store_in(MemoryType::Stak);"), "did you mean 'Stack'?");
}

TEST(ScheduleErrors, FuncLevelAndInlineRules) {
    EXPECT_HAS(error_of("b.compute_inline();"), "b has update stages and cannot be inlined");
    EXPECT_HAS(error_of("c.compute_inline();"), "c is an output and cannot be inlined");
    EXPECT_HAS(error_of("b.bound(k, 0, 4);"), "'k' is not a pure var of b");
}

TEST(ScheduleErrors, HeaderChecks) {
    Schedule s = parse_schedule("# loom schedule for mlp.onnx (sha256 aaaa) on x86-64-linux-avx2\n\nc.compute_root();",
                                "mlp.cpu.sched");
    auto w = check_schedule_header(s, kCpu, "bbbb");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "mlp.cpu.sched: written for model mlp.onnx with sha256 aaaa, but this model's sha256 is bbbb");
    EXPECT_TRUE(check_schedule_header(s, kCpu, "aaaa").empty());
    // The JIT feature says how code is loaded, not what code: a JIT run of a file written for the
    // same CPU target does not warn; another CPU target does.
    EXPECT_TRUE(check_schedule_header(s, Halide::Target("x86-64-linux-avx2-jit"), "aaaa").empty());
    auto other = check_schedule_header(s, Halide::Target("x86-64-linux-avx2-avx512-jit"), "aaaa");
    ASSERT_EQ(other.size(), 1u);
    EXPECT_HAS(other[0], "written for target x86-64-linux-avx2, running on x86-64-linux-avx2-avx512-jit");
    try {
        check_schedule_header(s, kCuda, "aaaa");
        FAIL();
    } catch (const UserError &e) {
        EXPECT_HAS(std::string(e.what()), "written for CPU target x86-64-linux-avx2, but the target is GPU target");
    }
    Schedule g = parse_schedule("c.compute_root().gpu_blocks(i);", "mlp.cuda.sched");
    try {
        check_schedule_header(g, kCpu);
        FAIL();
    } catch (const UserError &e) {
        EXPECT_HAS(std::string(e.what()), "mlp.cuda.sched:1:18: c.gpu_blocks(i): target x86-64-linux-avx2 has no GPU");
    }
}

TEST(ScheduleErrors, CanComputeAtReusesChecks) {
    TestPipeline t = make_pipeline();
    std::string why;
    EXPECT_TRUE(can_compute_at(t.p, "a", "b", "i"));
    EXPECT_FALSE(can_compute_at(t.p, "a", "c", "i", nullptr, &why));
    EXPECT_EQ(why, "c does not consume a; legal: b.{i, j, k}, root");
    Schedule ctx = parse_schedule("b.compute_inline();");  // illegal (b has updates) but only a context
    ctx = parse_schedule("b.compute_at(c, i).split(j, jo, ji, 8);");
    EXPECT_TRUE(can_compute_at(t.p, "a", "c", "j", &ctx));
    // jo splits b's pure stage, but only b's update reads a: its loops are the legal ones there.
    EXPECT_FALSE(can_compute_at(t.p, "a", "b", "jo", &ctx, &why));
    EXPECT_EQ(why, "'jo' is not a loop of b.update(0), the stage(s) of b that read a; its loops there: b.{i, j, k}");
    EXPECT_TRUE(can_compute_at(t.p, "a", "b", "k", &ctx));
    EXPECT_EQ(legal_compute_at_locations(t.p, "a", &ctx),
              (std::vector<std::string>{"b.{i, j, k}", "c.{i, j}", "root"}));
}

TEST(ScheduleErrors, HalideRejectionIsReportedAgainstTheStatement) {
    TestPipeline t = make_pipeline();
    // Legal to write, but Halide finds at compile time that a's size is not fixed.
    Schedule s = parse_schedule("c.compute_root();\na.compute_root()\n    .store_in(MemoryType::Register);", "mlp.cpu.sched");
    AppliedSchedule applied = apply_schedule(s, t.p, kCpu);
    Halide::Buffer<float> in(t.K, t.M);
    in.fill(1.f);
    t.in.set(in);
    try {
        with_schedule_errors(applied, [&] { return t.p.funcs[2].func.realize({t.N, t.M}); });
        FAIL();
    } catch (const UserError &e) {
        std::string m = e.what();
        EXPECT_STARTS(m, "mlp.cpu.sched:2:1: a.compute_root().store_in(MemoryType::Register): Halide rejected the "
                         "schedule: Allocation a");
    }
}

// The warnings validate_schedule gives for \p text (legal schedules only).
static std::vector<std::string> warnings_of(const std::string &text) {
    TestPipeline t = make_pipeline();
    std::vector<std::string> w;
    validate_schedule(parse_schedule(text, "mlp.cpu.sched"), t.p, kCpu, &w);
    return w;
}

// A split factor larger than the loop with a ShiftInwards or RoundUp tail still runs `factor`
// points: legal to Halide, out of bounds at run time (a schedule written for a larger model).
TEST(ScheduleErrors, SplitFactorBeyondExtentWarns) {
    auto w = warnings_of("c.compute_root();\na.split(j, jo, ji, 64).parallel(jo);");  // a(i:64, j:32)
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0], "mlp.cpu.sched:2:3: a.split(j, jo, ji, 64): factor 64 exceeds the extent 32 of j; with "
                    "TailStrategy::ShiftInwards (the default for a pure definition) the loop still runs 64 points, "
                    "32 outside j, so this Func and what it reads are accessed out of bounds; valid: "
                    "split(j, jo, ji, 64, TailStrategy::GuardWithIf) or a factor of at most 32");
    // Explicit RoundUp; the default for a pure var of an update (b: j is 48) is RoundUp too.
    w = warnings_of("a.vectorize(j, 64, RoundUp);");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "mlp.cpu.sched:1:3: a.vectorize(j, 64, RoundUp): factor 64 exceeds the extent "
                     "32 of j; with TailStrategy::RoundUp the loop");
    EXPECT_HAS(w[0], "valid: vectorize(j, 64, TailStrategy::GuardWithIf) or a factor of at most 32");
    w = warnings_of("b.update(0).vectorize(j, 64);");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "with TailStrategy::RoundUp (the default for a pure var of an update)");
    // tile checks both dims; a split's inner loop has the factor as its extent.
    w = warnings_of("c.tile(i, j, ii, ji, 128, 8);\na.split(j, jo, ji, 16).vectorize(ji, 32);");
    ASSERT_EQ(w.size(), 2u);
    EXPECT_HAS(w[0], "mlp.cpu.sched:1:3: c.tile(i, j, ii, ji, 128, 8): factor 128 exceeds the extent 64 of i");
    EXPECT_HAS(w[1], "mlp.cpu.sched:2:24: a.vectorize(ji, 32): factor 32 exceeds the extent 16 of ji");
    // No warning: a guarded tail, a factor that fits, an RVar (GuardWithIf by default), a reduction's
    // constant initial value (b(i, j) = 0 reads nothing), an extent widened by bound().
    EXPECT_TRUE(warnings_of("a.split(j, jo, ji, 64, GuardWithIf).vectorize(i, 64);").empty());
    EXPECT_TRUE(warnings_of("a.split(j, jo, ji, 32).vectorize(ji, 8);").empty());
    EXPECT_TRUE(warnings_of("b.update(0).split(k, ko, ki, 64);").empty());
    EXPECT_TRUE(warnings_of("b.compute_root().split(j, jo, ji, 64);").empty());
    EXPECT_TRUE(warnings_of("a.compute_root().split(j, jo, ji, 64).bound(j, 0, 64);").empty());
}

// Halide 14 can drop a GuardWithIf split's guard once the split's inner RVar is rfactored
// (halide/Halide#8600): unrolled copies of the new var past the last round's points then read past
// the reduction (a classifier softmax's sum gave NaN). Warned, naming the split and the fixes; not
// for a split that divides the extent, nor for a var that is only vectorized.
TEST(ScheduleErrors, UnrolledRfactorOfAGuardedSplitWarns) {
    // g() += in(r.x, r.y), r.y over 64 = 2 x 24 + 16: the last round keeps 16 of u's 24 points.
    auto w = warnings_of("g.update(0).split(r.y, ryo, ryi, 24).rfactor(ryi, u) as g_rf;\n"
                         "g_rf.update(0).split(u, uo, ui, 8).unroll(uo);");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0], "mlp.cpu.sched:2:36: g_rf.update(0).unroll(uo): Halide 14 can lose the guard of the split "
                    "r.y: 64 = 2 x 24 + 16 once it is rfactored (halide/Halide#8600, fixed upstream); unrolled, "
                    "the last 1 of the 3 copies of uo in g_rf would then run past the reduction's end and give "
                    "wrong results (NaN); check the result with `loom run --check`, or split the RVar by a factor "
                    "that divides its extent, or vectorize uo without unrolling it");
    w = warnings_of("tot.update(0).split(r, ro, ri, 24).rfactor(ri, u) as tot_rf;\ntot_rf.update(0).unroll(u);");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "the last 8 of the 24 copies of u in tot_rf");
    EXPECT_TRUE(warnings_of("g.update(0).split(r.y, ryo, ryi, 16).rfactor(ryi, u) as g_rf;\n"
                            "g_rf.update(0).split(u, uo, ui, 8).unroll(uo);").empty());
    EXPECT_TRUE(warnings_of("g.update(0).split(r.y, ryo, ryi, 24).rfactor(ryi, u) as g_rf;\n"
                            "g_rf.update(0).split(u, uo, ui, 8).vectorize(ui);").empty());
    // Without rfactor, Halide keeps the guard: an unrolled guarded RVar is fine.
    EXPECT_TRUE(warnings_of("g.update(0).split(r.y, ryo, ryi, 24).unroll(ryi);").empty());
    // 64 = 1 x 33 + 31: the last round keeps 31 of 33 points, some in each of the 3 unrolled copies.
    EXPECT_TRUE(warnings_of("g.update(0).split(r.y, ryo, ryi, 33).rfactor(ryi, u) as g_rf;\n"
                            "g_rf.update(0).split(u, uo, ui, 11).unroll(uo);").empty());
}

// Rounding up a var that the Func reads nothing by (a keepdims axis of extent 1, spread over a
// warp's lanes so every lane holds the statistic) only writes more of the Func's own buffer: no
// warning. A var it reads by still warns.
TEST(ScheduleErrors, RoundingUpAVarNothingIsReadByDoesNotWarn) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {8, 64});
    std::string m = b.node("ReduceMean", {x}, {8, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
    b.out("Sub", {x, m}, {8, 64});
    LoweredPipeline lp = lower_graph(b.g);
    std::string r;
    for (const auto &f : lp.funcs)
        if (f.op == "ReduceMean") r = f.name;
    ASSERT_FALSE(r.empty());
    const LoweredFunc &rf = *lp.find(r);
    ASSERT_EQ(rf.extents.back(), 1);
    const std::string kd = rf.vars.back(), row = rf.vars.front();
    auto warnings = [&](const std::string &text) {
        std::vector<std::string> w;
        validate_schedule(parse_schedule(text, "k.sched"), lp, kCpu, &w);
        return w;
    };
    EXPECT_TRUE(warnings(r + ".compute_root().split(" + kd + ", o, l, 32, RoundUp);").empty());
    EXPECT_TRUE(warnings(r + ".compute_root();\n" + r + ".update(0).split(" + kd + ", o, l, 32, RoundUp);").empty());
    auto w = warnings(r + ".compute_root();\n" + r + ".update(0).split(" + row + ", o, l, 32, RoundUp);");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "factor 32 exceeds the extent 8 of " + row);
}

// A run that fails a bounds check reports one message: Halide's compile-time burst of
// "guaranteed to fail an assertion" / halide_error_constraint_violated(...) lines is not printed.
TEST(ScheduleErrors, OutOfBoundsRunIsOneCleanMessage) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {10});
    b.out("Relu", {x}, {10});
    LoweredPipeline lp = lower_graph(b.g);
    const std::string f = lp.output_funcs.at(0);
    Schedule s = parse_schedule(f + ".vectorize(i, 16);", "small.sched");
    std::vector<std::string> w;
    validate_schedule(s, lp, host_target(), &w);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_HAS(w[0], "small.sched:1:" + std::to_string(f.size() + 2) + ": " + f +
                         ".vectorize(i, 16): factor 16 exceeds the extent 10 of i");
    apply_schedule(s, lp, host_target());
    std::string error;
    ::testing::internal::CaptureStderr();
    try {
        JitModel m(std::move(lp));
        m.run({{"x", Tensor::from_doubles(DType::F32, {10}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10})}});
    } catch (const UserError &e) {
        error = e.what();
    }
    std::string printed = ::testing::internal::GetCapturedStderr();
    EXPECT_HAS(error, "is accessed at -6, which is before the min (0)");
    EXPECT_HAS(error, "hint:");
    EXPECT_EQ(printed.find("halide_error_constraint_violated"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("guaranteed to fail"), std::string::npos) << printed;
}

// A graph input is not a Func: only in() applies to it, and the message says what to do instead.
TEST(ScheduleErrors, GraphInputTakesOnlyIn) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {4, 8});
    b.out("Relu", {x}, {4, 8});
    LoweredPipeline lp = lower_graph(b.g);
    auto message = [&](const std::string &text) {
        try {
            validate_schedule(parse_schedule(text, "in.sched"), lp, host_target());
        } catch (const UserError &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_STARTS(message("x.compute_root();"),
                  "in.sched:1:3: x.compute_root(): x is a graph input, not a Func: only `x.in([consumer]) as "
                  "<name>;` applies to it; schedule that wrapper instead");
    EXPECT_EQ(message("x.in() as x_tile;\nx_tile.compute_root();"), "");
    EXPECT_HAS(message("x.in(nope) as x_tile;"), "nope does not consume x");
}

// stream_stores (codegen/streaming_stores.h): a Func with a buffer of its own at root, a pure
// definition only, on an x86 CPU target; each message names the Func and what would be valid.
TEST(ScheduleErrors, StreamStoresNeedsARootPureFuncOnX86) {
    EXPECT_EQ(error_of("c.vectorize(j, 8).stream_stores();\na.compute_root().stream_stores();"), "");
    std::string m = error_of("b.stream_stores();");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:3: b.stream_stores(): b has update stages, which read back what it stores");
    EXPECT_HAS(m, "stream a Func with a pure definition only");
    m = error_of("a.stream_stores();");
    EXPECT_STARTS(m, "mlp.cpu.sched:1:3: a.stream_stores(): a is inlined: only a Func with a buffer of its own at root");
    EXPECT_HAS(m, "compute_root() it first, or stream the output that reads it");
    m = error_of("a.compute_at(b, i).stream_stores();");
    EXPECT_HAS(m, "a is computed at b.i: only a Func with a buffer of its own");
    m = error_of("c.gpu_tile(j, i, jo, io, ji, ii, 32, 8).stream_stores();", kCuda);
    EXPECT_HAS(m, "c.stream_stores(): stream_stores makes x86 non-temporal vector stores (movntps); target "
                  "x86-64-linux-avx2-cuda-cuda_capability_80 is not an x86 CPU target: leave it out there");
    m = error_of("c.stream_stores();", Halide::Target("arm-64-linux"));
    EXPECT_HAS(m, "is not an x86 CPU target");
}

// unscheduled() marks an update stage left at Halide's default loops: on a pure stage, or beside
// other primitives of its stage, it is an error naming the statement and the fix.
TEST(ScheduleErrors, UnscheduledOnlyAloneOnAnUpdate) {
    EXPECT_EQ(error_of("b.update(0).unscheduled();"), "");
    std::string m = error_of("b.unscheduled();");
    EXPECT_HAS(m, "mlp.cpu.sched:1:3: b.unscheduled(): unscheduled() marks an update stage");
    EXPECT_HAS(m, "`b.update(k).unscheduled()`");
    m = error_of("b.update(0).parallel(i).unscheduled();");
    EXPECT_HAS(m, "cannot share `b.update(0)` with other primitives (drop one)");
    // The same across statements, in either order (Halide would assert).
    m = error_of("b.update(0).parallel(i);\nb.update(0).unscheduled();");
    EXPECT_HAS(m, "mlp.cpu.sched:2:13: b.update(0).unscheduled(): unscheduled() says the stage has no schedule");
    m = error_of("b.update(0).unscheduled();\nb.update(0).parallel(i);");
    EXPECT_HAS(m, "mlp.cpu.sched:2:13: b.update(0).parallel(i): b.update(0) was marked unscheduled() at line 1; "
                  "drop that mark or this primitive");
    EXPECT_EQ(error_of("b.update(0).unscheduled();\nb.compute_root();"), "");  // a Func-level primitive
}

// compute_at must name a loop of the consumer's stage that reads the producer: a split of b's pure
// stage does not surround b's update, the only stage that reads a (Halide would reject it too).
TEST(ScheduleErrors, ComputeAtALoopOfAStageThatDoesNotRead) {
    std::string m = error_of("b.split(j, jo, ji, 8);\na.compute_at(b, jo);");
    EXPECT_STARTS(m, "mlp.cpu.sched:2:3: a.compute_at(b, jo): 'jo' is not a loop of b.update(0), the stage(s) of b "
                     "that read a; its loops there: b.{i, j, k}");
    EXPECT_EQ(error_of("b.split(j, jo, ji, 8);\na.compute_at(b, k);"), "");
}
