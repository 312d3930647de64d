// `loom grad model.onnx --loss mse|cross_entropy|output`: the gradient of the loss with respect to
// every parameter, from the backward graph Loom derives (autodiff/autodiff.h), compiled under a
// schedule like any graph; `--check` compares it with the reference interpreter running the same
// backward graph in double, with central finite differences of the loss on the interpreter, and
// with PyTorch's gradients where the inputs folder holds them (grad_<parameter>.npy).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/scheduling.h"
#include "cli/training_model.h"
#include "codegen/jit.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "reference/reference.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom::cli {

namespace {

struct GradOptions {
    std::string model, loss = "mse", schedule = "auto", input_dir, save_dir, print_graph;
    std::vector<std::string> inputs;
    uint64_t seed = 1;
    bool check = false;
    double rtol = 1e-4;
    int fd_samples = 8;
};

// ‖a − b‖ / ‖b‖ over all elements (a NaN anywhere gives infinity).
double rel_error(const Tensor &a, const Tensor &b) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < b.numel(); i++) {
        double x = a.get(i), y = b.get(i);
        if (!std::isfinite(x) || !std::isfinite(y)) return INFINITY;
        num += (x - y) * (x - y);
        den += y * y;
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

// Central differences of the loss at up to \p samples elements of parameter \p p (spread evenly),
// compared with \p grad there: max |fd - grad| over the samples, relative to max |grad| of the
// whole tensor (a gradient's small entries are compared at the scale of its large ones).
double finite_difference_error(Graph loss_graph, std::map<std::string, Tensor> inputs, const std::string &p,
                               const std::string &loss, const Tensor &grad, int samples) {
    Tensor &w = inputs[p];
    w = w.cast(DType::F64);  // steps of 1e-6 need double: the interpreter computes in double
    loss_graph.value(p).dtype = DType::F64;
    double scale = 0;
    for (int64_t i = 0; i < grad.numel(); i++) scale = std::max(scale, std::abs(grad.get(i)));
    int64_t n = w.numel(), count = std::min<int64_t>(n, samples);
    double worst = 0;
    for (int64_t s = 0; s < count; s++) {
        int64_t i = count == n ? s : (s * 7919 + 13) % n;
        double v = w.get(i), h = 1e-6 * std::max(1.0, std::abs(v));
        w.set(i, v + h);
        double up = run_reference(loss_graph, inputs).at(loss).get(0);
        w.set(i, v - h);
        double down = run_reference(loss_graph, inputs).at(loss).get(0);
        w.set(i, v);
        double fd = (up - down) / (2 * h);
        worst = std::max(worst, std::abs(fd - grad.get(i)) / std::max(scale, 1e-12));
    }
    return worst;
}

std::string sci(double v) {
    std::ostringstream s;
    s << std::scientific << std::setprecision(2) << v;
    return s.str();
}

void grad(const GradOptions &o) {
    TrainingModel m = load_training_model(o.model, o.inputs, o.loss, o.input_dir);
    const Graph &g = m.grad.graph;
    if (!o.print_graph.empty()) {
        std::ofstream f(o.print_graph);
        user_check((bool)f, "--print-graph: cannot write ", o.print_graph);
        print_graph(g, f);
    }
    auto ins = gradient_inputs(m, o.input_dir, o.seed);
    Halide::Target target = host_target();
    ScheduledModel sm = schedule_model(g, o.schedule, target, o.model);
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    JitModel jit = with_schedule_errors(sm.applied, [&] { return JitModel(sm.pipeline, target); });
    auto outs = with_schedule_errors(sm.applied, [&] { return jit.run(ins); });
    int fwd = m.grad.forward_nodes, bwd = (int)g.nodes.size() - fwd;
    std::cout << "gradient graph of " << o.model << " (loss " << o.loss << "): " << fwd << " forward nodes, " << bwd
              << " backward nodes, " << m.params.names.size() << " parameters; schedule '" << o.schedule
              << "', compile " << std::fixed << std::setprecision(2) << jit.compile_seconds() << " s, run "
              << std::setprecision(3) << jit.last_run_ms() << " ms\n"
              << std::defaultfloat << "loss " << std::setprecision(8) << outs.at(m.grad.loss).get(0) << "\n";

    std::map<std::string, Tensor> ref;
    Graph loss_graph;
    if (o.check) {
        ref = run_reference(g, ins);
        loss_graph = g;
        loss_graph.outputs = {m.grad.loss};
        eliminate_dead_code(loss_graph);
    }
    bool ok = true;
    std::filesystem::path torch_loss = std::filesystem::path(o.input_dir) / "loss.npy";
    if (o.check && !o.input_dir.empty() && std::filesystem::exists(torch_loss)) {
        double want = read_npy(torch_loss.string()).get(0), got = outs.at(m.grad.loss).get(0);
        double rel = std::abs(got - want) / std::max(1e-12, std::abs(want));
        std::cout << "loss vs torch: rel error " << sci(rel) << (rel < o.rtol ? "  ok\n" : "  FAILED\n");
        ok = ok && rel < o.rtol;
    }
    std::cout << std::left << std::setw(28) << "parameter" << std::setw(14) << "shape" << std::setw(11) << "max |grad|";
    if (o.check) std::cout << std::setw(13) << "vs reference" << std::setw(13) << "vs fin.diff" << std::setw(11) << "vs torch";
    std::cout << "\n";
    if (o.check) {
        double rl = std::abs(outs.at(m.grad.loss).get(0) - ref.at(m.grad.loss).get(0)) /
                    std::max(1e-12, std::abs(ref.at(m.grad.loss).get(0)));
        if (!(rl < o.rtol)) ok = false;
    }
    for (const auto &p : m.params.names) {
        const std::string &gv = m.grad.gradient_of.at(p);
        const Tensor &t = outs.at(gv);
        double mx = 0;
        for (int64_t i = 0; i < t.numel(); i++) mx = std::max(mx, std::abs(t.get(i)));
        std::cout << std::setw(28) << p << std::setw(14) << shape_str(t.shape()) << std::setw(11) << sci(mx);
        if (o.check) {
            double vs_ref = rel_error(t, ref.at(gv));
            double vs_fd = finite_difference_error(loss_graph, ins, p, m.grad.loss, ref.at(gv), o.fd_samples);
            std::string torch = "-";
            std::filesystem::path tf = std::filesystem::path(o.input_dir) / ("grad_" + p + ".npy");
            bool row_ok = vs_ref < o.rtol && vs_fd < o.rtol;
            if (!o.input_dir.empty() && std::filesystem::exists(tf)) {
                Tensor tt = read_npy(tf.string());
                user_check(tt.shape() == t.shape(), tf.string(), " is ", shape_str(tt.shape()), " but the parameter is ",
                           shape_str(t.shape()), "; export the gradients again");
                double vs_torch = rel_error(t, tt);
                torch = sci(vs_torch);
                row_ok = row_ok && vs_torch < o.rtol;
            }
            std::cout << std::setw(13) << sci(vs_ref) << std::setw(13) << sci(vs_fd) << std::setw(11) << torch
                      << (row_ok ? "ok" : "FAILED");
            ok = ok && row_ok;
        }
        std::cout << "\n";
    }
    if (!o.save_dir.empty()) {
        std::filesystem::create_directories(o.save_dir);
        write_npy((std::filesystem::path(o.save_dir) / "loss.npy").string(), outs.at(m.grad.loss));
        for (const auto &p : m.params.names)
            write_npy((std::filesystem::path(o.save_dir) / ("grad_" + p + ".npy")).string(), outs.at(m.grad.gradient_of.at(p)));
        std::cout << "saved loss.npy and " << m.params.names.size() << " grad_<parameter>.npy files to " << o.save_dir << "\n";
    }
    if (!ok)
        throw UserError(str_cat("--check: gradients differ beyond rel. error ", o.rtol, " under schedule '", o.schedule,
                                "'; compare with --schedule eager to tell a rule bug from a schedule bug"));
}

}  // namespace

void add_grad_command(CLI::App &app) {
    auto o = std::make_shared<GradOptions>();
    CLI::App *c = app.add_subcommand("grad", "Gradients of a loss with respect to every parameter (backward graph, JIT)");
    c->add_option("model", o->model, "ONNX model file")->required()->check(CLI::ExistingFile);
    c->add_option("--loss", o->loss, "mse | cross_entropy | output (the model's one-element output)")->default_val("mse");
    c->add_option("--schedule", o->schedule, "eager | inline | auto | a .sched file for the gradient graph")->default_val("auto");
    c->add_flag("--check", o->check, "Compare with the reference interpreter, central finite differences and, "
                                     "where --inputs holds grad_<parameter>.npy, PyTorch's gradients");
    c->add_option("--rtol", o->rtol, "Tolerance of --check")->default_val(1e-4);
    c->add_option("--fd-samples", o->fd_samples, "Elements per parameter checked by finite differences")->default_val(8);
    c->add_option("--input", o->inputs, "Bind an input shape or symbolic dim: x=8x64 or batch=8");
    c->add_option("--inputs", o->input_dir, "Directory with <input>.npy, target.npy (and PyTorch's grad_<parameter>.npy)");
    c->add_option("--seed", o->seed, "Seed of random inputs and target")->default_val(1);
    c->add_option("--save", o->save_dir, "Directory to write loss.npy and grad_<parameter>.npy");
    c->add_option("--print-graph", o->print_graph, "Write the gradient graph (forward, loss, backward) to this file");
    std::string ops;
    for (const auto &op : differentiable_ops()) ops += (ops.empty() ? "" : " ") + op;
    c->footer("Ops with a gradient rule (or through which no gradient flows): " + ops);
    c->callback([o] { grad(*o); });
}

}  // namespace loom::cli
