/// \file
/// The forward graph as training computes it, before differentiation: every normalization
/// (BatchNormalization, LayerNormalization, InstanceNormalization, GroupNormalization) written out
/// as ReduceMean / Sub / Mul / Sqrt / Reciprocal nodes over its statistics' axes. BatchNorm then
/// normalises with the batch's own mean and (biased) variance, as PyTorch's `model.train()` does;
/// its running statistics are not read here (the training step updates them: training_step.h). The other norms compute what they computed
/// before, now with one rule per primitive for their gradient. Private to src/autodiff.
#pragma once

#include <vector>

#include "autodiff/autodiff.h"
#include "graph/graph.h"

namespace loom::autodiff {

/// \p g with its norms rewritten (node outputs keep their value names). When \p stats is given,
/// each BatchNormalization's batch statistics and running statistics (constant mean and var
/// inputs) are appended to it.
Graph rewrite_norms_for_training(const Graph &g, std::vector<RunningStatistics> *stats = nullptr);

/// Replaces each exact (erf) GELU that an exporter wrote as elementwise nodes (x / √2 or x · 1/√2,
/// Erf, + 1, then · x and · 0.5 in any order) by one Gelu node (approximate 'none') named for its
/// scope, whose output keeps the region's output name. Its vector-Jacobian rule reads the output:
/// Φ(x) = y / x, so the backward evaluates φ's exp but not erf again (the decomposed rules
/// recomputed erf and its exp). A region is recognised by its nodes and checked by evaluating it
/// against 0.5·x·(1 + erf(x/√2)); every value inside it must be read only inside it. Returns how
/// many regions it replaced (bench/DECISIONS.md#d159-exact-gelu-gradient-reads-its-output).
int fuse_exact_gelu(Graph &g);

}  // namespace loom::autodiff
