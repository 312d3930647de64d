/// \file
/// Halide's parallel loops run by OpenMP instead of Halide's own thread pool (DESIGN.md "Targets"):
/// a program that already keeps an OpenMP team (the reference interpreter is one) then has one pool
/// of threads on the cores, not two competing for them, and its spinning threads start a small
/// kernel's loop sooner. JIT models (codegen/jit.h) read the process-wide choice at every run;
/// `loom run` and `loom bench` take `--threading openmp|halide`. Host artifacts have the same
/// switch in their C API (`<model>_set_threading`, codegen/runtime_glue.h).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>

namespace loom {

/// Who runs a Halide `parallel` loop's iterations.
enum class Threading {
    Halide,  ///< Halide's thread pool (HL_NUM_THREADS threads)
    /// An `omp parallel for` over the loop, on OpenMP's team (HL_NUM_THREADS threads, else
    /// OMP_NUM_THREADS, else every core): the default, since its idle threads spin a while before
    /// they sleep, where Halide's pool wakes sleeping threads for every loop, which costs more than
    /// a small kernel's work at 16 threads (bench/DECISIONS.md#d85-openmp-by-default).
    OpenMP,
};

/// Sets the threading of every JIT run from now on (process-wide).
void set_jit_threading(Threading t);
/// The threading JIT runs use now.
Threading jit_threading();

/// "halide" or "openmp" as a Threading; UserError naming \p flag, the value and the valid ones.
Threading parse_threading(const std::string &value, const std::string &flag = "--threading");

/// The JIT handler (JITHandlers::custom_do_par_for) that runs iterations [min, min + extent) of a
/// Halide parallel loop as an OpenMP parallel for, one iteration a chunk (Halide's loops are already
/// split into tasks), each with denormals flushed (codegen/denormals.h). Returns the first nonzero
/// task result, else 0.
int openmp_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *),
                      int min, int extent, uint8_t *closure);

/// Threads an OpenMP parallel loop of Loom's uses: HL_NUM_THREADS when set (the knob every Loom
/// run reads), else OpenMP's own count.
int openmp_threads();

/// Parallel loops openmp_do_par_for has run in this process (a test sees its routing work).
uint64_t openmp_loops_run();

}  // namespace loom
