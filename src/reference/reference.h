/// \file
/// The reference interpreter: a plain, obviously correct C++ implementation of every canonical op
/// (op_catalog.h), computing in double and parallel over outer loops with OpenMP. It is the
/// numerical oracle of every test and of `loom run --check`, and constant folding runs on it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace loom {

/// Evaluates one canonical node. \p inputs has one entry per node input (nullptr for an omitted
/// optional input); \p outputs gives the inferred type and shape of each output. Floating results
/// are returned as f64 tensors (the oracle keeps full precision); integer and bool results in their
/// declared dtype. UserError for an op or attribute value the interpreter does not support.
std::vector<Tensor> evaluate_node(const Node &node, const std::vector<const Tensor *> &inputs,
                                  const std::vector<ValueInfo> &outputs);

/// Runs a canonical graph on \p inputs (by graph input name) and returns every graph output by
/// name (floats as f64). UserError naming a missing input or one of the wrong shape.
std::map<std::string, Tensor> run_reference(const Graph &g,
                                            const std::map<std::string, Tensor> &inputs);

/// Random inputs for every graph input, from \p seed (floats uniform in [-1, 1), integer inputs in
/// [0, 10) — small enough to be valid indices for most embedding tables).
std::map<std::string, Tensor> random_inputs(const Graph &g, uint64_t seed);

}  // namespace loom
