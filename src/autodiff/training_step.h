/// \file
/// A whole training step as one graph: forward, loss, backward (autodiff.h) and the optimizer's
/// update of every parameter, so the step is lowered, scheduled and compiled like any other graph
/// (`loom compile --train`). The graph reads the parameters and the optimizer state as inputs and
/// writes their next values as outputs; the artifact's glue swaps the two sets of buffers after
/// each step, so to its caller the update is in place.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"

namespace loom {

/// The optimizer and its hyperparameters (PyTorch's defaults and update formulas).
struct OptimizerSpec {
    std::string name = "sgd";  ///< "sgd" (p -= lr g) or "adam" (torch.optim.Adam, no weight decay)
    double lr = 0.01;          ///< initial learning rate (the artifact can change it between steps)
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

/// The optimizer names `--optimizer` accepts.
const std::vector<std::string> &optimizer_names();

/// The step's graph and how its inputs and outputs pair up.
struct TrainingStepGraph {
    /// inputs: data inputs, target, parameters, state, buffers, scalars; outputs: loss, then each
    /// parameter's next value followed by its optimizer state's, the parameters in the order the
    /// forward first reads them, then the buffers' (next_of names each; output_index finds one)
    Graph graph;
    std::string loss, target;
    std::vector<std::string> data_inputs, parameters, state;
    /// BatchNorm running statistics (PyTorch's buffers): inputs read by no gradient, updated by
    /// momentum each step (RunningStatistics), starting from the model's values in buffer_initial.
    std::vector<std::string> buffers;
    std::map<std::string, Tensor> buffer_initial;
    /// Per-step scalar inputs ([1] f32) the caller computes: `lr` for sgd; `adam_step` (lr / (1 -
    /// beta1^t)) and `adam_rsqrt_bias` (1 / sqrt(1 - beta2^t)) for adam.
    std::vector<std::string> scalars;
    std::map<std::string, std::string> next_of;  ///< parameter, state or buffer input -> output of its next value
    OptimizerSpec optimizer;

    /// Index among graph.outputs of the next value of \p owned (a parameter, state or buffer).
    size_t output_index(const std::string &owned) const;
};

/// Rewrites each Gemm Y = X·Wᵀ (+ C) of a parameter W [N, K] (transB) over few rows M, where
/// transposing X and the product moves at most half of what transposing W would (2·M·(K+N) <= N·K),
/// as Y = (W·Xᵀ)ᵀ (+ C): W is the product's A, read along its rows as stored, so the step transposes
/// the [M, K] input and the [N, M] product instead of the weight. An X that is an elementwise
/// function of such products (their bias added along rows) and scalars is not transposed: the
/// function is computed again on the products as they lie. Y keeps its name (the backward reads
/// it). Returns how many Gemms it rewrote
/// (bench/DECISIONS.md#d150-few-row-gemms-read-the-weight-as-a).
int gemm_weights_read_as_a(Graph &g, const std::vector<std::string> &parameters);

/// Where the step runs: on a GPU the forward's products keep reading a parameter through its
/// transpose (cuBLAS's flag, no kernel); on the CPU a product over few rows reads it as A instead
/// (gemm_weights_read_as_a).
enum class StepDevice { Cpu, Gpu };

/// Appends \p opt's update to \p gg. UserError for an unknown optimizer (listing the valid ones)
/// or a learning rate that is not positive.
TrainingStepGraph make_training_step(const GradientGraph &gg, const OptimizerSpec &opt,
                                     StepDevice device = StepDevice::Cpu);

}  // namespace loom
