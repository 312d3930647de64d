/// \file
/// The losses a gradient graph and a training step are built on, appended to a forward graph as
/// canonical nodes:
///   mse            mean over every element of (y - target)^2; target: f32, the output's shape
///   cross_entropy  mean over the batch of -log softmax(y)[target]; y: logits [N, C], target:
///                  i64 class indices [N] (PyTorch's CrossEntropyLoss, mean reduction)
///   output         the model's one output, of one element, is the loss; no target
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace loom {

/// The names `--loss` accepts.
const std::vector<std::string> &loss_names();

/// What append_loss added.
struct LossNodes {
    std::string loss;    ///< the scalar loss value
    std::string target;  ///< the new target input ("" for "output")
};

/// Appends loss \p loss on the forward graph's only output (the graph's outputs are left as they
/// are) and, unless "output", a graph input `target`. UserError for an unknown loss (listing the
/// valid ones), a graph with several outputs, logits that are not [N, C], or an "output" loss
/// that is not one element (saying to use mse or cross_entropy).
LossNodes append_loss(Graph &g, const std::string &loss);

}  // namespace loom
