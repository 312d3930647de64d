/// \file
/// Flat row indices through a merge of dims. A reshape that merges dims ([batch, seq, d] read as
/// [batch·seq, d] rows: a training step's weight gradient, dW = Xᵀ·dY over every row) reads its
/// source at (row / seq, row % seq, d); once Halide flattens the dense source that address is
/// (row % seq)·s + (row / seq)·seq·s, which is row·s, but neither Halide's simplifier nor LLVM
/// folds it back after a GEMM's split of the k loop has rewritten row, so the micro-kernel
/// recomputes the divide and modulo (shift, mask, multiply-adds) at every k step. This Halide
/// lowering pass rewrites each load's index with such a pair into the flat form, which LLVM then
/// strength-reduces to a pointer increment (bench/DECISIONS.md#d174-flat-row-index-of-a-merged-reshape).
#pragma once

#include <Halide.h>

namespace loom {

/// Adds the pass to \p pipeline.
void fold_flat_row_indices(Halide::Pipeline &pipeline);

/// The pass itself, on a lowered statement (for tests): in the index of every load, a term
/// (x % c)·a together with a term (x / c)·(a·c) of the same x and c > 0 becomes x·a (Halide's
/// division rounds to negative infinity, so x = (x / c)·c + x % c for every x). x may be
/// spelled x·m + r (0 <= r < m, c a multiple of m) in the modulo and through let-bound names
/// (Halide's common subexpressions; not those whose value loads or calls); an index without such
/// a pair is left as it is.
Halide::Internal::Stmt flat_row_indices(const Halide::Internal::Stmt &s);

}  // namespace loom
