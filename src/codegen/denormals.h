/// \file
/// Denormal floats flushed to zero while a CPU model runs (x86's MXCSR: FTZ for results, DAZ for
/// operands), in the calling thread and in every task of its parallel loops. An FMA on a denormal
/// operand takes a microcode assist on Intel cores, and the activations of random-weight networks
/// decay into that range (bench/DECISIONS.md#d84-denormals-flushed). Values that small are below every tolerance a model
/// is checked at; TensorFlow flushes them the same way.
#pragma once

#include <Halide.h>

#include <cstdint>

namespace loom {

/// Sets FTZ and DAZ in this thread's floating-point control for its lifetime, then restores what
/// was there (a no-op where the CPU is not x86).
class FlushDenormals {
public:
    FlushDenormals();
    ~FlushDenormals();
    FlushDenormals(const FlushDenormals &) = delete;
    FlushDenormals &operator=(const FlushDenormals &) = delete;

private:
    unsigned saved_ = 0;
};

/// The JIT handler (JITHandlers::custom_do_task) that runs one task of Halide's thread pool with
/// denormals flushed: the pool's worker threads keep their own floating-point control.
int flushing_do_task(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *), int idx,
                     uint8_t *closure);

}  // namespace loom
