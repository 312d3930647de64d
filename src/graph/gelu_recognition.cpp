// recognize_gelu (passes.h): exporters decompose GELU into 5-9 elementwise nodes with scalar
// constants (PyTorch's opset-13 export of the tanh form: x·x, ·x, ·0.044715, +x, ·√(2/π), Tanh,
// +1, ·x, ·0.5). Such a region is recognised by what it computes, not by its shape: the scalar
// function of x it defines is evaluated on sample points and compared with the tanh GELU, so other
// orderings of the same arithmetic are found too. One Gelu node (approximate='tanh') then stands
// for the region, so that a CUDA Gemm can hand it to cuBLASLt's GELU epilogue, which computes that
// form (bench/experiments/gpu/cublaslt_gelu_probe.cpp). The exact (Erf) form is left as the
// exporter wrote it for inference (no library computes it, and hand schedules name its nodes'
// Funcs), except after a linear layer where a CUDA lowering may run it as that tanh epilogue
// within its precision's rounding (fuse_linear_exact_gelu); a training graph asks for it too
// (GeluForm::Exact), so that its gradient reads the Gelu's output.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "graph/gelu_recognition.h"
#include "graph/passes.h"

namespace loom {

namespace {

bool region_op(const std::string &op, GeluForm form) {
    static const std::set<std::string> ops = {"Mul", "Add", "Sub", "Div", "Pow", "Sqrt", "Neg"};
    return ops.count(op) > 0 || op == (form == GeluForm::Tanh ? "Tanh" : "Erf");
}

// The GELU of \p x in \p form.
double gelu(double x, GeluForm form) {
    return form == GeluForm::Tanh ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
                                  : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

struct Region {
    std::vector<int> nodes;  // topological order
    std::string out;
};

// Exporters write a GELU in at most 9 nodes, 8 deep: regions grow no further, so that a long
// elementwise chain (a residual stream, a scaled sum) costs the pass linear, not cubic, time.
constexpr int kMaxRegionDepth = 12;
constexpr size_t kMaxRegionNodes = 64;

using ConsumerMap = std::map<std::string, std::vector<int>>;

// Every value's consumers (node indices, ascending), built once per scan: Graph::consumers walks
// the whole graph for one value.
ConsumerMap consumer_map(const Graph &g) {
    ConsumerMap m;
    for (size_t i = 0; i < g.nodes.size(); i++)
        for (const auto &in : g.nodes[i].inputs)
            if (!in.empty() && (m[in].empty() || m[in].back() != (int)i)) m[in].push_back((int)i);
    return m;
}

class GeluFinder {
public:
    /// \p slack: how far from the GELU, relative to its argument, the region may compute (0: to
    /// float32's rounding of its constants).
    GeluFinder(Graph &g, const ConsumerMap &consumers, GeluForm form, double slack = 0)
        : g_(g), consumers_(consumers), form_(form), slack_(slack) {}

    // The largest region computing a GELU of \p x, or an empty one.
    Region find(const std::string &x) {
        // Grow from x along consumers, in topological order: every elementwise node whose
        // non-constant inputs are x or region values, up to kMaxRegionDepth from x.
        std::map<std::string, int> depth = {{x, 0}};
        std::set<int> frontier(uses(x).begin(), uses(x).end());
        std::vector<int> grown;
        while (!frontier.empty() && grown.size() < kMaxRegionNodes) {
            int i = *frontier.begin();
            frontier.erase(frontier.begin());
            const Node &n = g_.nodes[i];
            if (!region_op(n.op, form_) || n.outputs.size() != 1) continue;
            bool ok = true;
            int d = 0;
            for (const auto &in : n.inputs) {
                if (in.empty()) continue;
                auto it = depth.find(in);
                if (it != depth.end()) d = std::max(d, it->second + 1);
                else if (!scalar(in)) ok = false;
            }
            if (!ok || d > kMaxRegionDepth) continue;
            grown.push_back(i);
            depth[n.outputs[0]] = d;
            for (int c : uses(n.outputs[0])) frontier.insert(c);
        }
        Region best;
        for (int k : grown) {  // each candidate output, the last match wins
            const std::string &y = g_.nodes[k].outputs[0];
            std::vector<int> slice = backward_slice(grown, k);
            if (slice.size() < 3 || !closed(slice, y)) continue;
            if (matches(slice, x, y)) best = {slice, y};
        }
        return best;
    }

private:
    Graph &g_;
    const ConsumerMap &consumers_;
    GeluForm form_;
    double slack_;

    const std::vector<int> &uses(const std::string &v) const {
        static const std::vector<int> none;
        auto it = consumers_.find(v);
        return it == consumers_.end() ? none : it->second;
    }

    bool scalar(const std::string &v) const {
        const Tensor *t = g_.constant(v);
        return t && t->numel() == 1;
    }

    // The region nodes that \p k depends on (itself included), in topological order.
    std::vector<int> backward_slice(const std::vector<int> &grown, int k) const {
        std::set<std::string> need = {g_.nodes[k].outputs[0]};
        std::vector<int> slice;
        for (auto it = grown.rbegin(); it != grown.rend(); ++it) {
            if (*it > k) continue;
            const Node &n = g_.nodes[*it];
            if (!need.count(n.outputs[0])) continue;
            slice.insert(slice.begin(), *it);
            for (const auto &in : n.inputs) need.insert(in);
        }
        return slice;
    }

    // Every value the slice makes, except y, is read only inside it and is no graph output.
    bool closed(const std::vector<int> &slice, const std::string &y) const {
        std::set<int> in(slice.begin(), slice.end());
        for (int k : slice) {
            const std::string &v = g_.nodes[k].outputs[0];
            if (v == y) continue;
            if (g_.is_output(v)) return false;
            for (int c : uses(v))
                if (!in.count(c)) return false;
        }
        return true;
    }

    double eval(const std::vector<int> &slice, const std::string &x, const std::string &y, double xv) const {
        std::map<std::string, double> v = {{x, xv}};
        auto at = [&](const std::string &n) { return v.count(n) ? v.at(n) : g_.constant(n)->get(0); };
        for (int k : slice) {
            const Node &n = g_.nodes[k];
            double a = at(n.inputs[0]), b = n.has_input(1) ? at(n.inputs[1]) : 0, r = 0;
            if (n.op == "Mul") r = a * b;
            else if (n.op == "Add") r = a + b;
            else if (n.op == "Sub") r = a - b;
            else if (n.op == "Div") r = a / b;
            else if (n.op == "Pow") r = std::pow(a, b);
            else if (n.op == "Tanh") r = std::tanh(a);
            else if (n.op == "Erf") r = std::erf(a);
            else if (n.op == "Sqrt") r = std::sqrt(a);
            else if (n.op == "Neg") r = -a;
            v[n.outputs[0]] = r;
        }
        return v.at(y);
    }

    // The slice computes the GELU of x (form_) on [-8, 8] (97 points), to 1e-6 of the value (the
    // model's constants are float32), and slack_ · |x| besides.
    bool matches(const std::vector<int> &slice, const std::string &x, const std::string &y) const {
        for (int i = 0; i <= 96; i++) {
            double xv = -8.0 + i / 6.0;
            double want = gelu(xv, form_);
            double got = eval(slice, x, y, xv);
            if (!std::isfinite(got) || std::fabs(got - want) > 1e-6 * std::fmax(1.0, std::fabs(want)) + slack_ * std::fabs(xv))
                return false;
        }
        return true;
    }
};

}  // namespace

int recognize_gelu(Graph &g, GeluForm form) {
    int found = 0;
    for (bool changed = true; changed;) {
        changed = false;
        ConsumerMap consumers = consumer_map(g);
        std::vector<std::string> roots;
        for (const auto &[name, info] : g.values) {
            if (!dtype_is_float(info.dtype) || g.is_constant(name) || !consumers.count(name)) continue;
            bool feeds_region = false;  // cheap filter: the root feeds an op of the region
            for (int c : consumers.at(name)) feeds_region |= region_op(g.nodes[c].op, form);
            if (feeds_region) roots.push_back(name);
        }
        for (const auto &x : roots) {
            GeluFinder f(g, consumers, form);
            Region r = f.find(x);
            if (r.nodes.empty()) continue;
            Node gelu;
            gelu.op = "Gelu";
            // Named like the exporter's own nodes of that scope: "/mlp/Mul_5" → "/mlp/Gelu".
            const std::string &last = g.nodes[r.nodes.back()].name;
            gelu.name = g.unique_name(last.substr(0, last.rfind('/') + 1) + "Gelu");
            gelu.inputs = {x};
            gelu.outputs = {r.out};
            gelu.attrs["approximate"] = std::string(form == GeluForm::Tanh ? "tanh" : "none");
            std::set<int> drop(r.nodes.begin(), r.nodes.end());
            std::vector<Node> kept;
            for (size_t i = 0; i < g.nodes.size(); i++) {
                if (!drop.count((int)i)) kept.push_back(g.nodes[i]);
                else if ((int)i == r.nodes.back()) kept.push_back(gelu);
                else g.values.erase(g.nodes[i].outputs[0]);
            }
            g.nodes = std::move(kept);
            found++;
            changed = true;
            break;  // node indices moved: look again
        }
    }
    return found;
}

namespace {

// Whether \p c is a constant float32 bias of \p N values ([N] or [1, N]).
bool column_bias(const Tensor *c, int64_t N) {
    return c && c->dtype() == DType::F32 && c->numel() == N && (c->rank() == 1 || (c->rank() == 2 && c->shape()[0] == 1));
}

// The product y = MatMul(a [M, K], W [K, N] constant), all float32, that \p add adds a constant
// bias of N values ([N] or [1, N]) to, y read by that Add alone and no graph output: the MatMul's
// index, with the bias's name in \p bias; -1 when \p add is no such sum. \p add may instead be
// the whole linear layer, Gemm(a [M, K], W constant, bias) with transA 0 (torch.onnx's nn.Linear
// on a matrix): its own index then.
int linear_bias_product(const Graph &g, const Node &add, const ConsumerMap &consumers, std::string &bias) {
    if (add.op == "Gemm") {
        const Tensor *w = add.inputs.size() > 1 ? g.constant(add.inputs[1]) : nullptr;
        if (!w || !add.has_input(2) || add.get_int("transA", 0) != 0 || add.get_float("beta", 1.0) == 0 ||
            g.is_constant(add.inputs[0]) || w->rank() != 2 || w->dtype() != DType::F32 ||
            g.value(add.inputs[0]).dtype != DType::F32 || g.value(add.inputs[0]).shape.size() != 2)
            return -1;
        const int64_t N = w->shape()[add.get_int("transB", 0) != 0 ? 0 : 1];
        if (!column_bias(g.constant(add.inputs[2]), N)) return -1;
        bias = add.inputs[2];
        return (int)(&add - g.nodes.data());
    }
    if (add.op != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return -1;
    for (int side = 0; side < 2; side++) {
        const std::string &y = add.inputs[side], &b = add.inputs[1 - side];
        const int m = g.producer(y);
        if (m < 0 || g.nodes[m].op != "MatMul") continue;
        const Node &mm = g.nodes[m];
        const Tensor *w = g.constant(mm.inputs[1]), *cb = g.constant(b);
        if (!w || !cb || g.is_constant(mm.inputs[0]) || w->rank() != 2 || w->dtype() != DType::F32 ||
            cb->dtype() != DType::F32 || g.value(mm.inputs[0]).dtype != DType::F32)
            continue;
        const Shape &sa = g.value(mm.inputs[0]).shape, &sy = g.value(y).shape;
        const int64_t N = w->shape()[1];
        if (sa.size() != 2 || sy.size() != 2 || g.value(add.outputs[0]).shape != sy) continue;
        if (!column_bias(cb, N)) continue;
        auto it = consumers.find(y);
        if (it == consumers.end() || it->second.size() != 1 || g.is_output(y)) continue;
        bias = b;
        return m;
    }
    return -1;
}

}  // namespace

int fuse_linear_exact_gelu(Graph &g, double slack) {
    int fused = 0;
    for (bool changed = true; changed;) {
        changed = false;
        ConsumerMap consumers = consumer_map(g);
        for (size_t k = 0; k < g.nodes.size() && !changed; k++) {
            std::string bias;
            const int m = linear_bias_product(g, g.nodes[k], consumers, bias);
            if (m < 0) continue;
            const std::string x = g.nodes[k].outputs[0];
            if (g.is_output(x)) continue;
            Region r = GeluFinder(g, consumers, GeluForm::Exact, slack).find(x);
            if (r.nodes.empty()) continue;
            std::set<int> region(r.nodes.begin(), r.nodes.end());
            bool only_region = true;  // the sum feeds the GELU alone: it becomes the Gemm's output
            for (int c : consumers.at(x)) only_region &= region.count(c) > 0;
            if (!only_region) continue;
            // An Add of a MatMul's product becomes one Gemm; a Gemm already is the linear layer.
            const bool whole = m == (int)k;
            const Node &mm = g.nodes[m];
            const std::string scope = mm.name.substr(0, mm.name.rfind('/') + 1);
            Node gemm = mm;
            if (!whole) {
                gemm = Node();
                gemm.op = "Gemm";
                gemm.name = g.unique_name(scope + "Gemm");
                gemm.inputs = {mm.inputs[0], mm.inputs[1], bias};
                gemm.outputs = {x};
                gemm.attrs["alpha"] = 1.0;
                gemm.attrs["beta"] = 1.0;
                gemm.attrs["transA"] = (int64_t)0;
                gemm.attrs["transB"] = (int64_t)0;
                g.values.erase(mm.outputs[0]);
            }
            Node gelu;
            gelu.op = "Gelu";
            gelu.name = g.unique_name(scope + "Gelu");
            gelu.inputs = {x};
            gelu.outputs = {r.out};
            gelu.attrs["approximate"] = std::string("none");
            std::vector<Node> kept;
            for (size_t i = 0; i < g.nodes.size(); i++) {
                if ((int)i == m && !whole) continue;
                if (i == k) kept.push_back(gemm);
                else if ((int)i == r.nodes.back()) kept.push_back(gelu);
                else if (region.count((int)i)) g.values.erase(g.nodes[i].outputs[0]);
                else kept.push_back(g.nodes[i]);
            }
            g.nodes = std::move(kept);
            fused++;
            changed = true;  // node indices moved: look again
        }
    }
    return fused;
}

}  // namespace loom
