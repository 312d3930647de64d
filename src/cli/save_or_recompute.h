/// \file
/// Save or recompute, as the cost model decided it: for each forward activation that the backward
/// pass of a gradient or training-step graph reads, whether the schedule keeps it (a stored buffer
/// the backward reads: its bytes) or recomputes it inside its backward consumers (inlined: the
/// FLOPs that costs), with the cost model's own reason. In one pipeline the two passes are fused
/// like any producer and consumer, so the partitioner of AOTAutograd is the fusion planner's
/// inline-or-store choice (autoschedule/cost_model.cpp) applied across the forward/backward cut.
#pragma once

#include <set>
#include <string>

#include "autoschedule/autoschedule.h"
#include "lower/lowered.h"

namespace loom::cli {

/// Totals of the table.
struct SaveOrRecompute {
    int saved = 0, recomputed = 0;
    double saved_bytes = 0, recompute_flops = 0;
    std::string table;  ///< one line per activation, then the totals
};

/// The table for pipeline \p p scheduled as \p r, whose graph nodes named in \p forward_nodes are
/// the forward pass (every other node is backward or update).
SaveOrRecompute save_or_recompute(const LoweredPipeline &p, const AutoScheduleResult &r,
                                  const std::set<std::string> &forward_nodes);

}  // namespace loom::cli
