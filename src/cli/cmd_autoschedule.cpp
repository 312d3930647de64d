// `loom autoschedule model.onnx -o model.cpu.sched`: Loom's cost model writes a schedule file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "autoschedule/autoschedule.h"
#include "autoschedule/candidates.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/output_files.h"
#include "cli/scheduling.h"
#include "codegen/aot.h"
#include "codegen/jit.h"
#include "measure/machine_probe.h"
#include "measure/profile.h"
#include "measure/tuning.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom::cli {

namespace {

/// How long `--profile` may run the model (it stops sooner at kMinProfileSamples samples).
constexpr double kReportProfileBudgetMs = 5000;

struct AutoscheduleOptions {
    std::string model;
    std::vector<std::string> inputs;
    std::string target = "host";
    bool target_given = false;  ///< --target was passed (a --machine preset sets it otherwise)
    std::string output;
    std::vector<std::string> machine;  ///< --machine: [preset] key=value …
    std::string dot;
    bool force = false;
    bool report = false;
    bool profile = false;       ///< --profile: the report with each kernel's measured time
    int tune = 0;               ///< --tune N (0: not given; checked by tune_given)
    bool tune_given = false;
    double tune_budget_ms = 300;
    bool loop_conv_taps = false;  ///< --loop-conv-taps: ScheduleKnobs::conv_unroll_taps off
    bool normal_stores = false;   ///< --normal-stores: ScheduleKnobs::streaming_stores off
    bool nchw_conv_inputs = false;  ///< --nchw-conv-inputs: ScheduleKnobs::stage_conv_inputs off
    LibraryFlags libs;  ///< --target cuda: the library calls `loom compile` will make (same flags)
};

Halide::Target named_target(const AutoscheduleOptions &o) {
    return o.target == "host" ? host_target() : o.target == "cuda" ? aot_target("cuda") : Halide::Target(o.target);
}

// A --machine preset plans for another machine: it sets the target (the header records it), and
// nothing that runs the model on this machine goes with it.
void check_preset(const AutoscheduleOptions &o, const FixedMachine &preset) {
    const std::string flag = "loom autoschedule --machine " + preset.name;
    if (o.target_given) {
        // The JIT feature of `host` is how the code is loaded, not what it may execute.
        Halide::Target named = named_target(o).without_feature(Halide::Target::JIT);
        user_check(named == preset.target, flag, " plans for target ", preset.target.to_string(), ", not --target ",
                   o.target, " (", named.to_string(), "); drop --target (the preset sets it) or the preset");
    }
    user_check(!o.profile, flag, " with --profile: --profile runs the model on this machine, the preset "
               "describes another; drop the preset (key=value overrides adjust this machine's model) or --profile");
    user_check(!o.tune_given, flag, " with --tune: tuning times candidates on this machine, the preset "
               "describes another; drop the preset (key=value overrides adjust this machine's model) or --tune");
}

// The flag checks (--loop-conv-taps, --normal-stores, --tune), before anything slow runs.
void check_flags(const AutoscheduleOptions &o, const Halide::Target &target) {
    user_check(!o.loop_conv_taps || !target.has_gpu_feature(), "loom autoschedule --loop-conv-taps with --target ",
               o.target, ": it shapes the CPU cost model's conv tiles; drop it for a GPU target");
    user_check(!o.normal_stores || !target.has_gpu_feature(), "loom autoschedule --normal-stores with --target ",
               o.target, ": the CPU cost model's streaming stores are x86 only; drop it for a GPU target");
    user_check(!o.nchw_conv_inputs || !target.has_gpu_feature(), "loom autoschedule --nchw-conv-inputs with --target ",
               o.target, ": it shapes the CPU cost model's conv inputs; drop it for a GPU target");
    if (!o.tune_given) return;
    user_check(!o.nchw_conv_inputs, "loom autoschedule --nchw-conv-inputs with --tune: tuning times NCHW conv ",
               "inputs as one of its candidates already; drop one of the two");
    user_check(!o.loop_conv_taps, "loom autoschedule --loop-conv-taps with --tune: tuning times the looped taps ",
               "as one of its candidates already; drop one of the two");
    user_check(!o.normal_stores, "loom autoschedule --normal-stores with --tune: tuning times normal stores ",
               "as one of its candidates already; drop one of the two");
    user_check(o.tune >= 1, "loom autoschedule --tune ", o.tune,
               ": the number of candidate schedules to compile and time must be at least 1; "
               "try --tune 4 (or drop --tune for the cost model's choice without timing)");
    user_check(!target.has_gpu_feature(), "loom autoschedule --tune with --target ", o.target,
               ": tuning compiles and times candidates of the CPU cost model on this machine; "
               "drop --tune for a GPU target (or tune for the host: --target host)");
    user_check(o.tune_budget_ms > 0, "loom autoschedule --tune-budget-ms ", o.tune_budget_ms,
               ": the timing budget must be positive, e.g. --tune-budget-ms 300");
    user_check(o.output.empty() || o.force || !std::filesystem::exists(o.output), "'", o.output,
               "' exists; pass --force to overwrite it");
}

// Times the first o.tune candidates and returns the plan of the fastest with its tuned schedule.
AutoScheduleResult tune(const AutoscheduleOptions &o, const Graph &g, const LoweredPipeline &p,
                        const Halide::Target &target, const MachineModel &m) {
    std::vector<ScheduleCandidate> cands = schedule_candidates(p, target, m);
    std::cerr << "loom autoschedule --tune " << o.tune << ": the cost model offers " << cands.size()
              << " candidate(s)";
    if ((size_t)o.tune > cands.size()) std::cerr << "; timing all of them";
    std::cerr << "\n";
    std::cerr << "loom autoschedule: probing the machine (cached in " << machine_cache_path() << ")\n";
    MachineModel machine = probe_machine(false);
    TuneOptions to;
    to.count = o.tune;
    to.bench.budget_ms = o.tune_budget_ms;
    to.bench.seed = 1;
    to.bench.target = target;
    to.bench.progress = [](const std::string &line) { std::cerr << "loom autoschedule --tune: " << line << "\n"; };
    TuneResult tr = tune_schedule(g, cands, to, machine);
    for (const auto &t : tr.measured)
        if (!t.ok) std::cerr << "loom autoschedule --tune: candidate " << t.index + 1 << " (" << t.label
                             << ") skipped: " << t.error << "\n";
    for (const auto &line : tuning_table(tr, to)) std::cerr << "  " << line << "\n";
    const ScheduleCandidate &best = cands[tr.measured[tr.best].index];
    AutoScheduleResult r = auto_schedule_with_plan(p, target, m, best.knobs);
    r.schedule = tr.schedule;
    return r;
}

void autoschedule(const AutoscheduleOptions &o) {
    MachineOptions machine = parse_machine_options(o.machine);
    if (machine.preset) check_preset(o, *machine.preset);
    Halide::Target target = machine.preset ? machine.preset->target : named_target(o);
    check_flags(o, target);
    if (target.has_gpu_feature()) {
        // The GPU cost model has no fusion report or machine overrides yet: it writes the file only.
        user_check(!o.report && !o.profile && o.dot.empty() && o.machine.empty(), "loom autoschedule --target ",
                   o.target, ": --report, --profile, --dot and --machine describe the CPU cost model; drop them for "
                   "a GPU target");
        LowerOptions lo = library_lowering(target, o.libs, "loom autoschedule");
        Graph g = load_model(o.model, o.inputs, false, "", {}, attention_fusion(target, lo),
                             linear_exact_gelu(target, lo));
        choose_fp32_conv_layout(g, lo);
        // Lowered as `loom compile` will lower it (cuBLAS/cuDNN extern stages unless turned off), so
        // that the file names the Funcs that compile finds.
        LoweredPipeline p = lower_graph(g, lo);
        Schedule s = autoscheduler_for(target)(p, target);
        s.model = std::filesystem::path(o.model).filename().string();
        s.sha256 = file_sha256(o.model);
        s.target = target.to_string();
        std::string text = print_schedule(s);
        if (o.output.empty()) std::cout << text;
        else write_file_atomically(o.output, text, o.force), std::cout << "wrote " << o.output << "\n";
        return;
    }
    (void)library_lowering(target, o.libs, "loom autoschedule");  // --tf32 on a CPU target: its error
    MachineModel m = machine.preset ? machine.preset->model : detect_machine(target);
    for (const auto &kv : machine.overrides) override_machine(m, kv);
    Graph g = load_model(o.model, o.inputs);
    LoweredPipeline p = lower_graph(g);
    ScheduleKnobs knobs;
    knobs.conv_unroll_taps = !o.loop_conv_taps;
    knobs.streaming_stores = !o.normal_stores;
    knobs.stage_conv_inputs = !o.nchw_conv_inputs;
    AutoScheduleResult r = o.tune_given ? tune(o, g, p, target, m) : auto_schedule_with_plan(p, target, m, knobs);
    r.schedule.model = std::filesystem::path(o.model).filename().string();
    r.schedule.sha256 = file_sha256(o.model);
    r.schedule.target = target.to_string();
    std::string text = print_schedule(r.schedule);
    if (!o.dot.empty()) {
        std::string before = o.dot, after = o.dot;
        auto dotpos = o.dot.rfind(".dot");
        std::string stem = dotpos != std::string::npos && dotpos + 4 == o.dot.size() ? o.dot.substr(0, dotpos) : o.dot;
        before = stem + ".before.dot";
        after = o.dot;
        write_file_atomically(before, fusion_dot(p, r.plan, false), true);
        write_file_atomically(after, fusion_dot(p, r.plan, true), true);
        std::cout << "wrote " << before << " (before fusion) and " << after << " (after)\n";
        if (std::system("command -v dot >/dev/null 2>&1") == 0) {
            for (const auto &d : {before, after}) {
                std::string svg = d.substr(0, d.size() - 4) + ".svg";
                std::string cmd = "dot -Tsvg '" + d + "' -o '" + svg + "'";
                if (std::system(cmd.c_str()) == 0) std::cout << "wrote " << svg << "\n";
            }
        }
    }
    if (o.report || o.profile) {
        // The plan's Funcs scheduled once: the loop nest reads them, and a profile runs them.
        std::string nest;
        try {
            apply_schedule(r.schedule, p, target);
            nest = "\nloop nest:\n" + loop_nest(p, target);
        } catch (const std::exception &e) {
            if (o.profile) throw;  // nothing to run
            nest = std::string("\n(loop nest unavailable: ") + e.what() + ")\n";
        }
        std::map<std::string, double> measured;
        if (o.profile) {
            std::cerr << "loom autoschedule --profile: compiling with Halide's profiler and running\n";
            std::vector<std::map<std::string, Tensor>> ins = {random_inputs(g, 1), random_inputs(g, 2)};
            measured = ms_by_lowered_func(p, profile_model(p, target, ins, kReportProfileBudgetMs));
        }
        std::cout << format_report(p, r, m, o.profile ? &measured : nullptr) << nest;
    }
    if (o.output.empty()) {
        if (!o.report) std::cout << text;
        return;
    }
    write_file_atomically(o.output, text, o.force);
    std::cout << "wrote " << o.output << ": " << r.plan.kernels.size() << " kernels for " << p.funcs.size()
              << " Funcs\n";
}

}  // namespace

void add_autoschedule_command(CLI::App &app) {
    auto o = std::make_shared<AutoscheduleOptions>();
    CLI::App *c = app.add_subcommand("autoschedule", "Write a schedule for a model with Loom's cost model (CPU, or CUDA with --target cuda)");
    c->add_option("model", o->model, "ONNX model file")->required();
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_option("--target", o->target, "host, cuda, or a Halide target string (default: host, or the --machine preset's)")
        ->each([o](const std::string &) { o->target_given = true; });
    c->add_option("-o,--output", o->output, "Schedule file to write (default: print it)");
    c->add_flag("--force", o->force, "Overwrite an existing output file");
    c->add_flag("--report", o->report, "Print each kernel (loop nest) with the graph nodes it fuses");
    c->add_flag("--profile", o->profile,
                "Print the report with each kernel's measured time beside its estimate (compiles and runs the "
                "model under Halide's sampling profiler; CPU only)");
    c->add_flag("--loop-conv-taps", o->loop_conv_taps,
                "Keep conv taps as loops (not unrolled): about half the JIT compile time of ResNet-18, 0-10% slower convs");
    c->add_flag("--normal-stores", o->normal_stores,
                "No streaming (non-temporal) stores, where the cost model would stream an output larger than the LLC");
    c->add_flag("--nchw-conv-inputs", o->nchw_conv_inputs,
                "Conv outputs stay NCHW and 1x1 convs read them so (no channels-innermost storage or copy)");
    c->add_option("--dot", o->dot, "Write the Func graph after fusion here (and <stem>.before.dot; SVG with Graphviz)");
    c->add_option("--tune", o->tune,
                  "Compile, validate and time the N best candidate schedules of the cost model (JIT, "
                  "fixed input seed) and keep the fastest (CPU only)")
        ->each([o](const std::string &) { o->tune_given = true; });
    c->add_option("--tune-budget-ms", o->tune_budget_ms, "With --tune: timed runs per candidate and round, in ms")
        ->default_val(300);
    c->add_option("--machine", o->machine,
                  "Plan for a fixed machine (a preset, with its target: " + machines::names() +
                      "), then override the model: cores=2, l2_bytes=2M, copy_gbps=20, gflops=150, vector_bytes=64 …");
    add_library_flags(c, o->libs);
    c->callback([o] { autoschedule(*o); });
}

}  // namespace loom::cli
