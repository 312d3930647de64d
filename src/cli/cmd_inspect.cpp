// `loom inspect model.onnx`: the model's nodes, ops, shapes, parameters and op histogram.
#include <iomanip>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/scheduling.h"
#include "codegen/aot.h"
#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "graph/error.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include <cstdio>
#include <filesystem>

namespace loom::cli {

namespace {
struct InspectOptions {
    std::string model;
    std::vector<std::string> inputs;
    bool dump = false;
    bool funcs = false;
    std::string schedule;
    bool loop_nest = false;
    bool pipelines = false;
    std::string stmt;
    std::string target;  ///< "": the JIT on this machine; else as `loom compile --target`
};

std::string join(const std::vector<std::string> &v, const char *sep = ", ") {
    std::string r;
    for (size_t i = 0; i < v.size(); i++) r += (i ? sep : "") + v[i];
    return r;
}

// Every Func with its vars and extents, op, producers and consumers: the schedulable surface.
void print_funcs(const LoweredPipeline &p) {
    std::cout << "\nFuncs (outermost var first; what a schedule file names):\n";
    for (const auto &f : p.funcs) {
        std::cout << "  " << f.name << "(";
        for (size_t i = 0; i < f.vars.size(); i++)
            std::cout << (i ? ", " : "") << f.vars[i] << (i < f.extents.size() ? ":" + std::to_string(f.extents[i]) : "");
        std::cout << ")  " << f.op << " '" << f.node << "'" << (f.is_output ? "  [output]" : "")
                  << (f.is_pointwise ? "  [pointwise]" : "") << "\n";
        for (size_t k = 0; k < f.update_rvars.size(); k++)
            std::cout << "      update(" << k << ") over " << join(f.update_rvars[k]) << "\n";
        std::vector<std::string> reads = f.producers;
        for (const auto &in : f.input_reads) reads.push_back(in + " (input)");
        if (!reads.empty()) std::cout << "      reads " << join(reads) << "\n";
        if (!f.consumers.empty()) std::cout << "      read by " << join(f.consumers) << "\n";
    }
}

// Halide's lowered statement as HTML, written to a temporary name then renamed.
void write_stmt_html(const LoweredPipeline &p, const Halide::Target &t, const std::string &path) {
    std::vector<Halide::Argument> args;
    for (const auto &in : p.inputs) args.push_back(in);
    std::string tmp = path + ".tmp";
    p.pipeline().compile_to_lowered_stmt(tmp, args, Halide::HTML, t);
    std::filesystem::rename(tmp, path);
}

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
    user_check(!(o.loop_nest || o.pipelines || !o.stmt.empty() || !o.target.empty()) || !o.schedule.empty(),
               "--loop-nest, --pipelines, --stmt and --target show what a schedule does: add --schedule "
               "eager|inline|auto|FILE");
    if (o.schedule.empty()) {
        if (o.funcs) print_funcs(lower_graph(g));
        return;
    }
    // With --target, what `loom compile --target T` would build: its target, its library stages.
    const bool artifact = !o.target.empty();
    Halide::Target target = artifact ? aot_target(o.target) : host_target();
    LowerOptions lo = artifact ? library_lowering(target, LibraryFlags{}, "loom inspect") : LowerOptions{};
    ScheduledModel sm = schedule_model(g, o.schedule, target, o.model, lo);
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    if (o.funcs) print_funcs(sm.pipeline);
    if (o.loop_nest) {
        std::string nest = loop_nest(sm.pipeline, target);
        if (!nest.empty() && nest.back() != '\n') nest += '\n';
        std::cout << "\nloop nest under schedule '" << o.schedule << "':\n" << nest << std::flush;
    }
    if (o.pipelines) {
        SegmentLimits lim =
            default_segment_limits(sm.pipeline, target, artifact ? SegmentRunner::Artifact : SegmentRunner::Jit);
        CutPlan plan = plan_cuts(sm.pipeline, lim.max_segments, lim.min_funcs);
        std::cout << "\nunder schedule '" << o.schedule << "' "
                  << (artifact ? "`loom compile --target " + o.target + "`" : std::string("a JIT compile on this machine"))
                  << " makes "
                  << plan.cuts.size() + 1 << " pipeline(s) (at most " << lim.max_segments << ", "
                  << lim.min_funcs << "+ computed Funcs each; LOOM_PIPELINES sets the limit):\n"
                  << (plan.cuts.empty() ? "pipeline 1 of 1: the whole model\n" : describe_cuts(plan));
    }
    if (!o.stmt.empty()) {
        with_schedule_errors(sm.applied, [&] { write_stmt_html(sm.pipeline, target, o.stmt); });
        std::cout << "wrote Halide's lowered statement to " << o.stmt << "\n";
    }
}
}  // namespace

void add_inspect_command(CLI::App &app) {
    auto o = std::make_shared<InspectOptions>();
    CLI::App *c = app.add_subcommand("inspect", "Print a model's inputs, nodes, shapes and op histogram");
    c->add_option("model", o->model, "ONNX model file")->required()->check(CLI::ExistingFile);
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=1x3x224x224 or batch=8");
    c->add_flag("--funcs", o->funcs, "List every Func with its vars, extents, op, producers and consumers");
    c->add_option("--schedule", o->schedule, "eager | inline | auto | FILE: the schedule for --loop-nest, --pipelines and --stmt");
    c->add_flag("--loop-nest", o->loop_nest, "Print the loop nest the schedule makes");
    c->add_flag("--pipelines", o->pipelines,
                "Print the Halide pipelines a JIT compile (or, with --target, `loom compile`) cuts the "
                "scheduled model into (codegen/jit_segments.h)");
    c->add_option("--target", o->target,
                  "With --schedule: show what `loom compile --target` builds for host, cuda or a Halide target "
                  "string (library stages included) instead of the JIT on this machine");
    c->add_option("--stmt", o->stmt, "Write Halide's lowered statement (HTML) to this file");
    c->add_flag("--dump-passes", o->dump, "Print the graph after each preparation pass (as LOOM_DEBUG=1)");
    c->callback([o] { inspect(*o); });
}

}  // namespace loom::cli
