#include "graph/op_catalog.h"

#include <algorithm>
#include <map>

#include "support/error.h"

namespace loom {

namespace {
const std::map<std::string, OpKind> &catalog() {
    static const std::map<std::string, OpKind> m = [] {
        std::map<std::string, OpKind> r;
        for (const char *op :
             {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Reciprocal",
              "Floor", "Ceil", "Relu", "LeakyRelu", "PRelu", "Elu", "Sigmoid", "HardSigmoid",
              "HardSwish", "Swish", "Tanh", "Erf", "Gelu", "Softplus", "Clip", "Min", "Max", "Sum", "Mean",
              "Where", "Equal", "Less", "Greater", "Not", "And", "Or", "Cast", "Sin", "Cos"})
            r[op] = OpKind::Elementwise;
        for (const char *op : {"MatMul", "Gemm", "FusedAttention"}) r[op] = OpKind::MatMul;
        for (const char *op : {"Conv", "ConvTranspose"}) r[op] = OpKind::Conv;
        for (const char *op : {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
            r[op] = OpKind::Pool;
        for (const char *op : {"BatchNormalization", "LayerNormalization", "InstanceNormalization",
                               "GroupNormalization", "Softmax", "LogSoftmax"})
            r[op] = OpKind::Norm;
        for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                               "ReduceL2", "ArgMax", "ArgMin"})
            r[op] = OpKind::Reduce;
        for (const char *op : {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat",
                               "Split", "Slice", "Expand", "Tile", "Pad", "DepthToSpace"})
            r[op] = OpKind::Layout;
        r["Gather"] = OpKind::Gather;
        r["Resize"] = OpKind::Resize;
        r["Upsample"] = OpKind::Resize;
        for (const char *op : {"Shape", "Size", "ConstantOfShape", "Constant", "Range", "Identity",
                               "Dropout"})
            r[op] = OpKind::Folded;
        return r;
    }();
    return m;
}
}  // namespace

bool is_internal_op(const std::string &op) { return op == "FusedAttention"; }

const std::vector<std::string> &supported_ops() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> r;
        for (const auto &kv : catalog())
            if (!is_internal_op(kv.first)) r.push_back(kv.first);
        return r;
    }();
    return v;
}

bool is_supported_op(const std::string &op) { return catalog().count(op) > 0 && !is_internal_op(op); }

OpKind op_kind(const std::string &op) {
    auto it = catalog().find(op);
    internal_check(it != catalog().end(), "op '", op, "' has no kind");
    return it->second;
}

bool is_elementwise_op(const std::string &op) {
    auto it = catalog().find(op);
    return it != catalog().end() && it->second == OpKind::Elementwise;
}

}  // namespace loom
