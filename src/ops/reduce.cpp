// Reduce* and ArgMax/ArgMin over canonical (sorted, non-negative) axes.
//
// Each reduction is a pure init plus one update over the RDom "r" spanning the reduced axes,
// innermost first (r.x = the last reduced axis), so a schedule can split, reorder or rfactor it.
// ReduceSum/Max/Min/Prod: `<node>` alone. ReduceMean (float): `<node>` sums pre-scaled terms.
// ReduceL2 and integer ReduceMean: `<node>_sum` plus a pointwise `<node>`.
// ArgMax/ArgMin: two passes, `<node>_max` / `<node>_min` (the extreme, keepdims) then `<node>`,
// the smallest (or with select_last_index the largest) index that attains it, as an i64 min/max
// reduction (associative, so rfactor applies).
#include "support/error.h"
#include "ops/ops_internal.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace {

bool constant_count(const Expr &e) { return Halide::Internal::is_const(e); }

// Index of the input (rank \p in_rank) for an output point: kept dims read the output's vars
// (\p out, with or without the reduced dims per \p keepdims), reduced dims read \p red[i] for the
// i-th reduced axis.
std::vector<Expr> input_index(int in_rank, const std::vector<int64_t> &axes, bool keepdims,
                              const std::vector<Expr> &out, const std::vector<Expr> &red) {
    std::vector<Expr> idx;
    int o = 0, a = 0;
    for (int d = 0; d < in_rank; d++) {
        bool reduced = a < (int)axes.size() && axes[a] == d;
        if (reduced) {
            idx.push_back(red[a++]);
            if (keepdims) o++;
        } else {
            idx.push_back(out[o++]);
        }
    }
    return idx;
}

// The RDom over \p axes of value \p x, innermost first; \p red receives one RVar per axis, in axes
// order; \p count the points it spans (representative), \p count_expr the same as an Expr (read at
// run time where a reduced dim moves with the input sizes).
RDom reduce_rdom(const LowerContext &ctx, const std::string &x, const std::vector<int64_t> &axes,
                 std::vector<Expr> &red, int64_t &count, Expr &count_expr) {
    const Shape &s = ctx.shape(x);
    Halide::Region region;
    count = 1;
    SymDim sym_count = 1;
    for (int a = (int)axes.size() - 1; a >= 0; a--) {
        region.push_back({0, ctx.extent(x, (int)axes[a])});
        count *= s[axes[a]];
        sym_count = sym_count * ctx.sym(x)[axes[a]];
    }
    count_expr = ctx.size(sym_count);
    RDom r(region, "r");
    red.assign(axes.size(), Expr());
    for (size_t a = 0; a < axes.size(); a++) red[a] = r[(int)axes.size() - 1 - (int)a];
    return r;
}

std::vector<int64_t> checked_axes(const Node &node, const std::vector<int64_t> &axes, int rank) {
    user_check(!axes.empty(), node.describe(), ": canonical form needs a non-empty 'axes'");
    for (size_t i = 0; i < axes.size(); i++)
        user_check(axes[i] >= 0 && axes[i] < rank && (i == 0 || axes[i] > axes[i - 1]),
                   node.describe(), ": axes must be sorted, unique and in [0, ", rank, ")");
    return axes;
}

void lower_reduce_op(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x), &sy = ctx.shape(y);
    int rank = (int)sx.size(), ry = (int)sy.size();
    std::vector<int64_t> axes = checked_axes(node, node.need_ints("axes"), rank);
    bool keepdims = node.get_int("keepdims", 1) != 0;
    DType dt = ctx.dtype(y);
    Halide::Type t = LowerContext::halide_type(dt);
    bool is_float = dtype_is_float(dt);

    std::vector<Expr> red;
    int64_t n;
    Expr n_expr;
    RDom r = reduce_rdom(ctx, x, axes, red, n, n_expr);
    std::vector<Var> v = ctx.vars(ry);
    Expr xv = LowerContext::cast_to(dt, ctx.at(x, input_index(rank, axes, keepdims, exprs(v), red)));
    const std::string &op = node.op;

    // Two-stage forms: a sum, then a pointwise finish.
    if (op == "ReduceL2" || (op == "ReduceMean" && !is_float)) {
        Func sum = ctx.make_func(node, "sum", sy);
        ctx.define(sum, v, LowerContext::literal(dt, 0));
        ref(sum, exprs(v)) += op == "ReduceL2" ? xv * xv : xv;
        ctx.note_update(sum, rvar_names(r));
        ctx.note_cost(sum, false, 2.0 * n);
        Func f = ctx.make_func(node, "", ry);
        Expr s = LowerContext::call(sum, exprs(v));
        Expr e = op == "ReduceL2"
                     ? LowerContext::cast_to(dt, Halide::sqrt(Halide::cast(Halide::Float(32), s)))
                     : s / Halide::cast(t, n_expr);
        ctx.define(f, v, e);
        ctx.note_cost(f, true, 1);
        ctx.bind_output(y, f);
        return;
    }

    Func f = ctx.make_func(node, "", ry);
    std::vector<Expr> o = exprs(v);
    if (op == "ReduceSum") {
        ctx.define(f, v, LowerContext::literal(dt, 0));
        ref(f, o) += xv;
    } else if (op == "ReduceMean") {
        ctx.define(f, v, LowerContext::literal(dt, 0));
        ref(f, o) += xv * (constant_count(n_expr) ? LowerContext::literal(dt, 1.0 / (double)n)
                                            : LowerContext::literal(dt, 1.0) / Halide::cast(t, n_expr));
    } else if (op == "ReduceMax") {
        ctx.define(f, v, t.min());
        ref(f, o) = Halide::max(ref(f, o), xv);
    } else if (op == "ReduceMin") {
        ctx.define(f, v, t.max());
        ref(f, o) = Halide::min(ref(f, o), xv);
    } else if (op == "ReduceProd") {
        ctx.define(f, v, LowerContext::literal(dt, 1));
        ref(f, o) *= xv;
    } else {
        throw InternalError("lower_reduce: unexpected op " + op);
    }
    ctx.note_update(f, rvar_names(r));
    ctx.note_cost(f, false, (op == "ReduceMean" ? 2.0 : 1.0) * n);
    ctx.bind_output(y, f);
}

void lower_arg(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x), &sy = ctx.shape(y);
    int rank = (int)sx.size(), ry = (int)sy.size();
    int64_t axis = node.get_int("axis", 0);
    user_check(axis >= 0 && axis < rank, node.describe(), ": axis ", axis, " out of [0, ", rank, ")");
    bool keepdims = node.get_int("keepdims", 1) != 0;
    bool last = node.get_int("select_last_index", 0) != 0;
    bool is_max = node.op == "ArgMax";
    user_check(ctx.dtype(y) == DType::I64, node.describe(), ": output must be i64");
    DType xt = ctx.dtype(x);
    Halide::Type t = LowerContext::halide_type(xt);
    std::vector<int64_t> axes = {axis};

    std::vector<Expr> red;
    int64_t n;
    Expr n_expr;
    RDom r = reduce_rdom(ctx, x, axes, red, n, n_expr);
    std::vector<Var> v = ctx.vars(ry);

    // The extreme value, kept as a rank-`rank` Func with the axis of extent 1.
    Shape bs = sx;
    bs[axis] = 1;
    Func best = ctx.make_func(node, is_max ? "max" : "min", bs);
    std::vector<Var> bv = ctx.vars(rank);
    std::vector<Expr> bo = exprs(bv);
    std::vector<Expr> bx = bo;
    bx[axis] = red[0];
    Expr xb = ctx.at(x, bx);
    ctx.define(best, bv, is_max ? t.min() : t.max());
    ref(best, bo) = is_max ? Halide::max(ref(best, bo), xb) : Halide::min(ref(best, bo), xb);
    ctx.note_update(best, rvar_names(r));
    ctx.note_cost(best, false, (double)n);

    Func f = ctx.make_func(node, "", ry);
    std::vector<Expr> o = exprs(v);
    Expr xv = ctx.at(x, input_index(rank, axes, keepdims, o, red));
    Expr bval = LowerContext::call(best, input_index(rank, axes, keepdims, o, {Expr(0)}));
    Expr k = Halide::cast(Halide::Int(64), red[0]);
    Halide::Type i64 = Halide::Int(64);
    if (!last) {
        ctx.define(f, v, Halide::cast(i64, n_expr));
        ref(f, o) = Halide::min(ref(f, o), Halide::select(xv == bval, k, Halide::cast(i64, n_expr)));
    } else {
        ctx.define(f, v, Halide::cast(i64, -1));
        ref(f, o) = Halide::max(ref(f, o), Halide::select(xv == bval, k, Halide::cast(i64, -1)));
    }
    ctx.note_update(f, rvar_names(r));
    ctx.note_cost(f, false, 2.0 * n);
    ctx.bind_output(y, f);
}

}  // namespace

void lower_reduce(LowerContext &ctx, const Node &node) {
    if (node.op == "ArgMax" || node.op == "ArgMin") return lower_arg(ctx, node);
    return lower_reduce_op(ctx, node);
}

}  // namespace loom
