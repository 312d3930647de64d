#include "autodiff/training_rewrite.h"

#include <algorithm>
#include <cmath>
#include <set>

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

// A scalar constant's value, or NaN for anything else.
double scalar_value(const Graph &g, const std::string &v) {
    const Tensor *t = g.constant(v);
    return t && t->numel() == 1 ? t->get(0) : NAN;
}

bool is_scalar(const Graph &g, const std::string &v) { return !std::isnan(scalar_value(g, v)); }

// The one node reading \p v (and no graph output is \p v), or -1.
int sole_consumer(const Graph &g, const std::string &v) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return -1;
    std::vector<int> c = g.consumers(v);
    return c.size() == 1 ? c[0] : -1;
}

// The region's nodes (topological order) evaluated at x = \p xv in double precision.
double evaluate_region(const Graph &g, const std::vector<int> &region, const std::string &x, double xv) {
    std::map<std::string, double> v = {{x, xv}};
    auto at = [&](const std::string &n) { return v.count(n) ? v.at(n) : scalar_value(g, n); };
    double r = NAN;
    for (int k : region) {
        const Node &n = g.nodes[(size_t)k];
        double a = at(n.inputs[0]), b = n.inputs.size() > 1 ? at(n.inputs[1]) : NAN;
        r = n.op == "Mul" ? a * b : n.op == "Div" ? a / b : n.op == "Add" ? a + b : n.op == "Erf" ? std::erf(a) : NAN;
        v[n.outputs[0]] = r;
    }
    return r;
}

// The exact GELU region around Erf node \p erf_node: its nodes in topological order and its input,
// or no nodes.
std::pair<std::vector<int>, std::string> exact_gelu_region(const Graph &g, int erf_node) {
    const Node &erf = g.nodes[(size_t)erf_node];
    int scale = g.producer(erf.inputs[0]);
    if (scale < 0 || sole_consumer(g, erf.inputs[0]) != erf_node) return {};
    const Node &s = g.nodes[(size_t)scale];
    if ((s.op != "Div" && s.op != "Mul") || s.inputs.size() != 2) return {};
    int xi = is_scalar(g, s.inputs[1]) ? 0 : s.op == "Mul" && is_scalar(g, s.inputs[0]) ? 1 : -1;
    if (xi < 0 || g.is_constant(s.inputs[(size_t)xi]) || g.value(s.inputs[(size_t)xi]).dtype != DType::F32) return {};
    const std::string x = s.inputs[(size_t)xi];
    std::vector<int> region = {scale, erf_node};
    std::string cur = erf.outputs[0];
    // + 1, then · x and · 0.5 (either order; 0.5 · x may be its own node, read only here).
    for (int step = 0; step < 3; step++) {
        int c = sole_consumer(g, cur);
        if (c < 0) return {};
        const Node &n = g.nodes[(size_t)c];
        if ((n.op != "Add" && n.op != "Mul") || n.inputs.size() != 2 || n.outputs.size() != 1) return {};
        const std::string &other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
        if (n.op == "Add" ? (step != 0 || !is_scalar(g, other)) : step == 0) return {};
        if (n.op == "Mul" && other != x && !is_scalar(g, other)) {
            int h = g.producer(other);  // 0.5 · x computed first
            if (h < 0 || sole_consumer(g, other) != c) return {};
            const Node &hn = g.nodes[(size_t)h];
            bool half_x = hn.op == "Mul" && hn.inputs.size() == 2 &&
                          ((hn.inputs[0] == x && is_scalar(g, hn.inputs[1])) || (hn.inputs[1] == x && is_scalar(g, hn.inputs[0])));
            if (!half_x) return {};
            region.push_back(h);
        }
        region.push_back(c);
        cur = n.outputs[0];
        if (g.value(cur).shape != g.value(x).shape) return {};
        std::vector<int> sorted = region;
        std::sort(sorted.begin(), sorted.end());
        bool exact = step > 0;
        for (int i = 0; exact && i <= 96; i++) {
            double xv = -8.0 + i / 6.0, want = 0.5 * xv * (1 + std::erf(xv / std::sqrt(2.0)));
            double got = evaluate_region(g, sorted, x, xv);
            exact = std::isfinite(got) && std::fabs(got - want) <= 1e-6 * std::fmax(1.0, std::fabs(want));
        }
        if (exact) return {sorted, x};
    }
    return {};
}

}  // namespace

int fuse_exact_gelu(Graph &g) {
    int fused = 0;
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < g.nodes.size() && !again; i++) {
            if (g.nodes[i].op != "Erf") continue;
            auto [region, x] = exact_gelu_region(g, (int)i);
            if (region.empty()) continue;
            const Node &last = g.nodes[(size_t)region.back()];
            Node gelu;
            gelu.op = "Gelu";
            gelu.name = g.unique_name(last.name.substr(0, last.name.rfind('/') + 1) + "Gelu");
            gelu.inputs = {x};
            gelu.outputs = {last.outputs[0]};
            gelu.attrs["approximate"] = std::string("none");
            std::set<int> drop(region.begin(), region.end());
            std::vector<Node> kept;
            for (size_t k = 0; k < g.nodes.size(); k++) {
                if (!drop.count((int)k)) kept.push_back(g.nodes[k]);
                else if ((int)k == region.back()) kept.push_back(gelu);
                else g.values.erase(g.nodes[k].outputs[0]);
            }
            g.nodes = std::move(kept);
            fused++;
            again = true;  // node indices moved: scan again
        }
    }
    return fused;
}

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
