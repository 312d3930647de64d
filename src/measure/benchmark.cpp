#include "measure/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>

#include <unistd.h>

#include "codegen/jit.h"
#include "graph/op_catalog.h"
#include "measure/peer_worker.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "schedule/schedule_builtin.h"
#include "support/error.h"

namespace loom {

// A row this much above the probed FMA peak makes format_table suggest a re-probe (timer noise and
// turbo clocks stay below it).
constexpr double kAbovePeakSlack = 1.1;

// Turns in which run_benchmark times its schedules (see there).
constexpr int kTimingRounds = 8;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double numel_of(const Graph &g, const std::string &v) {
    if (v.empty() || !g.has_value(v)) return 0;
    return (double)shape_numel(g.value(v).shape);
}

double bytes_of(const Graph &g, const std::string &v) {
    if (!g.has_value(v)) return 0;
    const ValueInfo &vi = g.value(v);
    return (double)shape_numel(vi.shape) * dtype_size(vi.dtype);
}

const Shape &shape_of(const Graph &g, const std::string &v) { return g.value(v).shape; }

double prod(const Shape &s, size_t from) {
    double p = 1;
    for (size_t k = from; k < s.size(); k++) p *= (double)s[k];
    return p;
}

// First line of a message, so a table row stays one line (the JSON keeps the whole message).
std::string one_line(const std::string &s, size_t max = 160) {
    std::string l = s.substr(0, s.find('\n'));
    if (l.size() > max) l = l.substr(0, max - 3) + "...";
    return l;
}

std::string fmt(double v, int prec) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(prec) << v;
    return os.str();
}

std::string json_str(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
        case '"': o += "\\\""; break;
        case '\\': o += "\\\\"; break;
        case '\n': o += "\\n"; break;
        case '\t': o += "\\t"; break;
        case '\r': o += "\\r"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                snprintf(buf, sizeof buf, "\\u%04x", c);
                o += buf;
            } else {
                o += (char)c;
            }
        }
    }
    return o + "\"";
}

std::string json_num(double v) {
    if (!std::isfinite(v)) return "null";
    std::ostringstream os;
    os << std::setprecision(6) << v;
    return os.str();
}

std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c == '\n' ? ' ' : c);
    return o + "\"";
}

std::string now_iso() {
    std::time_t t = std::time(nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
    return buf;
}

// A private temporary folder, removed with its files when it goes out of scope.
struct ScratchFolder {
    std::string path;
    void create(const std::string &stem) {
        namespace fs = std::filesystem;
        fs::path base = fs::temp_directory_path();
        for (int k = 0;; k++) {
            fs::path p = base / str_cat(stem, "_", ::getpid(), "_", k);
            std::error_code ec;
            if (fs::create_directory(p, ec)) {
                fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace, ec);
                path = p.string();
                return;
            }
            if (ec || k > 1000) throw UserError(str_cat("cannot create a temporary folder in ", base.string(), ": ",
                                                        ec ? ec.message() : "too many exist"));
        }
    }
    void remove() {
        if (path.empty()) return;
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
        path.clear();
    }
    ~ScratchFolder() { remove(); }
};

}  // namespace

double node_flops(const Graph &g, const Node &n) {
    if (n.outputs.empty() || !g.has_value(n.outputs[0])) return 0;
    double out = numel_of(g, n.outputs[0]);
    double in = n.inputs.empty() ? 0 : numel_of(g, n.inputs[0]);
    OpKind kind;
    try {
        kind = op_kind(n.op);
    } catch (const std::exception &) {
        return out;
    }
    switch (kind) {
    case OpKind::MatMul: {
        const Shape &a = shape_of(g, n.inputs[0]);
        double k;
        if (n.op == "Gemm") k = (double)(n.get_int("transA", 0) ? a[0] : a[a.size() - 1]);
        else k = (double)a.back();
        double bias = (n.op == "Gemm" && n.has_input(2)) ? out : 0;
        return 2 * out * k + bias;
    }
    case OpKind::Conv: {
        const Shape &w = shape_of(g, n.inputs[1]);
        double bias = n.has_input(2) ? out : 0;
        if (n.op == "ConvTranspose") return 2 * in * prod(w, 1) + bias;
        return 2 * out * prod(w, 1) + bias;
    }
    case OpKind::Pool: {
        if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") return in;
        auto ks = n.get_ints("kernel_shape");
        double kk = 1;
        for (auto v : ks) kk *= (double)v;
        return out * kk;
    }
    case OpKind::Reduce: return in;
    case OpKind::Norm:
        if (n.op == "Softmax" || n.op == "LogSoftmax") return 5 * in;
        if (n.op == "BatchNormalization") return 2 * in;
        return 8 * in;  // Layer/Instance/Group norm: mean, variance, normalise, affine
    case OpKind::Elementwise: return out;
    case OpKind::Layout:
    case OpKind::Gather:
    case OpKind::Resize:
    case OpKind::Folded: return 0;
    }
    return 0;
}

WorkloadCost workload_cost(const Graph &g) {
    WorkloadCost c;
    for (const auto &v : g.inputs) c.input_bytes += bytes_of(g, v);
    for (const auto &v : g.outputs) c.output_bytes += bytes_of(g, v);
    for (const auto &[name, t] : g.initializers) c.weight_bytes += (double)t.bytes().size();
    for (const auto &n : g.nodes) c.flops += node_flops(g, n);
    return c;
}

void compare_to_reference(const std::map<std::string, Tensor> &out, const std::map<std::string, Tensor> &ref,
                          double rel_tol, BenchRow &row) {
    row.rel_error = 0;
    row.max_abs = 0;
    for (const auto &[name, r] : ref) {
        auto it = out.find(name);
        if (it == out.end()) throw UserError(str_cat("output '", name, "' was not produced"));
        const Tensor &o = it->second;
        if (o.shape() != r.shape())
            throw UserError(str_cat("output '", name, "' has shape ", shape_str(o.shape()),
                                    ", reference ", shape_str(r.shape())));
        double num = 0, den = 0, maxabs = 0;
        int64_t bad = -1;
        for (int64_t i = 0; i < r.numel(); i++) {
            double a = o.get(i), b = r.get(i);
            if (!std::isfinite(a) && std::isfinite(b)) {
                if (bad < 0) bad = i;
                continue;
            }
            double d = std::abs(a - b);
            num += d * d;
            den += b * b;
            maxabs = std::max(maxabs, d);
        }
        if (bad >= 0)
            throw UserError(str_cat("output '", name, "' has NaN/Inf or unwritten elements (first at "
                                    "flat index ", bad, ")"));
        double rel = std::sqrt(num / (den > 0 ? den : 1));
        row.rel_error = std::max(row.rel_error, rel);
        row.max_abs = std::max(row.max_abs, maxabs);
    }
    if (!(row.rel_error < rel_tol))
        throw UserError(str_cat("wrong result: rel error ", row.rel_error, " >= ", rel_tol, " (max abs ", row.max_abs,
                                ")"));
}

int bench_input_sets(const WorkloadCost &cost, const MachineModel &machine, int requested) {
    if (requested > 0) return requested;
    // Enough input sets that together they hold 8x the last-level cache (at least 64 MiB), 2..8,
    // and never more than 2 GiB of inputs: a last-level cache whose replacement is not LRU keeps
    // part of two sets read in turn and flatters the timing (bench/DECISIONS.md#d56-bench-input-sets).
    double per = std::max(1.0, cost.input_bytes);
    double want = std::max(64.0 * (1 << 20), 8.0 * (double)machine.llc_bytes);
    int sets = (int)std::ceil(want / per);
    sets = std::max(2, std::min(8, sets));
    while (sets > 2 && per * sets > 2.0 * (1 << 30)) sets--;
    return sets;
}

void record_failure(BenchRow &row) {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        row.error = "out of memory (an allocation failed)";
        row.fail_reason = "out_of_memory";
    } catch (const std::exception &e) {
        row.error = e.what();
        row.fail_reason = "error";
    } catch (...) {
        row.error = "unknown exception";
        row.fail_reason = "error";
    }
}

std::unique_ptr<JitModel> build_and_validate(const Graph &g, const BenchVariant &v,
                                             const std::vector<std::map<std::string, Tensor>> &inputs,
                                             const std::map<std::string, Tensor> &ref, const BenchOptions &opts,
                                             BenchRow &row, const std::function<void(const std::string &)> &say) {
    std::unique_ptr<JitModel> model;
    try {
        row.stage = "schedule";
        say("scheduling");
        auto ts = Clock::now();
        if (v.build) {
            row.stage = "compile";
            say("scheduling and compiling");
            model = v.build(opts.target, row.schedule_text);
            row.schedule_s = seconds_since(ts) - model->compile_seconds();
        } else {
            LoweredPipeline lp = v.lower ? v.lower() : lower_graph(g, lowering_for_schedule({}, v.kind));
            row.schedule_text = v.apply ? v.apply(lp, opts.target) : std::string();
            row.schedule_s = seconds_since(ts);

            row.stage = "compile";
            say("compiling (schedule took " + fmt(row.schedule_s, 1) + " s)");
            model = std::make_unique<JitModel>(std::move(lp), opts.target);
        }
        row.compile_s = model->compile_seconds();
        row.compile_cpu_s = model->compile_cpu_seconds();
        row.pipelines = model->segments();

        row.stage = "validate";
        say("validating (compile took " + fmt(row.compile_s, 1) + " s)");
        compare_to_reference(model->run(inputs[0]), ref, opts.rel_tol, row);
        row.stage = "run";
        for (int k = 0; k < opts.warmup; k++) model->time_run(inputs[(k + 1) % inputs.size()]);
        return model;
    } catch (...) {
        record_failure(row);
    }
    return nullptr;
}

int timed_runs(JitModel &m, const std::vector<std::map<std::string, Tensor>> &inputs, size_t first_set,
               double budget_ms, int at_least, int at_most, std::vector<double> &times, int untimed) {
    for (int k = 0; k < untimed; k++) m.time_run(inputs[(first_set + inputs.size() - 1) % inputs.size()]);
    auto tb = Clock::now();
    int n = 0;
    size_t next = first_set % inputs.size();
    while (n < at_most && (n < at_least || seconds_since(tb) * 1e3 < budget_ms)) {
        times.push_back(m.time_run(inputs[next]));
        next = (next + 1) % inputs.size();
        n++;
    }
    return n;
}

BenchReport run_benchmark(const Graph &g, const std::vector<BenchVariant> &variants,
                          const BenchOptions &opts, const MachineModel &machine) {
    auto say = [&](const std::string &s) {
        if (opts.progress) opts.progress(s);
    };
    BenchReport rep;
    rep.workload = g.name;
    rep.target = opts.target.to_string();
    rep.date = now_iso();
    rep.machine = machine;
    rep.cost = workload_cost(g);

    int sets = bench_input_sets(rep.cost, machine, opts.input_sets);
    rep.input_sets = sets;
    rep.threads = opts.threads;
    say(str_cat("making ", sets, " random input set(s) of ", fmt(rep.cost.input_bytes / 1e6, 1), " MB"));
    std::vector<std::map<std::string, Tensor>> inputs;
    for (int k = 0; k < sets; k++) inputs.push_back(random_inputs(g, opts.seed + k));

    say("running the reference interpreter (validation oracle)");
    auto t0 = Clock::now();
    std::map<std::string, Tensor> ref = run_reference(g, inputs[0]);
    rep.reference_ms = seconds_since(t0) * 1e3;

    // Workers of Halide autoschedulers' rows validate against the reference written once to a
    // private folder; ONNX Runtime's worker reads the input sets from one and writes its outputs to
    // another, which are checked here.
    ScratchFolder ref_dir, ort_dir;
    bool any_halide_peer = false, any_ort = false;
    for (const auto &v : variants) {
        any_ort |= v.peer == kOrtPeer;
        any_halide_peer |= !v.peer.empty() && v.peer != kOrtPeer;
    }
    std::string ref_error, ort_error;  // why the workers cannot have their data: their rows fail, no others
    if (any_halide_peer) {
        internal_check(!opts.peer_command.empty(), "run_benchmark: a peer row without BenchOptions::peer_command");
        try {
            ref_dir.create("loom_bench_ref");
            write_tensor_folder(ref_dir.path, ref);
        } catch (const std::exception &e) {
            ref_error = str_cat("cannot write the reference outputs for the worker process: ", e.what());
        }
    }
    if (any_ort && !opts.ort_command.unavailable.empty()) {
        ort_error = opts.ort_command.unavailable;
    } else if (any_ort) {
        internal_check(!opts.ort_command.argv.empty(), "run_benchmark: an ORT row without BenchOptions::ort_command");
        try {
            ort_dir.create("loom_bench_ort");
            for (size_t k = 0; k < inputs.size(); k++)
                write_tensor_folder(str_cat(ort_dir.path, "/inputs/", k), inputs[k]);
        } catch (const std::exception &e) {
            ort_error = str_cat("cannot write the input sets for ONNX Runtime's worker: ", e.what());
        }
    }
    // A worker's outputs of input set 0 against the reference, as build_and_validate checks a row.
    auto check_outputs = [&](const std::string &folder, BenchRow &row) {
        compare_to_reference(read_tensor_folder(folder), ref, opts.rel_tol, row);
    };

    // Every schedule is compiled and validated first, then all are timed in turns (kTimingRounds
    // rounds of budget_ms / kTimingRounds each): a machine whose memory bandwidth drifts over
    // minutes then moves every row alike, and the ratios between
    // rows hold where one schedule after another did not.
    std::vector<std::unique_ptr<JitModel>> models(variants.size());
    std::vector<std::unique_ptr<PeerModel>> peers(variants.size());
    auto prefix = [&](size_t vi) { return str_cat("[", vi + 1, "/", variants.size(), "] ", variants[vi].label, ": "); };
    auto alive = [&](size_t vi) { return models[vi] != nullptr || peers[vi] != nullptr; };
    // A row that failed after it validated: its times are dropped and it says why.
    auto fail_row = [&](size_t vi, const std::string &error, const std::string &reason) {
        BenchRow &row = rep.rows[vi];
        row.error = error;
        row.fail_reason = reason;
        row.stage = "run";
        models[vi].reset();
        if (peers[vi]) peers[vi]->stop();
        peers[vi].reset();
        say(prefix(vi) + "FAILED at run: " + one_line(row.error));
    };
    for (size_t vi = 0; vi < variants.size(); vi++) {
        const BenchVariant &v = variants[vi];
        BenchRow row;
        row.label = v.label;
        row.kind = v.kind;
        std::string pre = prefix(vi);
        auto say_row = [&](const std::string &s) { say(pre + s); };
        if (v.peer.empty()) {
            models[vi] = build_and_validate(g, v, inputs, ref, opts, row, say_row);
            if (!models[vi]) say(pre + "FAILED at " + row.stage + ": " + one_line(row.error));
            rep.rows.push_back(std::move(row));
            continue;
        }
        std::vector<std::string> argv;
        std::string data_error;
        if (v.peer == kOrtPeer) {
            argv = opts.ort_command.argv;
            for (const std::string &a :
                 {std::string("--model"), opts.ort_command.model_path, std::string("--inputs-dir"), ort_dir.path + "/inputs",
                  std::string("--outputs-dir"), str_cat(ort_dir.path, "/outputs_", vi), std::string("--threads"),
                  std::to_string(opts.threads), std::string("--warmup"), std::to_string(opts.warmup)})
                argv.push_back(a);
            data_error = ort_error;
        } else {
            PeerJob job;
            job.peer = v.peer;
            job.reference_dir = ref_dir.path;
            job.input_sets = sets;
            job.seed = opts.seed;
            job.warmup = opts.warmup;
            job.rel_tol = opts.rel_tol;
            job.target = rep.target;
            job.cores = machine.cores;
            job.l2_bytes = machine.l2_bytes;
            argv = opts.peer_command;
            for (auto &a : peer_job_args(job)) argv.push_back(a);
            data_error = ref_error;
        }
        if (!data_error.empty()) {
            row.stage = "schedule";
            row.error = data_error;
            row.fail_reason = "error";
            say(pre + "FAILED: " + data_error);
        } else {
            say(pre + str_cat("in a worker process (memory cap ", format_bytes(opts.peer_limits.memory_bytes), ", ",
                              fmt(opts.peer_limits.timeout_s, 0), " s)"));
            peers[vi] = PeerModel::start(argv, opts.peer_limits, row, say_row, check_outputs);
        }
        rep.rows.push_back(std::move(row));
    }
    ref_dir.remove();

    std::vector<std::vector<double>> times(variants.size());
    size_t next = 1 % inputs.size();
    int timed = 0;
    for (size_t vi = 0; vi < variants.size(); vi++) timed += alive(vi);
    say(str_cat("timing ", timed, " schedule(s) in turns: ", kTimingRounds, " rounds of ",
                fmt(opts.budget_ms / kTimingRounds, 0), " ms each"));
    // Where turns alternate between processes (or thread pools), a row's first run of a turn wakes
    // threads that slept through the other turn, so that run is untimed.
    int untimed = 0;
    for (const auto &p : peers) untimed = p ? 1 : untimed;
    for (const auto &v : variants) untimed = v.threading ? 1 : untimed;  // so do rows of other pools
    for (int round = 0; round < kTimingRounds; round++) {
        const bool last = round + 1 == kTimingRounds;
        for (size_t vi = 0; vi < variants.size(); vi++) {
            if (!alive(vi)) continue;
            std::vector<double> &t = times[vi];
            // At least one run a round (until max_runs), then until the round's share is spent.
            int at_most = opts.max_runs - (int)t.size();
            if (at_most <= 0) continue;
            int at_least = std::min(at_most, std::max(1, last ? opts.min_runs - (int)t.size() : 1));
            size_t before = t.size();
            if (peers[vi]) {
                if (!peers[vi]->time(next, opts.budget_ms / kTimingRounds, at_least, at_most, t, untimed)) {
                    PeerFailure f = peers[vi]->failure();
                    fail_row(vi, f.message, f.reason);
                    continue;
                }
            } else {
                try {
                    ThreadingScope threading(variants[vi].threading);
                    timed_runs(*models[vi], inputs, next, opts.budget_ms / kTimingRounds, at_least, at_most, t,
                               untimed);
                } catch (const std::exception &e) {
                    fail_row(vi, e.what(), "error");
                    continue;
                }
            }
            next = (next + (t.size() - before)) % inputs.size();
        }
    }
    for (size_t vi = 0; vi < variants.size(); vi++) {
        BenchRow &row = rep.rows[vi];
        if (!alive(vi)) continue;
        std::vector<double> &t = times[vi];
        std::sort(t.begin(), t.end());
        row.runs = (int)t.size();
        size_t n = t.size();
        row.median_ms = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
        row.min_ms = t.front();
        row.max_ms = t.back();
        double s = row.median_ms / 1e3;
        row.gbps = rep.cost.bytes() / s / 1e9;
        row.gflops = rep.cost.flops / s / 1e9;
        row.pct_roofline = 100.0 * machine.roofline_ms(rep.cost.bytes(), rep.cost.flops) / row.median_ms;
        row.ok = true;
        row.stage.clear();
        row.fail_reason.clear();
        say(prefix(vi) + str_cat("median ", fmt(row.median_ms, 3), " ms over ", row.runs, " runs"));
    }

    // Profiles after all timing, so that no profiled build shares a round with the timed ones.
    for (size_t vi = 0; opts.profile && vi < variants.size(); vi++) {
        BenchRow &row = rep.rows[vi];
        if (!row.ok) continue;
        if (peers[vi]) {
            // The worker profiles its own build (its autoscheduler is not run again); a worker
            // that fails here loses the profile only: the row was timed.
            say(prefix(vi) + "profiling (in its worker process)");
            std::string error;
            if (!peers[vi]->profile(opts.budget_ms, row.profile, error)) {
                row.profile_error = one_line(error);
                say(prefix(vi) + "profiling failed: " + row.profile_error);
            }
            peers[vi]->stop();
            peers[vi].reset();
            continue;
        }
        // The timed build's Funcs, already scheduled (a Halide autoscheduler is not run again);
        // its compiled code goes before the profiled one compiles.
        LoweredPipeline lp = models[vi]->lowered();
        models[vi].reset();
        try {
            say(prefix(vi) + "profiling");
            ThreadingScope threading(variants[vi].threading);  // a ROW@THREADING row profiles under its own
            row.profile = profile_model(std::move(lp), opts.target, inputs, opts.budget_ms);
        } catch (const std::exception &e) {
            row.profile_error = one_line(e.what());
            say(prefix(vi) + "profiling failed: " + row.profile_error);
        }
    }
    for (auto &p : peers)
        if (p) p->stop();

    double eager = 0;
    for (const auto &r : rep.rows)
        if (r.kind == "eager" && r.ok) eager = r.median_ms;
    if (eager > 0)
        for (auto &r : rep.rows)
            if (r.ok) r.speedup_vs_eager = eager / r.median_ms;
    return rep;
}

std::string format_table(const BenchReport &r) {
    std::ostringstream os;
    os << "workload " << r.workload << " (" << r.model << ") on " << r.target << "\n"
       << "machine: " << r.machine.cpu << ", " << r.machine.cores << " cores, copy "
       << fmt(r.machine.copy_gbps, 1) << " GB/s, " << fmt(r.machine.gflops, 1) << " GFLOP/s peak\n"
       << "compulsory: " << fmt(r.cost.bytes() / 1e6, 2) << " MB (in " << fmt(r.cost.input_bytes / 1e6, 2)
       << ", out " << fmt(r.cost.output_bytes / 1e6, 2) << ", weights " << fmt(r.cost.weight_bytes / 1e6, 2)
       << "), " << fmt(r.cost.flops / 1e9, 3) << " GFLOP; roofline "
       << fmt(r.machine.roofline_ms(r.cost.bytes(), r.cost.flops), 3) << " ms; " << r.input_sets
       << " input sets rotated; " << r.threads << " thread(s) for every row\n";
    const char *hdr[] = {"schedule", "median ms", "min..max ms", "GB/s", "GFLOP/s", "% roof", "vs eager",
                         "runs", "compile s", "rel err"};
    std::vector<std::vector<std::string>> cells;
    cells.push_back(std::vector<std::string>(std::begin(hdr), std::end(hdr)));
    std::vector<std::string> failures;
    for (const auto &row : r.rows) {
        if (!row.ok) {
            cells.push_back({row.label, "FAILED (" + row.stage + ")", "", "", "", "", "", "", "", ""});
            failures.push_back(row.label + ": " + one_line(row.error, 300));
            continue;
        }
        std::ostringstream rel;
        rel << std::setprecision(2) << std::scientific << row.rel_error;
        cells.push_back({row.label, fmt(row.median_ms, 3), fmt(row.min_ms, 3) + ".." + fmt(row.max_ms, 3),
                         fmt(row.gbps, 1), fmt(row.gflops, 1), fmt(row.pct_roofline, 1),
                         row.speedup_vs_eager > 0 ? fmt(row.speedup_vs_eager, 2) + "x" : "-",
                         std::to_string(row.runs), fmt(row.schedule_s + row.compile_s, 1), rel.str()});
    }
    std::vector<size_t> w(cells[0].size(), 0);
    for (const auto &c : cells)
        for (size_t k = 0; k < c.size(); k++) w[k] = std::max(w[k], c[k].size());
    for (size_t i = 0; i < cells.size(); i++) {
        for (size_t k = 0; k < cells[i].size(); k++) {
            if (k == 0) os << std::left << std::setw((int)w[k]) << cells[i][k];
            else if (cells[i][1].rfind("FAILED", 0) == 0 && k == 1) os << "  " << cells[i][k];
            else if (cells[i][1].rfind("FAILED", 0) == 0) continue;
            else os << "  " << std::right << std::setw((int)w[k]) << cells[i][k];
        }
        os << "\n";
    }
    for (const auto &f : failures) os << "  failed " << f << "\n";
    // A peer's fixed cost per call is part of its median: on a model that runs in about that long
    // the comparison says more about the binding than about the engine.
    for (const auto &row : r.rows)
        if (row.call_overhead_ms > 0)
            os << "note: " << row.label << "'s per-call overhead, measured on a trivial model, is "
               << fmt(row.call_overhead_ms * 1e3, 1) << " us"
               << (row.ok && row.median_ms < 20 * row.call_overhead_ms ? " (over 5% of its median here)" : "")
               << "\n";
    // No schedule can beat the FMA peak: a row above it means the probed peak is low (a probe taken
    // while the machine was busy), and every "% roof" and the cost model's estimates with it.
    for (const auto &row : r.rows)
        if (row.ok && r.machine.gflops > 0 && row.gflops > kAbovePeakSlack * r.machine.gflops) {
            os << "note: " << row.label << " ran at " << fmt(row.gflops, 1) << " GFLOP/s, above the probed FMA peak ("
               << fmt(r.machine.gflops, 1) << "): the machine probe was probably taken under load; re-probe on an "
               << "idle machine with `loom bench --reprobe` (cached in " << machine_cache_path() << ")\n";
            break;
        }
    for (const auto &row : r.rows) {
        if (row.profile.runs > 0) os << "\n" << format_profile(row.profile, row.label);
        if (!row.profile_error.empty()) os << "\nprofile of " << row.label << " failed: " << row.profile_error << "\n";
    }
    return os.str();
}

std::string to_json(const BenchReport &r) {
    std::ostringstream os;
    os << "{\n  \"workload\": " << json_str(r.workload) << ",\n  \"model\": " << json_str(r.model)
       << ",\n  \"target\": " << json_str(r.target) << ",\n  \"date\": " << json_str(r.date)
       << ",\n  \"machine\": {\"cpu\": " << json_str(r.machine.cpu) << ", \"cores\": " << r.machine.cores
       << ", \"copy_gbps\": " << json_num(r.machine.copy_gbps) << ", \"gflops\": " << json_num(r.machine.gflops)
       << ", \"l2_bytes\": " << r.machine.l2_bytes << ", \"simd\": " << json_str(r.machine.simd) << "}"
       << ",\n  \"cost\": {\"input_bytes\": " << json_num(r.cost.input_bytes)
       << ", \"output_bytes\": " << json_num(r.cost.output_bytes)
       << ", \"weight_bytes\": " << json_num(r.cost.weight_bytes) << ", \"bytes\": " << json_num(r.cost.bytes())
       << ", \"flops\": " << json_num(r.cost.flops)
       << ", \"roofline_ms\": " << json_num(r.machine.roofline_ms(r.cost.bytes(), r.cost.flops)) << "}"
       << ",\n  \"input_sets\": " << r.input_sets << ",\n  \"threads\": " << r.threads
       << ",\n  \"reference_ms\": " << json_num(r.reference_ms)
       << ",\n  \"rows\": [";
    for (size_t i = 0; i < r.rows.size(); i++) {
        const BenchRow &x = r.rows[i];
        os << (i ? "," : "") << "\n    {\"schedule\": " << json_str(x.label) << ", \"kind\": " << json_str(x.kind)
           << ", \"ok\": " << (x.ok ? "true" : "false") << ", \"error\": " << json_str(x.error)
           << ", \"failed_at\": " << json_str(x.stage) << ", \"fail_reason\": " << json_str(x.fail_reason) << ", \"median_ms\": " << json_num(x.ok ? x.median_ms : NAN)
           << ", \"min_ms\": " << json_num(x.ok ? x.min_ms : NAN) << ", \"max_ms\": " << json_num(x.ok ? x.max_ms : NAN)
           << ", \"runs\": " << x.runs << ", \"gbps\": " << json_num(x.ok ? x.gbps : NAN)
           << ", \"gflops\": " << json_num(x.ok ? x.gflops : NAN)
           << ", \"pct_roofline\": " << json_num(x.ok ? x.pct_roofline : NAN)
           << ", \"speedup_vs_eager\": " << json_num(x.speedup_vs_eager > 0 ? x.speedup_vs_eager : NAN)
           << ", \"schedule_s\": " << json_num(x.schedule_s) << ", \"compile_s\": " << json_num(x.compile_s)
           << ", \"compile_cpu_s\": " << json_num(x.compile_cpu_s)
           << ", \"pipelines\": " << x.pipelines
           << ", \"rel_error\": " << json_num(x.rel_error) << ", \"max_abs\": " << json_num(x.max_abs)
           << ", \"schedule_text\": " << json_str(x.schedule_text);
        if (x.call_overhead_ms > 0) os << ", \"call_overhead_ms\": " << json_num(x.call_overhead_ms);
        if (x.profile.runs > 0) {
            os << ", \"profile\": {\"runs\": " << x.profile.runs << ", \"samples\": " << x.profile.samples
               << ", \"ms_per_run\": " << json_num(x.profile.ms_per_run) << ", \"kernels\": [";
            for (size_t k = 0; k < x.profile.kernels.size(); k++) {
                const KernelTime &kt = x.profile.kernels[k];
                os << (k ? ", " : "") << "{\"root\": " << json_str(kt.root) << ", \"ms\": " << json_num(kt.ms)
                   << ", \"nodes\": [";
                for (size_t n = 0; n < kt.nodes.size(); n++) os << (n ? ", " : "") << json_str(kt.nodes[n]);
                os << "]}";
            }
            os << "]}";
        }
        if (!x.profile_error.empty()) os << ", \"profile_error\": " << json_str(x.profile_error);
        os << "}";
    }
    os << "\n  ]\n}\n";
    return os.str();
}

std::string to_csv(const BenchReport &r) {
    std::ostringstream os;
    os << "workload,schedule,kind,ok,median_ms,min_ms,max_ms,runs,gbps,gflops,pct_roofline,"
          "speedup_vs_eager,schedule_s,compile_s,pipelines,rel_error,failed_at,fail_reason,error\n";
    for (const auto &x : r.rows) {
        os << csv_field(r.workload) << "," << csv_field(x.label) << "," << x.kind << "," << (x.ok ? 1 : 0) << ",";
        if (x.ok)
            os << x.median_ms << "," << x.min_ms << "," << x.max_ms << "," << x.runs << "," << x.gbps << ","
               << x.gflops << "," << x.pct_roofline << ","
               << (x.speedup_vs_eager > 0 ? std::to_string(x.speedup_vs_eager) : std::string()) << ",";
        else
            os << ",,," << x.runs << ",,,,,";
        os << x.schedule_s << "," << x.compile_s << "," << x.pipelines << "," << x.rel_error << ","
           << csv_field(x.stage) << "," << csv_field(x.fail_reason) << "," << csv_field(one_line(x.error, 1000))
           << "\n";
    }
    return os.str();
}

}  // namespace loom
