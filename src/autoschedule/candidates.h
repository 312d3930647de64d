/// \file
/// Ranked alternatives to the CPU cost model's schedule, for `loom autoschedule --tune N` (which
/// compiles and times the first N and keeps the fastest: measure/tuning.h).
///
/// Each candidate is the cost model run with some ScheduleKnobs away from its own choice: another
/// GEMM micro-kernel (rows x vectors), epilogue tile size or k chunk; a GEMM's A operand
/// materialised instead of computed per row block; row statistics in their own kernels; bigger or
/// smaller parallel tasks. Only knobs that change this pipeline's schedule are varied, and
/// candidates whose statements print the same are dropped. Each carries a full Schedule and the
/// model's estimate of its time: per kernel, max(memory time, compute time) from the fusion plan,
/// with a GEMM's compute time scaled by its micro-kernel's FMA efficiency, parallel tasks'
/// overhead and load imbalance, and the B panel re-read per tile.
///
/// Deterministic: the same pipeline, target and machine model give the same list, in the same order.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "autoschedule/autoschedule.h"

namespace loom {

/// One alternative schedule.
struct ScheduleCandidate {
    ScheduleKnobs knobs;     ///< what differs from the model's choice
    std::string label;       ///< knobs.describe(): "model's choice", "gemm 4x2v, tile 16 kernels" …
    Schedule schedule;       ///< complete (every kernel), as auto_schedule_with_plan writes it
    double est_ms = 0;       ///< the model's estimate of one run
};

/// The model's estimate (ms) of one run of \p r, planned and tiled with \p knobs.
double estimate_ms(const LoweredPipeline &p, const AutoScheduleResult &r, const MachineModel &m,
                   const ScheduleKnobs &knobs);

/// Candidates for \p p: element 0 is always the model's choice (what `loom autoschedule` writes);
/// the others follow by increasing estimate (ties in the order they were generated). Distinct
/// schedules only; at most \p max_candidates (0: all).
std::vector<ScheduleCandidate> schedule_candidates(const LoweredPipeline &p, const Halide::Target &target,
                                                   const MachineModel &m, size_t max_candidates = 0);

}  // namespace loom
