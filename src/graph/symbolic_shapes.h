/// \file
/// Dynamic shapes: preparing a graph whose symbolic input dims (`batch`, `H`, an exporter's
/// `DynamicDimension.0`) stay open, so that one compile serves every size in their declared
/// ranges. The graph is prepared (graph/passes.h) at a representative size, which gives every
/// value its concrete shape for the cost model and the reports, and again at a second size; each
/// node's symbolic output dims follow from its inputs' by the op's own size rule (`(H + 2p - k) /
/// s + 1` for a Conv, a Reshape's grouping of dims, …) and must reproduce both preparations. What
/// does not (a constant folded from a size, an op without a symbolic rule) is a UserError naming
/// the node and the fix (bind the dim with --input), never a wrong result at another size.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes.h"

namespace loom {

/// Prepares \p g (imported, dims unbound) keeping open the symbolic dims \p opts.dynamic_dims names
/// (all of them with opts.dynamic_all) and binding the rest from opts.bindings as prepare_graph
/// does. Afterwards every value's ValueInfo::shape holds its representative size and
/// ValueInfo::sym its symbolic dims; Graph::dynamic lists the symbols, ranges and requirements.
/// A graph with no dim left open is prepared exactly as prepare_graph would.
void prepare_graph_dynamic(Graph &g, const NodeEvaluator &evaluate, const PrepareOptions &opts);

/// The symbolic dims each graph input leaves open, for a graph that prepare_graph_dynamic made:
/// sizes of the symbols read from \p shapes (by input name), checked against the inputs' static
/// dims, each other, the declared ranges and Graph::dynamic's requirements. UserError naming the
/// input and dim.
std::map<std::string, int64_t> bind_dynamic_sizes(const DynamicDims &dyn, const std::vector<std::string> &input_names,
                                                  const std::vector<SymShape> &input_syms,
                                                  const std::map<std::string, Shape> &shapes);

/// ValueInfo::sym of \p vi, or its static shape as SymDims when it has none.
SymShape sym_shape_of(const ValueInfo &vi);

}  // namespace loom
