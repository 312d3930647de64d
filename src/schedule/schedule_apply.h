/// \file
/// Applies a Schedule to a LoweredPipeline with Halide's own API, after validate_schedule has
/// accepted all of it (checks before actions). Vars are named as the schedule writes them
/// ("k" → Halide's "k$x", "r.x" → "r$x"; vars made by split/tile/fuse/gpu_tile are tracked per
/// stage). Funcs made by rfactor/in are known by their `as` names.
///
/// A Halide error while applying becomes a UserError at the statement's file:line:col; one thrown
/// later (compiling, realizing) can be re-reported with AppliedSchedule::explain.
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// What apply_schedule did: the schedule (positions kept) and every Func by its schedule name.
struct AppliedSchedule {
    Schedule schedule;
    std::map<std::string, Halide::Func> funcs;  ///< pipeline Funcs plus those rfactor/in made
    /// gpu_max_registers: Halide Func name → ptxas's register budget for its kernels (codegen/aot.h).
    std::map<std::string, int> max_registers;
    /// Dynamic shapes: splits of loops whose extents move with the input sizes that were applied
    /// GuardWithIf instead of the ShiftInwards/RoundUp/Auto written (correct at every extent), and
    /// whole moving loops left plain instead of unrolled or vectorized.
    int guarded_for_sizes = 0;
    /// Dynamic shapes: the stages specialized for large enough sizes, where the tails stay as
    /// written ("matmul.update(0)"), by when ("size_seq*size_batch >= 6, …"; one condition per
    /// kernel, schedule/size_specialization.h).
    std::map<std::string, std::vector<std::string>> specialized;
    /// The specializations for a person: one line per condition, each starting with \p indent.
    std::string specializations_text(const std::string &indent) const;
    /// The statement most likely behind a Halide error message (names the Func, or a Func it
    /// made, and most of the vars), or nullptr when none is named.
    const ScheduleStatement *culprit(const std::string &halide_message) const;
    /// "file:line:col: <stmt>: Halide rejected the schedule: <message>" for the culprit.
    std::string explain(const std::string &halide_message) const;
};

/// Validates \p s (schedule_validate.h) and applies it to the Funcs of \p p (which share state with
/// \p p's Halide Funcs, so \p p is scheduled afterwards). Throws UserError on any mistake.
/// \p assume_long_enough (dynamic shapes): the caller runs \p p only where every kernel's loops are
/// long enough for its splits (plan_size_specializations): no guarded copies are compiled.
AppliedSchedule apply_schedule(const Schedule &s, const LoweredPipeline &p, const Halide::Target &target,
                               bool assume_long_enough = false);

/// Runs \p fn; a Halide::Error it throws comes back as a UserError explained against \p applied.
template <typename F>
auto with_schedule_errors(const AppliedSchedule &applied, F &&fn) -> decltype(fn());

/// The loop nest of \p p as scheduled now (Halide's print_loop_nest, as text, not printed).
/// Halide 14 computes the nest from the schedule alone; \p target is for a stable API.
std::string loop_nest(const LoweredPipeline &p, const Halide::Target &target);

/// Halide's error text without its "Error: " prefix and trailing newline.
std::string halide_error_text(const std::exception &e);

}  // namespace loom

#include "support/error.h"

namespace loom {
template <typename F>
auto with_schedule_errors(const AppliedSchedule &applied, F &&fn) -> decltype(fn()) {
    try {
        return fn();
    } catch (const Halide::Error &e) {
        throw UserError(applied.explain(halide_error_text(e)));
    }
}
}  // namespace loom
