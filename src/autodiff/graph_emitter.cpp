#include "autodiff/graph_emitter.h"

#include <algorithm>

#include "support/error.h"

namespace loom::autodiff {

Shape broadcast_shapes(const Shape &a, const Shape &b) {
    size_t r = std::max(a.size(), b.size());
    Shape out(r, 1);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        user_check(da == db || da == 1 || db == 1, "autodiff: shapes ", shape_str(a), " and ", shape_str(b),
                   " do not broadcast");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

std::string GraphEmitter::fresh(const std::string &base) {
    std::string n;
    do {
        n = prefix_ + base + "_" + std::to_string(count_++);
    } while (g_.has_value(n) || g_.find_node(n));
    return n;
}

std::vector<std::string> GraphEmitter::op_n(const std::string &op, std::vector<std::string> inputs,
                                            std::vector<Shape> shapes, std::map<std::string, AttrValue> attrs) {
    Node n;
    n.op = op;
    n.name = fresh(op);
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    DType t = DType::F32;
    for (size_t k = 0; k < shapes.size(); k++) {
        std::string v = fresh(op + "_out");
        n.outputs.push_back(v);
        g_.values[v] = ValueInfo{v, t, shapes[k], {}, true};
    }
    std::vector<std::string> outs = n.outputs;
    g_.nodes.push_back(std::move(n));
    return outs;
}

std::string GraphEmitter::op(const std::string &op, std::vector<std::string> inputs, Shape shape,
                             std::map<std::string, AttrValue> attrs, DType dtype) {
    std::string v = op_n(op, std::move(inputs), {std::move(shape)}, std::move(attrs))[0];
    g_.values[v].dtype = dtype;
    return v;
}

std::string GraphEmitter::constant(const Tensor &t, const std::string &base) {
    std::string n = fresh(base);
    g_.set_constant(n, t);
    g_.values[n].has_shape = true;
    return n;
}

std::string GraphEmitter::scalar(double v, DType t) { return constant(Tensor::scalar(t, v), "c"); }

std::string GraphEmitter::binary(const std::string &o, const std::string &a, const std::string &b) {
    DType t = dtype(a);
    if (o == "Equal" || o == "Less" || o == "Greater" || o == "And" || o == "Or") t = DType::Bool;
    return op(o, {a, b}, broadcast_shapes(shape(a), shape(b)), {}, t);
}

std::string GraphEmitter::unary(const std::string &o, const std::string &x, std::map<std::string, AttrValue> attrs) {
    return op(o, {x}, shape(x), std::move(attrs), o == "Not" ? DType::Bool : dtype(x));
}

std::string GraphEmitter::where(const std::string &c, const std::string &a, const std::string &b) {
    return op("Where", {c, a, b}, broadcast_shapes(shape(c), broadcast_shapes(shape(a), shape(b))), {}, dtype(a));
}

std::string GraphEmitter::reshape(const std::string &x, const Shape &s) {
    if (shape(x) == s) return x;
    return op("Reshape", {x}, s, {{"shape", std::vector<int64_t>(s)}}, dtype(x));
}

std::string GraphEmitter::transpose(const std::string &x, const std::vector<int64_t> &perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); i++) identity = identity && perm[i] == (int64_t)i;
    if (identity) return x;
    // A transpose of a transpose by the inverse permutation is its source (a weight read
    // transposed by the forward gets its gradient back in its stored layout).
    if (int k = g_.producer(x); k >= 0 && g_.nodes[k].op == "Transpose" && !g_.nodes[k].inputs.empty()) {
        const Node &t = g_.nodes[k];
        std::vector<int64_t> inner = t.get_ints("perm");
        if (inner.empty())
            for (int64_t d = (int64_t)perm.size() - 1; d >= 0; d--) inner.push_back(d);
        if (inner.size() == perm.size()) {
            bool inverse = true;
            for (size_t i = 0; i < perm.size(); i++) inverse = inverse && perm[i] >= 0 && perm[i] < (int64_t)inner.size() &&
                                                                 inner[perm[i]] == (int64_t)i;
            if (inverse) return t.inputs[0];
        }
    }
    const Shape &s = shape(x);
    Shape out(perm.size());
    for (size_t i = 0; i < perm.size(); i++) out[i] = s[perm[i]];
    return op("Transpose", {x}, out, {{"perm", perm}}, dtype(x));
}

std::string GraphEmitter::reduce_sum(const std::string &x, std::vector<int64_t> axes, bool keepdims) {
    if (axes.empty()) return x;
    std::sort(axes.begin(), axes.end());
    const Shape s = shape(x);
    const int64_t r = (int64_t)s.size();
    Shape out;
    for (int64_t i = 0; i < r; i++) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced) out.push_back(s[i]);
        else if (keepdims) out.push_back(1);
    }
    // Several axes (a BatchNorm's N, H, W; a bias over N, H, W): the trailing ones as one flat
    // axis first, then the leading ones over what is left, so each stage is one long reduction per
    // output, which the GPU splits over threads, where a reduction over several axes took one
    // thread per output (bench/DECISIONS.md#d92-staged-multi-axis-reductions).
    size_t t = 0;
    while (t < axes.size() && axes[axes.size() - 1 - t] == r - 1 - (int64_t)t) t++;
    if (t > 0 && axes.size() > 1) {
        Shape flat(s.begin(), s.end() - (int64_t)t), kept = flat;
        flat.push_back(shape_numel(Shape(s.end() - (int64_t)t, s.end())));
        std::string y = op("ReduceSum", {reshape(x, flat)}, kept,
                           {{"axes", std::vector<int64_t>{(int64_t)kept.size()}}, {"keepdims", int64_t(0)}}, dtype(x));
        y = reduce_sum(y, std::vector<int64_t>(axes.begin(), axes.end() - (int64_t)t), false);
        return reshape(y, out);
    }
    return op("ReduceSum", {x}, out, {{"axes", axes}, {"keepdims", int64_t(keepdims ? 1 : 0)}}, dtype(x));
}

std::string GraphEmitter::expand(const std::string &x, const Shape &s) {
    if (shape(x) == s) return x;
    return op("Expand", {x}, s, {{"shape", std::vector<int64_t>(s)}}, dtype(x));
}

std::string GraphEmitter::unbroadcast(const std::string &g, const Shape &target) {
    const Shape &gs = shape(g);
    if (gs == target) return g;
    size_t lead = gs.size() - target.size();
    std::vector<int64_t> axes;
    for (size_t i = 0; i < gs.size(); i++)
        if (i < lead || (target[i - lead] == 1 && gs[i] != 1)) axes.push_back((int64_t)i);
    return reshape(reduce_sum(g, axes, true), target);
}

}  // namespace loom::autodiff
