/// \file
/// Masked accumulators of a model compiled for every size, kept in a register through their loop.
///
/// Compiled for every size, a vectorized loop whose extent moves has a last vector of runtime
/// length (a GuardWithIf split: the tail of a row of `size_seq` columns, or every vector of a conv
/// one to four pixels wide, D161), so Halide writes it as a masked load and a masked store. Where
/// that vector accumulates through a reduction loop (`acc = acc + a * b` at an address the loop
/// does not move), the compile for one size has a constant mask (a plain or scalar access LLVM
/// keeps in a register); the one compile does a masked load and a masked store per step, and on
/// AMD Zen a masked store (vmaskmovps) costs tens of cycles and does not forward to the next load.
/// This Halide lowering pass loads such an accumulator once before the outermost loop it does not
/// depend on, accumulates in a vector on the stack (a register to LLVM), and stores it once after
/// (bench/DECISIONS.md#d182).
#pragma once

#include <Halide.h>

namespace loom {

/// Adds the pass to \p pipeline (CPU loops only; GPU loops are left as they are).
void keep_masked_accumulators_in_registers(Halide::Pipeline &pipeline);

/// The pass itself, on a lowered statement (for tests): every serial loop whose body reads and
/// writes a buffer only at one vector index under one predicate (a masked read-modify-write),
/// both independent of the loop and of every loop and let inside it, and runs no parallel loop,
/// gets that vector loaded before it and stored after it, the body working on a stack copy.
Halide::Internal::Stmt masked_accumulators_in_registers(const Halide::Internal::Stmt &s);

}  // namespace loom
