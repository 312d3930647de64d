// `loom autoschedule model.onnx -o model.cpu.sched`: Loom's cost model writes a schedule file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "autoschedule/autoschedule.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/output_files.h"
#include "cli/scheduling.h"
#include "codegen/jit.h"
#include "graph/error.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_printer.h"

namespace loom::cli {

namespace {

struct AutoscheduleOptions {
    std::string model;
    std::vector<std::string> inputs;
    std::string target = "host";
    std::string output;
    std::vector<std::string> machine;
    std::string dot;
    bool force = false;
    bool report = false;
};

void autoschedule(const AutoscheduleOptions &o) {
    Halide::Target target = o.target == "host" ? host_target()
                            : o.target == "cuda" ? Halide::Target("host-cuda-cuda_capability_80")
                                                 : Halide::Target(o.target);
    if (target.has_gpu_feature()) {
        // The GPU cost model has no fusion report or machine overrides yet: it writes the file only.
        user_check(!o.report && o.dot.empty() && o.machine.empty(), "loom autoschedule --target ", o.target,
                   ": --report, --dot and --machine describe the CPU cost model; drop them for a GPU target");
        Graph g = load_model(o.model, o.inputs);
        LoweredPipeline p = lower_graph(g);
        Schedule s = autoscheduler_for(target)(p, target);
        s.model = std::filesystem::path(o.model).filename().string();
        s.sha256 = file_sha256(o.model);
        s.target = target.to_string();
        std::string text = print_schedule(s);
        if (o.output.empty()) std::cout << text;
        else write_file_atomically(o.output, text, o.force), std::cout << "wrote " << o.output << "\n";
        return;
    }
    MachineModel m = detect_machine(target);
    for (const auto &kv : o.machine) override_machine(m, kv);
    Graph g = load_model(o.model, o.inputs);
    LoweredPipeline p = lower_graph(g);
    AutoScheduleResult r = auto_schedule_with_plan(p, target, m);
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
    if (o.report) {
        std::cout << format_report(p, r, m);
        try {
            apply_schedule(r.schedule, p, target);
            std::cout << "\nloop nest:\n" << loop_nest(p, target);
        } catch (const std::exception &e) {
            std::cout << "\n(loop nest unavailable: " << e.what() << ")\n";
        }
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
    c->add_option("--target", o->target, "host, cuda, or a Halide target string (default: host)");
    c->add_option("-o,--output", o->output, "Schedule file to write (default: print it)");
    c->add_flag("--force", o->force, "Overwrite an existing output file");
    c->add_flag("--report", o->report, "Print each kernel (loop nest) with the graph nodes it fuses");
    c->add_option("--dot", o->dot, "Write the Func graph after fusion here (and <stem>.before.dot; SVG with Graphviz)");
    c->add_option("--machine", o->machine,
                  "Override the machine model: cores=2, l2_bytes=2M, copy_gbps=20, gflops=150, vector_bytes=64 …");
    c->callback([o] { autoschedule(*o); });
}

}  // namespace loom::cli
