// Softmax, LogSoftmax and the normalisations, each as stages a schedule can place.
//
// Statistics Funcs keep the input's rank with the reduced dims of extent 1 (so their vars carry
// the same names as the output's) and are a pure init plus one update over the RDom "r"
// (r.x = innermost reduced axis):
//   Softmax: `<node>_max`, `<node>_exp` (exp(x - max)), `<node>_sum` (sum of `<node>_exp`), `<node>`.
//   LogSoftmax: `<node>_max`, `<node>_sum` (sum of exp(x - max)), `<node>`.
//   LayerNormalization, InstanceNormalization, GroupNormalization: `<node>_mean`, `<node>_var`
//     (two-pass: mean of (x - mean)^2, never E[x^2] - mean^2), `<node>`.
//   BatchNormalization (inference): a per-channel affine x * scale + shift. With all four
//     statistics constant, scale/shift are computed in double into constant Buffers; otherwise
//     they are Funcs `<node>_scale`, `<node>_shift`.
// Means are sums of pre-scaled terms so that each statistic is one Func with one update.
#include <cmath>
#include <cstring>

#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace {

Expr lit(DType t, double v) { return LowerContext::literal(t, v); }

// A statistic over some dims of x: \p sx is x's shape, \p stat_shape the Func's shape (reduced dims
// 1), \p reduced the reduced dims (ascending) and \p read(index of x) the value read at a point.
// \p xindex maps (stat vars, rvars in reduced order) to an x index.
struct Reduction {
    RDom r;
    std::vector<Expr> red;  // one RVar per reduced dim, in ascending dim order
    int64_t count = 1;  // representative
    Expr count_expr;    // the same, read at run time where a reduced dim moves with the input sizes
};

/// 1 / \p count as a literal when \p count_expr is constant, else computed at run time.
Expr reciprocal(DType dt, int64_t count, const Expr &count_expr) {
    if (Halide::Internal::is_const(count_expr)) return lit(dt, 1.0 / (double)count);
    return lit(dt, 1) / Halide::cast(LowerContext::halide_type(dt), count_expr);
}

Reduction make_reduction(const LowerContext &ctx, const std::string &x, const std::vector<int> &reduced) {
    const Shape &sx = ctx.shape(x);
    Reduction R;
    Halide::Region region;
    SymDim count = 1;
    for (int a = (int)reduced.size() - 1; a >= 0; a--) {
        region.push_back({0, ctx.extent(x, reduced[a])});
        R.count *= sx[reduced[a]];
        count = count * ctx.sym(x)[reduced[a]];
    }
    R.count_expr = ctx.size(count);
    R.r = RDom(region, "r");
    for (size_t a = 0; a < reduced.size(); a++) R.red.push_back(R.r[(int)reduced.size() - 1 - (int)a]);
    return R;
}

// x index for a statistic point: stat vars, with reduced dims replaced by the RVars.
std::vector<Expr> with_rvars(const std::vector<Var> &v, const std::vector<int> &reduced,
                             const std::vector<Expr> &red) {
    std::vector<Expr> idx = exprs(v);
    for (size_t a = 0; a < reduced.size(); a++) idx[reduced[a]] = red[a];
    return idx;
}

// Stat index for an x point: x vars, with reduced dims read at 0.
std::vector<Expr> at_zero(const std::vector<Var> &v, const std::vector<int> &reduced) {
    std::vector<Expr> idx = exprs(v);
    for (int d : reduced) idx[d] = 0;
    return idx;
}

// mean and var of x over \p reduced (plain dims); returns {mean, var} Funcs.
std::pair<Func, Func> mean_var(LowerContext &ctx, const Node &node, const std::string &x,
                               const std::vector<int> &reduced, DType dt) {
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    Shape ss = sx;
    for (int d : reduced) ss[d] = 1;
    std::vector<Var> v = ctx.vars(rank);
    Reduction R = make_reduction(ctx, x, reduced);
    Expr inv_n = reciprocal(dt, R.count, R.count_expr);
    Expr xr = LowerContext::cast_to(dt, ctx.at(x, with_rvars(v, reduced, R.red)));

    Func mean = ctx.make_func(node, "mean", ss);
    ctx.define(mean, v, lit(dt, 0));
    ref(mean, exprs(v)) += xr * inv_n;
    ctx.note_update(mean, rvar_names(R.r));
    ctx.note_cost(mean, false, 2.0 * R.count);

    Func var = ctx.make_func(node, "var", ss);
    // The mean read at 0 along the reduced dims (their only point), as Softmax reads its max: the
    // variance then reads nothing by a reduced dim's var, which a schedule may round up (a
    // warp's lanes each holding the statistic) without reading past the mean.
    Expr d = xr - LowerContext::call(mean, at_zero(v, reduced));
    ctx.define(var, v, lit(dt, 0));
    ref(var, exprs(v)) += d * d * inv_n;
    ctx.note_update(var, rvar_names(R.r));
    ctx.note_cost(var, false, 4.0 * R.count);
    return {mean, var};
}

void lower_softmax(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    int64_t axis = node.get_int("axis", rank - 1);
    user_check(axis >= 0 && axis < rank, node.describe(), ": axis ", axis, " out of [0, ", rank, ")");
    DType dt = ctx.dtype(y);
    std::vector<int> reduced = {(int)axis};
    Shape ss = sx;
    ss[axis] = 1;
    std::vector<Var> v = ctx.vars(rank);
    Reduction R = make_reduction(ctx, x, reduced);
    Expr xr = LowerContext::cast_to(dt, ctx.at(x, with_rvars(v, reduced, R.red)));

    Func mx = ctx.make_func(node, "max", ss);
    ctx.define(mx, v, LowerContext::halide_type(dt).min());
    ref(mx, exprs(v)) = Halide::max(ref(mx, exprs(v)), xr);
    ctx.note_update(mx, rvar_names(R.r));
    ctx.note_cost(mx, false, (double)R.count);

    std::vector<Expr> z = at_zero(v, reduced);
    Expr xv = LowerContext::cast_to(dt, ctx.at(x, exprs(v)));
    Expr shifted = xv - LowerContext::call(mx, z);
    const bool log_softmax = node.op == "LogSoftmax";
    // Softmax: the exponentials are a Func of their own, read by the sum and by the output, so that
    // a schedule can compute each once per row (a row buffer in cache) instead of twice.
    Func ex;
    if (!log_softmax) {
        ex = ctx.make_func(node, "exp", sx);
        ctx.define(ex, v, Halide::exp(shifted));
        ctx.note_cost(ex, true, 11);  // as the Exp op counts it, plus the subtraction
        ctx.note_inline_by_default(ex);
    }

    Func sum = ctx.make_func(node, "sum", ss);
    ctx.define(sum, v, lit(dt, 0));
    std::vector<Expr> xi = with_rvars(v, reduced, R.red);
    ref(sum, exprs(v)) += log_softmax ? Halide::exp(xr - LowerContext::call(mx, exprs(v))) : LowerContext::call(ex, xi);
    ctx.note_update(sum, rvar_names(R.r));
    ctx.note_cost(sum, false, (log_softmax ? 12.0 : 1.0) * R.count);

    Func f = ctx.make_func(node, "", rank);
    Expr s = LowerContext::call(sum, z);
    // exp · (1 / sum): the reciprocal is per row (hoisted), a multiply per element (see Div).
    ctx.define(f, v, log_softmax ? shifted - Halide::log(s) : LowerContext::call(ex, exprs(v)) * (lit(dt, 1) / s));
    ctx.note_cost(f, true, log_softmax ? 3 : 1);
    ctx.bind_output(y, f);
}

void lower_layer_norm(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    int64_t axis = node.get_int("axis", -1);
    user_check(axis >= 0 && axis < rank, node.describe(), ": axis ", axis, " out of [0, ", rank, ")");
    DType dt = ctx.dtype(y);
    double eps = node.get_float("epsilon", 1e-5);
    std::vector<int> reduced;
    for (int d = (int)axis; d < rank; d++) reduced.push_back(d);
    auto [mean, var] = mean_var(ctx, node, x, reduced, dt);

    std::vector<Var> v = ctx.vars(rank);
    std::vector<Expr> z = at_zero(v, reduced);
    Expr xv = LowerContext::cast_to(dt, ctx.at(x, exprs(v)));
    // times 1/σ: one reciprocal per row, hoisted, instead of a division per element (as Div does).
    Expr e = (xv - LowerContext::call(mean, z)) *
             (lit(dt, 1) / Halide::sqrt(LowerContext::call(var, z) + lit(dt, eps)));
    e = e * LowerContext::cast_to(dt, ctx.at(node.inputs[1], exprs(v)));
    if (node.has_input(2)) e = e + LowerContext::cast_to(dt, ctx.at(node.inputs[2], exprs(v)));
    Func f = ctx.make_func(node, "", rank);
    ctx.define(f, v, e);
    ctx.note_cost(f, true, 5);
    ctx.bind_output(y, f);

    // Optional outputs: Mean and InvStdDev, both of the statistics' (keepdims) shape.
    if (node.outputs.size() > 1 && !node.outputs[1].empty()) ctx.bind_output(node.outputs[1], mean);
    if (node.outputs.size() > 2 && !node.outputs[2].empty()) {
        Shape ss = sx;
        for (int d : reduced) ss[d] = 1;
        Func inv = ctx.make_func(node, "invstd", ss);
        ctx.define(inv, v,
                   lit(dt, 1) / Halide::sqrt(LowerContext::call(var, exprs(v)) + lit(dt, eps)));
        ctx.note_cost(inv, true, 3);
        ctx.bind_output(node.outputs[2], inv);
    }
}

void lower_instance_group_norm(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    bool group = node.op == "GroupNormalization";
    user_check(rank >= (group ? 2 : 3), node.describe(), ": input rank ", rank, " too small");
    DType dt = ctx.dtype(y);
    double eps = node.get_float("epsilon", 1e-5);
    int64_t C = ctx.static_extent(node, x, 1), G = group ? node.need_int("num_groups") : C;
    user_check(G >= 1 && C % G == 0, node.describe(), ": num_groups ", G, " does not divide ", C,
               " channels");
    int64_t cg = C / G;
    std::vector<Var> v = ctx.vars(rank);

    // Statistics per (n, group): shape [N, G, 1, ...]; reduced over the group's channels and
    // all spatial dims, the channel innermost-last (it is the outermost in memory).
    Shape ss(rank, 1);
    ss[0] = sx[0];
    ss[1] = G;
    Halide::Region region;
    int64_t count = cg;
    SymDim sym_count = cg;
    for (int d = rank - 1; d >= 2; d--) {
        region.push_back({0, ctx.extent(x, d)});
        count *= sx[d];
        sym_count = sym_count * ctx.sym(x)[d];
    }
    if (cg > 1 || region.empty()) region.push_back({0, (int)cg});
    RDom r(region, "r");
    std::vector<Expr> xi = {v[0], cg > 1 || rank == 2 ? Expr(v[1] * (int)cg + r[rank - 2]) : Expr(v[1])};
    for (int d = 2; d < rank; d++) xi.push_back(r[rank - 1 - d]);
    Expr xr = LowerContext::cast_to(dt, ctx.at(x, xi));
    Expr inv_n = reciprocal(dt, count, ctx.size(sym_count));

    Func mean = ctx.make_func(node, "mean", ss);
    ctx.define(mean, v, lit(dt, 0));
    ref(mean, exprs(v)) += xr * inv_n;
    ctx.note_update(mean, rvar_names(r));
    ctx.note_cost(mean, false, 2.0 * count);

    Func var = ctx.make_func(node, "var", ss);
    Expr dev = xr - LowerContext::call(mean, exprs(v));
    ctx.define(var, v, lit(dt, 0));
    ref(var, exprs(v)) += dev * dev * inv_n;
    ctx.note_update(var, rvar_names(r));
    ctx.note_cost(var, false, 4.0 * count);

    std::vector<Expr> si = {v[0], cg == 1 ? Expr(v[1]) : Expr(v[1] / (int)cg)};
    for (int d = 2; d < rank; d++) si.push_back(0);
    Expr xv = LowerContext::cast_to(dt, ctx.at(x, exprs(v)));
    Expr e = (xv - LowerContext::call(mean, si)) *
             (lit(dt, 1) / Halide::sqrt(LowerContext::call(var, si) + lit(dt, eps)));
    // scale/bias: per channel (size C), or per group (size num_groups, GroupNormalization-18).
    auto per_channel = [&](const std::string &name) {
        int64_t len = shape_numel(ctx.shape(name));
        user_check(len == C || len == G, node.describe(), ": '", name, "' has ", len,
                   " elements; expected ", C, group ? str_cat(" or ", G) : "");
        return LowerContext::cast_to(dt, ctx.at(name, {len == C ? Expr(v[1]) : si[1]}));
    };
    e = e * per_channel(node.inputs[1]) + per_channel(node.inputs[2]);
    Func f = ctx.make_func(node, "", rank);
    ctx.define(f, v, e);
    ctx.note_cost(f, true, 5);
    ctx.bind_output(y, f);
}

void lower_batch_norm(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    user_check(node.outputs.size() == 1 || node.outputs[1].empty(), node.describe(),
               ": only inference mode (one output) is supported");
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    user_check(rank >= 2, node.describe(), ": input rank ", rank, " too small");
    DType dt = ctx.dtype(y);
    double eps = node.get_float("epsilon", 1e-5);
    int64_t C = ctx.static_extent(node, x, 1);
    const std::string &sc = node.inputs[1], &bi = node.inputs[2], &mu = node.inputs[3],
                      &va = node.inputs[4];
    for (const std::string *p : {&sc, &bi, &mu, &va})
        user_check(shape_numel(ctx.shape(*p)) == C, node.describe(), ": '", *p, "' must have ", C,
                   " elements");
    std::vector<Var> v = ctx.vars(rank);
    Func f = ctx.make_func(node, "", rank);
    Expr a, b;
    const Tensor *ts = ctx.constant(sc), *tb = ctx.constant(bi), *tm = ctx.constant(mu),
                 *tv = ctx.constant(va);
    if (ts && tb && tm && tv) {
        Halide::Type t = LowerContext::halide_type(dt);
        Halide::Buffer<> bs(t, {(int)C}, ctx.reserve_name(f.name() + "_scale"));
        Halide::Buffer<> bh(t, {(int)C}, ctx.reserve_name(f.name() + "_shift"));
        for (int64_t c = 0; c < C; c++) {
            double s = ts->get(c) / std::sqrt(tv->get(c) + eps);
            double h = tb->get(c) - tm->get(c) * s;
            Tensor one(dt, {2});
            one.set(0, s);
            one.set(1, h);
            std::memcpy((uint8_t *)bs.data() + c * t.bytes(), one.data(), t.bytes());
            std::memcpy((uint8_t *)bh.data() + c * t.bytes(), (uint8_t *)one.data() + t.bytes(),
                        t.bytes());
        }
        a = bs(v[1]);
        b = bh(v[1]);
    } else {
        Var i = ctx.vars(1)[0];
        Func fs = ctx.make_func(node, "scale", Shape{C});
        ctx.define(fs, {i},
                   LowerContext::cast_to(dt, ctx.at(sc, {i})) /
                       Halide::sqrt(LowerContext::cast_to(dt, ctx.at(va, {i})) + lit(dt, eps)));
        ctx.note_cost(fs, true, 3);
        Func fh = ctx.make_func(node, "shift", Shape{C});
        ctx.define(fh, {i},
                   LowerContext::cast_to(dt, ctx.at(bi, {i})) -
                       LowerContext::cast_to(dt, ctx.at(mu, {i})) * fs(i));
        ctx.note_cost(fh, true, 2);
        a = fs(v[1]);
        b = fh(v[1]);
    }
    ctx.define(f, v, LowerContext::cast_to(dt, ctx.at(x, exprs(v))) * a + b);
    ctx.note_cost(f, true, 2);
    ctx.bind_output(y, f);
}

}  // namespace

void lower_norm(LowerContext &ctx, const Node &node) {
    const std::string &op = node.op;
    if (op == "Softmax" || op == "LogSoftmax") return lower_softmax(ctx, node);
    if (op == "LayerNormalization") return lower_layer_norm(ctx, node);
    if (op == "InstanceNormalization" || op == "GroupNormalization")
        return lower_instance_group_norm(ctx, node);
    if (op == "BatchNormalization") return lower_batch_norm(ctx, node);
    throw InternalError("lower_norm: unexpected op " + op);
}

}  // namespace loom
