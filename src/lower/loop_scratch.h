/// \file
/// Scratch buffers of a model compiled for every size. A Func computed inside a loop whose
/// footprint depends on a size Param (a softmax row of `size_seq` floats) has no constant size, so
/// Halide allocates it on the heap at every iteration: 519 malloc/free pairs per run of the
/// transformer fixture where a compile for one size keeps its rows on the stack. This Halide
/// lowering pass moves such allocations to Halide's pseudostack (MemoryType::Stack of a
/// non-constant size): one buffer per function or parallel task, grown only when a larger size
/// comes, reused across the loop's iterations (bench/DECISIONS.md#d113).
#pragma once

#include <Halide.h>

namespace loom {

/// Adds the pass to \p pipeline: every allocation of automatic memory type and non-constant size
/// inside a CPU loop goes to the pseudostack. Allocations outside loops, of a constant size, of an
/// explicit memory type (store_in), or inside GPU loops are left as they are.
void keep_loop_scratch_on_pseudostack(Halide::Pipeline &pipeline);

/// The pass itself, on a lowered statement (for tests).
Halide::Internal::Stmt loop_scratch_on_pseudostack(const Halide::Internal::Stmt &s);

}  // namespace loom
