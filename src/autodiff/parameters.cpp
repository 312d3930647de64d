#include "autodiff/parameters.h"

#include <set>

#include "support/error.h"

namespace loom {

namespace {

// Inputs that hold shapes, indices, bounds or running statistics rather than data to learn.
bool is_auxiliary_input(const Node &n, size_t index) {
    static const std::set<std::string> aux_after_first = {
        "Reshape", "Expand", "Tile", "Slice", "Pad", "Resize", "Upsample", "Clip", "Split", "Squeeze",
        "Unsqueeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
        "ConstantOfShape", "Range", "Pow", "Gather"};
    if (index >= 1 && aux_after_first.count(n.op)) return true;
    if (n.op == "BatchNormalization" && index >= 3) return true;
    return false;
}

}  // namespace

Parameters promote_parameters(Graph &g) {
    std::set<std::string> data_reads, aux_reads;
    for (const Node &n : g.nodes)
        for (size_t i = 0; i < n.inputs.size(); i++) {
            if (n.inputs[i].empty() || !g.is_constant(n.inputs[i])) continue;
            (is_auxiliary_input(n, i) ? aux_reads : data_reads).insert(n.inputs[i]);
        }
    Parameters p;
    for (const auto &[name, t] : g.initializers) {
        if (!dtype_is_float(t.dtype()) || t.rank() == 0 || !data_reads.count(name) || aux_reads.count(name)) continue;
        p.names.push_back(name);
        p.initial[name] = t.cast(DType::F32);
    }
    user_check(!p.names.empty(), "the model has no trainable parameters (float initializers read as data); ",
               "export it with its weights as initializers (torch.onnx.export does by default)");
    for (const std::string &name : p.names) {
        g.initializers.erase(name);
        ValueInfo &v = g.values[name];
        v.name = name;
        v.dtype = DType::F32;
        v.shape = p.initial[name].shape();
        v.symbols.clear();
        v.has_shape = true;
        g.inputs.push_back(name);
    }
    return p;
}

}  // namespace loom
