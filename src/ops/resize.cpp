// Resize (ONNX semantics with explicit scales): nearest, N-linear and cubic, each as one Func
// whose taps read the input at clamped (edge) coordinates; only dims that really change size are
// interpolated, so an NCHW image resize is 4 (linear) or 16 (cubic) taps.
#include <algorithm>
#include <cmath>

#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

/// Input coordinate (float) of output coordinate \p x along a dim.
Expr source_coord(const std::string &mode, Expr x, double scale, int64_t n_in, int64_t n_out,
                  const Node &node) {
    Expr xf = Halide::cast(Halide::Float(32), x);
    float s = (float)scale;
    if (mode == "half_pixel") return (xf + 0.5f) / s - 0.5f;
    if (mode == "asymmetric") return xf / s;
    if (mode == "pytorch_half_pixel") return n_out > 1 ? (xf + 0.5f) / s - 0.5f : Expr(0.0f);
    if (mode == "tf_half_pixel_for_nearest") return (xf + 0.5f) / s;
    if (mode == "align_corners")
        return n_out > 1 ? xf * (float)((double)(n_in - 1) / (double)(n_out - 1)) : Expr(0.0f);
    throw UserError(str_cat(node.describe(), ": coordinate_transformation_mode '", mode,
                            "' is not supported; valid: half_pixel, asymmetric, align_corners, ",
                            "pytorch_half_pixel, tf_half_pixel_for_nearest"));
}

/// Input index (Int(32), not clamped) that nearest mode \p nearest_mode rounds coordinate \p c to.
Expr nearest_index(const std::string &nearest_mode, Expr c, const Node &node) {
    Expr i;
    if (nearest_mode == "round_prefer_floor") i = Halide::ceil(c - 0.5f);
    else if (nearest_mode == "round_prefer_ceil") i = Halide::floor(c + 0.5f);
    else if (nearest_mode == "floor") i = Halide::floor(c);
    else if (nearest_mode == "ceil") i = Halide::ceil(c);
    else
        throw UserError(str_cat(node.describe(), ": nearest_mode '", nearest_mode,
                                "' is not supported; valid: round_prefer_floor, ",
                                "round_prefer_ceil, floor, ceil"));
    return Halide::cast(Halide::Int(32), i);
}

/// Whether dim scale \p sc upsamples \p n_in to \p n_out by a power of two whose source coordinate
/// is affine with slope 1/s (not align_corners): then it is exact in float, the same every s
/// outputs but for a step of one, and a per-phase constant plus x / s gives it in integers.
int64_t phase_scale(const std::string &ctm, double sc, int64_t n_in, int64_t n_out) {
    const int64_t si = (int64_t)sc;
    bool ok = ctm != "align_corners" && sc >= 2 && (double)si == sc && (si & (si - 1)) == 0 && n_out == n_in * si &&
              n_out < (1 << 22);
    return ok ? si : 0;
}

/// select(x % s == 0, v[0], x % s == 1, v[1], ...) over the phases of \p x.
Expr per_phase(Expr x, int64_t s, const std::vector<Expr> &v) {
    Expr r = x % (int)s, e = v.back();
    for (int64_t k = s - 2; k >= 0; k--) e = Halide::select(r == (int)k, v[k], e);
    return e;
}

/// The 4 cubic convolution weights for fractional offset t (taps at floor-1 .. floor+2).
std::vector<Expr> cubic_weights(Expr t, float A) {
    auto far = [&](Expr u) { return ((A * u - 5 * A) * u + 8 * A) * u - 4 * A; };   // 1 < u < 2
    auto near = [&](Expr u) { return ((A + 2) * u - (A + 3)) * u * u + 1; };        // u <= 1
    return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

}  // namespace

void lower_resize(LowerContext &ctx, const Node &node) {
    user_check(node.op == "Resize", node.describe(),
               ": Upsample should have been rewritten to Resize before lowering");
    const std::string &x = node.inputs.at(0), &out = node.outputs.at(0);
    const Shape &is = ctx.shape(x), &os = ctx.shape(out);
    const int rank = (int)os.size();
    std::vector<double> scales = node.get_floats("scales");
    internal_check((int)scales.size() == rank, node.describe(), ": scales has ", scales.size(),
                   " entries for rank ", rank);
    const std::string mode = node.get_string("mode", "nearest");
    const std::string ctm = node.get_string("coordinate_transformation_mode", "half_pixel");
    const std::string nearest_mode = node.get_string("nearest_mode", "round_prefer_floor");
    const float A = (float)node.get_float("cubic_coeff_a", -0.75);
    const bool exclude_outside = node.get_int("exclude_outside", 0) != 0;

    Func f = ctx.make_func(node, "", rank);
    std::vector<Var> vs = ctx.vars(rank);
    std::vector<Expr> idx(vs.begin(), vs.end());
    const DType dt = ctx.dtype(out);

    // Dims that change: the others map straight through.
    std::vector<int> moving;
    std::vector<Expr> coord(rank);
    for (int d = 0; d < rank; d++) {
        if (is[d] == os[d] && scales[d] == 1.0) continue;
        moving.push_back(d);
        if (ctx.is_dynamic(x, d) && (ctm == "align_corners" || ctm == "pytorch_half_pixel"))
            ctx.static_extent(node, x, d);  // these coordinates depend on the sizes themselves
        coord[d] = source_coord(ctm, idx[d], scales[d], is[d], os[d], node);
    }

    Expr e;
    double flops = 1;
    if (mode == "nearest") {
        std::vector<Expr> src = idx;
        for (int d : moving) {
            // Upsampling by a power of two (not align_corners): the coordinate is affine with slope
            // 1/s, exact in float, so the source index steps by one every s outputs. As integer
            // arithmetic, x / s plus a per-phase constant, Halide loads a vector of the input and
            // shuffles it instead of gathering each element through float math, under every
            // schedule (bench/DECISIONS.md#d55-resize-power-of-two-upsampling).
            const double sc = scales[d];
            if (const int64_t si = phase_scale(ctm, sc, is[d], os[d])) {
                std::vector<Expr> phase;  // the float formula's index for outputs 0 .. s-1, folded
                bool zero = true;
                for (int64_t r = 0; r < si; r++) {
                    Expr ir = Halide::Internal::simplify(
                        nearest_index(nearest_mode, source_coord(ctm, Expr((int)r), sc, is[d], os[d], node), node));
                    const int64_t *iv = Halide::Internal::as_const_int(ir);
                    internal_check(iv != nullptr, node.describe(), ": a constant coordinate did not fold");
                    phase.push_back(Expr((int)*iv));
                    zero &= *iv == 0;
                }
                Expr i = idx[d] / (int)si;
                src[d] = zero ? i : Halide::clamp(i + per_phase(idx[d], si, phase), 0, ctx.size(ctx.sym(x)[d] - 1));
                continue;
            }
            src[d] = Halide::clamp(nearest_index(nearest_mode, coord[d], node), 0, ctx.size(ctx.sym(x)[d] - 1));
        }
        e = ctx.at(x, src);
    } else if (mode == "linear" || mode == "cubic") {
        const bool cubic = mode == "cubic";
        const int taps = cubic ? 4 : 2;
        // Per moving dim: tap indices (clamped) and weights.
        std::vector<std::vector<Expr>> tap_idx(rank), tap_w(rank);
        for (int d : moving) {
            Expr c = coord[d];
            Expr fl = Halide::floor(c);
            Expr t = c - fl;
            Expr i0 = Halide::cast(Halide::Int(32), fl);
            const int64_t si = cubic ? 0 : phase_scale(ctm, scales[d], is[d], os[d]);
            if (si) {
                // Linear upsampling by a power of two: the first tap x / s plus a per-phase step
                // and the weight per phase, folded from the float formula (exact), as nearest does;
                // the edge clamp `likely` in range, so that Halide's loop partitioning drops it
                // from the steady state and the taps load vectors
                // (bench/DECISIONS.md#d55-resize-power-of-two-upsampling).
                std::vector<Expr> first_tap, frac;
                for (int64_t r = 0; r < si; r++) {
                    Expr cr = source_coord(ctm, Expr((int)r), scales[d], is[d], os[d], node);
                    Expr fr = Halide::Internal::simplify(Halide::cast(Halide::Int(32), Halide::floor(cr)));
                    Expr tr = Halide::Internal::simplify(cr - Halide::floor(cr));
                    internal_check(Halide::Internal::as_const_int(fr) && Halide::Internal::as_const_float(tr),
                                   node.describe(), ": a constant coordinate did not fold");
                    first_tap.push_back(fr);
                    frac.push_back(tr);
                }
                i0 = idx[d] / (int)si + per_phase(idx[d], si, first_tap);
                t = per_phase(idx[d], si, frac);
            }
            std::vector<Expr> w = cubic ? cubic_weights(t, A) : std::vector<Expr>{1.0f - t, t};
            int first = cubic ? -1 : 0;
            const Expr n = ctx.extent(x, d), last = ctx.size(ctx.sym(x)[d] - 1);
            if (cubic && exclude_outside) {
                Expr sum = 0.0f;
                for (int k = 0; k < taps; k++) {
                    Expr ik = i0 + (first + k);
                    w[k] = Halide::select(ik >= 0 && ik < n, w[k], 0.0f);
                    sum = sum + w[k];
                }
                for (int k = 0; k < taps; k++) w[k] = w[k] / sum;
            }
            for (int k = 0; k < taps; k++) {
                Expr ik = i0 + (first + k);
                tap_idx[d].push_back(Halide::clamp(si ? Halide::likely(ik) : ik, 0, last));
                tap_w[d].push_back(w[k]);
            }
        }
        // Sum over the product of taps of all moving dims.
        int total = 1;
        for (size_t m = 0; m < moving.size(); m++) total *= taps;
        Expr acc;
        for (int combo = 0; combo < total; combo++) {
            std::vector<Expr> src = idx;
            Expr w = 1.0f;
            int rest = combo;
            for (int d : moving) {
                int k = rest % taps;
                rest /= taps;
                src[d] = tap_idx[d][k];
                w = w * tap_w[d][k];
            }
            Expr v = Halide::cast(Halide::Float(32), ctx.at(x, src)) * w;
            acc = acc.defined() ? acc + v : v;
        }
        e = acc;
        flops = 3.0 * total;
        if (!dtype_is_float(dt)) e = Halide::round(e);
    } else {
        throw UserError(str_cat(node.describe(), ": mode '", mode,
                                "' is not supported; valid: nearest, linear, cubic"));
    }
    ctx.define(f, vs, LowerContext::cast_to(dt, e));
    ctx.note_cost(f, mode == "nearest" && moving.empty(), flops);
    ctx.bind_output(out, f);
}

}  // namespace loom
