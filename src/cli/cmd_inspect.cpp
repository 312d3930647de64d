// `loom inspect model.onnx`: the model's nodes, ops, shapes, parameters and op histogram.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/input_binding.h"
#include "cli/model_loading.h"
#include "cli/scheduling.h"
#include "codegen/aot.h"
#include "codegen/jit.h"
#include "codegen/jit_segments.h"
#include "frontends/onnx/onnx_import.h"
#include "frontends/onnx/onnx_symbolic_shapes.h"
#include "ops/lower_graph.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"
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

// Column width for the node table: the longest name plus a gap, so no name runs into its op.
size_t name_column(const Graph &g, size_t at_least) {
    size_t w = at_least;
    for (const auto &n : g.nodes) w = std::max(w, n.name.size() + 2);
    return w;
}

void print_histogram(const Graph &g) {
    std::map<std::string, int> hist;
    for (const auto &n : g.nodes) hist[n.op]++;
    std::cout << "\nnodes " << g.nodes.size() << ", parameters " << g.parameter_count() << " ("
              << g.initializers.size() << " initializers)\nop histogram:";
    for (const auto &kv : hist) std::cout << " " << kv.first << "×" << kv.second;
    std::cout << "\n";
}

// The model as imported, with ONNX's symbolic shapes, for a model whose inputs have dims that no
// --input binds: how a user finds out what to bind.
void print_symbolic(const Graph &raw, const std::string &path, const std::vector<std::string> &unbound) {
    auto shapes = infer_symbolic_shapes(path);
    auto shape_of = [&](const std::string &v) {
        auto it = shapes.find(v);
        return it == shapes.end() ? std::string("?") : symbolic_shape_str(it->second);
    };
    auto dtype_of = [&](const std::string &v) {
        auto it = shapes.find(v);
        return it == shapes.end() || it->second.dtype.empty() ? std::string("?") : it->second.dtype;
    };
    std::cout << "model " << path << "  (graph '" << raw.name << "', opset " << raw.opset << ")\n";
    for (const auto &in : raw.inputs) std::cout << "input  " << in << ": " << dtype_of(in) << " " << shape_of(in) << "\n";
    for (const auto &out : raw.outputs) std::cout << "output " << out << ": " << dtype_of(out) << " " << shape_of(out) << "\n";
    std::string flags;
    for (const auto &u : unbound) flags += " --input " + u + (std::count(raw.inputs.begin(), raw.inputs.end(), u) ? "=DIMS" : "=N");
    std::cout << "\nunbound dims: ";
    for (size_t i = 0; i < unbound.size(); i++) std::cout << (i ? ", " : "") << unbound[i];
    std::cout << "\nshapes below are ONNX's shape inference of the file as exported (? = not known without\n"
                 "values); bind the dims to see the graph Loom compiles:" << flags << "\n";
    size_t w = name_column(raw, 32);
    std::cout << "\n" << std::left << std::setw((int)w) << "node" << std::setw(20) << "op" << std::setw(8) << "dtype"
              << "output shape\n";
    for (const auto &n : raw.nodes) {
        std::cout << std::setw((int)w) << n.name << std::setw(20) << n.op << std::setw(8)
                  << (n.outputs.empty() ? "" : dtype_of(n.outputs[0])) << (n.outputs.empty() ? "" : shape_of(n.outputs[0]));
        for (size_t i = 1; i < n.outputs.size(); i++)
            if (!n.outputs[i].empty()) std::cout << ", " << shape_of(n.outputs[i]);
        std::cout << "\n";
    }
    print_histogram(raw);
}

// The inputs' dims that neither a whole-input nor a symbolic-dim binding covers.
std::vector<std::string> unbound_dims(const Graph &raw, const std::vector<std::string> &flags) {
    InputBindings b;
    for (const auto &f : flags) parse_input_binding(f, b);
    std::vector<std::string> out;
    for (const auto &in : raw.inputs) {
        if (b.count(in)) continue;
        const ValueInfo &vi = raw.value(in);
        for (size_t d = 0; d < vi.shape.size(); d++) {
            if (vi.shape[d] >= 0) continue;
            std::string sym = d < vi.symbols.size() && !vi.symbols[d].empty() ? vi.symbols[d] : in;
            if (!b.count(sym) && std::find(out.begin(), out.end(), sym) == out.end()) out.push_back(sym);
        }
    }
    return out;
}

void inspect(const InspectOptions &o) {
    Graph raw = import_onnx(o.model);
    std::vector<std::string> unbound = unbound_dims(raw, o.inputs);
    const bool needs_bound = o.funcs || !o.schedule.empty() || o.loop_nest || o.pipelines || !o.stmt.empty() ||
                             !o.target.empty() || o.dump;
    if (!unbound.empty() && !needs_bound) {
        print_symbolic(raw, o.model, unbound);
        return;
    }
    Graph g;
    try {
        // As `loom compile --target` prepares it (FP32 on CUDA: attention unfused).
        const bool gpu_artifact = !o.target.empty() && aot_target(o.target).has_gpu_feature();
        g = prepare_model(std::move(raw), o.inputs, o.dump, "", {}, gpu_artifact ? AttentionFusion::Off : AttentionFusion::Halide);
    } catch (const UserError &e) {
        std::string m = e.what();
        if (m.rfind(o.model, 0) == 0) throw;
        throw UserError(o.model + ": " + m);
    }
    std::cout << "model " << o.model << "  (graph '" << g.name << "', opset " << g.opset << ")\n";
    for (const auto &in : g.inputs)
        std::cout << "input  " << in << ": " << dtype_name(g.value(in).dtype) << " " << shape_str(g.value(in).shape) << "\n";
    for (const auto &out : g.outputs)
        std::cout << "output " << out << ": " << dtype_name(g.value(out).dtype) << " " << shape_str(g.value(out).shape) << "\n";
    size_t w = name_column(g, 32);
    std::cout << "\n" << std::left << std::setw((int)w) << "node" << std::setw(20) << "op" << std::setw(8)
              << "dtype" << "output shape\n";
    for (const auto &n : g.nodes) {
        const ValueInfo &v = g.value(n.outputs[0]);
        std::cout << std::setw((int)w) << n.name << std::setw(20) << n.op << std::setw(8) << dtype_name(v.dtype)
                  << shape_str(v.shape);
        for (size_t i = 1; i < n.outputs.size(); i++) std::cout << ", " << shape_str(g.value(n.outputs[i]).shape);
        std::cout << "\n";
    }
    print_histogram(g);
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
