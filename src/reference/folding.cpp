#include "reference/folding.h"

#include "reference/reference.h"

namespace loom {

NodeEvaluator reference_evaluator() { return evaluate_node; }

void prepare_graph(Graph &g, const PrepareOptions &opts) { prepare_graph(g, reference_evaluator(), opts); }

void infer_shapes_and_fold(Graph &g) { infer_shapes_and_fold(g, reference_evaluator()); }

}  // namespace loom
