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
#include "graph/graph.h"

namespace loom::cli {

/// A model ready to train.
struct TrainingModel {
    Graph forward;        ///< prepared (canonical), parameters as inputs
    Parameters params;    ///< their initial values (from the model file)
    GradientGraph grad;   ///< forward + loss + backward
    std::vector<std::string> data_inputs;  ///< the model's own inputs
};

/// Imports \p path, promotes its parameters, prepares it with the `--input` bindings, and
/// differentiates it through \p loss. UserErrors are prefixed with the file name.
TrainingModel load_training_model(const std::string &path, const std::vector<std::string> &input_flags,
                                  const std::string &loss, const std::string &inputs_dir);

/// Every input of the gradient graph: the data inputs and the target from `<dir>/<name>.npy` when
/// \p dir is given (the target file is `target.npy`), else random from \p seed (class targets
/// uniform in [0, C)); each parameter its initial value. UserError naming a file whose shape or
/// dtype does not fit, or a class index out of range.
std::map<std::string, Tensor> gradient_inputs(const TrainingModel &m, const std::string &dir, uint64_t seed);

}  // namespace loom::cli
