// Canonical form and shape inference for compute ops: pointwise, matmul, conv, pool, norm, reduce.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "graph/canonicalize_internal.h"
#include "graph/op_catalog.h"
#include "support/error.h"

namespace loom::canon {

static void need_input(const Node &n, int i) {
    user_check(n.has_input(i), n.describe(), ": input ", i, " is missing (the node has ", n.num_inputs(),
               " input(s)); this op needs it. The model is malformed; re-export it");
}
const Shape &in_shape(const Graph &g, const Node &n, int i) {
    need_input(n, i);
    return g.value(n.inputs[i]).shape;
}
DType in_dtype(const Graph &g, const Node &n, int i) {
    need_input(n, i);
    return g.value(n.inputs[i]).dtype;
}

void set_output(Graph &g, const Node &n, int i, DType t, const Shape &s) {
    user_check(i < (int)n.outputs.size(), n.describe(), ": output ", i, " is missing (the node has ",
               n.outputs.size(), " output(s)); this op produces it. The model is malformed; re-export it");
    if (n.outputs[i].empty()) return;  // an optional output nobody reads
    for (int64_t d : s)
        user_check(d >= 0, n.describe(), ": inferred output shape ", shape_str(s), " has a negative dim");
    // A small model must not be able to ask for a huge intermediate (an Expand to 2^40 elements).
    checked_tensor_bytes(t, s, str_cat(n.describe(), ": output '", n.outputs[i], "'"));
    ValueInfo &vi = g.values[n.outputs[i]];
    vi.name = n.outputs[i];
    vi.dtype = t;
    vi.shape = s;
    vi.symbols.clear();
    vi.has_shape = true;
}

static const Tensor &need_const(const Graph &g, const Node &n, int i, const char *what) {
    const Tensor *t = n.has_input(i) ? g.constant(n.inputs[i]) : nullptr;
    user_check(t != nullptr, n.describe(), ": input ", i, " (", what, ", '",
               i < (int)n.inputs.size() ? n.inputs[i] : "", "') must be a constant after folding; ",
               "Loom compiles static graphs — bind the input shapes with --input so it folds");
    return *t;
}
std::vector<int64_t> const_ints(const Graph &g, const Node &n, int i, const char *what) {
    return need_const(g, n, i, what).to_ints();
}
std::vector<double> const_floats(const Graph &g, const Node &n, int i, const char *what) {
    return need_const(g, n, i, what).to_doubles();
}
double const_scalar(const Graph &g, const Node &n, int i, const char *what) {
    const Tensor &t = need_const(g, n, i, what);
    user_check(t.numel() == 1, n.describe(), ": input ", i, " (", what, ", '", n.inputs[i], "') must hold one value; it is ",
               dtype_name(t.dtype()), " ", shape_str(t.shape()));
    return t.get(0);
}
const Tensor &attr_scalar_tensor(const Node &n, const std::string &name) {
    auto it = n.attrs.find(name);
    const Tensor *t = it == n.attrs.end() ? nullptr : std::get_if<Tensor>(&it->second);
    user_check(t != nullptr && t->numel() == 1, n.describe(), ": attribute '", name,
               "' must be a tensor of one element; it is ",
               it == n.attrs.end() ? std::string("missing") : attr_str(it->second));
    return *t;
}

int64_t norm_axis(const Node &n, int64_t axis, int64_t rank, const char *what) {
    user_check(axis >= -rank && axis < std::max<int64_t>(rank, 1), n.describe(), ": ", what, " ",
               axis, " is out of range for rank ", rank, " (valid: ", -rank, "..", rank - 1, ")");
    return axis < 0 ? axis + rank : axis;
}

Shape broadcast(const Node &n, const Shape &a, const Shape &b) {
    size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        user_check(da == db || da == 1 || db == 1, n.describe(), ": shapes ", shape_str(a), " and ",
                   shape_str(b), " do not broadcast (dim ", i, ": ", da, " vs ", db, ")");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

void keep_inputs(Node &n, int k) {
    if ((int)n.inputs.size() > k) n.inputs.resize(k);
}

void need_rank(const Graph &g, const Node &n, int i, int min_rank, int max_rank) {
    int r = (int)in_shape(g, n, i).size();
    user_check(r >= min_rank && r <= max_rank, n.describe(), ": input ", i, " ('", n.inputs[i],
               "') has rank ", r, " (shape ", shape_str(in_shape(g, n, i)), "); expected rank ",
               min_rank == max_rank ? std::to_string(min_rank)
                                    : std::to_string(min_rank) + (max_rank < (1 << 20) ? ".." + std::to_string(max_rank) : "+"));
}

void drop_unused_outputs(Graph &g, Node &n, int k, const char *what) {
    for (size_t i = k; i < n.outputs.size(); i++) {
        const std::string &o = n.outputs[i];
        if (o.empty()) continue;
        bool used = !g.consumers(o).empty() ||
                    g.is_output(o);
        user_check(!used, n.describe(), ": output ", i, " ('", o, "', ", what,
                   ") is used, but Loom supports only inference-mode outputs of this op");
        g.values.erase(o);
    }
    if ((int)n.outputs.size() > k) n.outputs.resize(k);
}

Node make_reshape(const std::string &name, const std::string &in, const std::string &out,
                  const Shape &s) {
    Node r;
    r.name = name;
    r.op = "Reshape";
    r.inputs = {in};
    r.outputs = {out};
    r.attrs["shape"] = std::vector<int64_t>(s.begin(), s.end());
    return r;
}

// ---------------------------------------------------------------------------------------------

Result canon_elementwise(Graph &g, Node &n) {
    const std::string &op = n.op;
    user_check(n.num_inputs() >= 1, n.describe(), ": needs at least one input");
    if (op == "Clip") {
        double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
        if (n.has_input(1)) lo = const_scalar(g, n, 1, "min");
        else lo = n.get_float("min", lo);
        if (n.has_input(2)) hi = const_scalar(g, n, 2, "max");
        else hi = n.get_float("max", hi);
        n.attrs["min"] = lo;
        n.attrs["max"] = hi;
        keep_inputs(n, 1);
    } else if (op == "LeakyRelu") {
        n.attrs["alpha"] = n.get_float("alpha", 0.01);
    } else if (op == "Elu") {
        n.attrs["alpha"] = n.get_float("alpha", 1.0);
    } else if (op == "Swish") {
        n.attrs["alpha"] = n.get_float("alpha", 1.0);
    } else if (op == "HardSigmoid") {
        n.attrs["alpha"] = n.get_float("alpha", 0.2);
        n.attrs["beta"] = n.get_float("beta", 0.5);
    } else if (op == "Gelu") {
        std::string a = n.get_string("approximate", "none");
        user_check(a == "none" || a == "tanh", n.describe(), ": approximate='", a,
                   "' is invalid; valid: none, tanh");
        n.attrs["approximate"] = a;
    } else if (op == "Cast") {
        auto it = n.attrs.find("to");
        user_check(it != n.attrs.end(), n.describe(), ": missing required attribute 'to'");
        if (auto *i = std::get_if<int64_t>(&it->second)) {
            try {
                n.attrs["to"] = std::string(dtype_name(dtype_from_onnx((int)*i)));
            } catch (const UserError &e) {
                throw UserError(str_cat(n.describe(), ": to=", *i, ": ", e.what(),
                                        "; cast to one of these instead and re-export"));
            }
        }
    }
    // Output shape: broadcast of all inputs.
    Shape s = in_shape(g, n, 0);
    for (int i = 1; i < n.num_inputs(); i++)
        if (n.has_input(i)) s = broadcast(n, s, in_shape(g, n, i));
    DType t = in_dtype(g, n, 0);
    if (op == "Equal" || op == "Less" || op == "Greater" || op == "Not" || op == "And" || op == "Or")
        t = DType::Bool;
    else if (op == "Where") {
        user_check(n.num_inputs() == 3, n.describe(), ": Where takes 3 inputs (cond, a, b)");
        t = in_dtype(g, n, 1);
    } else if (op == "Cast")
        t = dtype_from_name(n.get_string("to", "f32"));
    static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Equal",
                                                 "Less", "Greater", "And", "Or", "PRelu"};
    if (binary.count(op))
        user_check(n.num_inputs() == 2, n.describe(), ": takes 2 inputs, got ", n.num_inputs());
    // ONNX types these ops' data inputs alike (Pow's exponent and Where's condition excepted).
    static const std::set<std::string> same_type = {"Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater",
                                                    "And", "Or", "PRelu", "Min", "Max", "Sum", "Mean", "Where"};
    if (same_type.count(op)) {
        int first = op == "Where" ? 1 : 0;
        for (int i = first + 1; i < n.num_inputs(); i++)
            user_check(!n.has_input(i) || in_dtype(g, n, i) == in_dtype(g, n, first), n.describe(), ": input ", i,
                       " ('", n.inputs[i], "') is ", dtype_name(in_dtype(g, n, i)), " but input ", first, " ('",
                       n.inputs[first], "') is ", dtype_name(in_dtype(g, n, first)),
                       "; ONNX requires one type here. The model is malformed (insert a Cast and re-export)");
    }
    set_output(g, n, 0, t, s);
    return {};
}

Result canon_matmul(Graph &g, Node &n) {
    if (n.op == "Gemm") {
        need_rank(g, n, 0, 2, 2);
        need_rank(g, n, 1, 2, 2);
        n.attrs["alpha"] = n.get_float("alpha", 1.0);
        n.attrs["beta"] = n.get_float("beta", 1.0);
        int64_t ta = n.get_int("transA", 0), tb = n.get_int("transB", 0);
        n.attrs["transA"] = ta;
        n.attrs["transB"] = tb;
        const Shape &a = in_shape(g, n, 0), &b = in_shape(g, n, 1);
        int64_t M = ta ? a[1] : a[0], K = ta ? a[0] : a[1];
        int64_t Kb = tb ? b[1] : b[0], N = tb ? b[0] : b[1];
        user_check(K == Kb, n.describe(), ": inner dims differ: A ", shape_str(a), (ta ? " (transposed)" : ""),
                   " vs B ", shape_str(b), (tb ? " (transposed)" : ""));
        if (n.has_input(2)) broadcast(n, {M, N}, in_shape(g, n, 2));
        set_output(g, n, 0, in_dtype(g, n, 0), {M, N});
        return {};
    }
    Shape a = in_shape(g, n, 0), b = in_shape(g, n, 1);
    user_check(!a.empty() && !b.empty(), n.describe(), ": MatMul inputs must have rank >= 1");
    bool a1 = a.size() == 1, b1 = b.size() == 1;
    if (a1) a.insert(a.begin(), 1);
    if (b1) b.push_back(1);
    user_check(a.back() == b[b.size() - 2], n.describe(), ": inner dims differ: ",
               shape_str(in_shape(g, n, 0)), " @ ", shape_str(in_shape(g, n, 1)));
    Shape batch = broadcast(n, Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
    Shape out = batch;
    if (!a1) out.push_back(a[a.size() - 2]);
    if (!b1) out.push_back(b.back());
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

namespace {
// Fills kernel_shape/strides/dilations/pads for conv and pool ops (auto_pad resolved).
void spatial_attrs(Node &n, const Shape &x, const Shape &kernel, bool transpose) {
    size_t sp = x.size() - 2;
    auto ks = n.get_ints("kernel_shape", kernel);
    user_check(ks.size() == sp, n.describe(), ": kernel_shape has ", ks.size(), " dims; input ",
               shape_str(x), " has ", sp, " spatial dims");
    auto strides = n.get_ints("strides", std::vector<int64_t>(sp, 1));
    auto dil = n.get_ints("dilations", std::vector<int64_t>(sp, 1));
    auto pads = n.get_ints("pads", std::vector<int64_t>(2 * sp, 0));
    user_check(strides.size() == sp && dil.size() == sp && pads.size() == 2 * sp, n.describe(),
               ": strides/dilations need ", sp, " entries and pads ", 2 * sp);
    // The bound keeps the window arithmetic below far from int64 overflow.
    const int64_t kMaxWindow = int64_t(1) << 24;
    for (size_t i = 0; i < sp; i++) {
        user_check(strides[i] > 0 && dil[i] > 0 && ks[i] > 0, n.describe(),
                   ": strides, dilations and kernel_shape must be positive");
        user_check(strides[i] <= kMaxWindow && dil[i] <= kMaxWindow && ks[i] <= kMaxWindow, n.describe(),
                   ": strides, dilations and kernel_shape must be at most ", kMaxWindow, "; the model is corrupt");
    }
    for (int64_t p : pads)
        user_check(p >= 0 && p <= kMaxWindow, n.describe(), ": pads ", attr_str(pads),
                   " must each be in 0..", kMaxWindow);
    if (transpose) {
        auto op = n.get_ints("output_padding", std::vector<int64_t>(sp, 0));
        user_check(op.size() == sp, n.describe(), ": output_padding has ", op.size(), " entries; expected ", sp);
        for (size_t i = 0; i < sp; i++)
            user_check(op[i] >= 0 && op[i] < std::max(strides[i], dil[i]), n.describe(), ": output_padding[", i,
                       "] = ", op[i], " must be in 0..max(stride, dilation)-1");
        auto os = n.get_ints("output_shape", {});
        user_check(os.empty() || os.size() == sp || os.size() == sp + 2, n.describe(), ": output_shape has ",
                   os.size(), " entries; expected ", sp, " (spatial) or ", sp + 2);
    }
    std::string ap = n.get_string("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (size_t i = 0; i < sp; i++) {
            int64_t in = x[2 + i], eff = (ks[i] - 1) * dil[i] + 1, total;
            if (transpose) {
                int64_t out = in * strides[i];
                auto op = n.get_ints("output_padding", std::vector<int64_t>(sp, 0));
                total = std::max<int64_t>(0, strides[i] * (in - 1) + op[i] + eff - out);
            } else {
                int64_t out = (in + strides[i] - 1) / strides[i];
                total = std::max<int64_t>(0, (out - 1) * strides[i] + eff - in);
            }
            bool upper = ap == "SAME_UPPER";
            pads[i] = upper ? total / 2 : total - total / 2;
            pads[sp + i] = total - pads[i];
        }
    } else if (ap == "VALID") {
        std::fill(pads.begin(), pads.end(), 0);
    } else {
        user_check(ap == "NOTSET", n.describe(), ": auto_pad='", ap,
                   "' is invalid; valid: NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    n.attrs.erase("auto_pad");
    n.attrs["kernel_shape"] = ks;
    n.attrs["strides"] = strides;
    n.attrs["dilations"] = dil;
    n.attrs["pads"] = pads;
}
}  // namespace

Result canon_conv(Graph &g, Node &n) {
    need_rank(g, n, 0, 3, 5);
    const Shape &x = in_shape(g, n, 0), &w = in_shape(g, n, 1);
    user_check(w.size() == x.size(), n.describe(), ": weight ", shape_str(w), " and input ",
               shape_str(x), " ranks differ");
    bool tr = n.op == "ConvTranspose";
    int64_t group = n.get_int("group", 1);
    n.attrs["group"] = group;
    size_t sp = x.size() - 2;
    spatial_attrs(n, x, Shape(w.begin() + 2, w.end()), tr);
    auto ks = n.get_ints("kernel_shape"), st = n.get_ints("strides"), dil = n.get_ints("dilations");
    auto pads = n.get_ints("pads");
    Shape out = {x[0], 0};
    if (!tr) {
        user_check(group > 0 && x[1] == w[1] * group && w[0] % group == 0, n.describe(), ": input has ",
                   x[1], " channels but weight ", shape_str(w), " with group=", group, " expects ",
                   w[1] * group);
        out[1] = w[0];
        for (size_t i = 0; i < sp; i++) {
            int64_t eff = (ks[i] - 1) * dil[i] + 1;
            int64_t o = (x[2 + i] + pads[i] + pads[sp + i] - eff) / st[i] + 1;
            user_check(o > 0, n.describe(), ": kernel (", eff, " with dilation) is larger than the padded input ",
                       shape_str(x));
            out.push_back(o);
        }
    } else {
        user_check(group > 0 && x[1] == w[0], n.describe(), ": input has ", x[1],
                   " channels but ConvTranspose weight ", shape_str(w), " expects ", w[0]);
        out[1] = w[1] * group;
        auto opad = n.get_ints("output_padding", std::vector<int64_t>(sp, 0));
        auto oshape = n.get_ints("output_shape", {});
        for (size_t i = 0; i < sp; i++) {
            int64_t eff = (ks[i] - 1) * dil[i] + 1;
            if (!oshape.empty()) {
                int64_t target = oshape[oshape.size() - sp + i];
                int64_t total = st[i] * (x[2 + i] - 1) + opad[i] + eff - target;
                pads[i] = total - total / 2;  // ONNX: SAME_UPPER-style split unless SAME_UPPER given
                pads[sp + i] = total / 2;
            }
            out.push_back(st[i] * (x[2 + i] - 1) + opad[i] + eff - pads[i] - pads[sp + i]);
        }
        n.attrs.erase("output_shape");
        n.attrs["pads"] = pads;
        n.attrs["output_padding"] = opad;
    }
    if (n.has_input(2))
        user_check(shape_numel(in_shape(g, n, 2)) == out[1], n.describe(), ": bias has ",
                   shape_numel(in_shape(g, n, 2)), " elements; expected ", out[1]);
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

Result canon_pool(Graph &g, Node &n) {
    need_rank(g, n, 0, 3, 5);
    const Shape x = in_shape(g, n, 0);
    size_t sp = x.size() - 2;
    if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
        Shape out = {x[0], x[1]};
        out.resize(x.size(), 1);
        set_output(g, n, 0, in_dtype(g, n, 0), out);
        return {};
    }
    user_check(n.has("kernel_shape"), n.describe(), ": missing required attribute 'kernel_shape'");
    drop_unused_outputs(g, n, 1, "Indices");
    spatial_attrs(n, x, {}, false);
    int64_t ceil_mode = n.get_int("ceil_mode", 0);
    n.attrs["ceil_mode"] = ceil_mode;
    n.attrs["count_include_pad"] = n.get_int("count_include_pad", 0);
    auto ks = n.get_ints("kernel_shape"), st = n.get_ints("strides"), dil = n.get_ints("dilations");
    auto pads = n.get_ints("pads");
    Shape out = {x[0], x[1]};
    for (size_t i = 0; i < sp; i++) {
        int64_t eff = (ks[i] - 1) * dil[i] + 1, span = x[2 + i] + pads[i] + pads[sp + i] - eff;
        user_check(span >= 0, n.describe(), ": window ", eff, " is larger than the padded input ", shape_str(x));
        int64_t o = (ceil_mode ? (span + st[i] - 1) / st[i] : span / st[i]) + 1;
        // A window that starts inside the end padding is dropped (PyTorch/ONNX ceil_mode rule).
        if (ceil_mode && (o - 1) * st[i] >= x[2 + i] + pads[i]) o--;
        out.push_back(o);
    }
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

Result canon_norm(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    if (n.op == "Softmax" || n.op == "LogSoftmax") {
        int64_t axis = norm_axis(n, n.get_int("axis", g.opset < 13 ? 1 : -1), r);
        n.attrs["axis"] = axis;
        if (g.opset < 13 && axis != r - 1) {
            // Opset < 13 softmax normalises over the flattened dims [axis, rank): rewrite as
            // Reshape → Softmax over the last axis of a 2-D view → Reshape back.
            int64_t outer = 1, inner = 1;
            for (int64_t i = 0; i < r; i++) (i < axis ? outer : inner) *= x[i];
            std::string flat = g.unique_name(n.outputs[0] + "_2d"), soft = g.unique_name(n.outputs[0] + "_sm");
            g.values[flat].name = flat;
            g.values[soft].name = soft;
            Node a = make_reshape(n.name + "_flatten", n.inputs[0], flat, {outer, inner});
            Node s = n;
            s.inputs = {flat};
            s.outputs = {soft};
            s.attrs["axis"] = int64_t(1);
            Node b = make_reshape(n.name + "_unflatten", soft, n.outputs[0], x);
            return {{a, s, b}};
        }
        set_output(g, n, 0, in_dtype(g, n, 0), x);
        return {};
    }
    n.attrs["epsilon"] = n.get_float("epsilon", 1e-5);
    if (n.op == "BatchNormalization") {
        user_check(n.num_inputs() == 5, n.describe(), ": needs 5 inputs (X, scale, B, mean, var)");
        drop_unused_outputs(g, n, 1, "training statistics");
        n.attrs["momentum"] = n.get_float("momentum", 0.9);  // the running statistics' update in training
        n.attrs.erase("training_mode");
        n.attrs.erase("spatial");
        for (int i = 1; i < 5; i++)
            user_check(r >= 2 && shape_numel(in_shape(g, n, i)) == x[1], n.describe(), ": input ", i,
                       " ('", n.inputs[i], "') should have ", r >= 2 ? x[1] : 0, " elements (one per channel)");
    } else if (n.op == "LayerNormalization") {
        n.attrs["axis"] = norm_axis(n, n.get_int("axis", -1), r);
        drop_unused_outputs(g, n, 1, "Mean/InvStdDev");
        n.attrs.erase("stash_type");
    } else if (n.op == "InstanceNormalization") {
        need_rank(g, n, 0, 3);
    } else if (n.op == "GroupNormalization") {
        need_rank(g, n, 0, 3);
        int64_t G = n.need_int("num_groups");
        user_check(G > 0 && x[1] % G == 0, n.describe(), ": num_groups=", G, " does not divide ", x[1], " channels");
    }
    set_output(g, n, 0, in_dtype(g, n, 0), x);
    return {};
}

Result canon_reduce(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    int64_t keep = n.get_int("keepdims", 1);
    n.attrs["keepdims"] = keep;
    Shape out;
    if (n.op == "ArgMax" || n.op == "ArgMin") {
        int64_t axis = norm_axis(n, n.get_int("axis", 0), r);
        n.attrs["axis"] = axis;
        n.attrs["select_last_index"] = n.get_int("select_last_index", 0);
        for (int64_t i = 0; i < r; i++)
            if (i != axis) out.push_back(x[i]);
            else if (keep) out.push_back(1);
        set_output(g, n, 0, DType::I64, out);
        return {};
    }
    std::vector<int64_t> axes;
    if (n.has_input(1)) axes = const_ints(g, n, 1, "axes");
    else axes = n.get_ints("axes", {});
    keep_inputs(n, 1);
    if (axes.empty()) {
        if (n.get_int("noop_with_empty_axes", 0)) {
            Node id = make_reshape(n.name, n.inputs[0], n.outputs[0], x);
            return {{id}};
        }
        for (int64_t i = 0; i < r; i++) axes.push_back(i);
    }
    for (auto &a : axes) a = norm_axis(n, a, r, "axes entry");
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    n.attrs["axes"] = axes;
    n.attrs.erase("noop_with_empty_axes");
    for (int64_t i = 0; i < r; i++)
        if (!std::binary_search(axes.begin(), axes.end(), i)) out.push_back(x[i]);
        else if (keep) out.push_back(1);
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

// How many leading inputs each op needs at least (ops not listed need one; Constant none).
static int min_inputs(const std::string &op) {
    static const std::map<std::string, int> m = {
        {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Equal", 2}, {"Less", 2},
        {"Greater", 2}, {"And", 2}, {"Or", 2}, {"PRelu", 2}, {"Where", 3}, {"MatMul", 2},
        {"Gemm", 2}, {"Conv", 2}, {"ConvTranspose", 2}, {"BatchNormalization", 5},
        {"InstanceNormalization", 3}, {"LayerNormalization", 2}, {"GroupNormalization", 3},
        {"Gather", 2}, {"Expand", 2}, {"Tile", 2}, {"Range", 3}, {"Constant", 0}};
    auto it = m.find(op);
    return it == m.end() ? 1 : it->second;
}

Result canonicalize_node(Graph &g, Node &n) {
    const int need = min_inputs(n.op);
    for (int i = 0; i < need; i++)
        user_check(n.has_input(i), n.describe(), ": needs at least ", need, " input(s) but input ", i,
                   n.num_inputs() <= i ? " is not given" : " is empty", " (it has ", n.num_inputs(),
                   "); the model is malformed, re-export it");
    user_check(!n.outputs.empty() && !n.outputs[0].empty(), n.describe(),
               ": has no output; the model is malformed, re-export it");
    for (int i = 0; i < n.num_inputs(); i++)
        if (n.has_input(i))
            internal_check(g.value(n.inputs[i]).has_shape, n.describe(), ": input '", n.inputs[i],
                           "' has no inferred shape");
    switch (op_kind(n.op)) {
    case OpKind::Elementwise: return canon_elementwise(g, n);
    case OpKind::MatMul: return canon_matmul(g, n);
    case OpKind::Conv: return canon_conv(g, n);
    case OpKind::Pool: return canon_pool(g, n);
    case OpKind::Norm: return canon_norm(g, n);
    case OpKind::Reduce: return canon_reduce(g, n);
    case OpKind::Layout: return canon_layout(g, n);
    case OpKind::Gather: return canon_gather(g, n);
    case OpKind::Resize: return canon_resize(g, n);
    case OpKind::Folded: return canon_folded(g, n);
    }
    return {};
}

}  // namespace loom::canon
