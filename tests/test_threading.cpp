// Halide's parallel loops routed through OpenMP (codegen/openmp_threading.h), the default above 4
// threads: a JIT run under Threading::OpenMP goes through openmp_do_par_for and matches the reference on poisoned
// outputs; Halide's own pool is used when switched; a failing task's error comes back; a bad
// --threading value is a user error naming the flag and the valid values. Denormals are flushed
// in every task under every threading (codegen/denormals.h). Loom's spinning pool
// (codegen/spin_pool.h) runs every iteration once on several threads and matches the reference.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "autoschedule/autoschedule.h"
#include "codegen/jit.h"
#include "codegen/openmp_threading.h"
#include "codegen/spin_pool.h"
#include "graph/passes.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "support/error.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

// Restores the default whatever a test does.
struct ThreadingGuard {
    ~ThreadingGuard() { set_jit_threading(threading_for(openmp_threads())); }
};

// sigmoid(x * w + b) over 256 rows of 4096: big enough that the auto-schedule makes its rows
// parallel tasks.
Graph pointwise_graph() {
    loom::testing::GraphBuilder b;
    Shape s{256, 4096};
    std::string x = b.input("x", s), w = b.input("w", s), c = b.input("c", s);
    std::string m = b.node("Mul", {x, w}, s);
    std::string a = b.node("Add", {m, c}, s);
    b.out("Sigmoid", {a}, s);
    prepare_graph(b.g);
    return b.g;
}

TEST(Threading, OpenMPRunsTheParallelLoopsAndMatchesTheReference) {
    ThreadingGuard guard;
    Graph g = pointwise_graph();
    LoweredPipeline lp = lower_graph(g);
    apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
    JitModel m(std::move(lp));
    auto in = random_inputs(g, 3);
    auto ref = run_reference(g, in);

    set_jit_threading(Threading::OpenMP);
    uint64_t before = openmp_loops_run();
    auto outs = m.run(in);  // outputs are poisoned before the run
    EXPECT_GT(openmp_loops_run(), before) << "no parallel loop went through OpenMP";
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t)) << name;

    set_jit_threading(Threading::Halide);
    before = openmp_loops_run();
    outs = m.run(in);  // the same cached model, Halide's pool again
    EXPECT_EQ(openmp_loops_run(), before);
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t)) << name;

    set_jit_threading(Threading::Spin);
    SpinPool &pool = SpinPool::instance(openmp_threads());
    uint64_t shared = pool.loops_shared();
    outs = m.run(in);  // Loom's spinning pool
    if (pool.threads() > 1) EXPECT_GT(pool.loops_shared(), shared) << "no parallel loop went through the pool";
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t)) << name;
}

TEST(Threading, AutoKeepsHalidesPoolUpToFourThreadsAndTakesOpenMPAbove) {
    EXPECT_EQ(threading_for(1), Threading::Halide);
    EXPECT_EQ(threading_for(4), Threading::Halide);
    EXPECT_EQ(threading_for(5), Threading::OpenMP);
    EXPECT_EQ(threading_for(16), Threading::OpenMP);
    EXPECT_EQ(parse_threading("auto"), threading_for(openmp_threads()));
    EXPECT_EQ(jit_threading(), threading_for(openmp_threads()));
}

#if defined(__x86_64__) || defined(__i386__)
// x * w with x = w = 1e-20: the product, 1e-40, is a denormal float. Flushed, every element is
// exactly 0 under both threadings (outputs are poisoned with NaN before each run), and the calling
// thread's floating-point control is what it was.
TEST(Threading, DenormalsAreFlushedInEveryTaskAndTheControlComesBack) {
    ThreadingGuard guard;
    volatile float tiny = 1e-20f;
    ASSERT_GT(tiny * tiny, 0.0f) << "this thread already flushes denormals: the test would prove nothing";
    loom::testing::GraphBuilder b;
    Shape s{256, 4096};
    std::string x = b.input("x", s), w = b.input("w", s);
    b.out("Mul", {x, w}, s);
    prepare_graph(b.g);
    LoweredPipeline lp = lower_graph(b.g);
    apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
    JitModel m(std::move(lp));
    std::map<std::string, Tensor> in;
    for (const auto &name : {x, w}) {
        Tensor t(DType::F32, s);
        for (int64_t i = 0; i < t.numel(); i++) t.set(i, 1e-20);
        in[name] = t;
    }
    for (Threading t : {Threading::OpenMP, Threading::Halide, Threading::Spin}) {
        set_jit_threading(t);
        const unsigned before = _mm_getcsr();
        auto outs = m.run(in);
        EXPECT_EQ(_mm_getcsr(), before);
        const Tensor &y = outs.begin()->second;
        int64_t nonzero = 0;
        for (int64_t i = 0; i < y.numel(); i++) nonzero += y.get(i) != 0.0;
        EXPECT_EQ(nonzero, 0) << (t == Threading::OpenMP ? "openmp" : t == Threading::Spin ? "spin" : "halide") << ": " << nonzero
                              << " elements kept a denormal (or NaN)";
    }
}
#endif

std::atomic<int> g_calls{0};
int count_or_fail(Halide::JITUserContext *, int x, uint8_t *) {
    g_calls++;
    return x == 5 ? 42 : 0;
}

TEST(Threading, EveryIterationRunsOnceAndTheFirstErrorComesBack) {
    g_calls = 0;
    EXPECT_EQ(openmp_do_par_for(nullptr, count_or_fail, 10, 100, nullptr), 0);
    EXPECT_EQ(g_calls.load(), 100);
    EXPECT_EQ(openmp_do_par_for(nullptr, count_or_fail, 0, 8, nullptr), 42);
}

std::atomic<int> g_team{0};
int record_team(Halide::JITUserContext *, int, uint8_t *) {
    g_team = omp_get_num_threads();
    return 0;
}

// A loop of fewer tasks than threads still runs on the whole team: a team that shrank would have
// to wake its docked threads again for the next, wider loop.
TEST(Threading, ALoopOfFewTasksKeepsTheWholeTeam) {
    g_team = 0;
    EXPECT_EQ(openmp_do_par_for(nullptr, record_team, 0, 1, nullptr), 0);
    EXPECT_EQ(g_team.load(), openmp_threads());
}

// Loom's spinning pool of 4 threads (on any host): every iteration of a loop runs once, on more
// than the calling thread (the first task waits, up to 10 s, for a second thread to arrive); the
// first error comes back and the tasks after it are skipped; a loop started inside a task runs
// there, whole; the pool's workers flush denormals.
std::atomic<int> g_hits[256];
std::atomic<int> g_threads_seen{0};
int count_each(void *, int x, uint8_t *) {
    static thread_local bool counted = false;
    if (!counted) counted = true, g_threads_seen++;
    if (x == 0)
        for (int k = 0; k < 10000 && g_threads_seen.load() < 2; k++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    g_hits[x]++;
    return 0;
}
int fail_at_3(void *, int x, uint8_t *) { return x == 3 ? 7 : 0; }
std::atomic<int> g_inner{0};
int inner(void *, int, uint8_t *) {
    g_inner++;
    return 0;
}
SpinPool *g_pool = nullptr;
int outer(void *, int, uint8_t *) { return g_pool->run(nullptr, inner, 0, 10, nullptr); }

TEST(Threading, SpinPoolRunsEveryIterationOnceOnSeveralThreads) {
    SpinPool pool(4);
    ASSERT_EQ(pool.threads(), 4);
    for (auto &h : g_hits) h = 0;
    g_threads_seen = 0;
    EXPECT_EQ(pool.run(nullptr, count_each, 0, 256, nullptr), 0);
    for (int x = 0; x < 256; x++) EXPECT_EQ(g_hits[x].load(), 1) << x;
    EXPECT_GE(g_threads_seen.load(), 2) << "no worker took a task";
    EXPECT_EQ(pool.loops_shared(), 1u);
    EXPECT_EQ(pool.run(nullptr, fail_at_3, 0, 8, nullptr), 7);
    g_pool = &pool;
    g_inner = 0;
    EXPECT_EQ(pool.run(nullptr, outer, 0, 6, nullptr), 0);
    EXPECT_EQ(g_inner.load(), 60) << "a nested loop runs whole on its task's thread";
    EXPECT_EQ(pool.run(nullptr, count_each, 5, 0, nullptr), 0) << "an empty loop";
}

TEST(Threading, BadValueNamesTheFlagAndTheValidOnes) {
    EXPECT_EQ(parse_threading("openmp"), Threading::OpenMP);
    EXPECT_EQ(parse_threading("spin"), Threading::Spin);
    EXPECT_EQ(parse_threading("halide"), Threading::Halide);
    try {
        parse_threading("omp");
        FAIL() << "no error";
    } catch (const UserError &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("--threading 'omp'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("halide"), std::string::npos) << msg;
        EXPECT_NE(msg.find("openmp"), std::string::npos) << msg;
        EXPECT_NE(msg.find("spin"), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace loom
