#include "autodiff/training_rewrite.h"

#include "autodiff/graph_emitter.h"
#include "support/error.h"

namespace loom::autodiff {

namespace {

// (x - mean) / sqrt(var + eps) over \p axes of \p x (kept as 1s).
// \p mean_out and \p var_out, when given, receive the statistics' values (biased variance).
std::string normalize(GraphEmitter &e, const std::string &x, const std::vector<int64_t> &axes, double eps,
                      std::string *mean_out = nullptr, std::string *var_out = nullptr) {
    Shape ks = e.shape(x);
    double n = 1;
    for (int64_t a : axes) {
        n *= (double)ks[a];
        ks[a] = 1;
    }
    std::map<std::string, AttrValue> attrs = {{"axes", axes}, {"keepdims", int64_t(1)}};
    // Over one axis a ReduceMean (a LayerNorm's row); over several (a BatchNorm's N, H, W) the
    // emitter's staged sum (graph_emitter.h reduce_sum) times 1/n.
    auto mean_of = [&](const std::string &v) {
        if (axes.size() == 1) return e.op("ReduceMean", {v}, ks, attrs);
        return e.reshape(e.mul(e.reduce_sum(v, axes, true), e.scalar(1.0 / n)), ks);
    };
    std::string mean = mean_of(x);
    std::string xc = e.sub(x, mean);
    std::string var = mean_of(e.mul(xc, xc));
    if (mean_out) *mean_out = mean;
    if (var_out) *var_out = var;
    std::string inv = e.unary("Reciprocal", e.unary("Sqrt", e.add(var, e.scalar(eps))));
    return e.mul(xc, inv);
}

std::vector<int64_t> range(int64_t from, int64_t to) {
    std::vector<int64_t> v;
    for (int64_t i = from; i < to; i++) v.push_back(i);
    return v;
}

// A per-channel vector [C] as [C, 1, …, 1] for an input of rank \p rank laid out [N, C, …].
std::string per_channel(GraphEmitter &e, const std::string &v, size_t rank) {
    Shape s(rank - 1, 1);
    s[0] = shape_numel(e.shape(v));
    return e.reshape(v, s);
}

// Emits the norm \p n; returns the value that stands for its output.
std::string emit_norm(GraphEmitter &e, const Node &n, std::vector<RunningStatistics> *stats) {
    const std::string &x = n.inputs[0];
    const Shape xs = e.shape(x);
    size_t r = xs.size();
    double eps = n.get_float("epsilon", 1e-5);
    std::string y;
    if (n.op == "LayerNormalization") {
        int64_t axis = n.get_int("axis", -1);
        if (axis < 0) axis += (int64_t)r;
        y = e.mul(normalize(e, x, range(axis, (int64_t)r), eps), n.inputs[1]);
        if (n.has_input(2)) y = e.add(y, n.inputs[2]);
        return y;
    }
    if (n.op == "GroupNormalization") {
        int64_t groups = n.need_int("num_groups");
        std::string v = e.reshape(x, {xs[0], groups, shape_numel(xs) / (xs[0] * groups)});
        std::string z = normalize(e, v, {2}, eps);
        int64_t ns = shape_numel(e.shape(n.inputs[1]));
        if (ns == groups) {  // one scale and bias per group
            z = e.mul(z, e.reshape(n.inputs[1], {groups, 1}));
            z = e.add(z, e.reshape(n.inputs[2], {groups, 1}));
            return e.reshape(z, xs);
        }
        z = e.reshape(z, xs);
        return e.add(e.mul(z, per_channel(e, n.inputs[1], r)), per_channel(e, n.inputs[2], r));
    }
    // BatchNormalization (batch statistics: over N and the spatial dims) and InstanceNormalization.
    std::vector<int64_t> axes = n.op == "BatchNormalization" ? range(0, (int64_t)r) : range(2, (int64_t)r);
    if (n.op == "BatchNormalization") axes.erase(axes.begin() + 1);
    RunningStatistics rs;
    bool running = stats && n.op == "BatchNormalization" && e.graph().is_constant(n.inputs[3]) &&
                   e.graph().is_constant(n.inputs[4]);
    std::string z = normalize(e, x, axes, eps, running ? &rs.batch_mean : nullptr, running ? &rs.batch_var : nullptr);
    if (running) {
        rs.node = n.name;
        rs.running_mean = n.inputs[3];
        rs.running_var = n.inputs[4];
        rs.initial_mean = e.graph().constant(n.inputs[3])->cast(DType::F32);
        rs.initial_var = e.graph().constant(n.inputs[4])->cast(DType::F32);
        rs.momentum = n.get_float("momentum", 0.9);
        rs.count = shape_numel(xs) / xs[1];
        stats->push_back(rs);
    }
    return e.add(e.mul(z, per_channel(e, n.inputs[1], r)), per_channel(e, n.inputs[2], r));
}

}  // namespace

Graph rewrite_norms_for_training(const Graph &g, std::vector<RunningStatistics> *stats) {
    Graph out = g;
    out.nodes.clear();
    GraphEmitter e(out, "train_");
    for (const Node &n : g.nodes) {
        bool norm = n.op == "BatchNormalization" || n.op == "LayerNormalization" ||
                    n.op == "InstanceNormalization" || n.op == "GroupNormalization";
        if (!norm) {
            out.nodes.push_back(n);
            continue;
        }
        user_check(n.outputs.size() == 1 || (n.outputs.size() > 1 && n.outputs[1].empty()) || n.op != "LayerNormalization",
                   n.describe(), ": LayerNormalization's Mean and InvStdDev outputs are not supported in training; ",
                   "export the model without them");
        std::string y = emit_norm(e, n, stats);
        // The last node emitted computes y: give it the norm's output name.
        Node &last = out.nodes.back();
        internal_check(last.outputs.size() == 1 && last.outputs[0] == y, "norm rewrite: last node is not the output");
        out.values.erase(y);
        last.outputs[0] = n.outputs[0];
    }
    return out;
}

}  // namespace loom::autodiff
