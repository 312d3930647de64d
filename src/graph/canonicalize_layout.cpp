// Canonical form and shape inference for layout ops (reshape family, transpose, concat, split,
// slice, expand, tile, pad), gather, resize, and the ops that fold away entirely.
#include <algorithm>
#include <cmath>

#include "graph/canonicalize_internal.h"
#include "support/error.h"

namespace loom::canon {

namespace {

Result to_reshape(Graph &g, Node &n, const Shape &out) {
    user_check(shape_numel(out) == shape_numel(in_shape(g, n, 0)), n.describe(), ": cannot reshape ",
               shape_str(in_shape(g, n, 0)), " (", shape_numel(in_shape(g, n, 0)), " elements) to ",
               shape_str(out), " (", shape_numel(out), " elements)");
    keep_inputs(n, 1);
    Node r = make_reshape(n.name, n.inputs[0], n.outputs[0], out);
    drop_unused_outputs(g, n, 1, "extra output");
    set_output(g, r, 0, in_dtype(g, n, 0), out);
    if (n.op == "Reshape") {  // already a Reshape: rewrite in place
        n.attrs = r.attrs;
        return {};
    }
    return {{r}};
}

Result reshape_family(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    if (n.op == "Reshape") {
        std::vector<int64_t> spec = n.has_input(1) ? const_ints(g, n, 1, "shape") : n.need_ints("shape");
        bool allowzero = n.get_int("allowzero", 0) != 0;
        Shape out(spec.size());
        int64_t known = 1, infer = -1;
        for (size_t i = 0; i < spec.size(); i++) {
            if (spec[i] == 0 && !allowzero) {
                user_check((int64_t)i < r, n.describe(), ": shape entry ", i, " is 0 (copy) but the input ",
                           shape_str(x), " has no dim ", i);
                out[i] = x[i];
            } else if (spec[i] == -1) {
                user_check(infer < 0, n.describe(), ": shape has more than one -1");
                infer = (int64_t)i;
                continue;
            } else {
                user_check(spec[i] >= 0, n.describe(), ": invalid shape entry ", spec[i]);
                out[i] = spec[i];
            }
            user_check(!__builtin_mul_overflow(known, out[i], &known), n.describe(), ": shape ",
                       attr_str(spec), " has more elements than int64 holds; the model is corrupt");
        }
        if (infer >= 0) {
            user_check(known > 0 && shape_numel(x) % known == 0, n.describe(), ": cannot infer -1 reshaping ",
                       shape_str(x), " with shape spec of ", spec.size(), " dims");
            out[infer] = shape_numel(x) / known;
        }
        n.attrs.erase("allowzero");
        return to_reshape(g, n, out);
    }
    if (n.op == "Flatten") {
        int64_t axis = norm_axis(n, n.get_int("axis", 1), r + 1);
        int64_t a = 1, b = 1;
        for (int64_t i = 0; i < r; i++) (i < axis ? a : b) *= x[i];
        return to_reshape(g, n, {a, b});
    }
    std::vector<int64_t> axes = n.has_input(1) ? const_ints(g, n, 1, "axes") : n.get_ints("axes", {});
    if (n.op == "Squeeze") {
        Shape out;
        for (auto &a : axes) {
            a = norm_axis(n, a, r, "axes entry");
            user_check(x[a] == 1, n.describe(), ": cannot squeeze dim ", a, " of ", shape_str(x),
                       " (size ", x[a], ", not 1)");
        }
        for (int64_t i = 0; i < r; i++) {
            bool sq = axes.empty() ? x[i] == 1 : std::count(axes.begin(), axes.end(), i) > 0;
            if (!sq) out.push_back(x[i]);
        }
        return to_reshape(g, n, out);
    }
    // Unsqueeze
    user_check(!axes.empty(), n.describe(), ": needs axes");
    int64_t orank = r + (int64_t)axes.size();
    for (auto &a : axes) a = norm_axis(n, a, orank, "axes entry");
    Shape out;
    for (int64_t i = 0, k = 0; i < orank; i++)
        out.push_back(std::count(axes.begin(), axes.end(), i) ? 1 : x[k++]);
    return to_reshape(g, n, out);
}

Result slice(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    std::vector<int64_t> starts, ends, axes, steps;
    if (n.has_input(1)) {
        starts = const_ints(g, n, 1, "starts");
        ends = const_ints(g, n, 2, "ends");
        if (n.has_input(3)) axes = const_ints(g, n, 3, "axes");
        if (n.has_input(4)) steps = const_ints(g, n, 4, "steps");
    } else {
        starts = n.need_ints("starts");
        ends = n.need_ints("ends");
        axes = n.get_ints("axes", {});
    }
    if (axes.empty())
        for (size_t i = 0; i < starts.size(); i++) axes.push_back((int64_t)i);
    if (steps.empty()) steps.assign(starts.size(), 1);
    user_check(starts.size() == ends.size() && axes.size() == starts.size() && steps.size() == starts.size(),
               n.describe(), ": starts, ends, axes and steps must have the same length");
    std::vector<int64_t> cs(r, 0), cst(r, 1);
    Shape out = x;
    for (size_t k = 0; k < axes.size(); k++) {
        int64_t a = norm_axis(n, axes[k], r, "axes entry"), d = x[a], s = starts[k], e = ends[k], st = steps[k];
        user_check(st != 0, n.describe(), ": step 0 on axis ", a);
        st = std::clamp<int64_t>(st, -(int64_t(1) << 62), int64_t(1) << 62);  // same slice; no overflow below
        // Clamp as ONNX does; INT64_MAX/MIN ends are common in exports.
        if (s < 0) s += d;
        if (e < 0 && e > INT64_MIN / 2) e += d;
        int64_t len;
        if (st > 0) {
            s = std::clamp<int64_t>(s, 0, d);
            e = std::clamp<int64_t>(e, 0, d);
            len = e > s ? (e - s + st - 1) / st : 0;
        } else {
            s = std::clamp<int64_t>(s, 0, d - 1);
            e = std::clamp<int64_t>(e, -1, d - 1);
            len = s > e ? (s - e + (-st) - 1) / (-st) : 0;
        }
        cs[a] = s;
        cst[a] = st;
        out[a] = len;
    }
    keep_inputs(n, 1);
    n.attrs.clear();
    n.attrs["starts"] = cs;
    n.attrs["steps"] = cst;
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

Result pad(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    std::vector<int64_t> pads;
    double value = n.get_float("value", 0.0);
    if (n.has_input(1)) {
        pads = const_ints(g, n, 1, "pads");
        if (n.has_input(2)) value = const_scalar(g, n, 2, "constant_value");
        if (n.has_input(3)) {  // opset 18 axes: pads only for the listed axes
            auto axes = const_ints(g, n, 3, "axes");
            user_check(pads.size() == 2 * axes.size(), n.describe(), ": pads has ", pads.size(),
                       " entries for ", axes.size(), " axes; expected ", 2 * axes.size());
            std::vector<int64_t> full(2 * r, 0);
            for (size_t k = 0; k < axes.size(); k++) {
                int64_t a = norm_axis(n, axes[k], r, "axes entry");
                full[a] = pads[k];
                full[r + a] = pads[axes.size() + k];
            }
            pads = full;
        }
    } else {
        pads = n.need_ints("pads");
    }
    user_check((int64_t)pads.size() == 2 * r, n.describe(), ": pads has ", pads.size(), " entries; input ",
               shape_str(x), " needs ", 2 * r);
    for (int64_t p : pads) {
        user_check(p >= 0, n.describe(), ": negative pads (cropping) are not supported; use Slice");
        user_check(p <= (int64_t(1) << 40), n.describe(), ": pad ", p, " is out of range; the model is corrupt");
    }
    std::string mode = n.get_string("mode", "constant");
    user_check(mode == "constant" || mode == "reflect" || mode == "edge", n.describe(), ": mode='", mode,
               "' is not supported; valid: constant, reflect, edge");
    Shape out = x;
    for (int64_t i = 0; i < r; i++) {
        out[i] += pads[i] + pads[r + i];
        if (mode == "reflect")
            user_check(pads[i] < x[i] && pads[r + i] < x[i], n.describe(), ": reflect padding of ",
                       std::max(pads[i], pads[r + i]), " needs dim ", i, " larger than that (it is ", x[i], ")");
    }
    keep_inputs(n, 1);
    n.attrs = {{"pads", pads}, {"mode", mode}, {"value", value}};
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

}  // namespace

Result canon_layout(Graph &g, Node &n) {
    const std::string &op = n.op;
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") return reshape_family(g, n);
    if (op == "Slice") return slice(g, n);
    if (op == "Pad") return pad(g, n);
    const Shape x = in_shape(g, n, 0);
    int64_t r = (int64_t)x.size();
    if (op == "Transpose") {
        std::vector<int64_t> perm = n.get_ints("perm", {});
        if (perm.empty())
            for (int64_t i = r - 1; i >= 0; i--) perm.push_back(i);
        user_check((int64_t)perm.size() == r, n.describe(), ": perm has ", perm.size(), " entries for rank ", r);
        Shape out(r);
        std::vector<int> seen(r, 0);
        for (int64_t i = 0; i < r; i++) {
            int64_t p = norm_axis(n, perm[i], r, "perm entry");
            user_check(!seen[p]++, n.describe(), ": perm repeats axis ", p);
            perm[i] = p;
            out[i] = x[p];
        }
        n.attrs["perm"] = perm;
        set_output(g, n, 0, in_dtype(g, n, 0), out);
    } else if (op == "DepthToSpace") {
        user_check(r == 4, n.describe(), ": input ", shape_str(x), " must be rank 4 (N, C, H, W)");
        const int64_t bs = n.need_int("blocksize");
        std::string mode = n.get_string("mode", "DCR");
        user_check(mode == "DCR" || mode == "CRD", n.describe(), ": mode='", mode, "' is not supported; valid: DCR, CRD");
        user_check(bs >= 1 && bs <= 64, n.describe(), ": blocksize ", bs, " is out of range; valid: 1..64");
        user_check(x[1] % (bs * bs) == 0, n.describe(), ": blocksize ", bs, " needs the input's channels (", x[1],
                   " in ", shape_str(x), ") to be a multiple of blocksize^2 = ", bs * bs);
        n.attrs = {{"blocksize", bs}, {"mode", mode}};
        set_output(g, n, 0, in_dtype(g, n, 0), {x[0], x[1] / (bs * bs), x[2] * bs, x[3] * bs});
    } else if (op == "Concat") {
        int64_t axis = norm_axis(n, n.need_int("axis"), r);
        n.attrs["axis"] = axis;
        Shape out = x;
        out[axis] = 0;
        for (int i = 0; i < n.num_inputs(); i++) {
            const Shape &s = in_shape(g, n, i);
            bool ok = s.size() == x.size();
            for (int64_t d = 0; ok && d < r; d++) ok = d == axis || s[d] == x[d];
            user_check(ok, n.describe(), ": input ", i, " ", shape_str(s), " does not match input 0 ",
                       shape_str(x), " outside axis ", axis);
            out[axis] += s[axis];
        }
        set_output(g, n, 0, in_dtype(g, n, 0), out);
    } else if (op == "Split") {
        int64_t axis = norm_axis(n, n.get_int("axis", 0), r);
        std::vector<int64_t> split = n.has_input(1) ? const_ints(g, n, 1, "split") : n.get_ints("split", {});
        int64_t k = (int64_t)n.outputs.size();
        if (split.empty()) {
            int64_t chunk = (x[axis] + k - 1) / k;  // opset 18: last chunk may be smaller
            for (int64_t i = 0; i < k; i++) split.push_back(std::min(chunk, x[axis] - i * chunk));
        }
        int64_t total = 0;
        for (int64_t s : split) {
            user_check(s >= 0 && s <= x[axis], n.describe(), ": split size ", s, " is outside 0..", x[axis],
                       " (axis ", axis, " of ", shape_str(x), ")");
            total += s;
        }
        user_check((int64_t)split.size() == k && total == x[axis], n.describe(), ": split sizes sum to ",
                   total, " over ", split.size(), " parts; axis ", axis, " of ", shape_str(x), " has ",
                   x[axis], " and the node has ", k, " outputs");
        keep_inputs(n, 1);
        n.attrs = {{"axis", axis}, {"split", split}};
        for (int64_t i = 0; i < k; i++) {
            Shape s = x;
            s[axis] = split[i];
            set_output(g, n, (int)i, in_dtype(g, n, 0), s);
        }
    } else if (op == "Expand") {
        auto shape = const_ints(g, n, 1, "shape");
        Shape out = broadcast(n, x, Shape(shape.begin(), shape.end()));
        keep_inputs(n, 1);
        n.attrs["shape"] = std::vector<int64_t>(out.begin(), out.end());
        set_output(g, n, 0, in_dtype(g, n, 0), out);
    } else if (op == "Tile") {
        auto rep = const_ints(g, n, 1, "repeats");
        user_check((int64_t)rep.size() == r, n.describe(), ": repeats has ", rep.size(), " entries for rank ", r);
        Shape out = x;
        for (int64_t i = 0; i < r; i++)
            user_check(rep[i] >= 0 && !__builtin_mul_overflow(out[i], rep[i], &out[i]), n.describe(), ": repeats ",
                       attr_str(rep), " must be >= 0 and small enough to tile ", shape_str(x));
        keep_inputs(n, 1);
        n.attrs["repeats"] = rep;
        set_output(g, n, 0, in_dtype(g, n, 0), out);
    } else {
        throw InternalError("canon_layout: " + op);
    }
    return {};
}

Result canon_gather(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0), idx = in_shape(g, n, 1);
    int64_t axis = norm_axis(n, n.get_int("axis", 0), (int64_t)x.size());
    n.attrs["axis"] = axis;
    user_check(!dtype_is_float(in_dtype(g, n, 1)), n.describe(), ": indices must be integers, got ",
               dtype_name(in_dtype(g, n, 1)));
    Shape out(x.begin(), x.begin() + axis);
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

Result canon_resize(Graph &g, Node &n) {
    const Shape x = in_shape(g, n, 0);
    size_t r = x.size();
    bool legacy = n.op == "Upsample" || g.opset < 11;  // Upsample and Resize-10: (X, scales)
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (legacy) {
        scales = n.has_input(1) ? const_floats(g, n, 1, "scales") : n.get_floats("scales", {});
    } else {
        if (n.has_input(2) && shape_numel(in_shape(g, n, 2)) > 0) scales = const_floats(g, n, 2, "scales");
        if (n.has_input(3)) sizes = const_ints(g, n, 3, "sizes");
    }
    user_check(n.get_ints("axes", {}).empty(), n.describe(), ": the 'axes' attribute is not supported");
    Shape out = x;
    if (!sizes.empty()) {
        user_check(sizes.size() == r, n.describe(), ": sizes has ", sizes.size(), " entries for rank ", r);
        scales.clear();
        for (size_t i = 0; i < r; i++) out[i] = sizes[i], scales.push_back((double)sizes[i] / x[i]);
    } else {
        user_check(scales.size() == r, n.describe(), ": needs scales or sizes with one entry per dim (", r, ")");
        for (size_t i = 0; i < r; i++) {
            double o = std::floor(x[i] * scales[i]);
            user_check(scales[i] > 0 && o < 0x1p40, n.describe(), ": scales ", attr_str(scales),
                       " must be positive and keep the output below 2^40 per dim (input ", shape_str(x), ")");
            out[i] = (int64_t)o;
        }
    }
    std::string mode = n.get_string("mode", "nearest");
    if (mode == "bilinear" || mode == "trilinear") mode = "linear";  // Upsample-7/9 names
    user_check(mode == "nearest" || mode == "linear" || mode == "cubic", n.describe(), ": mode='", mode,
               "' is invalid; valid: nearest, linear, cubic");
    std::string ctm = n.get_string("coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel");
    user_check(ctm != "tf_crop_and_resize", n.describe(),
               ": coordinate_transformation_mode=tf_crop_and_resize is not supported");
    std::map<std::string, AttrValue> attrs = {
        {"scales", scales},
        {"mode", mode},
        {"coordinate_transformation_mode", ctm},
        {"nearest_mode", n.get_string("nearest_mode", legacy ? "floor" : "round_prefer_floor")},
        {"cubic_coeff_a", n.get_float("cubic_coeff_a", -0.75)},
        {"exclude_outside", n.get_int("exclude_outside", 0)}};
    n.op = "Resize";
    n.attrs = attrs;
    keep_inputs(n, 1);
    set_output(g, n, 0, in_dtype(g, n, 0), out);
    return {};
}

// Ops that never survive canonicalisation: their outputs become initializers (or, for Identity
// and Dropout, a copying Reshape when a graph output name must be kept).
Result canon_folded(Graph &g, Node &n) {
    const std::string &op = n.op;
    if (op == "Identity" || op == "Dropout") {
        drop_unused_outputs(g, n, 1, "mask");
        return to_reshape(g, n, in_shape(g, n, 0));
    }
    if (op == "Shape") {
        const Shape &x = in_shape(g, n, 0);
        int64_t r = (int64_t)x.size(), s = n.get_int("start", 0), e = n.get_int("end", r);
        if (s < 0) s += r;
        if (e < 0) e += r;
        s = std::clamp<int64_t>(s, 0, r);
        e = std::clamp<int64_t>(e, s, r);
        g.set_constant(n.outputs[0], Tensor::from_ints(DType::I64, {e - s}, Shape(x.begin() + s, x.begin() + e)));
    } else if (op == "Size") {
        g.set_constant(n.outputs[0], Tensor::from_ints(DType::I64, {}, {shape_numel(in_shape(g, n, 0))}));
    } else if (op == "ConstantOfShape") {
        auto shape = const_ints(g, n, 0, "shape");
        Tensor value = Tensor::scalar(DType::F32, 0.0);
        if (n.has("value")) value = attr_scalar_tensor(n, "value");
        Tensor t(value.dtype(), Shape(shape.begin(), shape.end()));
        for (int64_t i = 0; i < t.numel(); i++) t.set(i, value.get(0));
        g.set_constant(n.outputs[0], t);
    } else if (op == "Range") {
        auto start = const_scalar(g, n, 0, "start"), limit = const_scalar(g, n, 1, "limit"),
             delta = const_scalar(g, n, 2, "delta");
        user_check(delta != 0, n.describe(), ": delta is 0");
        double count = std::ceil((limit - start) / delta);
        user_check(std::isfinite(count) && count < 0x1p40, n.describe(), ": Range(", start, ", ", limit,
                   ", ", delta, ") would have ", count, " elements; the model is corrupt");
        int64_t cnt = count > 0 ? (int64_t)count : 0;
        Tensor t(in_dtype(g, n, 0), {cnt});
        for (int64_t i = 0; i < cnt; i++) t.set(i, start + i * delta);
        g.set_constant(n.outputs[0], t);
    } else if (op == "Constant") {
        Tensor t;
        if (n.has("value")) {
            const Tensor *v = std::get_if<Tensor>(&n.attrs.at("value"));
            user_check(v != nullptr, n.describe(), ": attribute 'value' must be a tensor; it is ",
                       attr_str(n.attrs.at("value")));
            t = *v;
        } else if (n.has("value_float")) t = Tensor::scalar(DType::F32, n.get_float("value_float", 0));
        else if (n.has("value_int")) t = Tensor::from_ints(DType::I64, {}, {n.get_int("value_int", 0)});
        else if (n.has("value_floats")) {
            auto v = n.get_floats("value_floats");
            t = Tensor::from_doubles(DType::F32, {(int64_t)v.size()}, v);
        } else if (n.has("value_ints")) {
            auto v = n.get_ints("value_ints");
            t = Tensor::from_ints(DType::I64, {(int64_t)v.size()}, v);
        } else {
            throw UserError(n.describe() + ": Constant without a supported value attribute "
                            "(value, value_float(s), value_int(s))");
        }
        g.set_constant(n.outputs[0], t);
    } else {
        throw InternalError("canon_folded: " + op);
    }
    return {};
}

}  // namespace loom::canon
