#include "codegen/openmp_threading.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include <omp.h>

#include "codegen/denormals.h"
#include "codegen/spin_pool.h"
#include "support/error.h"

namespace loom {

int openmp_threads() {
    static const int from_env = [] {
        const char *t = std::getenv("HL_NUM_THREADS");
        return t && std::atoi(t) > 0 ? std::atoi(t) : 0;
    }();
    return from_env > 0 ? from_env : omp_get_max_threads();
}

Threading threading_for(int threads) { return threads > kHalidePoolUpTo ? Threading::OpenMP : Threading::Halide; }

namespace {

std::atomic<Threading> g_threading{threading_for(openmp_threads())};
std::atomic<uint64_t> g_loops{0};

}  // namespace

void set_jit_threading(Threading t) { g_threading = t; }

Threading jit_threading() { return g_threading; }

Threading parse_threading(const std::string &value, const std::string &flag) {
    if (value == "halide") return Threading::Halide;
    if (value == "openmp") return Threading::OpenMP;
    if (value == "spin") return Threading::Spin;
    if (value == "auto") return threading_for(openmp_threads());
    throw UserError(str_cat(flag, " '", value, "' is not a threading; valid: auto (the default: OpenMP above ",
                            kHalidePoolUpTo, " threads, else Halide's pool), spin (Loom's pool, whose idle threads spin ",
                            "briefly), openmp (an OpenMP parallel for per Halide parallel loop), halide (Halide's ",
                            "thread pool)"));
}

int openmp_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *),
                      int min, int extent, uint8_t *closure) {
    g_loops++;
    std::atomic<int> first_error{0};
    // Dynamic, one iteration at a time: Halide hands out its tasks the same way, and the cost
    // model already sized them (rows_per_task), so a chunk is a task. Always the whole team, even
    // for fewer tasks: a team that shrinks and grows again wakes its docked threads, the cost this
    // replaces Halide's pool to avoid (bench/DECISIONS.md#d85-openmp-above-four-threads).
    const int threads = openmp_threads();
#pragma omp parallel num_threads(threads)
    {
        FlushDenormals flush;  // once per thread of the team, not per task
#pragma omp for schedule(dynamic, 1)
        for (int x = min; x < min + extent; x++) {
            if (first_error.load(std::memory_order_relaxed) != 0) continue;  // a task failed: skip the rest
            int r = task(ctx, x, closure);
            if (r != 0) {
                int none = 0;
                first_error.compare_exchange_strong(none, r);
            }
        }
    }
    return first_error;
}

int spin_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *), int min,
                    int extent, uint8_t *closure) {
    // Halide's task type differs from the pool's only in its context pointer's type.
    return SpinPool::instance(openmp_threads()).run(ctx, reinterpret_cast<SpinPool::Task>(task), min, extent, closure);
}

JitDoParFor jit_do_par_for(Threading t) {
    return t == Threading::OpenMP ? openmp_do_par_for : t == Threading::Spin ? spin_do_par_for : nullptr;
}

uint64_t openmp_loops_run() { return g_loops; }

}  // namespace loom
