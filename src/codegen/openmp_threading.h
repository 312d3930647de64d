/// \file
/// Halide's parallel loops run by OpenMP instead of Halide's own thread pool (DESIGN.md "Targets"):
/// a program that already keeps an OpenMP team (the reference interpreter is one) then has one pool
/// of threads on the cores, not two competing for them. JIT models (codegen/jit.h) read the
/// process-wide choice at every run; `loom run` and `loom bench` take `--threading openmp`. Host
/// artifacts have the same switch in their C API (`<model>_set_threading`, codegen/runtime_glue.h).
#pragma once

#include <Halide.h>

#include <cstdint>
#include <string>

namespace loom {

/// Who runs a Halide `parallel` loop's iterations.
enum class Threading {
    Halide,  ///< Halide's thread pool (HL_NUM_THREADS threads): the default
    OpenMP,  ///< an `omp parallel for` over the loop, on OpenMP's team (OMP_NUM_THREADS)
};

/// Sets the threading of every JIT run from now on (process-wide).
void set_jit_threading(Threading t);
/// The threading JIT runs use now.
Threading jit_threading();

/// "halide" or "openmp" as a Threading; UserError naming \p flag, the value and the valid ones.
Threading parse_threading(const std::string &value, const std::string &flag = "--threading");

/// The JIT handler (JITHandlers::custom_do_par_for) that runs iterations [min, min + extent) of a
/// Halide parallel loop as an OpenMP parallel for, one iteration a chunk (Halide's loops are already
/// split into tasks). Returns the first nonzero task result, else 0.
int openmp_do_par_for(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *),
                      int min, int extent, uint8_t *closure);

/// Parallel loops openmp_do_par_for has run in this process (a test sees its routing work).
uint64_t openmp_loops_run();

}  // namespace loom
