#include "autodiff/loss.h"

#include <algorithm>

#include "autodiff/graph_emitter.h"
#include "support/error.h"

namespace loom {

const std::vector<std::string> &loss_names() {
    static const std::vector<std::string> names = {"mse", "cross_entropy", "output"};
    return names;
}

LossNodes append_loss(Graph &g, const std::string &loss) {
    const auto &names = loss_names();
    if (std::find(names.begin(), names.end(), loss) == names.end())
        throw UserError(str_cat("unknown loss '", loss, "'", did_you_mean(loss, names),
                                "; --loss takes mse, cross_entropy or output (the model's one-element output)"));
    user_check(g.outputs.size() == 1, "--loss ", loss, " needs a model with one output; this one has ",
               g.outputs.size(), " (", g.outputs.size() ? g.outputs[0] : "", ", …): export the output to train on alone");
    const std::string y = g.outputs[0];
    const ValueInfo yi = g.value(y);
    user_check(dtype_is_float(yi.dtype), "--loss ", loss, ": the output '", y, "' is ", dtype_name(yi.dtype),
               "; a loss needs a float output");
    autodiff::GraphEmitter e(g, "loss_");
    LossNodes out;
    // The mean of every element, over one flat axis: one long reduction (a GPU schedule splits it
    // over blocks) instead of a nest of several, which GPUs run on a single thread.
    auto mean_all = [&](const std::string &v) {
        const Shape &s = e.shape(v);
        if (s.empty()) return v;
        std::string flat = s.size() == 1 ? v : e.reshape(v, {shape_numel(s)});
        return e.op("ReduceMean", {flat}, {}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}});
    };
    if (loss == "output") {
        user_check(shape_numel(yi.shape) == 1, "--loss output takes the model's output as the loss, but '", y,
                   "' is ", shape_str(yi.shape), ", not one element: use --loss mse or --loss cross_entropy with targets");
        out.loss = e.reshape(y, {});
        if (out.loss == y) out.loss = e.op("Reshape", {y}, {}, {{"shape", std::vector<int64_t>{}}});
        return out;
    }
    out.target = g.unique_name("target");
    if (loss == "mse") {
        g.values[out.target] = ValueInfo{out.target, DType::F32, yi.shape, {}, true};
        g.inputs.push_back(out.target);
        std::string d = e.sub(y, out.target);
        out.loss = mean_all(e.mul(d, d));
        return out;
    }
    user_check(yi.shape.size() == 2, "--loss cross_entropy needs logits [N, C]; the output '", y, "' is ",
               shape_str(yi.shape), ": reshape it to [N, C] in the model, or use --loss mse");
    int64_t n = yi.shape[0], c = yi.shape[1];
    g.values[out.target] = ValueInfo{out.target, DType::I64, {n}, {}, true};
    g.inputs.push_back(out.target);
    Tensor classes(DType::I64, {c});
    for (int64_t i = 0; i < c; i++) classes.set_int(i, i);
    std::string onehot = e.binary("Equal", e.reshape(out.target, {n, 1}), e.constant(classes, "classes"));
    onehot = e.op("Cast", {onehot}, {n, c}, {{"to", std::string("f32")}});
    std::string logp = e.op("LogSoftmax", {y}, {n, c}, {{"axis", int64_t(1)}});
    std::string picked = e.op("ReduceSum", {e.mul(onehot, logp)}, {n}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
    out.loss = e.unary("Neg", e.op("ReduceMean", {picked}, {}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t(0)}}));
    return out;
}

}  // namespace loom
