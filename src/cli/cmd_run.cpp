// `loom run model.onnx`: run a model on the reference interpreter, or compiled (JIT) under a
// schedule, optionally checked against the reference.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>

#include "cli/artifact_runner.h"
#include "cli/commands.h"
#include "cli/input_binding.h"
#include "cli/model_loading.h"
#include "cli/scheduling.h"
#include "codegen/jit.h"
#include "codegen/openmp_threading.h"
#include "measure/output_tolerance.h"
#include "measure/profile.h"
#include "reference/reference.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom::cli {

namespace {

/// How long `--profile` may run the model (it stops sooner at kMinProfileSamples samples).
constexpr double kRunProfileBudgetMs = 5000;

struct RunOptions {
    std::string model;
    std::vector<std::string> inputs;
    std::string input_dir;
    std::string save_dir;
    std::string schedule;
    uint64_t seed = 1;
    bool reference = false;
    bool autosched = false;
    bool check = false;
    bool profile = false;
    double rtol = 0;  ///< 0: each output's tolerance by the rule of measure/output_tolerance.h
    int repeats = 5;
    std::string threading = "auto";
    std::vector<std::string> dims;  ///< --dim NAME=LO..HI
    bool dynamic = false;           ///< --dynamic
    bool small_size_plan = false;   ///< --small-size-plan
    std::string artifact;           ///< --artifact DIR: run a `loom compile` artifact instead of compiling
};

// Compares each output with the reference; prints a line per output and returns false past its tolerance.
bool check_outputs(const std::map<std::string, Tensor> &outs, const std::map<std::string, Tensor> &ref,
                   const std::map<std::string, OutputTolerance> &tolerances) {
    bool ok = true;
    for (const auto &[name, r] : ref) {
        const Tensor &o = outs.at(name);
        const OutputTolerance &tol = tolerances.at(name);
        OutputError e = output_error(o, r);
        bool pass = e.passes(tol.rtol);
        ok &= pass;
        std::vector<int64_t> idx(r.rank());
        for (int64_t d = r.rank() - 1, w = e.worst; d >= 0; d--) idx[d] = w % r.shape()[d], w /= r.shape()[d];
        std::cout << "  check " << name << ": rel error " << std::scientific << std::setprecision(2) << e.rel
                  << ", max abs " << e.max_abs << std::defaultfloat << " at [";
        for (size_t d = 0; d < idx.size(); d++) std::cout << (d ? "," : "") << idx[d];
        std::cout << "] (got " << o.get(e.worst) << ", want " << r.get(e.worst) << ")";
        if (e.non_finite) std::cout << ", " << e.non_finite << " non-finite";
        std::cout << (pass ? "  ok" : "  FAILED") << ", tolerance " << tol.describe() << "\n";
    }
    return ok;
}

/// The reference interpreter's outputs of \p g on \p ins, with each output's tolerance in
/// \p tolerances: the rule of measure/output_tolerance.h, or \p rtol when it is given (> 0).
std::map<std::string, Tensor> reference_with_tolerances(const Graph &g, const std::map<std::string, Tensor> &ins,
                                                        double rtol, std::map<std::string, OutputTolerance> &tolerances) {
    auto ref = run_reference_with_tolerances(g, ins, Precision::FP32, tolerances);
    if (rtol > 0)
        for (auto &[name, t] : tolerances) {
            t.rtol = rtol;
            t.fixed = true;
        }
    return ref;
}

/// The JIT model of \p g under \p sm (its warnings printed), from the cache or compiled.
JitModel &compile_scheduled(const Graph &g, ScheduledModel &sm, const Halide::Target &target) {
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    JitKey key{graph_fingerprint(g), print_schedule(sm.schedule), target.to_string()};
    return jit_cache_get(key, [&] {
        return with_schedule_errors(sm.applied, [&] { return std::make_unique<JitModel>(sm.pipeline, target); });
    });
}

/// Prints one size's run of a model compiled for several sizes (\p gs prepared for it alone): the
/// median of \p times, the outputs and, with --check, their comparison with the reference; false
/// when an output is past its tolerance.
bool report_size_run(const RunOptions &o, const Graph &gs, const std::map<std::string, Tensor> &ins,
                     const std::map<std::string, Tensor> &outs, std::vector<double> times) {
    std::string sizes;
    for (const auto &in : gs.inputs) sizes += (sizes.empty() ? "" : " ") + in + "=" + shape_str(gs.value(in).shape);
    std::sort(times.begin(), times.end());
    std::cout << "size " << sizes << ": run " << std::fixed << std::setprecision(3) << times[times.size() / 2]
              << " ms (median of " << times.size() << ")\n" << std::defaultfloat << summarize(outs);
    if (!o.check) return true;
    std::map<std::string, OutputTolerance> tolerances;
    auto ref = reference_with_tolerances(gs, ins, o.rtol, tolerances);
    return check_outputs(outs, ref, tolerances);
}

/// `loom run` with dynamic shapes: one compile, run (and checked) at each --input set.
void run_dynamic(const RunOptions &o, const std::string &spec) {
    std::vector<std::vector<std::string>> sets = input_sets(o.inputs);
    DynamicRequest req;
    for (const auto &d : o.dims) parse_dim_range(d, req.dims);
    req.all = req.dims.empty();
    user_check(o.input_dir.empty(), "loom run: --inputs DIR gives one size; with several --input sets, --dim or "
               "--dynamic the inputs are random (drop --inputs)");
    user_check(o.save_dir.empty(), "loom run: --save takes one size; drop it, or give one --input set without "
               "--dim/--dynamic");
    user_check(!o.profile || !o.small_size_plan, "loom run: --profile times one compile's kernels, and "
               "--small-size-plan compiles two; drop one of them");
    if (sets.empty()) sets.emplace_back();
    Graph g = load_model(o.model, sets[0], false, "", req);
    std::cout << "dynamic shapes of " << o.model << (g.dynamic.active() ? "" : " (no dim left open: static)")
              << ":\n" << describe_dynamic(g);
    Halide::Target target = host_target();
    EverySizeModel em = schedule_compiled_for_every_size(
        g, [&](const std::vector<std::string> &plan) { return load_model(o.model, plan, false, "", req); }, spec,
        target, o.model, o.small_size_plan);
    ScheduledModel &sm = em.main;
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    JitKey key{graph_fingerprint(g),
               print_schedule(sm.schedule) + (em.short_sizes ? print_schedule(em.short_sizes->schedule) : ""),
               target.to_string()};
    JitModel &m = jit_cache_get(key, [&] { return compile_every_size(em, target); });
    std::cout << "compiled once with schedule '" << spec << "' for " << target.to_string() << ": compile "
              << std::fixed << std::setprecision(2) << m.compile_seconds() << " s (" << m.compile_cpu_seconds()
              << " CPU s)" << std::defaultfloat;
    if (m.segments() > 1) std::cout << " as " << m.segments() << " pipelines";
    if (sm.applied.guarded_for_sizes)
        std::cout << "; " << sm.applied.guarded_for_sizes << " splits of loops whose extents move made GuardWithIf";
    std::cout << "\n";
    std::cout << sm.applied.specializations_text("");
    if (em.short_sizes) {
        std::cout << em.describe();
        if (em.short_sizes->applied.guarded_for_sizes)
            std::cout << "  " << em.short_sizes->applied.guarded_for_sizes
                      << " splits of loops whose extents move made GuardWithIf\n";
        std::cout << em.short_sizes->applied.specializations_text("  ");
    }
    bool ok = true;
    std::vector<std::vector<std::map<std::string, Tensor>>> profiled;  // per size, its inputs
    std::vector<std::string> labels;
    for (const auto &set : sets) {
        // The reference runs the model prepared for this size alone.
        Graph gs = load_model(o.model, set);
        auto ins = make_inputs(gs, "", o.seed);
        auto outs = with_schedule_errors(sm.applied, [&] { return m.run(ins); });
        ok &= report_size_run(o, gs, ins, outs, m.time_runs(ins, std::max(1, o.repeats)));
        if (o.profile) {
            std::string size;
            for (const auto &in : gs.inputs) size += (size.empty() ? "" : " ") + in + "=" + shape_str(gs.value(in).shape);
            labels.push_back(str_cat(spec, " compiled for every size, at ", size));
            profiled.push_back({ins});
        }
    }
    // One compile with the profiler, profiled at each size: where the plan made at one size spends
    // its time at another.
    if (o.profile) {
        auto profiles = profile_model_sizes(sm.pipeline, target, profiled, kRunProfileBudgetMs);
        for (size_t i = 0; i < profiles.size(); i++) std::cout << "\n" << format_profile(profiles[i], labels[i]);
    }
    if (!ok)
        throw UserError(str_cat("--check: outputs differ from the reference interpreter beyond their tolerance under "
                                "schedule '", spec, "' compiled for every size; compare with --schedule eager "
                                "to tell a lowering bug from a schedule bug, or bind the dims with one --input"));
}

/// `loom run M --artifact DIR`: the artifact run (and checked) at each --input set, the reference
/// interpreter preparing the model for that size alone.
void run_artifact(const RunOptions &o) {
    user_check(!o.autosched && o.schedule.empty() && !o.reference && !o.profile,
               "loom run: --artifact runs a compiled artifact; drop --schedule/--auto/--reference/--profile");
    ArtifactRunner a(o.artifact);
    std::vector<std::vector<std::string>> sets = input_sets(o.inputs);
    if (sets.empty()) sets.emplace_back();
    std::cout << "artifact " << o.artifact << " (" << a.name() << ")"
              << (a.dims().empty() ? std::string(": one size") : ": every size of its dims") << "\n";
    for (const auto &d : a.dims()) std::cout << "  dim " << d << "\n";
    bool ok = true;
    for (const auto &set : sets) {
        Graph gs = load_model(o.model, set, false, sets.size() == 1 ? o.input_dir : "");
        auto ins = make_inputs(gs, sets.size() == 1 ? o.input_dir : "", o.seed);
        auto outs = a.run(ins);
        std::vector<double> times;
        for (int r = 0; r < std::max(1, o.repeats); r++) times.push_back(a.time_run());
        ok &= report_size_run(o, gs, ins, outs, times);
        if (!o.save_dir.empty() && sets.size() == 1) {
            save_outputs(o.save_dir, outs, gs);
            std::cout << "saved " << outs.size() << " output(s) to " << o.save_dir << "/<name>.npy\n";
        }
    }
    if (!ok)
        throw UserError(str_cat("--check: the artifact's outputs differ from the reference interpreter beyond their "
                                "tolerance; compare with `loom run M --schedule eager` at that size to tell a "
                                "lowering bug from a schedule bug"));
}

void run(const RunOptions &o) {
    if (!o.artifact.empty()) return run_artifact(o);
    user_check(!(o.autosched && !o.schedule.empty()), "loom run: give --schedule or --auto, not both");
    std::string spec = o.autosched ? "auto" : o.schedule;
    user_check(!(o.reference && !spec.empty()), "loom run: --reference runs the interpreter; drop --schedule/--auto");
    user_check(!o.profile || !spec.empty(), "loom run: --profile times a compiled model's kernels; give it a schedule "
               "(--auto, or --schedule eager|inline|FILE)");
    set_jit_threading(parse_threading(o.threading));
    if (input_sets(o.inputs).size() > 1 || !o.dims.empty() || o.dynamic) {
        user_check(!spec.empty(), "loom run: several --input sets, --dim and --dynamic compile one model for every "
                   "size; give a schedule (--auto, or --schedule eager|inline|FILE)");
        return run_dynamic(o, spec);
    }
    user_check(!o.small_size_plan, "loom run: --small-size-plan adds a plan to a model compiled for every size; "
               "add --dynamic or --dim NAME=LO..HI, or drop it");
    Graph g = load_model(o.model, o.inputs, false, o.input_dir);
    auto ins = make_inputs(g, o.input_dir, o.seed);
    std::map<std::string, Tensor> outs, ref;
    std::map<std::string, OutputTolerance> tolerances;
    if (spec.empty() || o.check) {
        auto t0 = std::chrono::steady_clock::now();
        ref = reference_with_tolerances(g, ins, o.rtol, tolerances);
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (spec.empty()) {
            std::cout << "reference run of " << o.model << ": " << ms << " ms\n" << summarize(ref);
            outs = ref;
        }
    }
    if (!spec.empty()) {
        Halide::Target target = host_target();
        ScheduledModel sm = schedule_model(g, spec, target, o.model);
        JitModel &m = compile_scheduled(g, sm, target);
        outs = with_schedule_errors(sm.applied, [&] { return m.run(ins); });
        std::vector<double> times = m.time_runs(ins, std::max(1, o.repeats));
        std::sort(times.begin(), times.end());
        std::cout << "compiled " << o.model << " with schedule '" << spec << "' for " << target.to_string()
                  << (jit_threading() == Threading::OpenMP ? " (parallel loops on OpenMP)" : "")
                  << ": compile " << std::fixed << std::setprecision(2) << m.compile_seconds() << " s"
                  << (m.segments() > 1 ? " (" + std::to_string(m.segments()) + " pipelines)" : std::string())
                  << ", run "
                  << std::setprecision(3) << times[times.size() / 2] << " ms (median of " << times.size()
                  << ")\n" << std::defaultfloat << summarize(outs);
        if (o.check && !check_outputs(outs, ref, tolerances))
            throw UserError(str_cat("--check: outputs differ from the reference interpreter beyond their tolerance",
                                    o.rtol > 0 ? str_cat(" (--rtol ", o.rtol, ")") : std::string(), " under schedule '", spec,
                                    "'; compare with --schedule eager to tell a lowering bug from a schedule bug"));
        if (o.profile)
            std::cout << "\n" << format_profile(profile_model(sm.pipeline, target, {ins}, kRunProfileBudgetMs), spec);
    }
    if (!o.save_dir.empty()) {
        save_outputs(o.save_dir, outs, g);
        std::cout << "saved " << outs.size() << " output(s) to " << o.save_dir << "/<name>.npy\n";
    }
}
}  // namespace

void add_run_command(CLI::App &app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App *c = app.add_subcommand("run", "Run a model (reference interpreter, or compiled under a schedule)");
    c->add_option("model", o->model, "ONNX model file")->required()->check(CLI::ExistingFile);
    c->add_flag("--reference", o->reference, "Run on the reference interpreter (the default without --schedule)");
    c->add_option("--schedule", o->schedule, "eager | inline | auto | path to a .sched file: compile with it (JIT)");
    c->add_flag("--auto", o->autosched, "Compile with Loom's auto-schedule (same as --schedule auto)");
    c->add_flag("--check", o->check, "Compare every output with the reference interpreter; fail past --rtol");
    c->add_flag("--profile", o->profile,
                "Then profile the compiled model: its time kernel by kernel (Halide's sampling profiler)");
    c->add_option("--rtol", o->rtol,
                  "Tolerance of --check on ‖out−ref‖/‖ref‖ (default: per output, from the model's depth and output "
                  "scale, as printed)")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--repeats", o->repeats, "Timed runs after the first (median reported)")->default_val(5);
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8; "
                  "repeated for one input, several sizes run on one compile (dynamic shapes)");
    c->add_option("--dim", o->dims, "Keep a symbolic dim open, with its range: H=32..2048 (dynamic shapes: one "
                  "compile for every size; --input then gives the size it is planned for)");
    c->add_option("--artifact", o->artifact, "Run the `loom compile` artifact in DIR (host) at the --input sizes "
                  "instead of compiling; --check compares it with the reference interpreter at each");
    c->add_flag("--dynamic", o->dynamic, "Keep every symbolic input dim open (dynamic shapes; --input gives the "
                "size it is planned for)");
    add_tail_copies_option(c);
    c->add_flag("--small-size-plan", o->small_size_plan,
                "Dynamic shapes, --auto: serve the sizes too short for the plan's splits with a second plan made at "
                "the ranges' small end (faster there, one more compile; bench/DECISIONS.md#d107)");
    c->add_option("--inputs", o->input_dir, "Directory with one <input name>.npy per graph input; their shapes bind the inputs' unbound dims");
    c->add_option("--seed", o->seed, "Seed of the random inputs")->default_val(1);
    c->add_option("--save", o->save_dir, "Directory to write each output as <name>.npy");
    c->add_option("--threading", o->threading,
                  kThreadingHelp)
        ->default_val("auto");
    c->callback([o] { run(*o); });
}

}  // namespace loom::cli
