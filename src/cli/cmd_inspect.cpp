// `loom inspect model.onnx`: the model's nodes, ops, shapes, parameters and op histogram.
#include <iomanip>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/model_loading.h"

namespace loom::cli {

namespace {
struct InspectOptions {
    std::string model;
    std::vector<std::string> inputs;
    bool dump = false;
};

void inspect(const InspectOptions &o) {
    Graph g = load_model(o.model, o.inputs, o.dump);
    std::cout << "model " << o.model << "  (graph '" << g.name << "', opset " << g.opset << ")\n";
    for (const auto &in : g.inputs)
        std::cout << "input  " << in << ": " << dtype_name(g.value(in).dtype) << " " << shape_str(g.value(in).shape) << "\n";
    for (const auto &out : g.outputs)
        std::cout << "output " << out << ": " << dtype_name(g.value(out).dtype) << " " << shape_str(g.value(out).shape) << "\n";
    std::cout << "\n" << std::left << std::setw(32) << "node" << std::setw(20) << "op" << std::setw(8)
              << "dtype" << "output shape\n";
    std::map<std::string, int> hist;
    for (const auto &n : g.nodes) {
        hist[n.op]++;
        const ValueInfo &v = g.value(n.outputs[0]);
        std::cout << std::setw(32) << n.name << std::setw(20) << n.op << std::setw(8) << dtype_name(v.dtype)
                  << shape_str(v.shape);
        for (size_t i = 1; i < n.outputs.size(); i++) std::cout << ", " << shape_str(g.value(n.outputs[i]).shape);
        std::cout << "\n";
    }
    std::cout << "\nnodes " << g.nodes.size() << ", parameters " << g.parameter_count() << " ("
              << g.initializers.size() << " initializers)\nop histogram:";
    for (const auto &kv : hist) std::cout << " " << kv.first << "×" << kv.second;
    std::cout << "\n";
}
}  // namespace

void add_inspect_command(CLI::App &app) {
    auto o = std::make_shared<InspectOptions>();
    CLI::App *c = app.add_subcommand("inspect", "Print a model's inputs, nodes, shapes and op histogram");
    c->add_option("model", o->model, "ONNX model file")->required();
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_flag("--dump-passes", o->dump, "Print the graph after each preparation pass (as LOOM_DEBUG=1)");
    c->callback([o] { inspect(*o); });
}

}  // namespace loom::cli
