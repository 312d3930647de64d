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

}  // namespace loom::autodiff
