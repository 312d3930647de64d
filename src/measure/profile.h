/// \file
/// Where a compiled model's time goes, kernel by kernel: `loom bench --profile` and
/// `loom run --profile`. The model is compiled again with Halide's sampling profiler
/// (Target::Profile: a thread samples which Func every pipeline is computing, about once a
/// millisecond) and run repeatedly; each run's report is read back through the runtime's print
/// hook (JitModel::capture_runtime_prints), and the Funcs' times are added up into the kernels
/// (loop nests) that compute them: a Func computed at another's tile counts in that one's kernel,
/// an inlined Func is part of its consumer's code and never shows.
///
/// Samples, not timers: a kernel's share is good to a few percent once it holds some tens of
/// samples, so a profile runs until it has kMinProfileSamples of them (or its time budget is
/// spent). Halide's profiler bills a sample with all the time since the one before, outside
/// Halide too, so for runs shorter than its interval its own totals are inflated; and a loop that
/// runs the model at a steady period can lock onto the sampler's phase (samples landing in the
/// same kernel each time). So the runs start after a pseudo-random pause of up to one interval,
/// and a kernel's milliseconds are its share of the samples times the runs' measured median. Kernels run one after another, so their times
/// are sound; the split between the Funcs inside a kernel whose loop runs in parallel is not:
/// Halide 14's profiler keeps one "current Func" for all threads, so a sample goes to the Func a
/// thread entered last (format_profile says so under such a split).
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "lower/lowered.h"

namespace loom {

/// Samples a profile wants before it stops (the time budget may stop it sooner).
constexpr int kMinProfileSamples = 2000;

/// One Func's time in a profile.
struct FuncTime {
    std::string func;  ///< Halide Func name
    double ms = 0;     ///< milliseconds per model run
};

/// One kernel: a loop nest, named by the root Func that owns it.
struct KernelTime {
    std::string root;                ///< the Func computed at root ("" for the runtime's own time)
    std::vector<std::string> nodes;  ///< graph nodes whose Funcs it computes, in first-seen order
    std::vector<FuncTime> funcs;     ///< its Funcs with time, slowest first
    double ms = 0;                   ///< milliseconds per model run
};

/// A whole profile.
struct ModelProfile {
    int runs = 0;               ///< model runs profiled
    int samples = 0;            ///< profiler samples over all of them
    double ms_per_run = 0;      ///< a run's time, which the kernels' shares divide (see attribute_to_kernels)
    std::vector<KernelTime> kernels;  ///< slowest first; the runtime's malloc/free as root ""
};

/// Sums of Halide 14's profiler reports (the text halide_profiler_report prints: a pipeline's
/// name, " total time: … ms  samples: N  runs: R …", then one "  <func>: <ms>ms (…%) …" line per
/// Func). Lines of any other shape are ignored, so a report may arrive in pieces or mixed with
/// the pipeline's own prints.
struct ProfilerTotals {
    std::map<std::string, double> func_ms;  ///< per Func, summed over reports
    double total_ms = 0;                    ///< the reports' "total time"s, summed
    int samples = 0;
    /// Adds the reports in \p text.
    void add_reports(const std::string &text);
};

/// Adds \p totals up into kernels of the scheduled \p p, per run over \p runs runs: with \p run_ms
/// (the runs' measured median) each Func's share of the profiler's total times that, else the
/// profiler's own times.
ModelProfile attribute_to_kernels(const LoweredPipeline &p, const ProfilerTotals &totals, int runs,
                                  double run_ms = 0);

/// Milliseconds per run of each LoweredFunc of \p p in \p prof: a Func's own time, with its `in()`
/// wrappers' and rfactor intermediates' (Halide names them `<f>_global_wrapper$N`, `<f>_intm$N`)
/// added to it; the runtime's entries are left out. What `loom autoschedule --report --profile`
/// sets beside the cost model's estimate of each kernel.
std::map<std::string, double> ms_by_lowered_func(const LoweredPipeline &p, const ModelProfile &prof);

/// Compiles the scheduled \p p for \p target with Target::Profile (a CPU target; UserError for a
/// GPU one: Halide's profiler samples host code only), runs it on \p inputs in turn until
/// kMinProfileSamples samples or \p budget_ms of runs (at least 3 runs), and attributes the time.
ModelProfile profile_model(LoweredPipeline p, const Halide::Target &target,
                           const std::vector<std::map<std::string, Tensor>> &inputs, double budget_ms);

/// profile_model for a pipeline compiled for every size (dynamic shapes; a static one works too):
/// one compile with the profiler, then one profile per entry of \p sizes (that size's input sets,
/// run in turn), each with its own \p budget_ms: `loom run --dynamic --profile`, where the plan
/// made at one size runs at others.
std::vector<ModelProfile> profile_model_sizes(LoweredPipeline p, const Halide::Target &target,
                                              const std::vector<std::vector<std::map<std::string, Tensor>>> &sizes,
                                              double budget_ms);

/// The profile as a table: kernel, ms per run, share, cumulative share, graph nodes, and its
/// Funcs with their shares when it has more than one with time; kernels under \p min_share
/// percent are summed in one line.
std::string format_profile(const ModelProfile &prof, const std::string &label, double min_share = 0.5);

}  // namespace loom
