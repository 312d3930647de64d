#include "frontends/onnx/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "graph/op_catalog.h"
#include "support/error.h"

namespace loom {

namespace {

// How to inline external data; said wherever a tensor points outside the .onnx file.
std::string inline_hint(const std::string &origin) {
    return str_cat("; Loom reads self-contained models only: inline the data with python3 -c "
                   "\"import onnx; onnx.save(onnx.load('", origin,
                   "'), 'inlined.onnx', save_as_external_data=False)\"");
}

std::string join(const std::vector<std::string> &v, const char *sep) {
    std::string r;
    for (const auto &s : v) r += (r.empty() ? "" : sep) + s;
    return r;
}

class Importer {
public:
    Importer(const onnx::ModelProto &model, std::string origin)
        : model_(model), origin_(std::move(origin)) {}

    Graph run();

private:
    [[noreturn]] void fail(const std::string &msg) const { throw UserError(origin_ + ": " + msg); }
    template <typename... Args>
    void check(bool cond, const Args &...args) const {
        if (!cond) fail(str_cat(args...));
    }

    int default_opset() const;
    Tensor to_tensor(const onnx::TensorProto &tp, const std::string &what) const;
    ValueInfo to_value_info(const onnx::ValueInfoProto &vi, const std::string &what) const;
    AttrValue to_attr(const onnx::AttributeProto &a, const std::string &node) const;
    void add_constant_node(const onnx::NodeProto &n, const std::string &node);
    void add_node(const onnx::NodeProto &n, int index);
    void check_defined() const;
    std::string node_name(const onnx::NodeProto &n, int index);

    const onnx::ModelProto &model_;
    std::string origin_;
    Graph g_;
    std::set<std::string> used_names_, given_names_;
};

int Importer::default_opset() const {
    std::vector<std::string> seen;
    for (const auto &op : model_.opset_import()) {
        if (op.domain().empty() || op.domain() == "ai.onnx") return (int)op.version();
        seen.push_back("'" + op.domain() + "'");
    }
    fail(str_cat("the model imports no opset of the default ONNX domain (it imports ",
                 seen.empty() ? "none" : join(seen, ", "),
                 "); re-export it with an opset_import for domain \"\" (e.g. opset 13)"));
}

Tensor Importer::to_tensor(const onnx::TensorProto &tp, const std::string &what) const {
    if (tp.data_location() == onnx::TensorProto_DataLocation_EXTERNAL || tp.external_data_size() > 0) {
        std::string location;
        for (const auto &kv : tp.external_data())
            if (kv.key() == "location") location = kv.value();
        fail(str_cat(what, " stores its data in an external file",
                     location.empty() ? std::string() : " ('" + location + "')",
                     ", which Loom does not read (it reads nothing but the .onnx file itself)",
                     inline_hint(origin_)));
    }
    DType type;
    try {
        type = dtype_from_onnx(tp.data_type());
    } catch (const UserError &e) {
        fail(str_cat(what, ": ", e.what(), "; store it as one of these and re-export"));
    }
    Shape shape(tp.dims().begin(), tp.dims().end());
    int64_t bytes = 0;
    try {
        bytes = checked_tensor_bytes(type, shape, what);
    } catch (const UserError &e) {
        fail(e.what());
    }
    const int64_t n = bytes / dtype_size(type);
    // Every count is checked against the data the file holds before anything is allocated, so a
    // small file cannot claim a huge tensor.
    if (tp.has_raw_data()) {
        check((int64_t)tp.raw_data().size() == bytes, what, " (", dtype_name(type), " ", shape_str(shape),
              ") has ", tp.raw_data().size(), " bytes of raw_data; expected ", bytes,
              ". The model is corrupt; re-export it");
        Tensor t(type, shape);
        if (n) std::memcpy(t.data(), tp.raw_data().data(), tp.raw_data().size());
        return t;
    }
    // ONNX keeps f64 in double_data, i64 in int64_data, and f16 and bf16 (their 16 bits), i32,
    // i16, i8, u8 and bool in int32_data.
    int count = tp.int32_data_size();
    const char *field = "int32_data";
    if (type == DType::F32) count = tp.float_data_size(), field = "float_data";
    if (type == DType::F64) count = tp.double_data_size(), field = "double_data";
    if (type == DType::I64) count = tp.int64_data_size(), field = "int64_data";
    check(count == n, what, " (", dtype_name(type), " ", shape_str(shape), ") has ", count, " values in ",
          field, "; expected ", n, ". The model is corrupt; re-export it");
    Tensor t(type, shape);
    switch (type) {
    case DType::F32: if (n) std::memcpy(t.data(), tp.float_data().data(), n * 4); break;
    case DType::F64: if (n) std::memcpy(t.data(), tp.double_data().data(), n * 8); break;
    case DType::I64: if (n) std::memcpy(t.data(), tp.int64_data().data(), n * 8); break;
    case DType::F16:
    case DType::BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t bits = (uint16_t)tp.int32_data((int)i);
            std::memcpy(t.bytes().data() + 2 * i, &bits, 2);
        }
        break;
    default:
        for (int64_t i = 0; i < n; i++) t.set_int(i, tp.int32_data((int)i));
        break;
    }
    return t;
}

ValueInfo Importer::to_value_info(const onnx::ValueInfoProto &vi, const std::string &what) const {
    ValueInfo info;
    info.name = vi.name();
    if (!vi.has_type()) return info;  // no type given: left to shape inference
    check(vi.type().has_tensor_type(), what, " '", vi.name(),
          "' is not a tensor (sequence, map or optional types are not supported)");
    const auto &tt = vi.type().tensor_type();
    if (tt.elem_type() != 0) {
        try {
            info.dtype = dtype_from_onnx(tt.elem_type());
        } catch (const UserError &e) {
            fail(str_cat(what, " '", vi.name(), "': ", e.what(), "; declare it as one of these and re-export"));
        }
    }
    if (!tt.has_shape()) return info;
    bool symbolic = false;
    for (const auto &d : tt.shape().dim()) {
        if (d.has_dim_value()) {
            check(d.dim_value() >= 0, what, " '", vi.name(), "' has a negative dim ", d.dim_value());
            info.shape.push_back(d.dim_value());
            info.symbols.push_back("");
        } else {
            info.shape.push_back(-1);
            info.symbols.push_back(d.has_dim_param() ? d.dim_param() : "");
            symbolic |= d.has_dim_param();
        }
    }
    if (!symbolic) info.symbols.clear();
    info.has_shape = true;
    return info;
}

AttrValue Importer::to_attr(const onnx::AttributeProto &a, const std::string &node) const {
    std::string what = str_cat(node, ": attribute '", a.name(), "'");
    switch (a.type()) {
    case onnx::AttributeProto_AttributeType_INT: return (int64_t)a.i();
    case onnx::AttributeProto_AttributeType_FLOAT: return (double)a.f();
    case onnx::AttributeProto_AttributeType_STRING: return a.s();
    case onnx::AttributeProto_AttributeType_INTS:
        return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto_AttributeType_FLOATS:
        return std::vector<double>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto_AttributeType_STRINGS:
        return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case onnx::AttributeProto_AttributeType_TENSOR: return to_tensor(a.t(), what);
    case onnx::AttributeProto_AttributeType_UNDEFINED:
        fail(what + " has no type (ONNX attributes must set 'type'); the model is malformed");
    default:
        fail(str_cat(what, " is of ONNX attribute type ",
                     onnx::AttributeProto_AttributeType_Name(a.type()),
                     ", which Loom does not support (supported: INT FLOAT STRING INTS FLOATS "
                     "STRINGS TENSOR)"));
    }
}

std::string Importer::node_name(const onnx::NodeProto &n, int index) {
    std::string name = n.name().empty() ? str_cat(n.op_type(), "_", index) : n.name();
    bool generated = n.name().empty();
    // A generated name must not take a name the file gives a later node.
    if (used_names_.count(name) || (generated && given_names_.count(name))) {
        std::string base = name;
        for (int k = 1;; k++) {
            name = str_cat(base, "_", k);
            if (!used_names_.count(name) && !given_names_.count(name)) break;
        }
    }
    used_names_.insert(name);
    return name;
}

void Importer::add_constant_node(const onnx::NodeProto &n, const std::string &node) {
    check(n.output_size() == 1 && !n.output(0).empty(), node, " must have exactly one output");
    check(n.attribute_size() == 1, node, " must have exactly one value attribute (value, value_float, "
          "value_floats, value_int, value_ints); it has ", n.attribute_size());
    const auto &a = n.attribute(0);
    Tensor t;
    if (a.name() == "value") {
        check(a.type() == onnx::AttributeProto_AttributeType_TENSOR, node, ": 'value' must be a tensor");
        t = to_tensor(a.t(), node + ": attribute 'value'");
    } else if (a.name() == "value_float") {
        t = Tensor::scalar(DType::F32, a.f());
    } else if (a.name() == "value_floats") {
        t = Tensor::from_doubles(DType::F32, {a.floats_size()},
                                 std::vector<double>(a.floats().begin(), a.floats().end()));
    } else if (a.name() == "value_int") {
        t = Tensor::from_ints(DType::I64, {}, {a.i()});
    } else if (a.name() == "value_ints") {
        t = Tensor::from_ints(DType::I64, {a.ints_size()},
                              std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    } else {
        fail(str_cat(node, ": attribute '", a.name(), "' is not supported (string and sparse "
                     "constants are not); supported: value, value_float, value_floats, value_int, value_ints"));
    }
    check(!g_.is_constant(n.output(0)), node, " defines '", n.output(0),
          "', which an initializer or earlier Constant already defines");
    g_.set_constant(n.output(0), std::move(t));
}

void Importer::add_node(const onnx::NodeProto &n, int index) {
    std::string name = node_name(n, index);
    std::string node = str_cat(n.op_type(), " '", name, "'");
    check(n.domain().empty() || n.domain() == "ai.onnx", node, " is from domain '", n.domain(),
          "'; Loom supports only the default ONNX domain (re-export without custom ops, or replace the "
          "op by standard ONNX ops)");
    if (!is_supported_op(n.op_type()))
        fail(str_cat(node, ": op '", n.op_type(), "' is not supported by Loom (model opset ",
                     g_.opset, ")", did_you_mean(n.op_type(), supported_ops()),
                     "; supported ops: ", join(supported_ops(), " ")));
    if (n.op_type() == "Constant") return add_constant_node(n, node);

    Node out;
    out.name = name;
    out.op = n.op_type();
    out.inputs.assign(n.input().begin(), n.input().end());
    out.outputs.assign(n.output().begin(), n.output().end());
    for (const auto &a : n.attribute()) {
        check(a.ref_attr_name().empty(), node, ": attribute '", a.name(),
              "' refers to a function attribute, which Loom does not support");
        check(!out.attrs.count(a.name()), node, ": attribute '", a.name(), "' is given twice");
        out.attrs[a.name()] = to_attr(a, node);
    }
    for (const auto &o : out.outputs) {
        if (o.empty() || g_.values.count(o)) continue;  // duplicates are reported by validate()
        ValueInfo vi;
        vi.name = o;
        g_.values[o] = vi;
    }
    g_.nodes.push_back(std::move(out));
}

// validate() would catch these too; here the message can also say how such a model comes about.
void Importer::check_defined() const {
    std::set<std::string> defined(g_.inputs.begin(), g_.inputs.end());
    for (const auto &kv : g_.initializers) defined.insert(kv.first);
    for (const auto &n : g_.nodes) defined.insert(n.outputs.begin(), n.outputs.end());
    // The "did you mean" hints are computed only on failure: over every name they are quadratic.
    auto all = [&] { return std::vector<std::string>(defined.begin(), defined.end()); };
    for (const auto &n : g_.nodes)
        for (const auto &in : n.inputs)
            if (!in.empty() && !defined.count(in))
                fail(str_cat(n.describe(), " reads '", in, "', which no node, graph input or initializer defines",
                             did_you_mean(in, all()), "; if it is a weight the model was saved without it (export "
                             "with export_params=True), otherwise declare it as a graph input"));
    for (const auto &o : g_.outputs)
        if (!defined.count(o))
            fail(str_cat("graph output '", o, "' is produced by no node, graph input or initializer",
                         did_you_mean(o, all()), "; a graph output must name a value the graph computes (check "
                         "output_names in torch.onnx.export)"));
}

Graph Importer::run() {
    check(model_.has_graph(), "the file holds no ONNX graph; is it an ONNX model (.onnx)?");
    const onnx::GraphProto &gp = model_.graph();
    g_.name = gp.name();
    g_.opset = default_opset();
    check(gp.sparse_initializer_size() == 0, "sparse initializers (e.g. '",
          gp.sparse_initializer_size() ? gp.sparse_initializer(0).values().name() : "",
          "') are not supported; densify them with onnx before importing");

    for (const auto &init : gp.initializer()) {
        check(!init.name().empty(), "an initializer has no name; the model is malformed");
        check(!g_.is_constant(init.name()), "two initializers are named '", init.name(), "'");
        g_.set_constant(init.name(), to_tensor(init, "initializer '" + init.name() + "'"));
    }
    for (const auto &in : gp.input()) {
        // Older exporters list weights among the inputs too; they stay constants.
        if (g_.is_constant(in.name())) continue;
        check(!in.name().empty(), "a graph input has no name; the model is malformed");
        g_.inputs.push_back(in.name());
        g_.values[in.name()] = to_value_info(in, "graph input");
    }
    for (const auto &n : gp.node())
        if (!n.name().empty()) given_names_.insert(n.name());
    for (int i = 0; i < gp.node_size(); i++) add_node(gp.node(i), i);

    for (const auto &out : gp.output()) {
        check(!out.name().empty(), "a graph output has no name; the model is malformed");
        g_.outputs.push_back(out.name());
        if (g_.is_constant(out.name()) ||
            std::find(g_.inputs.begin(), g_.inputs.end(), out.name()) != g_.inputs.end())
            continue;
        ValueInfo declared = to_value_info(out, "graph output");
        // A name nobody defines must not gain a ValueInfo here: validate() reports it.
        if (g_.values.count(out.name())) g_.values[out.name()] = declared;
    }
    check_defined();
    try {
        g_.topo_sort();
        g_.validate();
    } catch (const UserError &e) {
        fail(e.what());
    }
    return std::move(g_);
}

}  // namespace

Graph import_onnx_bytes(const std::string &bytes, const std::string &origin_name) {
    user_check(!bytes.empty(), origin_name, ": the file is empty; expected an ONNX model");
    onnx::ModelProto model;
    user_check(model.ParseFromString(bytes), origin_name, ": cannot parse the ONNX model (",
               bytes.size(), " bytes): the file is truncated, corrupt or not an ONNX protobuf; "
               "re-export or re-download it (python3 -c \"import onnx; onnx.checker.check_model('",
               origin_name, "')\" shows what is wrong)");
    return Importer(model, origin_name).run();
}

Graph import_onnx(const std::string &path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    user_check(fs::exists(path, ec), path, ": no such file; expected an ONNX model (.onnx)");
    user_check(!fs::is_directory(path, ec), path, ": is a directory; expected an ONNX model file (.onnx)");
    // Protobuf cannot parse a message over 2 GiB, so a bigger file is refused before it is read.
    const auto size = fs::file_size(path, ec);
    user_check(ec || size < (uintmax_t(2) << 30), path, ": the file is ", size >> 20,
               " MiB, over the 2 GiB a self-contained ONNX protobuf can hold; a model this large keeps its "
               "weights in external data files, which Loom does not read");
    std::ifstream in(path, std::ios::binary);
    user_check(bool(in), path, ": cannot open the ONNX model (", std::strerror(errno), ")");
    std::ostringstream ss;
    ss << in.rdbuf();
    user_check(!in.bad(), path, ": error while reading the ONNX model");
    return import_onnx_bytes(ss.str(), path);
}

}  // namespace loom
