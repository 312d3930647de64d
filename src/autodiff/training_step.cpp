#include "autodiff/training_step.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>

#include "autodiff/graph_emitter.h"
#include "graph/passes.h"
#include "graph/tensor.h"
#include "support/error.h"

namespace loom {

const std::vector<std::string> &optimizer_names() {
    static const std::vector<std::string> names = {"sgd", "adam"};
    return names;
}

int gemm_weights_read_as_a(Graph &g, const std::vector<std::string> &parameters) {
    autodiff::GraphEmitter e(g, "weight_as_a_");
    static const std::set<std::string> unary_ops = {"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Erf", "Exp",
                                                    "Neg", "Abs", "Softplus", "HardSigmoid", "HardSwish", "Gelu",
                                                    "Identity", "Sqrt", "Reciprocal", "Log"};
    static const std::set<std::string> binary_ops = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
    // value -> its transpose computed in the layout of a rewritten product (no Transpose of it).
    std::map<std::string, std::string> transposed;
    // The transpose of a product's consumer chain, when every leaf is a rewritten product or a
    // scalar: a layer's activation read by the next layer's rewritten Gemm is then computed from
    // the [N, M] product as it lies, not gathered across its rows.
    std::function<std::string(const std::string &, int)> pushed = [&](const std::string &v, int depth) -> std::string {
        if (auto it = transposed.find(v); it != transposed.end()) return it->second;
        int p = g.producer(v);
        if (p < 0 || depth > 8) return "";
        const Node n = g.nodes[(size_t)p];  // a copy: the emitter appends to g.nodes
        if (n.outputs.size() != 1) return "";
        const Shape shape = g.value(v).shape;
        std::string r;
        if (unary_ops.count(n.op) && n.inputs.size() == 1) {
            std::string a = pushed(n.inputs[0], depth + 1);
            if (a.empty()) return "";
            r = e.unary(n.op, a, n.attrs);
        } else if (binary_ops.count(n.op) && n.inputs.size() == 2) {
            std::string in[2];
            for (int i = 0; i < 2; i++) {
                const ValueInfo &vi = g.value(n.inputs[(size_t)i]);
                if (vi.dtype != DType::F32) return "";
                if (shape_numel(vi.shape) == 1) in[i] = n.inputs[(size_t)i];
                else if (vi.shape == shape) in[i] = pushed(n.inputs[(size_t)i], depth + 1);
                if (in[i].empty()) return "";
            }
            r = e.binary(n.op, in[0], in[1]);
        } else {
            return "";
        }
        transposed[v] = r;
        return r;
    };
    int rewritten = 0;
    const size_t original = g.nodes.size();
    for (size_t k = 0; k < original; k++) {
        const Node n = g.nodes[k];
        if (n.op != "Gemm" || n.get_int("transB", 0) == 0 || !n.has_input(1) ||
            std::find(parameters.begin(), parameters.end(), n.inputs[1]) == parameters.end() || n.outputs.size() != 1)
            continue;
        const ValueInfo w = g.value(n.inputs[1]), x = g.value(n.inputs[0]);
        if (w.shape.size() != 2 || x.shape.size() != 2 || w.dtype != DType::F32 || x.dtype != DType::F32) continue;
        bool trans_a = n.get_int("transA", 0) != 0;
        int64_t N = w.shape[0], K = w.shape[1], M = trans_a ? x.shape[1] : x.shape[0];
        if (N <= 0 || K <= 0 || M <= 0 || (trans_a ? x.shape[0] : x.shape[1]) != K) continue;
        // Transposing X and the product must move at most half of what transposing W moves.
        if (2 * M * (K + N) > N * K) continue;
        bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
        if (has_c && n.get_float("beta", 1.0) != 1.0) continue;
        const std::string y = n.outputs[0];
        std::string xt = n.inputs[0];
        if (!trans_a) {
            xt = pushed(n.inputs[0], 0);
            if (xt.empty()) xt = e.transpose(n.inputs[0], {1, 0});
        }
        std::string yt = g.unique_name(y + "_t");
        g.values[yt] = ValueInfo{yt, DType::F32, {N, M}, {}, true, {}};
        Node &gemm = g.nodes[k];
        gemm.inputs = {n.inputs[1], xt};
        gemm.outputs = {yt};
        gemm.attrs.erase("beta");
        gemm.attrs["transA"] = int64_t(0);
        gemm.attrs["transB"] = int64_t(0);
        std::string c = has_c ? n.inputs[2] : std::string();
        Node last;
        last.outputs = {y};
        if (has_c) {
            last.name = n.name + "_bias";
            last.op = "Add";
            last.inputs = {e.transpose(yt, {1, 0}), c};
        } else {
            last.name = n.name + "_product_transpose";
            last.op = "Transpose";
            last.inputs = {yt};
            last.attrs["perm"] = std::vector<int64_t>{1, 0};
        }
        g.nodes.push_back(std::move(last));
        // Y's transpose as the next layer's rewritten Gemm would read it: the product with the
        // bias added along its rows.
        const Shape cs = has_c ? g.value(c).shape : Shape{};
        if (!has_c) transposed[y] = yt;
        else if (shape_numel(cs) == 1) transposed[y] = e.add(yt, c);
        else if (cs == Shape{N} || cs == Shape{1, N}) transposed[y] = e.add(yt, e.reshape(c, {N, 1}));
        rewritten++;
    }
    if (rewritten) g.topo_sort();  // the emitter appended the new nodes after their readers
    return rewritten;
}

size_t TrainingStepGraph::output_index(const std::string &owned) const {
    auto it = std::find(graph.outputs.begin(), graph.outputs.end(), next_of.at(owned));
    internal_check(it != graph.outputs.end(), "training step: the next value of ", owned, " is no output");
    return (size_t)(it - graph.outputs.begin());
}

TrainingStepGraph make_training_step(const GradientGraph &gg, const OptimizerSpec &opt, StepDevice device) {
    const auto &names = optimizer_names();
    if (std::find(names.begin(), names.end(), opt.name) == names.end())
        throw UserError(str_cat("unknown optimizer '", opt.name, "'", did_you_mean(opt.name, names),
                                "; --optimizer takes sgd or adam"));
    user_check(opt.lr > 0 && std::isfinite(opt.lr), "--lr ", opt.lr, " is not a positive learning rate; try --lr 0.01");
    TrainingStepGraph s;
    s.graph = gg.graph;
    s.loss = gg.loss;
    s.target = gg.target;
    s.parameters = gg.parameters;
    s.optimizer = opt;
    Graph &g = s.graph;
    for (const auto &i : g.inputs)
        if (i != gg.target && std::find(gg.parameters.begin(), gg.parameters.end(), i) == gg.parameters.end())
            s.data_inputs.push_back(i);
    autodiff::GraphEmitter e(g, "update_");
    auto scalar_input = [&](const std::string &name) {
        std::string n = g.unique_name(name);
        g.values[n] = ValueInfo{n, DType::F32, {1}, {}, true};
        s.scalars.push_back(n);
        return n;
    };
    auto state_input = [&](const std::string &p, const std::string &kind) {
        std::string n = g.unique_name(p + "." + kind);
        g.values[n] = ValueInfo{n, DType::F32, g.value(p).shape, {}, true};
        s.state.push_back(n);
        return n;
    };
    // The parameters last read first by the forward first (the order the backward reaches them):
    // the updates are made, and their next values listed among the outputs, in this order (see
    // the outputs below).
    std::map<std::string, size_t> first_read;
    for (size_t k = 0; k < gg.graph.nodes.size(); k++)
        for (const auto &in : gg.graph.nodes[k].inputs) first_read.emplace(in, k);
    std::vector<std::string> order = gg.parameters;
    std::stable_sort(order.begin(), order.end(), [&](const std::string &a, const std::string &b) {
        auto fa = first_read.find(a), fb = first_read.find(b);
        size_t ka = fa == first_read.end() ? 0 : fa->second + 1, kb = fb == first_read.end() ? 0 : fb->second + 1;
        return ka > kb;
    });
    std::vector<std::pair<std::string, std::string>> next;  // (input, its next value)
    std::map<std::string, std::vector<std::string>> state_of;  // parameter -> its optimizer state
    if (opt.name == "sgd") {
        std::string lr = scalar_input("lr");
        for (const auto &p : order)
            next.push_back({p, e.sub(p, e.mul(gg.gradient_of.at(p), lr))});
    } else {
        std::string step = scalar_input("adam_step"), rsqrt_bias = scalar_input("adam_rsqrt_bias");
        for (const auto &p : order) {
            const std::string &grad = gg.gradient_of.at(p);
            std::string m = state_input(p, "adam_m"), v = state_input(p, "adam_v");
            state_of[p] = {m, v};
            std::string m1 = e.add(e.mul(m, e.scalar(opt.beta1)), e.mul(grad, e.scalar(1 - opt.beta1)));
            std::string v1 = e.add(e.mul(v, e.scalar(opt.beta2)), e.mul(e.mul(grad, grad), e.scalar(1 - opt.beta2)));
            // torch.optim.Adam: p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
            std::string denom = e.add(e.mul(e.unary("Sqrt", v1), rsqrt_bias), e.scalar(opt.eps));
            next.push_back({p, e.sub(p, e.div(e.mul(m1, step), denom))});
            next.push_back({m, m1});
            next.push_back({v, v1});
        }
    }
    // BatchNorm's running statistics: running * momentum + batch * (1 - momentum), the variance
    // unbiased as PyTorch's.
    for (const RunningStatistics &rs : gg.running_statistics) {
        internal_check(g.producer(rs.batch_mean) >= 0 && g.producer(rs.batch_var) >= 0, "training step: the batch ",
                       "statistics of ", rs.node, " are gone from the gradient graph");
        double unbias = rs.count > 1 ? (double)rs.count / (double)(rs.count - 1) : 1.0;
        for (const auto &[name, initial, batch, factor] :
             {std::tuple{rs.running_mean, rs.initial_mean, rs.batch_mean, 1.0},
              std::tuple{rs.running_var, rs.initial_var, rs.batch_var, unbias}}) {
            if (s.buffer_initial.count(name)) continue;  // shared by two norms: the first one updates it
            g.initializers.erase(name);
            g.values[name] = ValueInfo{name, DType::F32, initial.shape(), {}, true};
            s.buffers.push_back(name);
            s.buffer_initial[name] = initial;
            std::string b = e.reshape(batch, initial.shape());
            next.push_back({name, e.add(e.mul(name, e.scalar(rs.momentum)), e.mul(b, e.scalar((1 - rs.momentum) * factor)))});
        }
    }
    // Inputs: data, target, parameters, state, buffers, scalars; outputs: loss, then each next
    // value in parameter-state-buffer order.
    std::vector<std::string> inputs = s.data_inputs;
    if (!s.target.empty()) inputs.push_back(s.target);
    inputs.insert(inputs.end(), s.parameters.begin(), s.parameters.end());
    inputs.insert(inputs.end(), s.state.begin(), s.state.end());
    inputs.insert(inputs.end(), s.buffers.begin(), s.buffers.end());
    inputs.insert(inputs.end(), s.scalars.begin(), s.scalars.end());
    g.inputs = inputs;
    g.outputs = {s.loss};
    for (const auto &[in, value] : next) s.next_of[in] = value;
    // Next values in the order the backward reaches their parameters (each parameter's optimizer
    // state after it, the buffers last): Halide realizes a pipeline's Funcs depth first from its
    // outputs in order, so each layer's update then runs as soon as its gradient can, and the
    // activations its weight gradient reads are freed early, as PyTorch's backward frees them
    // (bench/DECISIONS.md#d219-step-memory-one-pipeline-planned-arena); the CPU artifact also
    // orders each update after the reads of its parameter (codegen/in_place_outputs.h
    // order_reads_before_outputs) to write it over the parameter (#d218-parameters-updated-in-place).
    for (const auto &p : order) {
        g.outputs.push_back(s.next_of[p]);
        for (const auto &st : state_of[p]) g.outputs.push_back(s.next_of[st]);
    }
    for (const auto &b : s.buffers) g.outputs.push_back(s.next_of[b]);
    internal_check(g.outputs.size() == 1 + s.parameters.size() + s.state.size() + s.buffers.size(),
                   "training step: every parameter, state and buffer has one next value among the outputs");
    // After autodiff, so only the forward's products read a parameter through transB (the
    // gradient Gemms read it as stored); on the CPU a product over few rows reads it as A instead.
    if (device == StepDevice::Cpu) gemm_weights_read_as_a(g, s.parameters);
    transpose_gemm_value_weights(g);
    eliminate_dead_code(g);
    g.topo_sort();
    g.validate();
    return s;
}

}  // namespace loom
