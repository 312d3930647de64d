// Reductions over axes (Reduce*), ArgMax/ArgMin, and Softmax/LogSoftmax over one axis.
#include <cmath>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

// Splits X's dims into kept and reduced ones: for output element o (over kept dims, row-major)
// the inputs it reduces are X[base(o) + roff[j]] for every j.
struct ReducePlan {
    Shape kept;                 // extents of the kept dims
    std::vector<int64_t> kstr;  // X strides of the kept dims
    std::vector<int64_t> roff;  // offsets of every reduced element relative to base
    int64_t base(int64_t o) const {
        int64_t off = 0;
        for (int d = (int)kept.size() - 1; d >= 0; d--) {
            off += (o % kept[d]) * kstr[d];
            o /= kept[d];
        }
        return off;
    }
};

ReducePlan plan_reduce(const Shape &xs, const std::vector<bool> &reduced) {
    ReducePlan p;
    const std::vector<int64_t> st = shape_strides(xs);
    Shape rs;
    std::vector<int64_t> rst;
    for (size_t d = 0; d < xs.size(); d++) {
        if (reduced[d]) rs.push_back(xs[d]), rst.push_back(st[d]);
        else p.kept.push_back(xs[d]), p.kstr.push_back(st[d]);
    }
    const int64_t n = shape_numel(rs);
    p.roff.resize(n);
    for (int64_t j = 0; j < n; j++) {
        std::vector<int64_t> idx = unflatten(j, rs);
        int64_t off = 0;
        for (size_t q = 0; q < idx.size(); q++) off += idx[q] * rst[q];
        p.roff[j] = off;
    }
    return p;
}

// Which dims \p axes name (negative counted from the end; empty means all), checked against rank.
std::vector<bool> axes_mask(const OpArgs &a, std::vector<int64_t> axes, int rank) {
    std::vector<bool> m(rank, axes.empty());
    for (int64_t ax : axes) {
        int64_t d = ax < 0 ? ax + rank : ax;
        a.check(d >= 0 && d < rank, "axis ", ax, " is out of range for rank ", rank);
        a.check(!m[d], "axis ", ax, " is listed twice");
        m[d] = true;
    }
    return m;
}

Shape reduced_shape(const Shape &xs, const std::vector<bool> &m, bool keepdims) {
    Shape s;
    for (size_t d = 0; d < xs.size(); d++) {
        if (!m[d]) s.push_back(xs[d]);
        else if (keepdims) s.push_back(1);
    }
    return s;
}

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

std::vector<Tensor> reduce(const OpArgs &a, Red kind) {
    const Tensor &X = a.input(0);
    const std::vector<bool> m = axes_mask(a, a.node.get_ints("axes"), X.rank());
    const bool keep = a.node.get_int("keepdims", 1) != 0;
    const Shape os = reduced_shape(X.shape(), m, keep);
    a.check(os == a.out_shape(0), "axes/keepdims give output ", shape_str(os), " but ",
            shape_str(a.out_shape(0)), " is declared");
    const ReducePlan p = plan_reduce(X.shape(), m);
    const std::vector<double> x = to_f64(X);
    const int64_t n = shape_numel(os), len = (int64_t)p.roff.size();
    std::vector<double> y(n);
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t o = 0; o < n; o++) {
        const double *px = x.data() + p.base(o);
        double acc = kind == Red::Prod ? 1.0 : kind == Red::Max ? -INFINITY : kind == Red::Min ? INFINITY : 0.0;
        double mx = -INFINITY;
        if (kind == Red::LogSumExp)
            for (int64_t j = 0; j < len; j++) mx = std::max(mx, px[p.roff[j]]);
        for (int64_t j = 0; j < len; j++) {
            const double v = px[p.roff[j]];
            switch (kind) {
            case Red::Sum: case Red::Mean: case Red::LogSum: acc += v; break;
            case Red::Max: acc = std::isnan(v) ? v : std::max(acc, v); break;
            case Red::Min: acc = std::isnan(v) ? v : std::min(acc, v); break;
            case Red::Prod: acc *= v; break;
            case Red::L1: acc += std::abs(v); break;
            case Red::L2: case Red::SumSquare: acc += v * v; break;
            case Red::LogSumExp: acc += std::exp(v - mx); break;
            }
        }
        if (kind == Red::Mean) acc /= len;
        if (kind == Red::L2) acc = std::sqrt(acc);
        if (kind == Red::LogSum) acc = std::log(acc);
        if (kind == Red::LogSumExp) acc = mx + std::log(acc);
        y[o] = acc;
    }
    return {output_from(a, y)};
}

std::vector<Tensor> op_reduce_sum(const OpArgs &a) { return reduce(a, Red::Sum); }
std::vector<Tensor> op_reduce_mean(const OpArgs &a) { return reduce(a, Red::Mean); }
std::vector<Tensor> op_reduce_max(const OpArgs &a) { return reduce(a, Red::Max); }
std::vector<Tensor> op_reduce_min(const OpArgs &a) { return reduce(a, Red::Min); }
std::vector<Tensor> op_reduce_prod(const OpArgs &a) { return reduce(a, Red::Prod); }
std::vector<Tensor> op_reduce_l1(const OpArgs &a) { return reduce(a, Red::L1); }
std::vector<Tensor> op_reduce_l2(const OpArgs &a) { return reduce(a, Red::L2); }
std::vector<Tensor> op_reduce_sum_square(const OpArgs &a) { return reduce(a, Red::SumSquare); }
std::vector<Tensor> op_reduce_log_sum(const OpArgs &a) { return reduce(a, Red::LogSum); }
std::vector<Tensor> op_reduce_log_sum_exp(const OpArgs &a) { return reduce(a, Red::LogSumExp); }

std::vector<Tensor> arg_reduce(const OpArgs &a, bool is_max) {
    const Tensor &X = a.input(0);
    const int64_t axis = a.node.get_int("axis", 0);
    const std::vector<bool> m = axes_mask(a, {axis}, X.rank());
    const bool keep = a.node.get_int("keepdims", 1) != 0, last = a.node.get_int("select_last_index", 0) != 0;
    const Shape os = reduced_shape(X.shape(), m, keep);
    a.check(os == a.out_shape(0), "axis/keepdims give output ", shape_str(os), " but ",
            shape_str(a.out_shape(0)), " is declared");
    const ReducePlan p = plan_reduce(X.shape(), m);
    const std::vector<double> x = to_f64(X);
    const int64_t n = shape_numel(os), len = (int64_t)p.roff.size();
    Tensor out = a.new_output();
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t o = 0; o < n; o++) {
        const double *px = x.data() + p.base(o);
        int64_t best = 0;
        for (int64_t j = 1; j < len; j++) {
            const double v = px[p.roff[j]], b = px[p.roff[best]];
            const bool better = is_max ? v > b : v < b;
            if (better || (last && v == b)) best = j;
        }
        if (out.dtype() == DType::I64) static_cast<int64_t *>(out.data())[o] = best;
        else static_cast<int32_t *>(out.data())[o] = (int32_t)best;
    }
    return {out};
}

std::vector<Tensor> op_argmax(const OpArgs &a) {
    a.check(a.out.at(0).dtype == DType::I64 || a.out.at(0).dtype == DType::I32, "output must be i64");
    return arg_reduce(a, true);
}
std::vector<Tensor> op_argmin(const OpArgs &a) {
    a.check(a.out.at(0).dtype == DType::I64 || a.out.at(0).dtype == DType::I32, "output must be i64");
    return arg_reduce(a, false);
}

std::vector<Tensor> softmax(const OpArgs &a, bool log) {
    const Tensor &X = a.input(0);
    a.check(X.rank() >= 1, "X must have rank >= 1");
    int64_t axis = a.node.get_int("axis", -1);
    if (axis < 0) axis += X.rank();
    a.check(axis >= 0 && axis < X.rank(), "axis ", a.node.get_int("axis", -1), " is out of range for rank ",
            X.rank());
    const int64_t len = X.shape()[axis];
    int64_t inner = 1;
    for (int d = axis + 1; d < X.rank(); d++) inner *= X.shape()[d];
    const int64_t lines = X.numel() / std::max<int64_t>(len, 1);
    std::vector<double> x = to_f64(X);
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t l = 0; l < lines; l++) {
        double *p = x.data() + (l / inner) * len * inner + (l % inner);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < len; j++) mx = std::max(mx, p[j * inner]);
        for (int64_t j = 0; j < len; j++) sum += std::exp(p[j * inner] - mx);
        for (int64_t j = 0; j < len; j++)
            p[j * inner] = log ? p[j * inner] - mx - std::log(sum) : std::exp(p[j * inner] - mx) / sum;
    }
    return {output_from(a, x)};
}

std::vector<Tensor> op_softmax(const OpArgs &a) { return softmax(a, false); }
std::vector<Tensor> op_log_softmax(const OpArgs &a) { return softmax(a, true); }

}  // namespace

void register_reduce_ops(OpTable &t) {
    t["ReduceSum"] = op_reduce_sum;
    t["ReduceMean"] = op_reduce_mean;
    t["ReduceMax"] = op_reduce_max;
    t["ReduceMin"] = op_reduce_min;
    t["ReduceProd"] = op_reduce_prod;
    t["ReduceL1"] = op_reduce_l1;
    t["ReduceL2"] = op_reduce_l2;
    t["ReduceSumSquare"] = op_reduce_sum_square;
    t["ReduceLogSum"] = op_reduce_log_sum;
    t["ReduceLogSumExp"] = op_reduce_log_sum_exp;
    t["ArgMax"] = op_argmax;
    t["ArgMin"] = op_argmin;
    t["Softmax"] = op_softmax;
    t["LogSoftmax"] = op_log_softmax;
}

}  // namespace loom::ref
