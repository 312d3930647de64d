#include "autodiff/autodiff.h"

#include <algorithm>
#include <set>

#include "autodiff/graph_emitter.h"
#include "autodiff/loss.h"
#include "autodiff/training_rewrite.h"
#include "autodiff/vjp_rules.h"
#include "graph/passes.h"
#include "support/error.h"

namespace loom {

using autodiff::GraphEmitter;

namespace {

// Renames value \p from to \p to everywhere in \p g.
void rename_value(Graph &g, const std::string &from, const std::string &to) {
    for (Node &n : g.nodes) {
        for (auto &i : n.inputs)
            if (i == from) i = to;
        for (auto &o : n.outputs)
            if (o == from) o = to;
    }
    for (auto &o : g.outputs)
        if (o == from) o = to;
    ValueInfo v = g.values.at(from);
    g.values.erase(from);
    v.name = to;
    g.values[to] = v;
}

std::string zeros(GraphEmitter &e, const Shape &s) { return e.constant(Tensor(DType::F32, s), "zeros"); }

}  // namespace

std::vector<std::string> differentiable_ops() {
    std::vector<std::string> ops;
    for (const auto &[op, rule] : autodiff::vjp_rules()) ops.push_back(op);
    for (const auto &op : autodiff::zero_gradient_ops()) ops.push_back(op);
    for (const char *norm : {"BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization"})
        ops.push_back(norm);
    std::sort(ops.begin(), ops.end());
    return ops;
}

GradientGraph differentiate(const Graph &forward, const std::vector<std::string> &parameters, const std::string &loss,
                            const NodeEvaluator &evaluate) {
    GradientGraph out;
    out.graph = autodiff::rewrite_norms_for_training(forward, &out.running_statistics);
    Graph &g = out.graph;
    // An exporter's exact GELU as one Gelu node, whose gradient reads its output instead of
    // evaluating erf again (bench/DECISIONS.md#d159-exact-gelu-gradient-reads-its-output).
    recognize_gelu(g, GeluForm::Exact);
    out.forward_outputs = g.outputs;
    LossNodes ln = append_loss(g, loss);
    out.loss = ln.loss;
    out.target = ln.target;
    out.parameters = parameters;
    size_t forward_end = g.nodes.size();

    // Values a parameter reaches (through ops that carry a gradient).
    std::set<std::string> active(parameters.begin(), parameters.end());
    for (const auto &p : parameters)
        user_check(g.is_input(p), "parameter '", p,
                   "' is not an input of the graph");
    for (size_t i = 0; i < forward_end; i++) {
        const Node &n = g.nodes[i];
        if (autodiff::zero_gradient_ops().count(n.op)) continue;
        bool any = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string &v) { return active.count(v); });
        if (!any) continue;
        for (const auto &o : n.outputs)
            if (!o.empty() && dtype_is_float(g.value(o).dtype)) active.insert(o);
    }
    user_check(active.count(out.loss), "no parameter reaches the loss: the model's output does not depend on its ",
               "weights (are they stored as Constant nodes? export them as initializers)");

    // Reverse sweep: contributions to each value's gradient, summed when a node is reached.
    GraphEmitter e(g, "grad_");
    std::map<std::string, std::vector<std::string>> contrib;
    contrib[out.loss] = {e.scalar(1.0)};
    auto total = [&](const std::string &v) -> std::string {
        auto it = contrib.find(v);
        if (it == contrib.end() || it->second.empty()) return "";
        std::string s = it->second[0];
        for (size_t k = 1; k < it->second.size(); k++) s = e.add(s, it->second[k]);
        it->second = {s};
        return s;
    };
    for (size_t i = forward_end; i-- > 0;) {
        const Node n = g.nodes[i];  // a copy: the emitter appends to g.nodes
        bool reached = false;
        for (const auto &o : n.outputs) reached = reached || (active.count(o) && contrib.count(o));
        if (!reached) continue;
        auto rule = autodiff::vjp_rules().find(n.op);
        if (rule == autodiff::vjp_rules().end())
            throw UserError(str_cat(n.describe(), ": Loom has no gradient rule for ", n.op, ", and a parameter reaches ",
                                    "the loss through it; keep it out of the trained part of the model (export it after ",
                                    "the loss or give its inputs no weights), or ask for a rule (ops with one: loom grad --help)"));
        autodiff::VjpArgs args{e, n, {}, {}, &evaluate};
        for (const auto &o : n.outputs) {
            std::string d = o.empty() ? "" : total(o);
            if (d.empty() && !o.empty()) d = zeros(e, g.value(o).shape);
            args.dy.push_back(d);
        }
        for (const auto &v : n.inputs) args.wanted.push_back(!v.empty() && active.count(v) > 0);
        std::vector<std::string> grads = rule->second(args);
        for (size_t k = 0; k < n.inputs.size() && k < grads.size(); k++) {
            if (!args.wanted[k] || grads[k].empty()) continue;
            internal_check(g.value(grads[k]).shape == g.value(n.inputs[k]).shape, "gradient rule of ", n.describe(),
                           " gave input ", k, " shape ", shape_str(g.value(grads[k]).shape), ", want ",
                           shape_str(g.value(n.inputs[k]).shape));
            contrib[n.inputs[k]].push_back(grads[k]);
        }
    }

    // Outputs: the loss, then each parameter's gradient under a readable name.
    g.outputs.clear();
    std::set<std::string> used;
    auto distinct_output = [&](std::string v, const std::string &name) {
        bool own_node = g.producer(v) >= (int)forward_end && !used.count(v) && v != out.loss;
        if (!own_node) v = e.op("Reshape", {v}, g.value(v).shape, {{"shape", std::vector<int64_t>(g.value(v).shape)}});
        if (!g.has_value(name)) {
            rename_value(g, v, name);
            v = name;
        }
        used.insert(v);
        g.outputs.push_back(v);
        return v;
    };
    std::string loss_name = g.has_value("loss") ? out.loss : "loss";
    if (loss_name == "loss") {
        rename_value(g, out.loss, "loss");
        for (auto &[k, list] : contrib)
            for (auto &c : list)
                if (c == out.loss) c = "loss";
        out.loss = "loss";
    }
    g.outputs.push_back(out.loss);
    used.insert(out.loss);
    for (const auto &p : parameters) {
        std::string d = total(p);
        if (d.empty()) d = zeros(e, g.value(p).shape);
        out.gradient_of[p] = distinct_output(d, p + "_grad");
    }
    eliminate_common_subexpressions(g);
    eliminate_dead_code(g);
    g.topo_sort();
    g.validate();
    for (const Node &n : g.nodes)
        if (n.name.rfind("grad_", 0) != 0) out.forward_nodes++;
    return out;
}

}  // namespace loom
