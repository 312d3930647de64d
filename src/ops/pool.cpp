// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
//
// Windowed pools read `<node>_pad`, the input in padded coordinates with -inf (max) or 0 (average)
// outside it; the output shape is the graph's (ceil_mode is already in it), and windows that run
// past the end pads read the same border. MaxPool is `<node>` = -inf then one max-update over the
// RDom "r" of the kernel taps (r.x = last spatial tap). AveragePool is `<node>_sum` (one update)
// and a pointwise `<node>` dividing by the window's count, in closed form per dim: taps inside the
// input, or inside input + pads with count_include_pad. Global pools are one Func with one update
// over the spatial dims.
#include "support/error.h"
#include "ops/ops_internal.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace {

void lower_window_pool(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    user_check(node.outputs.size() == 1 || node.outputs[1].empty(), node.describe(),
               ": the optional Indices output of MaxPool is not supported");
    const Shape &sx = ctx.shape(x), &sy = ctx.shape(y);
    int rank = (int)sx.size(), sp = rank - 2;
    user_check(rank >= 3 && rank <= 5, node.describe(), ": expects an input of rank 3..5, got ",
               shape_str(sx));
    bool is_max = node.op == "MaxPool";
    DType dt = ctx.dtype(y);
    std::vector<int64_t> kernel = node.need_ints("kernel_shape");
    std::vector<int64_t> strides = node.get_ints("strides", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> dil = node.get_ints("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> pads = node.get_ints("pads", std::vector<int64_t>(2 * sp, 0));
    bool include_pad = node.get_int("count_include_pad", 0) != 0;
    user_check((int)kernel.size() == sp && (int)strides.size() == sp && (int)dil.size() == sp &&
                   (int)pads.size() == 2 * sp,
               node.describe(), ": kernel_shape/strides/dilations need ", sp, " entries and pads ",
               2 * sp);

    Expr border = is_max ? LowerContext::halide_type(dt).min() : LowerContext::literal(dt, 0);
    // A border Func is needed when a window reaches outside the input (pads, or ceil_mode).
    bool need_pad = false;
    Shape ps = sx;
    for (int d = 0; d < sp; d++) {
        int64_t last = (sy[2 + d] - 1) * strides[d] + (kernel[d] - 1) * dil[d] - pads[d];
        // Where the size moves, a ceil_mode window may leave the input at some sizes.
        bool moves = ctx.is_dynamic(x, 2 + d) && node.get_int("ceil_mode", 0) != 0;
        need_pad |= pads[d] > 0 || last >= sx[2 + d] || moves;
        ps[2 + d] = std::max(sx[2 + d] + pads[d], last + 1 + pads[d]);
    }
    std::vector<Var> v = ctx.vars(rank);
    Func xin;
    if (need_pad) {
        xin = ctx.make_func(node, "pad", ps);
        ctx.define(xin, v, bordered_read(ctx, x, v, std::vector<int64_t>(pads.begin(), pads.begin() + sp), dt, border));
        ctx.note_cost(xin, true, 1);
        ctx.note_padded_input(xin);
    }

    Halide::Region region;
    for (int d = sp - 1; d >= 0; d--) region.push_back({0, (int)kernel[d]});
    RDom r(region, "r");
    std::vector<Expr> ix = {v[0], v[1]};
    for (int d = 0; d < sp; d++)
        ix.push_back(v[2 + d] * (int)strides[d] + r[sp - 1 - d] * (int)dil[d]);
    // Without a border Func the window never leaves the input (no pads, in range).
    Expr xv = need_pad ? LowerContext::call(xin, ix) : LowerContext::cast_to(dt, ctx.at(x, ix));
    int64_t taps = 1;
    for (auto k : kernel) taps *= k;

    if (is_max) {
        Func f = ctx.make_func(node, "", rank);
        ctx.define(f, v, border);
        ref(f, exprs(v)) = Halide::max(ref(f, exprs(v)), xv);
        ctx.note_update(f, rvar_names(r));
        ctx.note_cost(f, false, (double)taps);
        ctx.bind_output(y, f);
        return;
    }

    Func sum = ctx.make_func(node, "sum", sy);
    ctx.define(sum, v, LowerContext::literal(dt, 0));
    ref(sum, exprs(v)) += xv;
    ctx.note_update(sum, rvar_names(r));
    ctx.note_cost(sum, false, (double)taps);

    // Window size: per dim, the taps k in [0, K) with lo <= o*s + k*d - pad < hi.
    Expr count = 1;
    bool ceil_mode = node.get_int("ceil_mode", 0) != 0;
    for (int d = 0; d < sp; d++) {
        if (ctx.is_dynamic(x, 2 + d) && pads[d] == 0 && pads[sp + d] == 0 && !ceil_mode) {
            // A window that never leaves the input counts the whole kernel at every size.
            count = count * (int)kernel[d];
            continue;
        }
        int64_t lo = include_pad ? -pads[d] : 0;
        SymDim n = ctx.sym(x)[2 + d];
        Expr hi_minus_1 = ctx.size((include_pad ? n + pads[sp + d] : n) - 1);
        Expr base = v[2 + d] * (int)strides[d] - (int)pads[d];
        int dd = (int)dil[d];
        // Halide's integer division rounds down, so ceil(a/dd) = (a + dd - 1) / dd.
        Expr kmin = Halide::max(0, ((int)lo - base + dd - 1) / dd);
        Expr kmax = Halide::min((int)kernel[d] - 1, (hi_minus_1 - base) / dd);
        count = count * Halide::max(0, kmax - kmin + 1);
    }
    Func f = ctx.make_func(node, "", rank);
    ctx.define(f, v,
               LowerContext::call(sum, exprs(v)) /
                   Halide::cast(LowerContext::halide_type(dt), Halide::max(count, 1)));
    ctx.note_cost(f, true, 2.0 * sp + 1);
    ctx.bind_output(y, f);
}

void lower_global_pool(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &y = node.outputs[0];
    const Shape &sx = ctx.shape(x);
    int rank = (int)sx.size();
    user_check(rank >= 3, node.describe(), ": expects an input of rank >= 3, got ", shape_str(sx));
    DType dt = ctx.dtype(y);
    bool is_max = node.op == "GlobalMaxPool";
    Halide::Region region;
    int64_t n = 1;
    SymDim count = 1;
    for (int d = rank - 1; d >= 2; d--) {
        region.push_back({0, ctx.extent(x, d)});
        n *= sx[d];
        count = count * ctx.sym(x)[d];
    }
    RDom r(region, "r");
    std::vector<Var> v = ctx.vars(rank);
    std::vector<Expr> ix = {v[0], v[1]};
    for (int d = 2; d < rank; d++) ix.push_back(r[rank - 1 - d]);
    Expr xv = LowerContext::cast_to(dt, ctx.at(x, ix));

    Func f = ctx.make_func(node, "", rank);
    if (is_max) {
        ctx.define(f, v, LowerContext::halide_type(dt).min());
        ref(f, exprs(v)) = Halide::max(ref(f, exprs(v)), xv);
    } else {
        // The mean as a sum of pre-scaled terms keeps it one Func with one update.
        ctx.define(f, v, LowerContext::literal(dt, 0));
        Expr scale = count.is_static() ? LowerContext::literal(dt, 1.0 / (double)n)
                                       : LowerContext::literal(dt, 1.0) / Halide::cast(LowerContext::halide_type(dt), ctx.size(count));
        ref(f, exprs(v)) += xv * scale;
    }
    ctx.note_update(f, rvar_names(r));
    ctx.note_cost(f, false, (is_max ? 1.0 : 2.0) * n);
    ctx.bind_output(y, f);
}

}  // namespace

void lower_pool(LowerContext &ctx, const Node &node) {
    if (node.op == "MaxPool" || node.op == "AveragePool") return lower_window_pool(ctx, node);
    if (node.op == "GlobalAveragePool" || node.op == "GlobalMaxPool")
        return lower_global_pool(ctx, node);
    throw InternalError("lower_pool: unexpected op " + node.op);
}

}  // namespace loom
