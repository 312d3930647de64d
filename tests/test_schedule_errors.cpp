// One test per schedule user error: each message names file:line:col, the culprit and what would
// be valid. Validation runs before anything touches Halide.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "lower/lowered.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_validate.h"

#include "schedule_test_pipeline.h"

using namespace loom;


static const Halide::Target kCpu("x86-64-linux-avx2");
static const Halide::Target kCuda("x86-64-linux-avx2-cuda-cuda_capability_80");

// The message validate_schedule throws for \p text ("" if it is legal).
static std::string error_of(const std::string &text, const Halide::Target &target = kCpu) {
    TestPipeline t = make_pipeline();
    try {
        validate_schedule(parse_schedule(text, "mlp.cpu.sched"), t.p, target);
    } catch (const UserError &e) {
        return e.what();
    }
    return "";
}

#define EXPECT_STARTS(msg, prefix) EXPECT_EQ((msg).substr(0, std::string(prefix).size()), prefix) << (msg)
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

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
    EXPECT_TRUE(can_compute_at(t.p, "a", "b", "jo", &ctx));
    EXPECT_EQ(legal_compute_at_locations(t.p, "a", &ctx),
              (std::vector<std::string>{"b.{i, jo, ji, j, k}", "c.{i, j}", "root"}));
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
