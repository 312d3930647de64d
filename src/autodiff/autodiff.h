/// \file
/// Graph-level reverse-mode differentiation: from a canonical forward graph (op_catalog.h) whose
/// trainable parameters are graph inputs (parameters.h), and a loss (loss.h), the backward graph
/// as ordinary canonical nodes, one vector-Jacobian rule per op (vjp_rules.h). The result is a
/// Graph like any other: it lowers through src/ops, is scheduled by a file or the cost model, runs
/// on the reference interpreter and through the JIT/AOT.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes.h"

namespace loom {

/// A BatchNormalization's running statistics, which a training step updates as ONNX's momentum
/// says (running = running * momentum + batch * (1 - momentum)) with PyTorch's batch variance
/// (unbiased, n / (n - 1), as `model.train()` uses it for running_var).
struct RunningStatistics {
    std::string node;                       ///< the BatchNormalization node
    std::string running_mean, running_var;  ///< its mean and var initializers' names ([C])
    Tensor initial_mean, initial_var;       ///< their values in the model
    std::string batch_mean, batch_var;      ///< the batch's mean and biased variance in the graph ([1, C, 1, …])
    double momentum = 0.9;
    int64_t count = 1;                      ///< elements per channel in the batch (N times the spatial size)
};

/// A forward graph extended with its loss and the gradient of the loss with respect to each
/// parameter. Graph outputs: `loss` first, then one gradient per parameter (same order).
struct GradientGraph {
    Graph graph;
    std::string loss;                      ///< the scalar loss value (graph output 0)
    std::string target;                    ///< the target input ("" for a graph output taken as loss)
    std::vector<std::string> parameters;   ///< parameter inputs, in graph order
    std::map<std::string, std::string> gradient_of;  ///< parameter -> its gradient value (a graph output)
    std::vector<std::string> forward_outputs;        ///< the forward graph's outputs (not graph outputs here)
    int forward_nodes = 0;                 ///< graph.nodes[0, forward_nodes) are the forward pass (with the loss)
    std::vector<RunningStatistics> running_statistics;  ///< one per BatchNormalization, in graph order
};

/// Differentiates \p forward (canonical, parameters as inputs listed in \p parameters) through the
/// loss \p loss ("mse", "cross_entropy" or "output": see loss.h). Norms are rewritten to training
/// mode first (batch statistics; norm_training.h). UserError naming the op and node for an op with
/// no rule on a path from a parameter to the loss, and saying what to do; UserError for an unknown
/// loss or a forward graph the loss does not fit. \p evaluate (reference/folding.h's
/// reference_evaluator) computes constant tables some rules need (Resize's interpolation matrices).
GradientGraph differentiate(const Graph &forward, const std::vector<std::string> &parameters, const std::string &loss,
                            const NodeEvaluator &evaluate = nullptr);

/// The ops with a vector-Jacobian rule, and the ones no gradient flows through (comparisons,
/// ArgMax, Floor, …), sorted.
std::vector<std::string> differentiable_ops();

}  // namespace loom
