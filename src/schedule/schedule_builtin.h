/// \file
/// Loom's built-in schedules, as Schedule data, and the one precedence function
/// (house style): a schedule file, else the auto-scheduler, else the default — for every Func a
/// file does not mention the default applies.
///
/// The default for one Func (default_statements):
/// - CPU: compute_root; parallel over the outermost pure var (the two outermost fused when the
///   outermost is small, < 2 × cores, and a third var is left to vectorize); vectorize the innermost
///   pure var by the target's natural vector width for the Func's type (8 f32 lanes on AVX2, 16 on
///   AVX-512) when its extent is at least that. Update stages likewise over their pure vars, with
///   the vectorized pure var moved inside the reduction loops.
/// - GPU: compute_root; gpu_tile over the two innermost pure vars (32 × 8 threads) or the only one
///   (256 threads); update stages likewise over their pure vars; gpu_single_thread when a stage has
///   none.
#pragma once

#include <Halide.h>

#include <functional>
#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// The default statements of \p f on \p target: its pure stage, then each update stage.
std::vector<ScheduleStatement> default_statements(const LoweredFunc &f, const Halide::Target &target);

/// "eager": the default for every Func (one loop nest per op).
Schedule eager_schedule(const LoweredPipeline &p, const Halide::Target &target);

/// "inline": compute_inline for every pointwise Func that is not an output, the default for the rest.
Schedule inline_schedule(const LoweredPipeline &p, const Halide::Target &target);

/// The lowering schedule \p spec (as resolve_schedule takes it) is measured with: \p lo, except
/// that the built-in baselines ("eager", "inline", "" = eager) read conv and GEMM weights as the
/// graph stores them (LowerOptions::block_conv_weights, block_matmul_weights and
/// channels_last_depthwise_filters off). They stand for an unfused framework, whose layouts
/// are its own, and their default loop nests read blocked weights one tap at a time, 64 bytes apart,
/// which is slower (bench/DECISIONS.md#d30-conv-channel-tiles). Auto, Halide's autoschedulers and
/// schedule files get \p lo unchanged.
LowerOptions lowering_for_schedule(LowerOptions lo, const std::string &spec);

/// Appends the default for every Func \p s does not mention, and on a GPU target the default GPU
/// mapping for stages of compute_root Funcs that have none (and no loop changes of their own).
void fill_defaults(Schedule &s, const LoweredPipeline &p, const Halide::Target &target);

/// Makes a schedule for a pipeline (src/autoschedule provides one).
using AutoscheduleFn = std::function<Schedule(const LoweredPipeline &, const Halide::Target &)>;

/// THE precedence function. \p spec: "eager" | "inline" | "auto" | "" (= eager) | a schedule file
/// path. A file is header-checked (warnings appended to \p warnings, never printed; errors thrown)
/// against \p model_sha256 and \p target; a file's or the auto-scheduler's schedule gets
/// fill_defaults. Throws UserError for "auto" without \p autoschedule or an unreadable path.
Schedule resolve_schedule(const LoweredPipeline &p, const Halide::Target &target, const std::string &spec,
                          const AutoscheduleFn &autoschedule = nullptr,
                          std::vector<std::string> *warnings = nullptr, const std::string &model_sha256 = "");

}  // namespace loom
