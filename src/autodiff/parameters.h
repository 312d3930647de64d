/// \file
/// Which constants of an imported model are trainable parameters, and turning them into graph
/// inputs before preparation, so constant folding and the inference rewrites (Conv+BN folding,
/// Gemm weight pre-transposition) leave them as they are in the model file.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace loom {

/// The parameters of a model: name -> initial value (f32), in graph input order.
struct Parameters {
    std::vector<std::string> names;
    std::map<std::string, Tensor> initial;
};

/// Promotes every float initializer of an imported (not yet prepared) graph that is a trainable
/// parameter to a graph input, appended after the model's own inputs, and returns the values it
/// held. A parameter is a float initializer of 2 or more elements read as data: not an auxiliary
/// input (a Reshape's shape, Resize scales, Clip bounds, Pad values, …) and not a BatchNorm's
/// running mean or variance. UserError when the model has none.
Parameters promote_parameters(Graph &g);

}  // namespace loom
