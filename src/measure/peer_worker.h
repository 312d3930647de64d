/// \file
/// A peer's `loom bench` row (a Halide autoscheduler, or ONNX Runtime), run in a worker process
/// (peer_process.h) so that its blow-up (memory, time, a crash at compile or run) fails that row
/// only. Both ends of a Halide autoscheduler's worker live here:
///  - the parent's PeerModel starts a worker and drives it;
///  - the worker's serve_peer_worker (`loom bench-peer`, a hidden subcommand) does the work.
/// ONNX Runtime's worker is bench/ort/ort_worker.js (node), which speaks the same protocol.
/// The worker loads the model as the parent did, makes the same seeded random input sets, schedules
/// with the autoscheduler, compiles, validates against the reference outputs the parent wrote once
/// (write_tensor_folder: .npy files in a private folder), warms up, and then serves requests,
/// so that its row is timed in turns with the parent's rows (benchmark.h).
///
/// The protocol: one line per message over the worker's channel, fields separated by spaces, text
/// fields escaped (escape_field).
///   worker → parent while it prepares: `stage <stage>`, `progress <text>`, `overhead <ms>` (its
///     per-call overhead, measured on a trivial model), `outputs <folder>` (a worker that does not
///     validate itself: its outputs of input set 0, written as by write_tensor_folder, which the
///     parent checks against the reference; on a wrong result the parent stops the worker); then
///     either `ready <schedule_s> <compile_s> <pipelines> <rel_error> <max_abs> <schedule text>`
///     (the error fields are ignored after `outputs`) or `fail <stage> <reason> <message>` (reason
///     "error" or "out_of_memory"; it then exits).
///   parent → worker: `time <first set> <budget ms> <at least> <at most> <untimed>`, answered
///     `times <n> <ms>…`; `profile <budget ms>`, answered `profile <serialized ModelProfile>` or
///     `profile_error <message>`; `quit` (or closing the channel) ends it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "measure/benchmark.h"
#include "measure/peer_process.h"

namespace loom {

/// What a worker needs besides the model (which the command line that starts it loads).
struct PeerJob {
    std::string peer;           ///< the autoscheduler: "mullapudi2016", "li2018", "adams2019"
    std::string reference_dir;  ///< write_reference_outputs' folder
    int input_sets = 2;
    uint64_t seed = 1;
    int warmup = 2;
    double rel_tol = 1e-5;
    std::string target;         ///< Halide target string
    int cores = 1;              ///< machine fields the autoschedulers read
    int64_t l2_bytes = 0;
};

/// The worker's flags for \p job (what `loom bench-peer` parses back into a PeerJob).
std::vector<std::string> peer_job_args(const PeerJob &job);

/// A field of a protocol line: '%', whitespace and control characters as %XX.
std::string escape_field(const std::string &s);
/// The inverse of escape_field.
std::string unescape_field(const std::string &s);

/// \p tensors as .npy files in \p dir (created): `<k>.npy` for the k-th, with `names.txt` (one
/// escaped name a line). How reference outputs, input sets and a worker's outputs travel.
void write_tensor_folder(const std::string &dir, const std::map<std::string, Tensor> &tensors);
/// What write_tensor_folder wrote. UserError naming the folder when it is incomplete.
std::map<std::string, Tensor> read_tensor_folder(const std::string &dir);

/// \p p as one line of escaped fields, and back (nullopt when the text does not parse).
std::string serialize_profile(const ModelProfile &p);
std::optional<ModelProfile> parse_profile(const std::string &text);

/// The worker's side: loads the graph (\p load_graph: as the parent did), prepares \p job's row on it, answers on file descriptor \p channel_fd until
/// told to quit or the channel closes. Never throws; returns the process's exit code (0 also
/// when the schedule failed: the parent was told).
int serve_peer_worker(const std::function<Graph()> &load_graph, const PeerJob &job, int channel_fd);

/// The parent's side: one worker.
class PeerModel {
public:
    /// Checks a worker's `outputs` folder against the reference, filling row.rel_error and
    /// row.max_abs; throws (UserError) on a wrong result.
    using OutputCheck = std::function<void(const std::string &folder, BenchRow &row)>;

    /// Starts \p argv under \p limits and waits for it to be ready (within limits.timeout_s, at
    /// most limits.memory_bytes). Fills \p row: on success its schedule, compile and validation
    /// fields (and call_overhead_ms); else error, stage and fail_reason, and returns null. \p say
    /// gets the worker's progress lines; \p check validates an `outputs` folder (a worker that
    /// sends one without a check fails as a protocol error).
    static std::unique_ptr<PeerModel> start(const std::vector<std::string> &argv, const PeerLimits &limits,
                                            BenchRow &row, const std::function<void(const std::string &)> &say,
                                            const OutputCheck &check = {});

    /// timed_runs in the worker (the same arguments); false when the worker failed (failure()).
    bool time(size_t first_set, double budget_ms, int at_least, int at_most, std::vector<double> &times,
              int untimed = 0);
    /// profile_model in the worker on its build; false with \p error set when it did not give one.
    bool profile(double budget_ms, ModelProfile &out, std::string &error);
    /// Why the worker stopped (after time() returned false): reason and message.
    PeerFailure failure() const;
    /// Tells the worker to quit and reaps it.
    void stop();

private:
    explicit PeerModel(std::unique_ptr<PeerProcess> p) : process_(std::move(p)) {}
    std::unique_ptr<PeerProcess> process_;
    std::optional<PeerFailure> protocol_failure_;
};

}  // namespace loom
