/// \file
/// A check of applied GPU schedules for serial loops that Halide accepts but runs badly: a serial
/// reduction loop (an RVar, not unrolled, not vectorized) *outside* the GPU thread loops of a
/// stage. Between the block and thread loops, Halide runs a whole thread loop per iteration with a
/// block barrier after each (what `rfactor` gives when its new var is mapped to threads without a
/// reorder: 37 barriers in an 8192-wide softmax row); outside the block loops, it launches the
/// kernel once per iteration (an NCHW pool tiled over h, w only: one launch per channel).
#pragma once

#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule_apply.h"

namespace loom {

/// One warning per offending stage: where its statement is (file:line), the loop, and the fix
/// (reorder the loop inside the thread vars, or map it to gpu_blocks). Empty for CPU schedules.
/// (Outer *pure* loops are not checked: a Func computed per block often runs them once.)
std::vector<std::string> lint_gpu_loops(const AppliedSchedule &applied, const LoweredPipeline &p);

}  // namespace loom
