/// \file
/// Lowering a whole graph: each node goes to its op family's lowering function (src/ops), which
/// defines its named Funcs in one LoweredPipeline (lower/lowered.h).
#pragma once

#include "graph/graph.h"
#include "lower/lowered.h"

namespace loom {

/// Lowers a canonical graph (after prepare_graph) to one Pipeline: inputs become ImageParams with
/// estimates from their shapes, initializers constant Buffers, each node one or more named Funcs.
/// Leaves every Func unscheduled (except extern stages made under \p options: compute_root).
LoweredPipeline lower_graph(const Graph &g, const LowerOptions &options = {});

}  // namespace loom
