/// \file
/// Halide's parallel loops run by OpenMP instead of Halide's own thread pool (DESIGN.md "Targets"):
/// a program that already keeps an OpenMP team (the reference interpreter is one) then has one pool
/// of threads on the cores, not two competing for them, and its spinning threads start a small
/// kernel's loop sooner. JIT models (codegen/jit.h) read the process-wide choice at every run;
/// `loom run` and `loom bench` take `--threading auto|openmp|halide`. Host artifacts have the same
/// switch in their C API (`<model>_set_threading`, codegen/runtime_glue.h).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <string>

namespace loom {

/// Who runs a Halide `parallel` loop's iterations.
enum class Threading {
    Halide,  ///< Halide's thread pool (HL_NUM_THREADS threads)
    /// An `omp parallel for` over the loop, on OpenMP's team (HL_NUM_THREADS threads, else
    /// OMP_NUM_THREADS, else every core). Its idle threads spin a while before they sleep, where
    /// Halide's pool wakes sleeping threads for every loop, which at 16 threads costs more than a
    /// small kernel's work; but a team waits for its slowest thread, which loses on a few cores
    /// shared with other work (bench/DECISIONS.md#d85-openmp-above-four-threads).
    OpenMP,
    /// Loom's pool (codegen/spin_pool.h): as Halide's, the calling thread claims tasks and waits
    /// for no worker that has not started one; unlike it, an idle worker spins a while before it
    /// sleeps, so a network's next small kernel finds it running. Opt-in: its gain was within the
    /// noise of the machines measured (bench/DECISIONS.md#d134-spinning-thread-pool).
    Spin,
};

/// Up to this many threads JIT runs use Halide's pool by default, above it OpenMP's team.
constexpr int kHalidePoolUpTo = 4;

/// The default threading for runs on \p threads threads (`--threading auto`).
Threading threading_for(int threads);

/// Sets the threading of every JIT run from now on (process-wide).
void set_jit_threading(Threading t);
/// The threading JIT runs use now.
Threading jit_threading();

/// Sets the JIT threading to \p t for its lifetime (nothing when \p t is empty), then restores it.
class ThreadingScope {
public:
    explicit ThreadingScope(std::optional<Threading> t) : before_(jit_threading()) {
        if (t) set_jit_threading(*t);
    }
    ~ThreadingScope() { set_jit_threading(before_); }
    ThreadingScope(const ThreadingScope &) = delete;
    ThreadingScope &operator=(const ThreadingScope &) = delete;

private:
    Threading before_;
};

/// "auto" (threading_for the run's threads), "spin", "halide" or "openmp" as a Threading; UserError naming
/// \p flag, the value and the valid ones.
Threading parse_threading(const std::string &value, const std::string &flag = "--threading");

/// The JIT handler (JITHandlers::custom_do_par_for) that runs iterations [min, min + extent) of a
/// Halide parallel loop as an OpenMP parallel for, one iteration a chunk (Halide's loops are already
/// split into tasks), each with denormals flushed (codegen/denormals.h). Returns the first nonzero
/// task result, else 0.
int openmp_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *),
                      int min, int extent, uint8_t *closure);

/// The JIT handler (JITHandlers::custom_do_par_for) that runs a Halide parallel loop on Loom's
/// spinning pool (SpinPool::instance(openmp_threads())); its workers flush denormals.
int spin_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *),
                    int min, int extent, uint8_t *closure);

/// A JITHandlers::custom_do_par_for handler.
using JitDoParFor = int (*)(Halide::JITUserContext *, int (*)(Halide::JITUserContext *, int, uint8_t *), int, int,
                            uint8_t *);

/// The custom_do_par_for handler of JIT runs under \p t (null: Halide's pool).
JitDoParFor jit_do_par_for(Threading t);

/// Threads an OpenMP parallel loop of Loom's uses: HL_NUM_THREADS when set (the knob every Loom
/// run reads), else OpenMP's own count.
int openmp_threads();

/// Parallel loops openmp_do_par_for has run in this process (a test sees its routing work).
uint64_t openmp_loops_run();

}  // namespace loom
