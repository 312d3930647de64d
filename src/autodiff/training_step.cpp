#include "autodiff/training_step.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "autodiff/graph_emitter.h"
#include "graph/passes.h"
#include "support/error.h"

namespace loom {

const std::vector<std::string> &optimizer_names() {
    static const std::vector<std::string> names = {"sgd", "adam"};
    return names;
}

TrainingStepGraph make_training_step(const GradientGraph &gg, const OptimizerSpec &opt) {
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
    std::vector<std::pair<std::string, std::string>> next;  // (input, its next value)
    if (opt.name == "sgd") {
        std::string lr = scalar_input("lr");
        for (const auto &p : gg.parameters)
            next.push_back({p, e.sub(p, e.mul(gg.gradient_of.at(p), lr))});
    } else {
        std::string step = scalar_input("adam_step"), rsqrt_bias = scalar_input("adam_rsqrt_bias");
        for (const auto &p : gg.parameters) {
            const std::string &grad = gg.gradient_of.at(p);
            std::string m = state_input(p, "adam_m"), v = state_input(p, "adam_v");
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
    for (const auto &p : s.parameters) g.outputs.push_back(s.next_of[p]);
    for (const auto &st : s.state) g.outputs.push_back(s.next_of[st]);
    for (const auto &b : s.buffers) g.outputs.push_back(s.next_of[b]);
    // After autodiff, so only the forward's products read a parameter through transB (the
    // gradient Gemms read it as stored).
    transpose_gemm_value_weights(g);
    eliminate_dead_code(g);
    g.topo_sort();
    g.validate();
    return s;
}

}  // namespace loom
