// `loom run model.onnx`: run a model on the reference interpreter (and, with a schedule, compiled).
#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "graph/error.h"
#include "reference/reference.h"

namespace loom::cli {

namespace {
struct RunOptions {
    std::string model;
    std::vector<std::string> inputs;
    std::string input_dir;
    std::string save_dir;
    uint64_t seed = 1;
    bool reference = false;
};

void run(const RunOptions &o) {
    Graph g = load_model(o.model, o.inputs);
    auto ins = make_inputs(g, o.input_dir, o.seed);
    auto t0 = std::chrono::steady_clock::now();
    auto outs = run_reference(g, ins);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "reference run of " << o.model << ": " << ms << " ms\n" << summarize(outs);
    if (!o.save_dir.empty()) {
        save_outputs(o.save_dir, outs, g);
        std::cout << "saved " << outs.size() << " output(s) to " << o.save_dir << "/<name>.npy\n";
    }
}
}  // namespace

void add_run_command(CLI::App &app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App *c = app.add_subcommand("run", "Run a model on random (or given) inputs and summarise its outputs");
    c->add_option("model", o->model, "ONNX model file")->required();
    c->add_flag("--reference", o->reference, "Run on the reference interpreter");
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_option("--inputs", o->input_dir, "Directory with one <input name>.npy per graph input");
    c->add_option("--seed", o->seed, "Seed of the random inputs")->default_val(1);
    c->add_option("--save", o->save_dir, "Directory to write each output as <name>.npy");
    c->callback([o] { run(*o); });
}

}  // namespace loom::cli
