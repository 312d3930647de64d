/// \file
/// A schedule file's header against the model and target it is used with: the model hash recorded
/// by `loom autoschedule`, and whether the file was written for a GPU or a CPU target.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace loom {

/// The header check: warnings (not printed) when the file's model hash differs from
/// \p model_sha256 (skipped when either is empty) or its target differs from \p target; throws
/// UserError when the file uses GPU primitives and \p target has no GPU, or was written for a GPU
/// target and uses CPU parallelism while \p target is a GPU target (and the reverse).
std::vector<std::string> check_schedule_header(const Schedule &s, const Halide::Target &target,
                                               const std::string &model_sha256 = "");

}  // namespace loom
