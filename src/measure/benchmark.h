/// \file
/// `loom bench`'s engine: several schedules of one graph, each validated against the reference
/// interpreter before it is timed, side by side (time, GB/s against compulsory bytes, GFLOP/s,
/// % of this machine's roofline, speedup over eager). A schedule that fails to compile or to
/// validate is reported in its row and the others still run.
///
/// Timing: a warm-up, then repeated runs until a time budget; median, min and max of the realize
/// calls. Inputs rotate among several random sets (enough to overflow the caches that matter) so
/// that caches do not flatter small workloads.
///
/// A peer (a Halide autoscheduler, or ONNX Runtime: BenchVariant::peer) is scheduled, compiled,
/// validated and timed in a worker process under a memory cap and a time budget
/// (measure/peer_worker.h): when it blows up, its row says why and every other row stands.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/jit.h"
#include "codegen/openmp_threading.h"
#include "graph/graph.h"
#include "lower/lowered.h"
#include "measure/machine_probe.h"
#include "measure/peer_process.h"
#include "measure/profile.h"

namespace loom {

/// One schedule to measure. \p apply schedules a freshly lowered pipeline in place and returns
/// the schedule as text (kept in the report); it throws (UserError …) when the schedule is wrong.
struct BenchVariant {
    std::string label;  ///< shown in the table: "eager", "inline", "auto", "mullapudi2016", "a.sched"
    std::string kind;   ///< "eager", "inline", "auto", "halide", "file", "ort"
    std::function<std::string(LoweredPipeline &, const Halide::Target &)> apply;
    /// When set: a Halide autoscheduler's name ("adams2019"), or kOrtPeer; the row runs in a
    /// worker process (BenchOptions::peer_command or ort_command, measure/peer_worker.h) and
    /// \p apply is not used.
    std::string peer = {};
    /// When set: lowers the pipeline this row compiles in place of the benchmark's graph (the model
    /// compiled for every size, `loom bench --generic`); \p apply then schedules it.
    std::function<LoweredPipeline()> lower = {};
    /// When set: schedules and compiles the row's model itself (\p schedule_text receives what
    /// the row reports as its schedule), in place of lower, apply and one JitModel: the model
    /// compiled for every size with a second plan for short sizes (cli/scheduling.h).
    std::function<std::unique_ptr<JitModel>(const Halide::Target &, std::string &schedule_text)> build = {};
    /// When set: who runs this row's parallel loops while it is timed (set_jit_threading), so that
    /// threadings compare in the same rounds; else the process-wide choice.
    std::optional<Threading> threading = {};
};

/// BenchVariant::peer of ONNX Runtime's row: the original model file run by onnxruntime-node.
inline constexpr const char *kOrtPeer = "ort";

/// How to start ONNX Runtime's worker (bench/ort/ort_worker.js).
struct OrtWorkerCommand {
    std::vector<std::string> argv;  ///< node, the harness and --ort-dir DIR [--trivial-model FILE]
    std::string model_path;         ///< the ONNX file ORT loads: the one Loom's graph came from
    /// Set when ONNX Runtime cannot run here (node or onnxruntime-node missing): why, and the fix;
    /// its row fails with this message and the others still run.
    std::string unavailable;
};

/// How to measure.
struct BenchOptions {
    double budget_ms = 2000;  ///< wall time spent in timed runs per schedule, over all rounds (at least min_runs)
    int warmup = 2;           ///< untimed runs first (after the validation run)
    int min_runs = 3;
    int max_runs = 2000;
    int input_sets = 0;       ///< random input sets to rotate among; 0 = enough for 8x the LLC, at least 64 MiB (2..8)
    double rel_tol = 1e-5;    ///< ‖out − ref‖ / ‖ref‖ a schedule must stay under (floats)
    uint64_t seed = 1;
    /// After timing, profile every schedule that ran (measure/profile.h: compiled again with
    /// Halide's sampling profiler, up to budget_ms of runs each) into BenchRow::profile.
    bool profile = false;
    Halide::Target target;    ///< set by the caller (host_target())
    /// Receives one line of progress per step (the CLI prints it on stderr); may be empty.
    std::function<void(const std::string &)> progress;
    /// How to start a worker for BenchVariant::peer rows: the executable and the arguments that
    /// load the same model the same way (e.g. {"/proc/self/exe", "bench-peer", model, "--input",
    /// …}); run_benchmark appends the job's (peer_job_args). Required when a variant has a peer.
    std::vector<std::string> peer_command;
    /// What each worker may use: memory cap, and the time its scheduling, compiling and validating
    /// (and then each timing or profiling request) may take.
    PeerLimits peer_limits;
    /// How to start ONNX Runtime's worker. Required when a variant's peer is kOrtPeer.
    OrtWorkerCommand ort_command;
    /// The thread count every row runs with (Halide's pool or OpenMP's team); ONNX Runtime's
    /// intra-op threads are set to it, so that peers compare at equal threads.
    int threads = 1;
};

/// The compulsory traffic and arithmetic of a graph: what any schedule has to move and compute.
struct WorkloadCost {
    double input_bytes = 0;   ///< graph inputs, read once
    double output_bytes = 0;  ///< graph outputs, written once
    double weight_bytes = 0;  ///< initializers, read once
    double flops = 0;         ///< sum of node_flops over the graph
    double bytes() const { return input_bytes + output_bytes + weight_bytes; }
};

/// FLOPs of one canonical node: MatMul/Gemm 2·M·N·K (+ the bias), Conv 2·N·M·(C/g)·KH·KW·OH·OW,
/// pointwise ops 1 per output element, reductions 1 per input element, Softmax 5, LayerNorm 8,
/// BatchNorm 2, pools one per window element; layout ops (Reshape, Transpose …) 0.
double node_flops(const Graph &g, const Node &n);
/// The compulsory bytes and FLOPs of \p g.
WorkloadCost workload_cost(const Graph &g);

/// One row of the table.
struct BenchRow {
    std::string label, kind;
    bool ok = false;
    std::string error;        ///< why not ok: the compile or validation failure, one line
    std::string stage;        ///< where it failed: "schedule", "compile", "run", "validate"
    /// Why not ok, machine-readable: "error" (Loom's message says why), "out_of_memory",
    /// "timed_out", "crashed", "exited", "protocol" (a worker process's end, peer_process.h).
    std::string fail_reason;
    double schedule_s = 0;    ///< applying / searching the schedule
    double compile_s = 0;     ///< JIT compile
    double compile_cpu_s = 0; ///< JIT compile, CPU seconds over its segments (JitModel::compile_cpu_seconds)
    int pipelines = 0;        ///< Halide pipelines it compiled as (jit_segments.h); 0 if it never compiled
    double rel_error = 0, max_abs = 0;  ///< validation against the reference (worst output)
    int runs = 0;
    double median_ms = 0, min_ms = 0, max_ms = 0;
    double gbps = 0, gflops = 0;   ///< against WorkloadCost at the median
    double pct_roofline = 0;       ///< roofline lower bound / median, in %
    double speedup_vs_eager = 0;   ///< eager median / this median (0 when eager did not run)
    std::string schedule_text;     ///< the schedule as applied (for a reader of the JSON)
    ModelProfile profile;          ///< BenchOptions::profile: where its time goes (runs 0: none)
    std::string profile_error;     ///< why profiling it failed, when it did (the row stays ok)
    /// A peer's fixed cost per call, measured on a trivial model (0: not measured): ONNX Runtime's
    /// node binding, so that a row of a tiny model is not misjudged.
    double call_overhead_ms = 0;
};

/// All rows of one benchmark run and what they were measured against.
struct BenchReport {
    std::string model;     ///< model path as given
    std::string workload;  ///< short name (file stem)
    std::string target;    ///< Halide target string
    std::string date;      ///< ISO 8601, local time
    MachineModel machine;
    WorkloadCost cost;
    int input_sets = 0;
    int threads = 1;          ///< BenchOptions::threads
    double reference_ms = 0;  ///< one reference-interpreter run (validation oracle)
    std::vector<BenchRow> rows;
};

/// Validates every variant on \p g (a prepared, canonical graph), in order, then times all that
/// validated in turns (8 rounds of budget_ms / 8 each, the compiled models kept side by side), so
/// that a machine whose speed drifts moves every row alike. Rows stay in variant order.
BenchReport run_benchmark(const Graph &g, const std::vector<BenchVariant> &variants,
                          const BenchOptions &opts, const MachineModel &machine);

/// The number of random input sets a run rotates among: \p requested when > 0, else enough that
/// together they hold 8x the last-level cache (at least 64 MiB), 2..8, at most 2 GiB of inputs.
int bench_input_sets(const WorkloadCost &cost, const MachineModel &machine, int requested);

/// Worst relative (‖out − ref‖ / ‖ref‖) and absolute error of \p out against \p ref over every
/// output into \p row; UserError when an output is missing, misshapen or has NaN/Inf where the
/// reference has none, or when the relative error is not below \p rel_tol ("wrong result").
void compare_to_reference(const std::map<std::string, Tensor> &out, const std::map<std::string, Tensor> &ref,
                          double rel_tol, BenchRow &row);

/// Sets \p row's error and fail_reason ("out_of_memory" for std::bad_alloc, else "error") from the
/// exception being handled: call it inside a catch block.
void record_failure(BenchRow &row);

/// One row's first half, in this process: lowers \p g for \p v, schedules, compiles, validates on
/// inputs[0] against \p ref (opts.rel_tol) and warms up (opts.warmup runs). Fills \p row (times,
/// errors, stage); on failure returns null with row.error, row.stage and row.fail_reason set (and
/// says nothing of it: the caller does).
/// \p say gets a progress line per step, after row.stage is set.
std::unique_ptr<JitModel> build_and_validate(const Graph &g, const BenchVariant &v,
                                             const std::vector<std::map<std::string, Tensor>> &inputs,
                                             const std::map<std::string, Tensor> &ref, const BenchOptions &opts,
                                             BenchRow &row, const std::function<void(const std::string &)> &say);

/// Timed runs of \p m appended to \p times, inputs rotating from set \p first_set: at least
/// \p at_least, at most \p at_most, and after at_least until \p budget_ms is spent; \p untimed
/// runs first (on the set before \p first_set). Returns the number of timed runs made (the
/// caller's rotation moves on by as many).
int timed_runs(JitModel &m, const std::vector<std::map<std::string, Tensor>> &inputs, size_t first_set,
               double budget_ms, int at_least, int at_most, std::vector<double> &times, int untimed = 0);

/// The human table (one line per row, a header naming machine, target and costs), then each
/// row's profile when it has one (format_profile).
std::string format_table(const BenchReport &r);
/// The report as JSON (one object; rows as an array; schedule texts included).
std::string to_json(const BenchReport &r);
/// One CSV line per row, with a header line.
std::string to_csv(const BenchReport &r);

}  // namespace loom
