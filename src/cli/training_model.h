/// \file
/// What `loom grad` and `loom compile --train` share: a model imported with its weights as
/// parameter inputs (autodiff/parameters.h), prepared, and differentiated through a loss; and the
/// inputs a gradient run takes (data inputs, the target, the parameters' values).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "autodiff/parameters.h"
#include "autodiff/recompute_partition.h"
#include "graph/graph.h"

namespace loom::cli {

/// A model ready to train.
struct TrainingModel {
    Graph forward;        ///< prepared (canonical), parameters as inputs
    Parameters params;    ///< their initial values (from the model file)
    GradientGraph grad;   ///< forward + loss + backward (partitioned as `recompute` says)
    RecomputePlan recompute;  ///< which forward values the backward saves and which it recomputes
    std::vector<std::string> data_inputs;  ///< the model's own inputs
};

/// Imports \p path, promotes its parameters, prepares it with the `--input` bindings, and
/// differentiates it through \p loss, then partitions saved and recomputed activations:
/// \p recompute is "min-cut" (recompute_partition.h) or "save-all" (the backward reads every
/// forward value it needs as stored). UserErrors are prefixed with the file name.
TrainingModel load_training_model(const std::string &path, const std::vector<std::string> &input_flags,
                                  const std::string &loss, const std::string &inputs_dir,
                                  const std::string &recompute = "min-cut");

/// The partitions `--recompute` accepts.
const std::vector<std::string> &recompute_modes();

/// Every input of the gradient graph: the data inputs and the target from `<dir>/<name>.npy` when
/// \p dir is given (the target file is `target.npy`), else random from \p seed (class targets
/// uniform in [0, C)); each parameter its initial value. UserError naming a file whose shape or
/// dtype does not fit, or a class index out of range.
std::map<std::string, Tensor> gradient_inputs(const TrainingModel &m, const std::string &dir, uint64_t seed);

}  // namespace loom::cli
