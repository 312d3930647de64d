/// \file
/// Graph preparation with constant folding on the reference interpreter: what every caller above
/// the reference layer uses (graph/passes.h takes the evaluator as an argument, so that the graph
/// layer does not depend on the interpreter).
#pragma once

#include "graph/passes.h"

namespace loom {

/// evaluate_node (reference.h) as a NodeEvaluator.
NodeEvaluator reference_evaluator();

/// prepare_graph (graph/passes.h) folding constants with reference_evaluator().
void prepare_graph(Graph &g, const PrepareOptions &opts = {});

/// infer_shapes_and_fold (graph/passes.h) folding constants with reference_evaluator().
void infer_shapes_and_fold(Graph &g);

}  // namespace loom
