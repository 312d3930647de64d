// Ops that move data without arithmetic: Reshape (and the Flatten/Squeeze/Unsqueeze/Identity
// forms it replaces), Transpose, DepthToSpace, Concat, Split, Slice, Gather, Expand, Tile, Pad; and the ops
// canonicalisation folds away (Shape, Size, Constant, ConstantOfShape, Range), so that folding can
// still evaluate them. Integer data is copied exactly, never through double.
#include <algorithm>
#include <cmath>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

Tensor as_result(const Tensor &t) { return dtype_is_float(t.dtype()) ? t.cast(DType::F64) : t; }

std::vector<int64_t> identity_map(int64_t n) {
    std::vector<int64_t> m(n);
    for (int64_t i = 0; i < n; i++) m[i] = i;
    return m;
}

// Reshape and every op that only relabels the shape.
std::vector<Tensor> op_reshape(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const Shape &os = a.out_shape(0);
    if (a.node.op == "Reshape" && a.node.has("shape"))
        a.check(a.node.get_ints("shape") == os, "attribute shape ", shape_str(a.node.get_ints("shape")),
                " differs from the declared output ", shape_str(os));
    a.check(shape_numel(os) == X.numel(), "cannot reshape ", shape_str(X.shape()), " (", X.numel(),
            " elements) to ", shape_str(os));
    std::vector<Tensor> r{as_result(X).reshaped(os)};
    if (a.node.op == "Dropout" && a.wants(1)) {  // inference mode: the mask keeps everything
        Tensor mask(DType::Bool, a.out_shape(1));
        for (int64_t i = 0; i < mask.numel(); i++) mask.set(i, 1);
        r.push_back(mask);
    }
    return r;
}

std::vector<Tensor> op_transpose(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int r = X.rank();
    std::vector<int64_t> perm = a.node.get_ints("perm");
    if (perm.empty())
        for (int d = r - 1; d >= 0; d--) perm.push_back(d);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    a.check(sorted == identity_map(r), "perm must be a permutation of 0..", r - 1);
    Shape os(r);
    for (int d = 0; d < r; d++) os[d] = X.shape()[perm[d]];
    a.check(os == a.out_shape(0), "perm gives ", shape_str(os), " but ", shape_str(a.out_shape(0)),
            " is declared");
    const std::vector<int64_t> ist = shape_strides(X.shape());
    const int64_t n = X.numel();
    std::vector<int64_t> src(n);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            off += (rem % os[d]) * ist[perm[d]];
            rem /= os[d];
        }
        src[i] = off;
    }
    return {gather_elements(X, src, a.out.at(0))};
}

// DepthToSpace, straight from the ONNX definition: DCR reads channel (a*bs + b)*C' + c, CRD reads
// c*bs*bs + a*bs + b, for output [n, c, h*bs + a, w*bs + b] of C' = C / bs^2 channels.
std::vector<Tensor> op_depth_to_space(const OpArgs &a) {
    const Tensor &X = a.input(0);
    a.check(X.rank() == 4, "input must be rank 4 (N, C, H, W), not ", shape_str(X.shape()));
    const int64_t bs = a.node.get_int("blocksize", 0);
    const std::string mode = a.node.get_string("mode", "DCR");
    a.check(mode == "DCR" || mode == "CRD", "mode '", mode, "' is not DCR or CRD");
    const Shape &xs = X.shape();
    a.check(bs >= 1 && xs[1] % (bs * bs) == 0, "blocksize ", bs, " does not divide the ", xs[1],
            " channels into blocksize^2 groups");
    const Shape os = {xs[0], xs[1] / (bs * bs), xs[2] * bs, xs[3] * bs};
    a.check(os == a.out_shape(0), "gives ", shape_str(os), " but ", shape_str(a.out_shape(0)), " is declared");
    const int64_t n_out = shape_numel(os), C = os[1];
    std::vector<int64_t> src(n_out);
#pragma omp parallel for if (n_out > kParallelMin)
    for (int64_t i = 0; i < n_out; i++) {
        int64_t w = i % os[3], h = (i / os[3]) % os[2], c = (i / (os[3] * os[2])) % C, n = i / (os[3] * os[2] * C);
        int64_t ab = (h % bs) * bs + w % bs;
        int64_t ch = mode == "DCR" ? ab * C + c : c * bs * bs + ab;
        src[i] = ((n * xs[1] + ch) * xs[2] + h / bs) * xs[3] + w / bs;
    }
    return {gather_elements(X, src, a.out.at(0))};
}

int64_t norm_axis(const OpArgs &a, int64_t axis, int rank) {
    int64_t d = axis < 0 ? axis + rank : axis;
    a.check(d >= 0 && d < rank, "axis ", axis, " is out of range for rank ", rank);
    return d;
}

// Outer/axis/inner sizes of \p s around \p axis.
void split_dims(const Shape &s, int64_t axis, int64_t &outer, int64_t &inner) {
    outer = inner = 1;
    for (int64_t d = 0; d < axis; d++) outer *= s[d];
    for (size_t d = axis + 1; d < s.size(); d++) inner *= s[d];
}

std::vector<Tensor> op_concat(const OpArgs &a) {
    const int k = a.num_inputs();
    a.check(k >= 1, "needs at least one input");
    const Tensor &X0 = a.input(0);
    const int64_t axis = norm_axis(a, a.node.get_int("axis", 0), X0.rank());
    Shape os = X0.shape();
    os[axis] = 0;
    for (int i = 0; i < k; i++) {
        const Tensor &Xi = a.input(i);
        Shape s = Xi.shape(), ref = X0.shape();
        a.check(Xi.rank() == X0.rank(), "input ", i, " ", shape_str(s), " has another rank than input 0 ",
                shape_str(ref));
        s[axis] = ref[axis] = 0;
        a.check(s == ref, "input ", i, " ", shape_str(Xi.shape()), " differs from input 0 ",
                shape_str(X0.shape()), " outside axis ", axis);
        a.check(dtype_is_float(Xi.dtype()) == dtype_is_float(X0.dtype()), "inputs mix float and integer dtypes");
        os[axis] += Xi.shape()[axis];
    }
    a.check(os == a.out_shape(0), "inputs concatenate to ", shape_str(os), " but ",
            shape_str(a.out_shape(0)), " is declared");
    int64_t outer, inner;
    split_dims(os, axis, outer, inner);
    const bool fl = dtype_is_float(X0.dtype());
    Tensor out(fl ? DType::F64 : X0.dtype(), os);
    int64_t start = 0;  // position along axis where input i begins
    for (int i = 0; i < k; i++) {
        const Tensor &Xi = a.input(i);
        const int64_t len = Xi.shape()[axis] * inner, row = os[axis] * inner;
        const std::vector<double> v = fl ? to_f64(Xi) : std::vector<double>{};
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < len; j++) {
                const int64_t dst = o * row + start * inner + j, s = o * len + j;
                if (fl) f64_data(out)[dst] = v[s];
                else out.set_int(dst, Xi.get_int(s));
            }
        start += Xi.shape()[axis];
    }
    return {out};
}

std::vector<Tensor> op_split(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int64_t axis = norm_axis(a, a.node.get_int("axis", 0), X.rank());
    const int nout = (int)a.node.outputs.size();
    std::vector<int64_t> split = a.node.get_ints("split");
    if (split.empty()) {  // ONNX default: equal parts, the last one smaller
        const int64_t part = (X.shape()[axis] + nout - 1) / nout;
        for (int i = 0; i < nout; i++) split.push_back(std::min(part, X.shape()[axis] - part * i));
    }
    a.check((int)split.size() == nout, "split has ", split.size(), " sizes for ", nout, " outputs");
    int64_t total = 0;
    for (int64_t s : split) total += s;
    a.check(total == X.shape()[axis], "split sizes sum to ", total, " but axis ", axis, " of ",
            shape_str(X.shape()), " has ", X.shape()[axis]);
    int64_t outer, inner;
    split_dims(X.shape(), axis, outer, inner);
    std::vector<Tensor> r;
    int64_t start = 0;
    for (int i = 0; i < nout; i++) {
        Shape os = X.shape();
        os[axis] = split[i];
        if (a.wants(i)) {
            a.check(os == a.out_shape(i), "output ", i, " is ", shape_str(os), " but ",
                    shape_str(a.out_shape(i)), " is declared");
            const int64_t len = split[i] * inner;
            std::vector<int64_t> src(outer * len);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t j = 0; j < len; j++) src[o * len + j] = (o * X.shape()[axis] + start) * inner + j;
            r.push_back(gather_elements(X, src, a.out.at(i)));
        } else {
            r.emplace_back();
        }
        start += split[i];
    }
    return r;
}

std::vector<Tensor> op_slice(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int r = X.rank();
    const Shape &os = a.out_shape(0);
    const std::vector<int64_t> starts = a.node.need_ints("starts"), steps = ints_or(a, "steps", r, 1);
    a.check((int)starts.size() == r && (int)os.size() == r, "starts must have one entry per dim (", r, ")");
    for (int d = 0; d < r; d++) {
        if (os[d] == 0) continue;
        const int64_t first = starts[d], last = starts[d] + (os[d] - 1) * steps[d];
        a.check(steps[d] != 0 && first >= 0 && first < X.shape()[d] && last >= 0 && last < X.shape()[d],
                "dim ", d, ": start ", first, " step ", steps[d], " extent ", os[d],
                " reads outside 0..", X.shape()[d] - 1);
    }
    const std::vector<int64_t> ist = shape_strides(X.shape());
    const int64_t n = shape_numel(os);
    std::vector<int64_t> src(n);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            off += (starts[d] + (rem % os[d]) * steps[d]) * ist[d];
            rem /= os[d];
        }
        src[i] = off;
    }
    return {gather_elements(X, src, a.out.at(0))};
}

std::vector<Tensor> op_gather(const OpArgs &a) {
    const Tensor &D = a.input(0), &I = a.input(1);
    a.check(!dtype_is_float(I.dtype()), "indices must be integers, got ", dtype_name(I.dtype()));
    const int64_t axis = norm_axis(a, a.node.get_int("axis", 0), D.rank());
    const int64_t dim = D.shape()[axis];
    Shape os(D.shape().begin(), D.shape().begin() + axis);
    os.insert(os.end(), I.shape().begin(), I.shape().end());
    os.insert(os.end(), D.shape().begin() + axis + 1, D.shape().end());
    a.check(os == a.out_shape(0), "gather gives ", shape_str(os), " but ", shape_str(a.out_shape(0)),
            " is declared");
    std::vector<int64_t> idx = I.to_ints();
    for (int64_t &v : idx) {
        a.check(v >= -dim && v < dim, "index ", v, " is out of range for axis ", axis, " of size ", dim);
        if (v < 0) v += dim;
    }
    int64_t outer, inner;
    split_dims(D.shape(), axis, outer, inner);
    const int64_t ni = (int64_t)idx.size(), n = outer * ni * inner;
    std::vector<int64_t> src(n);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i++) {
        const int64_t in = i % inner, j = (i / inner) % ni, o = i / (inner * ni);
        src[i] = (o * dim + idx[j]) * inner + in;
    }
    return {gather_elements(D, src, a.out.at(0))};
}

std::vector<Tensor> op_expand(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const Shape &os = a.out_shape(0);
    const Shape target = a.node.has("shape") ? Shape(a.node.get_ints("shape")) : os;
    const Shape bs = broadcast_shapes(a, {X.shape(), target});
    a.check(bs == os, "expanding ", shape_str(X.shape()), " to ", shape_str(target), " gives ", shape_str(bs),
            " but ", shape_str(os), " is declared");
    Broadcaster b(os, {X.shape()});
    std::vector<int64_t> src(shape_numel(os));
    for (int64_t i = 0; i < (int64_t)src.size(); i++) src[i] = b.offset(0, i);
    return {gather_elements(X, src, a.out.at(0))};
}

std::vector<Tensor> op_tile(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int r = X.rank();
    const std::vector<int64_t> rep = a.node.need_ints("repeats");
    a.check((int)rep.size() == r, "repeats has ", rep.size(), " entries for rank ", r);
    Shape os(r);
    for (int d = 0; d < r; d++) os[d] = X.shape()[d] * rep[d];
    a.check(os == a.out_shape(0), "repeats give ", shape_str(os), " but ", shape_str(a.out_shape(0)),
            " is declared");
    const std::vector<int64_t> ist = shape_strides(X.shape());
    std::vector<int64_t> src(shape_numel(os));
    for (int64_t i = 0; i < (int64_t)src.size(); i++) {
        int64_t rem = i, off = 0;
        for (int d = r - 1; d >= 0; d--) {
            off += ((rem % os[d]) % X.shape()[d]) * ist[d];
            rem /= os[d];
        }
        src[i] = off;
    }
    return {gather_elements(X, src, a.out.at(0))};
}

// Source position for padded position \p p of a dim of size \p n, or -1 for the constant.
int64_t pad_source(int64_t p, int64_t n, int mode) {
    if (p >= 0 && p < n) return p;
    switch (mode) {
    case 1: {  // reflect: mirror without repeating the edge (NumPy 'reflect')
        if (n == 1) return 0;
        const int64_t period = 2 * (n - 1);
        int64_t q = ((p % period) + period) % period;
        return q < n ? q : period - q;
    }
    case 2: return std::min(std::max<int64_t>(p, 0), n - 1);  // edge
    case 3: return ((p % n) + n) % n;                         // wrap
    default: return -1;                                      // constant
    }
}

std::vector<Tensor> op_pad(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int r = X.rank();
    const std::vector<int64_t> pads = ints_or(a, "pads", 2 * r, 0);
    const std::string ms = a.node.get_string("mode", "constant");
    const int mode = ms == "constant" ? 0 : ms == "reflect" ? 1 : ms == "edge" ? 2 : ms == "wrap" ? 3 : -1;
    a.check(mode >= 0, "mode '", ms, "' is not valid; use constant, reflect, edge or wrap");
    Shape os(r);
    for (int d = 0; d < r; d++) {
        os[d] = X.shape()[d] + pads[d] + pads[r + d];
        a.check(mode == 0 || X.shape()[d] > 0 || os[d] == 0, "cannot ", ms, "-pad an empty dim ", d);
    }
    a.check(os == a.out_shape(0), "pads give ", shape_str(os), " but ", shape_str(a.out_shape(0)),
            " is declared");
    const std::vector<int64_t> ist = shape_strides(X.shape());
    const int64_t n = shape_numel(os);
    std::vector<int64_t> src(n);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = r - 1; d >= 0 && off >= 0; d--) {
            const int64_t p = pad_source(rem % os[d] - pads[d], X.shape()[d], mode);
            off = p < 0 ? -1 : off + p * ist[d];
            rem /= os[d];
        }
        src[i] = off;
    }
    return {gather_elements(X, src, a.out.at(0), a.node.get_float("value", 0.0))};
}

std::vector<Tensor> op_shape(const OpArgs &a) {
    const Shape &s = a.input(0).shape();
    const int64_t r = (int64_t)s.size();
    int64_t start = a.node.get_int("start", 0), end = a.node.get_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    Tensor t = a.new_output();
    a.check(t.numel() == end - start, "declared output ", shape_str(t.shape()), " but the shape slice has ",
            end - start, " dims");
    for (int64_t i = start; i < end; i++) t.set_int(i - start, s[i]);
    return {t};
}

std::vector<Tensor> op_size(const OpArgs &a) {
    Tensor t = a.new_output();
    t.set_int(0, a.input(0).numel());
    return {t};
}

std::vector<Tensor> op_constant_of_shape(const OpArgs &a) {
    Tensor t = a.new_output();
    double v = 0;
    if (a.node.has("value")) {
        const Tensor *vt = std::get_if<Tensor>(&a.node.attrs.at("value"));
        a.check(vt && vt->numel() == 1, "attribute value must be a one-element tensor");
        v = vt->get(0);
    }
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, v);
    return {t};
}

std::vector<Tensor> op_constant(const OpArgs &a) {
    const auto &at = a.node.attrs;
    Tensor t;
    if (at.count("value") && std::get_if<Tensor>(&at.at("value"))) t = std::get<Tensor>(at.at("value"));
    else if (a.node.has("value_float")) t = Tensor::scalar(DType::F32, a.node.get_float("value_float", 0));
    else if (a.node.has("value_int")) t = Tensor::from_ints(DType::I64, {}, {a.node.get_int("value_int", 0)});
    else if (a.node.has("value_floats")) {
        auto v = a.node.get_floats("value_floats");
        t = Tensor::from_doubles(DType::F32, {(int64_t)v.size()}, v);
    } else if (a.node.has("value_ints")) {
        auto v = a.node.get_ints("value_ints");
        t = Tensor::from_ints(DType::I64, {(int64_t)v.size()}, v);
    } else {
        a.fail("has no value, value_float(s) or value_int(s) attribute the reference understands");
    }
    return {as_result(t)};
}

std::vector<Tensor> op_range(const OpArgs &a) {
    const Tensor &s = a.input(0), &d = a.input(2);
    a.input(1);
    Tensor t = a.new_output();
    for (int64_t i = 0; i < t.numel(); i++) {
        if (dtype_is_float(t.dtype())) t.set(i, s.get(0) + i * d.get(0));
        else t.set_int(i, s.get_int(0) + i * d.get_int(0));
    }
    return {t};
}

}  // namespace

void register_layout_ops(OpTable &t) {
    for (const char *op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
        t[op] = op_reshape;
    t["Transpose"] = op_transpose;
    t["DepthToSpace"] = op_depth_to_space;
    t["Concat"] = op_concat;
    t["Split"] = op_split;
    t["Slice"] = op_slice;
    t["Gather"] = op_gather;
    t["Expand"] = op_expand;
    t["Tile"] = op_tile;
    t["Pad"] = op_pad;
    t["Shape"] = op_shape;
    t["Size"] = op_size;
    t["ConstantOfShape"] = op_constant_of_shape;
    t["Constant"] = op_constant;
    t["Range"] = op_range;
}

}  // namespace loom::ref
