// `loom compile model.onnx --target cuda|host -o out/`: an ahead-of-time artifact (codegen/aot.h)
// with the model's C API, plus seeded inputs and the reference interpreter's outputs for checking.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/input_binding.h"
#include "cli/train_artifact.h"
#include "autoschedule/machine_model.h"
#include "cli/model_loading.h"
#include "cli/scheduling.h"
#include "codegen/aot.h"
#include "graph/npy.h"
#include "measure/output_tolerance.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"
#include "support/tensor_file_name.h"

namespace loom::cli {

namespace {
struct CompileOptions {
    std::string model, target = "host", schedule, out, name;
    std::vector<std::string> inputs;
    bool autosched = false, eager = false, force = false, no_reference = false, print_schedule = false;
    LibraryFlags libs;
    uint64_t seed = 1;
    std::vector<std::string> dims;  ///< --dim NAME=LO..HI (dynamic shapes)
    bool dynamic = false;           ///< --dynamic
    bool train = false;      ///< a training step instead (train_artifact.h)
    bool target_given = false;  ///< --target was passed
    TrainCompileOptions training;
};

void compile(const CompileOptions &o) {
    if (o.train) {
        TrainCompileOptions t = o.training;
        t.model = o.model, t.target = o.target, t.out = o.out, t.name = o.name, t.inputs = o.inputs;
        t.force = o.force, t.print_schedule = o.print_schedule;
        t.libs = o.libs;
        t.schedule = !o.schedule.empty() ? o.schedule : o.eager ? "eager" : "auto";
        t.target_given = o.target_given;
        return compile_training(t);
    }
    user_check(o.training.machine.empty(), "loom compile --machine plans a training step (--train); for inference, "
               "write the plan with `loom autoschedule M --machine ", o.training.machine.front(),
               " -o plan.sched` and compile it with --schedule plan.sched");
    user_check(int(!o.schedule.empty()) + int(o.autosched) + int(o.eager) <= 1,
               "loom compile: give at most one of --schedule, --auto, --eager");
    Halide::Target target = aot_target(o.target);
    bool gpu = target.has_gpu_feature();
    DynamicRequest dyn;
    for (const auto &d : o.dims) parse_dim_range(d, dyn.dims);
    dyn.all = o.dynamic && dyn.dims.empty();
    user_check(input_sets(o.inputs).size() <= 1, "loom compile: give one --input per input (the size it is planned for); "
               "--dim NAME=LO..HI or --dynamic make the artifact serve every size");
    // CUDA: float GEMMs with constant weights go to cuBLAS, 2-D convs to cuDNN (extern stages,
    // lower/lowered.h), attention in BF16 to cuDNN's fused attention.
    LowerOptions lo = library_lowering(target, o.libs, "loom compile");
    Graph g = load_model(o.model, o.inputs, false, "", dyn, attention_fusion(target, lo), linear_exact_gelu(target, lo));
    choose_fp32_conv_layout(g, lo);
    std::string spec = !o.schedule.empty() ? o.schedule : o.autosched ? "auto" : o.eager ? "eager" : gpu ? "auto" : "eager";
    ScheduledModel sm = schedule_model(g, spec, target, o.model, lo);
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    LoweredPipeline &p = sm.pipeline;
    AppliedSchedule &applied = sm.applied;
    std::string text = print_schedule(sm.schedule);
    if (o.print_schedule) std::cout << text;

    AotOptions ao;
    ao.name = o.name.empty() ? std::filesystem::path(o.model).stem().string() : o.name;
    ao.force = o.force;
    ao.schedule_text = text;
    ao.max_registers = applied.max_registers;
    ao.raise_spilling_budgets = spec == "auto";  // the cost model's budgets are a rule; a hand-written one is the user's
    auto write_data = [&](const std::string &dir) {
        if (o.no_reference) {  // the rule without the output-scale term, which needs the reference's values
            std::map<std::string, OutputTolerance> tolerances;
            for (const auto &out : g.outputs) tolerances[out] = output_tolerance(g, out, lo.gemm_precision, nullptr);
            std::filesystem::create_directories(dir + "/data");
            std::ofstream(dir + "/data/tolerance.txt") << tolerance_file_text(tolerances);
            return;
        }
        auto ins = make_inputs(g, "", o.seed);
        std::map<std::string, OutputTolerance> tolerances;
        auto ref = run_reference_with_tolerances(g, ins, lo.gemm_precision, tolerances);
        std::filesystem::create_directories(dir + "/data");
        for (const auto &[n, t] : ins) write_npy(dir + "/data/" + tensor_file_stem(n) + ".npy", t);
        for (const auto &[n, t] : ref) write_npy(dir + "/data/expected_" + tensor_file_stem(n) + ".npy", t);
        // Each output's tolerance for tools/loom_run (measure/output_tolerance.h states the rule).
        std::ofstream(dir + "/data/tolerance.txt") << tolerance_file_text(tolerances);
    };
    AotArtifact a = with_schedule_errors(applied, [&] { return compile_aot(p, target, o.out, ao, write_data); });
    for (const auto &w : a.warnings) std::cerr << "warning: " << w << "\n";
    std::cout << "compiled " << o.model << " for " << target.to_string() << " (" << spec << " schedule) in "
              << a.halide_seconds << " s"
              << (a.pipelines > 1 ? " (" + std::to_string(a.pipelines) + " pipelines)" : std::string()) << " into "
              << a.dir << ":\n  " << a.static_lib << "\n  " << a.shared_lib << "\n  " << a.header << "\n  "
              << a.manifest << "\n";
    if (g.dynamic.active()) {
        std::cout << "  every size (<name>_run_host_shaped), planned at the sizes of data/:\n" << describe_dynamic(g);
        std::cout << applied.specializations_text("  ");
    }
    if (!o.no_reference)
        std::cout << "  data/: seeded inputs (seed " << o.seed << "), reference outputs and their tolerances ("
                  << precision_name(lo.gemm_precision) << ")\n";
}
}  // namespace

void add_compile_command(CLI::App &app) {
    auto o = std::make_shared<CompileOptions>();
    CLI::App *c = app.add_subcommand("compile", "Compile a model ahead of time into a library with a C API");
    c->add_option("model", o->model, "ONNX model file")->required();
    c->add_option("--target", o->target, "host (the default), cuda (host-cuda-cuda_capability_80) or a Halide target string")
        ->each([o](const std::string &) { o->target_given = true; });
    c->add_option("--schedule", o->schedule, "Schedule file (.sched)");
    c->add_flag("--auto", o->autosched, "Auto-schedule (the default on cuda)");
    c->add_flag("--eager", o->eager, "Every op its own loop nest (the default on host)");
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_option("--dim", o->dims, "Keep a symbolic dim open, with its range: H=32..2048 (one library for every "
                  "size; --input then gives the size it is planned for)");
    c->add_flag("--dynamic", o->dynamic, "Keep every symbolic input dim open (one library for every size)");
    c->add_option("-o,--out", o->out, "Output folder")->required();
    c->add_option("--name", o->name, "C name of the model (default: the model file's stem)");
    c->add_option("--seed", o->seed, "Seed of the saved inputs")->default_val(1);
    c->add_flag("--force", o->force, "Replace an existing output folder");
    c->add_flag("--no-reference", o->no_reference,
                "Write no inputs and reference outputs under data/, only tolerance.txt (each output's tolerance "
                "without the output-scale term)");
    c->add_flag("--print-schedule", o->print_schedule, "Print the schedule used");
    add_library_flags(c, o->libs);
    c->add_flag("--train", o->train, "Compile a training step: forward, backward and update (train_artifact.h; CPU or CUDA)");
    c->add_option("--loss", o->training.loss, "--train: mse | cross_entropy | output")->default_val("mse");
    c->add_option("--optimizer", o->training.optimizer, "--train: sgd | adam")->default_val("sgd");
    c->add_option("--lr", o->training.lr, "--train: initial learning rate")->default_val(0.01);
    c->add_option("--recompute", o->training.recompute,
                  "--train: min-cut (save the cheapest cut, recompute cheap ops in the backward) | save-all")
        ->default_val("min-cut");
    c->add_option("--report", o->training.report, "--train: write the step's fusion report and save-or-recompute table here");
    c->add_option("--machine", o->training.machine,
                  "--train: plan the step for a fixed machine (a preset, with its target: " + machines::names() +
                      "), then override the model: cores=2, l2_bytes=2M … (as loom autoschedule --machine)");
    c->callback([o] { compile(*o); });
}

}  // namespace loom::cli
