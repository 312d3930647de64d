#include "cli/training_model.h"

#include <algorithm>
#include <filesystem>

#include "cli/model_loading.h"
#include "frontends/onnx/onnx_import.h"
#include "graph/npy.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "support/error.h"

namespace loom::cli {

TrainingModel load_training_model(const std::string &path, const std::vector<std::string> &input_flags,
                                  const std::string &loss, const std::string &inputs_dir, const std::string &recompute) {
    const auto &modes = recompute_modes();
    if (std::find(modes.begin(), modes.end(), recompute) == modes.end())
        throw UserError(str_cat("unknown --recompute '", recompute, "'", did_you_mean(recompute, modes),
                                "; it takes min-cut or save-all"));
    TrainingModel m;
    try {
        Graph g = import_onnx(path);
        m.data_inputs = g.inputs;
        m.params = promote_parameters(g);
        m.forward = prepare_model(std::move(g), input_flags, false, inputs_dir, {}, AttentionFusion::Off);
        m.grad = differentiate(m.forward, m.params.names, loss, reference_evaluator());
        m.recompute = plan_recompute(m.grad.graph, recompute == "min-cut");
        apply_recompute(m.grad.graph, m.recompute);
    } catch (const UserError &e) {
        std::string msg = e.what();
        if (msg.rfind(path, 0) == 0) throw;
        throw UserError(path + ": " + msg);
    }
    return m;
}

const std::vector<std::string> &recompute_modes() {
    static const std::vector<std::string> modes = {"min-cut", "save-all"};
    return modes;
}

std::map<std::string, Tensor> gradient_inputs(const TrainingModel &m, const std::string &dir, uint64_t seed) {
    const Graph &g = m.grad.graph;
    std::map<std::string, Tensor> in;
    Graph data = g;  // the data inputs and the target only, for make_inputs / random_inputs
    data.inputs.clear();
    for (const auto &name : g.inputs)
        if (!m.params.initial.count(name) && name != m.grad.target) data.inputs.push_back(name);
    in = make_inputs(data, dir, seed);
    for (const auto &[name, t] : m.params.initial) in[name] = t;
    if (m.grad.target.empty()) return in;
    const ValueInfo &ti = g.value(m.grad.target);
    std::filesystem::path file = std::filesystem::path(dir) / "target.npy";
    Tensor t(ti.dtype, ti.shape);
    if (!dir.empty() && std::filesystem::exists(file)) {
        Tensor f = read_npy(file.string());
        user_check(f.shape() == ti.shape, file.string(), ": the target is ", shape_str(f.shape()), " but the loss needs ",
                   shape_str(ti.shape), " (", ti.dtype == DType::I64 ? "class indices, one per row of the output"
                                                                      : "the output's shape", ")");
        user_check(dtype_is_float(f.dtype()) == dtype_is_float(ti.dtype), file.string(), ": the target is ",
                   dtype_name(f.dtype()), " but the loss needs ", dtype_name(ti.dtype),
                   ti.dtype == DType::I64 ? " class indices (cross_entropy)" : " values (mse)");
        t = f.cast(ti.dtype);
    } else if (ti.dtype == DType::I64) {
        fill_random(t, seed + 7, 0, (double)g.value(m.grad.forward_outputs[0]).shape[1]);
    } else {
        fill_random(t, seed + 7);
    }
    if (ti.dtype == DType::I64) {
        int64_t classes = g.value(m.grad.forward_outputs[0]).shape[1];
        for (int64_t i = 0; i < t.numel(); i++)
            user_check(t.get_int(i) >= 0 && t.get_int(i) < classes, "target class ", t.get_int(i), " at [", i,
                       "] is out of range: the output has ", classes, " classes (0..", classes - 1, ")");
    }
    in[m.grad.target] = t;
    return in;
}

}  // namespace loom::cli
