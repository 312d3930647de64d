// Applying schedules: the result stays numerically right (against plain C++ loops on random data)
// and the loop nest changes as the schedule says.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "autoschedule/gpu_schedule.h"
#include "codegen/jit.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/gpu_loop_lint.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"

#include "graph_builder.h"
#include "schedule_test_pipeline.h"
#include "test_util.h"

using namespace loom;


static const Halide::Target kHost = Halide::get_host_target();

// Random input (never zeros), set on the pipeline's ImageParam.
static Halide::Buffer<float> random_input(TestPipeline &t, unsigned seed = 7) {
    Halide::Buffer<float> in(t.K, t.M);  // in(j, i): i < M rows, j < K columns
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(0.1f, 1.0f);
    in.for_each_value([&](float &v) { v = d(rng) * ((rng() & 1) ? 1.f : -1.f); });
    t.in.set(in);
    return in;
}

static Halide::Func func_of(TestPipeline &t, const std::string &n) {
    for (auto &f : t.p.funcs)
        if (f.name == n) return f.func;
    return {};
}

// Checks c, tot, g and nz against loops over \p in.
static void check_numerics(TestPipeline &t, const Halide::Buffer<float> &in) {
    Halide::Buffer<float> c = func_of(t, "c").realize({t.N, t.M});
    double err = 0, norm = 0;
    for (int i = 0; i < t.M; i++)
        for (int j = 0; j < t.N; j++) {
            double acc = 0;
            for (int k = 0; k < t.K; k++) acc += (in(k, i) * 2.0 + 1.0) * t.w(j, k);
            double ref = std::max(acc, 0.0);
            ASSERT_FALSE(std::isnan(c(j, i)));
            err += (c(j, i) - ref) * (c(j, i) - ref), norm += ref * ref;
        }
    EXPECT_LT(std::sqrt(err / norm), 1e-5);
    Halide::Buffer<float> tot = func_of(t, "tot").realize({t.K});
    for (int j = 0; j < t.K; j++) {
        double ref = 0;
        for (int r = 0; r < t.M; r++) ref += in(j, r);
        EXPECT_NEAR(tot(j), ref, 1e-4);
    }
    Halide::Buffer<float> g = func_of(t, "g").realize();
    double gref = 0;
    for (int y = 0; y < t.M; y++)
        for (int x = 0; x < t.K; x++) gref += in(x, y);
    EXPECT_NEAR(g(), gref, 1e-3);
    Halide::Buffer<float> nz = func_of(t, "nz").realize({t.M});
    for (int i = 0; i < t.M; i++) {
        double ref = 0;
        for (int k = 0; k < t.K; k++) ref = ref * in(k, i) + 1.0;
        EXPECT_NEAR(nz(i), ref, 1e-3 * std::max(1.0, std::abs(ref)));
    }
}

static bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

TEST(ScheduleApply, SplitVectorizeParallelComputeAt) {
    TestPipeline t = make_pipeline();
    auto in = random_input(t);
    const char *text = R"(# loom schedule for test (sha256 0) on host
a.compute_at(b, i);
b.compute_root()
    .split(j, jo, ji, 8).vectorize(ji)
    .parallel(i);
b.update(0).reorder(j, k, i).vectorize(j, 8).parallel(i);
c.compute_root().parallel(i).vectorize(j, 16);
tot.compute_root();
tot.update(0).unroll(r, 4);
g.compute_root();
nz.compute_root().vectorize(i, 8);
nz.update(0).vectorize(i, 8);
)";
    Schedule s = parse_schedule(text, "test.sched");
    AppliedSchedule applied = apply_schedule(s, t.p, kHost);
    std::string nest = loop_nest(t.p, kHost);
    EXPECT_TRUE(has(nest, "parallel i")) << nest;
    EXPECT_TRUE(has(nest, "vectorized j.ji")) << nest;
    EXPECT_TRUE(has(nest, "unrolled r")) << nest;
    // a is produced inside b's loop over i, not at root.
    size_t b_loop = nest.find("produce b");
    size_t a_prod = nest.find("produce a");
    ASSERT_NE(a_prod, std::string::npos) << nest;
    EXPECT_GT(a_prod, b_loop) << nest;
    check_numerics(t, in);
}

TEST(ScheduleApply, TileFuseAndRfactor) {
    TestPipeline t = make_pipeline();
    auto in = random_input(t, 11);
    const char *text = R"(a.compute_inline();
b.compute_root().tile(j, i, jo, io, ji, ii, 8, 4).fuse(jo, io, t).parallel(t);
b.update(0).split(k, ko, ki, 8).reorder(ki, j, ko, i);
c.compute_root();
tot.update(0).split(r, ro, ri, 16).rfactor(ro, u) as tot_part;
tot.compute_root();
tot_part.compute_root();
tot_part.update(0).parallel(u);
g.update(0).rfactor(r.y, v) as g_part;
g.compute_root();
g_part.compute_root().parallel(v);
g_part.update(0).parallel(v);
nz.compute_root();
)";
    Schedule s = parse_schedule(text, "test.sched");
    AppliedSchedule applied = apply_schedule(s, t.p, kHost);
    ASSERT_TRUE(applied.funcs.count("tot_part"));
    ASSERT_TRUE(applied.funcs.count("g_part"));
    std::string nest = loop_nest(t.p, kHost);
    EXPECT_TRUE(has(nest, "parallel j.jo.t")) << nest;
    // rfactor adds a producer loop nest (Halide names it tot_intm, shown as "tot…" when Halide
    // has uniquified names across tests).
    EXPECT_GE(loom::testing::count_of(nest, "produce tot"), 2u) << nest;
    EXPECT_GE(loom::testing::count_of(nest, "produce g"), 2u) << nest;
    EXPECT_FALSE(has(nest, "produce a:")) << nest;        // inlined
    check_numerics(t, in);
}

// A tree of rfactors (as the GPU cost model builds over a warp's lanes): each new intermediate of
// tot's update reads the previous one, so the previous one may be computed at it.
TEST(ScheduleApply, RfactorTreeLevelsAreComputedAtTheNext) {
    TestPipeline t = make_pipeline();
    auto in = random_input(t, 13);
    const char *text = R"(tot.update(0).split(r, ro, ri, 16).rfactor(ro, u) as tot_p1;
tot.update(0).split(ro, ro2, u2r, 2).rfactor(u2r, u2) as tot_p2;
tot.compute_root();
tot_p2.compute_at(tot, j);
tot_p1.compute_at(tot_p2, u2);
)";
    Schedule s = parse_schedule(text, "tree.sched");
    AppliedSchedule applied = apply_schedule(s, t.p, kHost);
    ASSERT_TRUE(applied.funcs.count("tot_p1"));
    ASSERT_TRUE(applied.funcs.count("tot_p2"));
    std::string nest = loop_nest(t.p, kHost);
    // tot_p1 is produced inside tot_p2's loop over u2.
    size_t p2_loop = nest.find("for u2"), p1_prod = nest.find("produce tot", nest.find("produce tot") + 1);
    ASSERT_NE(p2_loop, std::string::npos) << nest;
    EXPECT_NE(p1_prod, std::string::npos) << nest;
    check_numerics(t, in);
}

TEST(ScheduleApply, BuiltinSchedulesAreCorrect) {
    for (const std::string spec : {"eager", "inline"}) {
        TestPipeline t = make_pipeline();
        auto in = random_input(t, 3);
        Schedule s = resolve_schedule(t.p, kHost, spec);
        EXPECT_EQ(parse_schedule(print_schedule(s)), s) << spec;
        apply_schedule(s, t.p, kHost);
        std::string nest = loop_nest(t.p, kHost);
        EXPECT_TRUE(has(nest, "parallel")) << spec << "\n" << nest;
        EXPECT_TRUE(has(nest, "vectorized")) << spec << "\n" << nest;
        EXPECT_EQ(has(nest, "produce a"), spec == "eager") << spec << "\n" << nest;
        check_numerics(t, in);
    }
}

TEST(ScheduleApply, DefaultStatementsFollowTheTarget) {
    TestPipeline t = make_pipeline();
    const LoweredFunc &b = t.p.funcs[1];
    auto avx2 = default_statements(b, Halide::Target("x86-64-linux-avx2-sse41-fma-f16c"));
    ASSERT_EQ(avx2.size(), 2u);
    Schedule s;
    s.statements = avx2;
    EXPECT_EQ(print_schedule(s),
              "b.compute_root().vectorize(j, 8).parallel(i);\n"
              "b.update(0).reorder(j, k, i).vectorize(j, 8).parallel(i);\n");
    auto avx512 = default_statements(b, Halide::Target("x86-64-linux-avx2-avx512-avx512_skylake-sse41-fma-f16c"));
    EXPECT_EQ(avx512[0].calls[1].str(), "vectorize(j, 16)");
    auto cuda = default_statements(b, Halide::Target("x86-64-linux-cuda-cuda_capability_80"));
    s.statements = cuda;
    // The update guards its tail where a tile may not divide the extent (unknown here): Halide's
    // Auto would be RoundUp for an update, computing past the extent, which a Func bound to its
    // shape (an extern's operand) rejects at run time (ResNet-18's 56-wide max pool).
    EXPECT_EQ(print_schedule(s),
              "b.compute_root().gpu_tile(j, i, jo, io, ji, ii, 32, 8);\n"
              "b.update(0).gpu_tile(j, i, jo, io, ji, ii, 32, 8, TailStrategy::GuardWithIf);\n");
    auto g = default_statements(t.p.funcs[4], Halide::Target("x86-64-linux-cuda"));
    EXPECT_EQ(g[1].calls[0].name, "gpu_single_thread");
    // Tiles that divide known extents keep Auto (nothing is computed past the extent).
    LoweredFunc even = b;
    even.extents.assign(even.vars.size(), 64);
    s.statements = default_statements(even, Halide::Target("x86-64-linux-cuda-cuda_capability_80"));
    EXPECT_EQ(print_schedule(s),
              "b.compute_root().gpu_tile(j, i, jo, io, ji, ii, 32, 8);\n"
              "b.update(0).gpu_tile(j, i, jo, io, ji, ii, 32, 8);\n");
}

// The CPU default for a long sum (here the mean of 2^22 + 123 squares: positive terms, so rounding
// adds up) is a cascade: chunks of 4096 terms (the last one guarded), in parallel, then the
// partials. One serial float accumulator was 1.9e-4 off on the suite's mse (2^24), so its eager
// and inline schedules failed validation; this matches the reference to 1e-6 with outputs poisoned.
TEST(ScheduleApply, DefaultLongSumIsChunked) {
    loom::testing::GraphBuilder b;
    Shape s = {(1 << 22) + 123};
    std::string x = b.input("x", s);
    std::string y = b.out("ReduceMean", {b.node("Mul", {x, x}, s)}, {1},
                          {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}});
    LoweredPipeline p = lower_graph(b.g);
    Schedule sched = eager_schedule(p, kHost);
    std::string text = print_schedule(sched);
    EXPECT_TRUE(has(text, ".split(r.x, rxo, rxi, 4096, TailStrategy::GuardWithIf)")) << text;
    EXPECT_TRUE(has(text, ".rfactor(rxo, p) as ")) << text;
    EXPECT_TRUE(has(text, "_part.update(0).parallel(p);")) << text;
    apply_schedule(sched, p, kHost);
    std::map<std::string, Tensor> in;
    Tensor xt(DType::F32, s);
    fill_random(xt, 5, 0.0, 1.0);
    in["x"] = xt;
    JitModel m(std::move(p));
    auto out = m.run(in);
    auto ref = run_reference(b.g, in);
    EXPECT_TRUE(loom::testing::close(out.at(y), ref.at(y), 1e-6));
}

// On CUDA the default for that sum was one GPU thread adding every term. It is now 16384 interleaved
// per-thread partials (coalesced loads, at most 4096 terms each) added into the output by float
// atomics: no serial loop outside the thread loops (lint), and it lowers to CUDA kernels.
TEST(ScheduleApply, DefaultLongSumOnCudaIsPartialsAndAtomics) {
    loom::testing::GraphBuilder b;
    Shape s = {(1 << 22) + 123};
    std::string x = b.input("x", s);
    b.out("ReduceMean", {b.node("Mul", {x, x}, s)}, {1}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(1)}});
    LoweredPipeline p = lower_graph(b.g);
    Halide::Target cuda("x86-64-linux-avx2-cuda-cuda_capability_80");
    Schedule sched = eager_schedule(p, cuda);
    std::string text = print_schedule(sched);
    EXPECT_TRUE(has(text, ".split(r.x, rxo, rxi, 16384, TailStrategy::GuardWithIf)")) << text;
    EXPECT_TRUE(has(text, ".rfactor(rxi, p) as ")) << text;
    EXPECT_TRUE(has(text, ".update(0).atomic().gpu_tile(rxi, rxio, rxii, 256);")) << text;
    EXPECT_TRUE(has(text, "_part.update(0).reorder(rxo, p).gpu_tile(p, po, pi, 256);")) << text;
    AppliedSchedule applied = apply_schedule(sched, p, cuda);
    EXPECT_TRUE(lint_gpu_loops(applied, p).empty());
    std::string stmt = loom::testing::temp_path("long_sum.stmt");
    ASSERT_NO_THROW(p.funcs.back().func.compile_to_lowered_stmt(stmt, {p.inputs[0]}, Halide::Text, cuda));
    std::ifstream f(stmt);
    std::string lowered((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(lowered, "cuda_gpu_source_kernels")) << lowered.substr(0, 2000);
    EXPECT_TRUE(has(lowered, "atom.global.add.f32")) << "the partials are added by atomics";
}

// The default GPU mapping of an NCHW reduction (a pool: 4 pure vars, an update over the window)
// maps every pure var onto the grid: the two innermost tiled, the outer ones fused into the z
// blocks (left as host loops they launched the kernel once per channel: ResNet-18 ran 6.8 ms
// instead of 1.2), and the update guards the 56-wide tail that 32-wide tiles do not divide.
TEST(ScheduleApply, DefaultGpuMappingPutsOuterVarsOnTheGrid) {
    loom::testing::GraphBuilder b;
    std::map<std::string, AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                                              {"strides", std::vector<int64_t>{2, 2}},
                                              {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    b.out("MaxPool", {b.input("x", {1, 64, 112, 112})}, {1, 64, 56, 56}, attrs, DType::F32, "pool");
    LoweredPipeline p = lower_graph(b.g);
    const LoweredFunc *pool = nullptr;
    for (const auto &f : p.funcs)
        if (f.op == "MaxPool" && !f.update_rvars.empty()) pool = &f;
    ASSERT_NE(pool, nullptr);
    Schedule s;
    s.statements = default_statements(*pool, Halide::Target("x86-64-linux-cuda-cuda_capability_80"));
    std::string text = print_schedule(s);
    EXPECT_NE(text.find("pool.compute_root().gpu_tile(w, h, wo, ho, wi, hi, 32, 8).fuse(c, n, c_n).gpu_blocks(c_n);"),
              std::string::npos) << text;
    EXPECT_NE(text.find(".update(0).gpu_tile(w, h, wo, ho, wi, hi, 32, 8, TailStrategy::GuardWithIf)\n"
                        "    .fuse(c, n, c_n)\n    .gpu_blocks(c_n);"),
              std::string::npos) << text;
    apply_schedule(s, p, Halide::Target("x86-64-linux-cuda-cuda_capability_80"));  // Halide accepts it
}

// lint_gpu_loops: rfactor leaves its new var innermost, so a partial mapped to threads without a
// reorder keeps its serial reduction loop outside the thread loop (a block barrier per element
// in a softmax row). The warning names the place, the loop and the reorder that fixes it; the
// fixed schedule and the auto-scheduler's are clean.
namespace {

// lint_gpu_loops on the softmax_rows fixture under the CUDA schedule \p text ("rows.cuda.sched"),
// or under the GPU auto-scheduler's when \p text is empty.
std::vector<std::string> lint_softmax_rows(const std::string &text) {
    Halide::Target cuda("x86-64-linux-cuda-cuda_capability_80");
    Graph g = import_onnx(loom::testing::data_path("softmax_rows.onnx"));
    prepare_graph(g);
    LoweredPipeline p = lower_graph(g);
    Schedule s = text.empty() ? gpu_auto_schedule(p, cuda) : parse_schedule(text, "rows.cuda.sched");
    AppliedSchedule a = apply_schedule(s, p, cuda);
    return lint_gpu_loops(a, p);
}

}  // namespace

TEST(ScheduleApply, LintFindsSerialReductionLoopsOutsideGpuThreads) {
    auto lint = lint_softmax_rows;
    std::string bad = "softmax.compute_root().split(j, jo, jt, 64).gpu_threads(jt).gpu_blocks(i);\n"
                      "softmax_max.compute_at(softmax, i);\n"
                      "softmax_sum.compute_at(softmax, i);\n"
                      "softmax_max.update(0).split(r.x, r_xo, r_xi, 64).rfactor(r_xi, u) as part;\n"
                      "part.compute_at(softmax, i).gpu_threads(u);\n"
                      "part.update(0).gpu_threads(u);\n";
    auto loops_only = [](std::vector<std::string> w) {  // (the statistics' accumulators: the next test)
        w.erase(std::remove_if(w.begin(), w.end(), [](const std::string &m) { return m.find("serial loop") == std::string::npos; }),
                w.end());
        return w;
    };
    auto w = loops_only(lint(bad));
    ASSERT_EQ(w.size(), 1u);
    EXPECT_NE(w[0].find("rows.cuda.sched:6:1: part.update(0): the serial loop over r_xo runs"), std::string::npos) << w[0];
    EXPECT_NE(w[0].find("reorder(r_xo, u)"), std::string::npos) << w[0];
    std::string good = bad;
    good.replace(good.find("part.update(0).gpu_threads(u);"), 30, "part.update(0).reorder(r_xo, u).gpu_threads(u);");
    EXPECT_TRUE(loops_only(lint(good)).empty()) << lint(good)[0];
    EXPECT_TRUE(lint("").empty()) << "the auto-scheduler's schedule";
}

// lint_gpu_loops: a reduction computed at a GPU block lives in shared memory; when one thread runs
// its update's loop, each step stores and reloads the accumulator there (softmax 8192² on an H200:
// 0.1438 ms, 0.1340 in registers). The warning names the place, the Func, the block loop and the
// in() wrapper that fixes it; the fixed schedule is clean.
TEST(ScheduleApply, LintFindsBlockAccumulatorsInSharedMemory) {
    auto lint = lint_softmax_rows;
    std::string head = "softmax.compute_root().split(j, jo, jt, 64).gpu_threads(jt).gpu_blocks(i);\n"
                       "softmax_max.compute_at(softmax, i).gpu_threads(j);\n"
                       "softmax_max.update(0).gpu_threads(j);\n";  // (one thread, but inside a thread loop)
    auto w = lint(head + "softmax_sum.compute_at(softmax, i);\n");
    ASSERT_EQ(w.size(), 1u) << w[0];
    for (const char *part : {"rows.cuda.sched:4:1: softmax_sum: computed at the block loop i of softmax",
                             "update(0) runs its loop over r.x in one thread",
                             "softmax_sum.in() as softmax_sum_w; softmax_sum_w.compute_at(softmax, i).gpu_threads(j); "
                             "softmax_sum.compute_at(softmax_sum_w, j).store_in(MemoryType::Register);"})
        EXPECT_NE(w[0].find(part), std::string::npos) << part << "\n" << w[0];
    EXPECT_TRUE(lint(head + "softmax_sum.in() as softmax_sum_w;\n"
                            "softmax_sum_w.compute_at(softmax, i).gpu_threads(j);\n"
                            "softmax_sum.compute_at(softmax_sum_w, j).store_in(MemoryType::Register);\n")
                    .empty());
    // A 0-d reduction has no var for the wrapper's thread loop: the advice names what is valid instead.
    using Ints = std::vector<int64_t>;
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {8, 64});
    std::string m = b.node("ReduceMean", {x}, {}, {{"axes", Ints{0, 1}}, {"keepdims", int64_t(0)}});
    b.out("Sub", {x, m}, {8, 64});
    LoweredPipeline p = lower_graph(b.g);
    Halide::Target cuda("x86-64-linux-cuda-cuda_capability_80");
    Schedule s0 = parse_schedule("sub_1.compute_root().gpu_blocks(i).gpu_threads(j);\n"
                                 "reducemean_0.compute_at(sub_1, i);\n", "z.cuda.sched");
    auto w0 = lint_gpu_loops(apply_schedule(s0, p, cuda), p);
    ASSERT_EQ(w0.size(), 1u);
    EXPECT_NE(w0[0].find("z.cuda.sched:2:1: reducemean_0: computed at the block loop i of sub_1"), std::string::npos) << w0[0];
    EXPECT_NE(w0[0].find("compute it at root (reducemean_0.compute_root()), or keep the reduced dims"), std::string::npos)
        << w0[0];
    EXPECT_EQ(w0[0].find("__outermost"), std::string::npos) << w0[0];
}

TEST(ScheduleApply, ResolvePrecedence) {
    TestPipeline t = make_pipeline();
    std::string path = loom::testing::temp_path("resolve.sched");
    {
        std::ofstream f(path);
        f << "# loom schedule for test (sha256 abc) on " << kHost.to_string() << "\n\nb.compute_root().parallel(i);\n";
    }
    std::vector<std::string> warnings;
    Schedule s = resolve_schedule(t.p, kHost, path, nullptr, &warnings, "def");
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_TRUE(has(warnings[0], "sha256 abc, but this model's sha256 is def")) << warnings[0];
    // The file's statement first, then the default for every Func it does not mention.
    EXPECT_EQ(s.statements[0].func, "b");
    EXPECT_EQ(s.statements[0].calls.size(), 2u);
    EXPECT_EQ(s.statements_for("a").size(), 1u);
    EXPECT_EQ(s.statements_for("a")[0]->comments[0], "default: a is not in the schedule");
    EXPECT_EQ(s.statements_for("b").size(), 1u);  // b's update keeps Halide's default (serial)
    int calls = 0;
    AutoscheduleFn fake = [&](const LoweredPipeline &, const Halide::Target &) {
        calls++;
        Schedule a;
        a.statements.push_back(ScheduleStatement("a").add("compute_inline"));
        return a;
    };
    Schedule a = resolve_schedule(t.p, kHost, "auto", fake);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(a.statements[0].calls[0].name, "compute_inline");
    EXPECT_GT(a.statements.size(), 1u);
    EXPECT_THROW(resolve_schedule(t.p, kHost, "auto"), UserError);
    try {
        resolve_schedule(t.p, kHost, "/nonexistent/x.sched");
        FAIL();
    } catch (const UserError &e) {
        EXPECT_TRUE(has(e.what(), "valid schedules: eager, inline, auto or the path of a .sched file")) << e.what();
    }
    std::remove(path.c_str());
}

TEST(ScheduleApply, GpuDefaultScheduleLowersForCuda) {
    // No GPU needed: lowering to a statement checks the GPU mapping is complete and legal.
    TestPipeline t = make_pipeline();
    Halide::Target cuda("x86-64-linux-avx2-cuda-cuda_capability_80");
    Schedule s = resolve_schedule(t.p, cuda, "inline");
    apply_schedule(s, t.p, cuda);
    std::string stmt = loom::testing::temp_path("gpu.stmt");
    Halide::Func c = func_of(t, "c");
    ASSERT_NO_THROW(c.compile_to_lowered_stmt(stmt, {t.in}, Halide::Text, cuda));
    std::ifstream f(stmt);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(text, "cuda_gpu_source_kernels")) << text.substr(0, 2000);
    EXPECT_TRUE(has(loop_nest(t.p, cuda), "gpu_block")) << loop_nest(t.p, cuda);
}

TEST(ScheduleApply, CanComputeAtAgreesWithApply) {
    TestPipeline t = make_pipeline();
    ASSERT_TRUE(can_compute_at(t.p, "a", "b", "j"));
    auto in = random_input(t, 5);
    Schedule s = parse_schedule("a.compute_at(b, j);\nb.compute_root();\nc.compute_root();");
    fill_defaults(s, t.p, kHost);
    apply_schedule(s, t.p, kHost);
    check_numerics(t, in);
}

// `x.in() as x_row` wraps a graph input (its reading Func, vars named by layout) so that a
// schedule can place the row read: staged per row of a softmax, the result is unchanged. The
// wrapper is found by its Func, not by its printed name: once another pipeline in the process has
// used the name x_read, Halide's is x_read$1_global_wrapper$0, which the loop-nest printer shows
// as x_read.
TEST(ScheduleApply, InputWrapperStagesARow) {
    loom::testing::GraphBuilder b;
    std::string x = b.input("x", {16, 96});
    b.out("Softmax", {x}, {16, 96}, {{"axis", int64_t(1)}});
    LoweredPipeline lp = lower_graph(b.g);
    const std::string out = lp.output_funcs.at(0);
    std::string text = "x.in() as x_row;\nx_row.compute_at(" + out + ", i).vectorize(j, 8);\n" + out +
                       "_max.compute_at(" + out + ", i);\n" + out + "_sum.compute_at(" + out + ", i);\n" +
                       out + ".parallel(i).vectorize(j, 8);\n";
    AppliedSchedule a = apply_schedule(parse_schedule(text, "rows.sched"), lp, kHost);
    const std::string wrapper = a.funcs.at("x_row").name();
    EXPECT_TRUE(has(wrapper, "x_read") && has(wrapper, "_global_wrapper")) << wrapper;
    std::string nest = loop_nest(lp, kHost);
    ASSERT_TRUE(has(nest, "produce x_read")) << nest;
    EXPECT_LT(nest.find("parallel i"), nest.find("produce x_read")) << nest;
    auto in = random_inputs(b.g, 3);
    auto ref = run_reference(b.g, in);
    JitModel m(std::move(lp));
    auto outs = m.run(in);
    for (const auto &[name, t] : ref) EXPECT_TRUE(loom::testing::close(outs.at(name), t)) << name;
}

// An output wrapped (`matmul.in() as matmul_out`, Halide's idiom) is realized in the output's place:
// the GEMM is computed per 4x8 tile of the wrapper, its initial value and k loop inside the tile,
// and the Tanh that also reads the GEMM reads the wrapper. Right with 21 rows (the last tile
// shifted inwards), as one pipeline and cut at every root.
TEST(ScheduleApply, OutputWrapperComputesAReductionPerTile) {
    loom::testing::WrappedGemm c;
    for (int segments : {1, 1000}) {
        LoweredPipeline lp = lower_graph(c.b.g);
        const std::string g = lp.output_funcs.at(0);
        apply_schedule(parse_schedule(c.schedule(lp), "wrapped.sched"), lp, kHost);
        ASSERT_EQ(lp.output_wrappers->size(), 1u);
        EXPECT_EQ(lp.realized_output_name(0).rfind(g + "_global_wrapper", 0), 0u) << lp.realized_output_name(0);
        EXPECT_EQ(lp.find_realized(lp.realized_output_name(0)), lp.find(g));
        std::string nest = loop_nest(lp, kHost);
        // The GEMM's initial value and update inside the wrapper's tile loop.
        size_t tile = nest.find("for j.jo", nest.find("produce " + g + "_global_wrapper"));
        ASSERT_NE(tile, std::string::npos) << nest;
        EXPECT_GT(nest.find("produce " + g + ":"), tile) << nest;
        EXPECT_GT(nest.find("for k", tile), nest.find("produce " + g + ":")) << nest;
        JitModel m(std::move(lp), kHost, segments);
        // relu | the wrapper | tanh: tanh reads the GEMM through its global wrapper (Halide
        // rewires the calls when it lowers), a whole buffer of the GEMM's shape and the realized
        // graph output, which tanh's pipeline reads from the caller's output buffer
        // (bench/DECISIONS.md#d126-jit-segments-cut-at-wrappers-costliest-first).
        if (segments > 1) EXPECT_EQ(m.segments(), 3);
        for (uint64_t seed : {3, 4}) {
            auto in = random_inputs(c.b.g, seed);
            auto ref = run_reference(c.b.g, in);
            auto outs = m.run(in);
            for (const auto &[name, t] : ref)
                EXPECT_TRUE(loom::testing::close(outs.at(name), t)) << name << ", " << segments << " segments";
        }
    }
}
