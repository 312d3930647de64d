#include "frontends/onnx/onnx_symbolic_shapes.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "graph/dtype.h"
#include "support/error.h"

namespace loom {

namespace {

// Loom's name where Loom has the type ("f32"), else ONNX's in lower case ("string").
std::string element_type_name(int t) {
    if (t == onnx::TensorProto::UNDEFINED) return "";
    try {
        return dtype_name(dtype_from_onnx(t));
    } catch (const std::exception &) {
        std::string n = onnx::TensorProto_DataType_Name((onnx::TensorProto_DataType)t);
        std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return (char)std::tolower(c); });
        return n;
    }
}

SymbolicShape to_symbolic(const onnx::TypeProto &type) {
    SymbolicShape s;
    if (!type.has_tensor_type()) return s;
    const auto &tt = type.tensor_type();
    s.dtype = element_type_name(tt.elem_type());
    if (!tt.has_shape()) return s;
    s.rank_known = true;
    for (const auto &d : tt.shape().dim()) {
        if (d.has_dim_value()) s.dims.push_back(std::to_string(d.dim_value()));
        // ONNX names a dim it computed but cannot express "unk__N": to a reader that is unknown.
        else if (d.has_dim_param() && !d.dim_param().empty() && d.dim_param().rfind("unk__", 0) != 0)
            s.dims.push_back(d.dim_param());
        else s.dims.push_back("?");
    }
    return s;
}

}  // namespace

std::string symbolic_shape_str(const SymbolicShape &s) {
    if (!s.rank_known) return "?";
    if (s.dims.empty()) return "scalar";
    std::string r;
    for (size_t i = 0; i < s.dims.size(); i++) r += (i ? "x" : "") + s.dims[i];
    return r;
}

std::map<std::string, SymbolicShape> infer_symbolic_shapes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    user_check(bool(in), path, ": cannot open the ONNX model");
    onnx::ModelProto model;
    user_check(model.ParseFromIstream(&in), path, ": cannot parse the ONNX model");
    // Node-level inference errors are ignored (error_mode 0): a value ONNX cannot type stays "?".
    onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*error_mode=*/0, /*data_propagation=*/true);
    try {
        onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), opts);
    } catch (const std::exception &) {
        // A model ONNX cannot infer at all still shows its declared inputs and outputs.
    }
    std::map<std::string, SymbolicShape> shapes;
    const auto &g = model.graph();
    for (const auto &vi : g.value_info()) shapes[vi.name()] = to_symbolic(vi.type());
    for (const auto &vi : g.output()) shapes[vi.name()] = to_symbolic(vi.type());
    for (const auto &vi : g.input()) shapes[vi.name()] = to_symbolic(vi.type());
    for (const auto &t : g.initializer()) {
        SymbolicShape s;
        s.dtype = element_type_name(t.data_type());
        s.rank_known = true;
        for (auto d : t.dims()) s.dims.push_back(std::to_string(d));
        shapes[t.name()] = s;
    }
    return shapes;
}

}  // namespace loom
