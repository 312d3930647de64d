// `loom bench model.onnx`: several schedules of one model side by side, each validated against the
// reference interpreter before it is timed (measure/benchmark.h does the work).
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/input_binding.h"
#include "cli/model_loading.h"
#include "cli/output_files.h"
#include "cli/scheduling.h"
#include "codegen/jit.h"
#include "codegen/openmp_threading.h"
#include "measure/benchmark.h"
#include "measure/halide_autoschedulers.h"
#include "measure/machine_probe.h"
#include "measure/peer_process.h"
#include "ops/lower_graph.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_printer.h"
#include "schedule/schedule_validate.h"
#include "schedule/size_specialization.h"
#include "support/error.h"

namespace loom::cli {

namespace {

namespace fs = std::filesystem;

struct BenchCliOptions {
    std::string model;
    std::vector<std::string> schedules;
    bool eager = false, inline_ = false, auto_ = false, ort = false, reprobe = false, profile = false;
    std::vector<std::string> halide;
    std::vector<std::string> inputs;
    bool generic = false;                     ///< --generic
    bool small_size_plan = false;             ///< --small-size-plan
    std::vector<std::string> generic_plan;    ///< --generic-plan
    std::vector<std::string> generic_schedules;  ///< --generic-schedule
    std::vector<int> generic_tail_copies;         ///< --generic-tail-copies
    std::vector<std::string> generic_without;     ///< --generic-without
    std::vector<std::string> dims;            ///< --dim
    std::string json, csv, plot, name;
    double budget_ms = 2000;
    int warmup = 2, sets = 0;
    double tolerance = 1e-5;
    uint64_t seed = 1;
    std::vector<std::string> threadings = {"auto"};  ///< --threading: the first for every row; more repeat Loom's rows
    std::string peer_memory = "4G", peer_timeout = "300";
};

// --peer-timeout's seconds: a positive number, else a UserError naming the flag and the form.
double parse_peer_timeout(const std::string &text) {
    double v = 0;
    size_t used = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::logic_error &) {
        used = 0;
    }
    user_check(used == text.size() && used > 0 && std::isfinite(v) && v > 0, "--peer-timeout '", text,
               "': expected a positive number of seconds, e.g. --peer-timeout 300");
    return v;
}

// The command line that starts a worker for a Halide autoscheduler's row: this binary, loading the
// model exactly as this process did (cmd_bench_peer.cpp).
std::vector<std::string> peer_worker_command(const BenchCliOptions &o) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    std::vector<std::string> cmd = {ec ? std::string("/proc/self/exe") : exe.string(), "bench-peer", o.model};
    for (const auto &i : o.inputs) {
        cmd.push_back("--input");
        cmd.push_back(i);
    }
    cmd.push_back("--threading");
    cmd.push_back(o.threadings.front());
    return cmd;
}

// Folders where Loom's source tree may be: $LOOM_SOURCE_DIR, else the folders above the binary,
// else the current directory.
std::vector<fs::path> source_roots() {
    std::vector<fs::path> roots;
    if (const char *d = std::getenv("LOOM_SOURCE_DIR"); d && *d) roots.emplace_back(d);
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec)
        for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
            roots.push_back(p);
    roots.push_back(fs::current_path());
    return roots;
}

// \p relative (e.g. "bench/plot.py") in the first source root that has it; empty when none does.
std::string find_source_file(const std::string &relative) {
    for (const auto &r : source_roots())
        if (fs::exists(r / relative)) return (r / relative).string();
    return "";
}

std::string find_plot_script() {
    std::string p = find_source_file("bench/plot.py");
    user_check(!p.empty(), "--plot: cannot find bench/plot.py (set LOOM_SOURCE_DIR to the Loom source tree)");
    return p;
}

// An executable named \p name on $PATH; empty when there is none.
std::string find_on_path(const std::string &name) {
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (size_t b = 0; b <= dirs.size();) {
        size_t e = dirs.find(':', b);
        if (e == std::string::npos) e = dirs.size();
        fs::path p = fs::path(dirs.substr(b, e - b).empty() ? "." : dirs.substr(b, e - b)) / name;
        if (::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p.string();
        b = e + 1;
    }
    return "";
}

// How to start ONNX Runtime's worker: node ($LOOM_NODE, else on $PATH), bench/ort/ort_worker.js,
// and onnxruntime-node in $LOOM_ORT_DIR (else .deps/ort of the source tree, where
// scripts/install_deps.sh puts it). What is missing goes into `unavailable`, so that only the ORT
// row fails.
OrtWorkerCommand ort_worker_command(const std::string &model) {
    OrtWorkerCommand c;
    c.model_path = fs::absolute(model).string();
    const char *node_env = std::getenv("LOOM_NODE");
    std::string node = node_env && *node_env ? node_env : find_on_path("node");
    std::string harness = find_source_file("bench/ort/ort_worker.js");
    std::string ort_dir;
    if (const char *d = std::getenv("LOOM_ORT_DIR"); d && *d) ort_dir = d;
    else if (std::string pkg = find_source_file(".deps/ort/node_modules/onnxruntime-node/package.json"); !pkg.empty())
        ort_dir = fs::path(pkg).parent_path().parent_path().parent_path().string();
    const std::string fix = "run scripts/install_deps.sh, which installs Node.js and onnxruntime-node";
    if (node.empty() || ::access(node.c_str(), X_OK) != 0)
        c.unavailable = str_cat("ONNX Runtime's row needs Node.js: no executable `node` ",
                                node_env && *node_env ? str_cat("at LOOM_NODE=", node_env) : std::string("on PATH"),
                                "; ", fix, ", or set LOOM_NODE");
    else if (harness.empty())
        c.unavailable = "ONNX Runtime's row needs bench/ort/ort_worker.js from Loom's source tree; set LOOM_SOURCE_DIR "
                        "to the source tree";
    else if (ort_dir.empty() || !fs::exists(fs::path(ort_dir) / "node_modules" / "onnxruntime-node" / "package.json"))
        c.unavailable = str_cat("ONNX Runtime's row needs onnxruntime-node, not found in ",
                                ort_dir.empty() ? std::string(".deps/ort of the source tree") : ort_dir + "/node_modules",
                                "; ", fix, " (into .deps/ort), or set LOOM_ORT_DIR to a folder whose node_modules has it");
    if (!c.unavailable.empty()) return c;
    c.argv = {node, harness, "--ort-dir", ort_dir};
    std::string trivial = (fs::path(harness).parent_path() / "trivial.onnx").string();
    if (fs::exists(trivial)) {
        c.argv.push_back("--trivial-model");
        c.argv.push_back(trivial);
    }
    return c;
}

std::string shell_quote(const std::string &s) {
    std::string o = "'";
    for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return o + "'";
}

void bench(const BenchCliOptions &o) {
    std::vector<Threading> threadings;
    for (const auto &t : o.threadings) threadings.push_back(parse_threading(t));
    set_jit_threading(threadings.front());
    PeerLimits peer_limits;
    peer_limits.memory_bytes = parse_memory_size(o.peer_memory, "--peer-memory");
    peer_limits.timeout_s = parse_peer_timeout(o.peer_timeout);
    peer_limits.memory_flag = "--peer-memory";
    peer_limits.timeout_flag = "--peer-timeout";
    if (jit_threading() == Threading::OpenMP)
        std::cerr << "loom bench: parallel loops run on OpenMP's team (" << openmp_threads() << " threads)\n";
    Graph g = load_model(o.model, o.inputs);
    g.name = o.name.empty() ? fs::path(o.model).stem().string() : o.name;
    Halide::Target target = host_target();

    std::cerr << "loom bench: probing the machine (cached in " << machine_cache_path() << ")\n";
    MachineModel machine = probe_machine(o.reprobe);

    bool any = o.eager || o.inline_ || o.auto_ || o.ort || !o.halide.empty() || !o.schedules.empty() ||
               !o.generic_schedules.empty() || !o.generic_tail_copies.empty() || !o.generic_without.empty();
    std::vector<BenchVariant> variants;
    auto builtin = [&](const std::string &spec) {
        AutoscheduleFn autofn = autoscheduler_for(target);
        variants.push_back({spec, spec, [spec, autofn](LoweredPipeline &p, const Halide::Target &t) {
                                Schedule s = resolve_schedule(p, t, spec, autofn);
                                apply_schedule(s, p, t);
                                return print_schedule(s);
                            }});
    };
    if (o.eager || !any) builtin("eager");
    if (o.inline_ || !any) builtin("inline");
    if (o.auto_ || !any) builtin("auto");
    for (const auto &h : o.halide) {
        std::string name = h;
        halide_autoscheduler_registered_name(name);  // a typo is a user error before anything runs
        // In a worker process under --peer-memory and --peer-timeout: a foreign search that blows
        // up fails its row only.
        variants.push_back({name, "halide", nullptr, name});
    }
    if (o.generic || !o.generic_schedules.empty() || !o.generic_tail_copies.empty() || !o.generic_without.empty()) {
        // The model compiled for every size (dynamic shapes), planned at --generic-plan, run at
        // this --input size: the row a compile specialized to the size ("auto") is judged against.
        // Each --generic-schedule file is such a row too, its schedule as written.
        std::set<std::string> planned;  // one size per input or dim: a second would silently win
        for (const auto &p : o.generic_plan) {
            const std::string name = p.substr(0, p.find('='));
            user_check(planned.insert(name).second, "--generic-plan ", p, ": '", name,
                       "' is already given by an earlier --generic-plan; the compile is planned for one size, "
                       "so give each input or dim once");
        }
        DynamicRequest req;
        for (const auto &d : o.dims) parse_dim_range(d, req.dims);
        req.all = req.dims.empty();
        auto gen = std::make_shared<Graph>(
            load_model(o.model, o.generic_plan.empty() ? o.inputs : o.generic_plan, false, "", req));
        user_check(gen->dynamic.active(), "loom bench --generic: ", o.model, " has no symbolic input dim to keep "
                   "open; drop --generic, or export the model with dynamic axes");
        struct Row {
            std::string label, spec;
            int tail_copies;                  // -1: --tail-copies
            std::set<std::string> left_out;  // kinds of copies this row compiles without
        };
        std::vector<Row> rows;
        if (o.generic) rows.push_back({"auto generic", "auto", -1, {}});
        for (int n : o.generic_tail_copies)
            rows.push_back({"auto generic, " + std::to_string(n) + " tail copies", "auto", n, {}});
        std::string known;  // the kinds a --generic-without error lists
        for (const auto &k : size_copy_kinds()) known += (known.empty() ? "" : ", ") + k;
        for (const auto &kinds : o.generic_without) {
            std::set<std::string> left_out;
            for (size_t at = 0; at <= kinds.size();) {
                size_t end = std::min(kinds.find('+', at), kinds.size());
                std::string kind = kinds.substr(at, end - at);
                user_check(size_copy_kinds().count(kind), "--generic-without ", kinds, ": '", kind,
                           "' is no kind of copy; give one of ", known, ", or several joined by '+'");
                left_out.insert(kind);
                at = end + 1;
            }
            rows.push_back({"auto generic without " + kinds, "auto", -1, left_out});
        }
        for (const auto &path : o.generic_schedules)
            rows.push_back({fs::path(path).filename().string() + " generic", path, -1, {}});
        for (const auto &row : rows) {
            BenchVariant v{row.label, row.spec == "auto" ? "auto" : "file", nullptr};
            std::string model = o.model;
            bool second = o.small_size_plan && row.spec == "auto";
            v.build = [gen, model, req, second, spec = row.spec, copies = row.tail_copies,
                       left_out = row.left_out](const Halide::Target &t, std::string &schedule_text) {
                EverySizeModel em;
                {
                    TailCopiesScope scope(copies);  // this row's copies while it is planned
                    SizeCopiesLeftOutScope without(left_out);
                    em = schedule_compiled_for_every_size(
                        *gen, [&](const std::vector<std::string> &plan) { return load_model(model, plan, false, "", req); },
                        spec, t, model, second);
                }
                schedule_text = print_schedule(em.main.schedule);
                if (em.short_sizes) schedule_text += "\n# " + em.describe() + print_schedule(em.short_sizes->schedule);
                return compile_every_size(em, t);
            };
            variants.push_back(v);
        }
    }
    user_check(o.generic || !o.generic_schedules.empty() || !o.generic_tail_copies.empty() ||
                   !o.generic_without.empty() || (o.generic_plan.empty() && o.dims.empty() && !o.small_size_plan),
               "loom bench: --generic-plan, --dim and --small-size-plan describe the --generic row; add --generic");
    // ONNX Runtime runs the model file itself, in a worker process under the same limits.
    if (o.ort) variants.push_back({"ort", "ort", nullptr, kOrtPeer});
    for (const auto &path : o.schedules) {
        AutoscheduleFn autofn = autoscheduler_for(target);
        variants.push_back({fs::path(path).filename().string(), "file",
                            [path, autofn](LoweredPipeline &p, const Halide::Target &t) {
                                std::vector<std::string> warnings;
                                Schedule s = resolve_schedule(p, t, path, autofn, &warnings);
                                validate_schedule(s, p, t, &warnings);
                                for (const auto &w : warnings) std::cerr << "warning: " << w << "\n";
                                apply_schedule(s, p, t);
                                return print_schedule(s);
                            }});
    }
    if (threadings.size() > 1) {
        // Each of Loom's rows once per threading, side by side in the same rounds: the threadings
        // compare on the same machine state, which separate processes do not share.
        std::vector<BenchVariant> rows;
        for (const auto &v : variants) {
            if (v.kind == "halide" || v.kind == "ort") {
                rows.push_back(v);
                continue;
            }
            for (size_t k = 0; k < threadings.size(); k++) {
                BenchVariant t = v;
                t.label += "@" + o.threadings[k];
                t.threading = threadings[k];
                rows.push_back(t);
            }
        }
        variants = std::move(rows);
    }

    BenchOptions opts;
    opts.budget_ms = o.budget_ms;
    opts.warmup = o.warmup;
    opts.input_sets = o.sets;
    opts.rel_tol = o.tolerance;
    opts.seed = o.seed;
    opts.profile = o.profile;
    opts.target = target;
    opts.peer_command = peer_worker_command(o);
    opts.peer_limits = peer_limits;
    if (o.ort) opts.ort_command = ort_worker_command(o.model);
    opts.threads = jit_threading() == Threading::OpenMP ? openmp_threads() : machine.cores;
    opts.progress = [&](const std::string &line) { std::cerr << "loom bench " << g.name << ": " << line << "\n"; };

    BenchReport rep = run_benchmark(g, variants, opts, machine);
    rep.model = o.model;
    std::cout << format_table(rep);

    std::string json_path = o.json;
    if (!o.plot.empty() && json_path.empty())
        json_path = (fs::temp_directory_path() / ("loom_bench_" + std::to_string(::getpid()) + ".json")).string();
    if (!json_path.empty()) write_file_atomically(json_path, to_json(rep));
    if (!o.csv.empty()) write_file_atomically(o.csv, to_csv(rep));
    if (!o.plot.empty()) {
        std::string cmd = "/usr/bin/python3 " + shell_quote(find_plot_script()) + " " + shell_quote(json_path) +
                          " -o " + shell_quote(o.plot);
        int rc = std::system(cmd.c_str());
        user_check(rc == 0, "--plot: ", cmd, " failed (exit ", rc, ")");
        std::cerr << "loom bench: plot written to " << o.plot << "\n";
    }
    // A peer's failure (a Halide autoscheduler, ONNX Runtime) is a finding about that peer; a
    // failure of one of Loom's own schedules (eager, inline, auto, a schedule file) is Loom's and
    // fails the command.
    std::string own_failures;
    for (const auto &row : rep.rows)
        if (!row.ok && row.kind != "halide" && row.kind != "ort")
            own_failures += str_cat(own_failures.empty() ? "" : "; ", row.label, " (", row.stage, ")");
    user_check(own_failures.empty(), "Loom's own schedule(s) failed: ", own_failures,
               " (their rows above say why; the other rows were measured and written)");
}

}  // namespace

void add_bench_command(CLI::App &app) {
    auto o = std::make_shared<BenchCliOptions>();
    CLI::App *c = app.add_subcommand(
        "bench", "Validate and time several schedules of a model side by side (time, GB/s, GFLOP/s, % roofline)");
    c->add_option("model", o->model, "ONNX model file")->required();
    c->add_option("--schedule", o->schedules, "A schedule file to measure (repeatable)");
    c->add_flag("--eager", o->eager, "Measure the eager schedule (every op its own loop nest)");
    c->add_flag("--inline", o->inline_, "Measure the inline schedule (pointwise ops inlined)");
    c->add_flag("--auto", o->auto_, "Measure Loom's auto-scheduler");
    c->add_flag("--ort", o->ort,
                "Measure ONNX Runtime (onnxruntime-node, CPU, all graph optimizations) on the same inputs "
                "with the same thread count, in a worker process; its outputs are checked like every row's");
    c->add_option("--halide", o->halide, "Halide autoschedulers to measure: mullapudi2016,adams2019,li2018")
        ->delimiter(',');
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_flag("--generic", o->generic,
                "Also measure the auto schedule compiled once for every size (dynamic shapes: every symbolic "
                "input dim open, or those of --dim) and run at this --input size");
    c->add_option("--generic-plan", o->generic_plan,
                  "The size the --generic compile is planned for, as --input (default: the --input size)");
    c->add_option("--dim", o->dims, "A dim the --generic compile keeps open, with its range: H=32..2048");
    c->add_option("--generic-schedule", o->generic_schedules,
                  "A schedule file compiled once for every size as --generic is (repeatable): its row times it "
                  "at this --input size beside the others");
    add_tail_copies_option(c);
    c->add_option("--generic-tail-copies", o->generic_tail_copies,
                  "A row of the --generic compile with this many tail copies (repeatable), beside the others: "
                  "their run and compile times compare in one process")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--generic-without", o->generic_without,
                  "A row of the --generic compile without one kind of copy (repeatable; several kinds joined by '+'): "
                  "half-tile, by-value, narrow, narrow-vectors, remainder, undivided; its run and compile times beside the others weigh "
                  "what that kind costs and gains");
    c->add_flag("--small-size-plan", o->small_size_plan,
                "The --generic compile serves the sizes too short for its splits with a second plan made at the "
                "ranges' small end (bench/DECISIONS.md#d107)");
    c->add_option("--json", o->json, "Write the report as JSON");
    c->add_option("--csv", o->csv, "Write the rows as CSV");
    c->add_option("--plot", o->plot, "Plot the report (bench/plot.py, matplotlib) to this image");
    c->add_option("--name", o->name, "Workload name in the report (default: the model file's stem)");
    c->add_option("--budget-ms", o->budget_ms, "Time spent in timed runs per schedule (the schedules take turns, 8 rounds)")->default_val(2000);
    c->add_option("--warmup", o->warmup, "Untimed runs before timing")->default_val(2);
    c->add_option("--sets", o->sets, "Random input sets to rotate among (0: enough to overflow caches)")
        ->default_val(0);
    c->add_option("--tolerance", o->tolerance, "Largest relative error a schedule may have")->default_val(1e-5);
    c->add_option("--seed", o->seed, "Seed of the random inputs")->default_val(1);
    c->add_flag("--profile", o->profile,
                "Then profile each schedule: its time kernel by kernel (Halide's sampling profiler; "
                "a kernel is a loop nest, named by its root Func)");
    c->add_flag("--reprobe", o->reprobe, "Re-measure the machine's copy bandwidth and FLOP rate");
    c->add_option("--peer-memory", o->peer_memory,
                  "Memory each Halide autoscheduler's worker process may hold (scheduling, compiling, "
                  "validating, timing), e.g. 4G, 512M; over it the row fails")
        ->default_val("4G");
    c->add_option("--peer-timeout", o->peer_timeout,
                  "Seconds each Halide autoscheduler's worker may take to schedule, compile and validate "
                  "(and then per timing request); over it the row fails")
        ->default_val("300");
    c->add_option("--threading", o->threadings,
                  kThreadingHelp + ". Several values: each of Loom's rows once per threading, labelled ROW@THREADING, timed in the same rounds")
        ->expected(1, -1);
    c->footer("With no schedule flag: eager, inline and auto. A schedule that fails to "
              "compile or validate is reported in its row; the others still run. Each Halide "
              "autoscheduler runs in its own worker process under --peer-memory and --peer-timeout, so "
              "that its blow-up fails its row only; so does ONNX Runtime (--ort). Exit code 1 when one of "
              "Loom's own schedules failed (the report is still written), 0 when only peer rows did.");
    c->callback([o] { bench(*o); });
}

}  // namespace loom::cli
