// Elementwise ops: one pure Func per node, inputs read through ctx.at (broadcast by index, never
// copied), so every op here can be inlined into its consumer by a schedule.
#include <cmath>

#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

/// Float16 has no native arithmetic on most targets: compute in float32.
Expr widen(Expr e) {
    if (e.type() == Halide::Float(16)) return Halide::cast(Halide::Float(32), e);
    return e;
}

Expr fconst(const Expr &like, double v) { return Halide::cast(like.type(), Expr(v)); }

// sin and cos in float32 as straight-line arithmetic that vectorises (Halide's sin/cos call scalar
// libm). Both build the same reduction and kernels from the same argument, so where a schedule
// inlines sin(x) and cos(x) into one loop, Halide's CSE computes all of it once and only the
// final blend and sign differ.
//
// Reduction: x = k·π/2 + r, |r| <= π/4. Adding 1.5·2^23 to x·2/π rounds it to the integer k and
// leaves k mod 4 in the low mantissa bits (no round, no float->int conversion); subtracting it
// again gives k as a float. r = x − k·C1 − k·C2 − k·C3 (Cody–Waite): C1 has 8 significant bits and
// C2 7, so k·C1 and k·C2 are exact and the first subtraction is exact for |k| < 2^16; C3 is the
// float nearest π/2 − C1 − C2 (the rest is 5e-15). strict_float because Halide's fast-math flags
// let LLVM fold the steps back into x − k·(C1 + C2 + C3), which loses the reduction.
//
// Kernels on |r| <= 0.8 (π/4 plus room for the k that x·2/π rounded in float32 puts one off near
// a quadrant boundary): sin r = r + r³·P(r²), cos r = 1 + r²·Q(r²), deg P = 2, deg Q = 3, fitted
// for Loom by a Remez exchange minimising the relative error (Horner form, so every step is one
// FMA): 2.6e-9 and 1.5e-9 in exact arithmetic, far under float32's 6e-8 ulp near 1.
//
// Quadrant q = k mod 4: sin x = ±(q odd ? cos r : sin r), negative when bit 1 of q is set;
// cos x = sin(x + π/2), the same with q + 1. Sign flips are an xor of the sign bit.
//
// Accuracy: max abs error about 7e-8 (1 ulp) for |x| up to 1e5 (tests/test_ops_elementwise.cpp);
// past 65536·π/2 ≈ 1.03e5, k·C1 is no longer exact and the error grows (~3e-2 at 1e6); past
// 2^22·π/2 ≈ 6.6e6 the shifter no longer yields k and the value is meaningless but r is clamped,
// so the result stays in [-1, 1] and is never NaN for finite x.
struct SinCosParts {
    Expr sin_r, cos_r;  ///< the kernels at the reduced argument
    Expr q;             ///< k as uint32 bits: k mod 4 in bits 0-1
};

SinCosParts sincos_parts(const Expr &x) {
    const float shifter = 12582912.0f;  // 1.5 * 2^23
    Expr kb = Halide::strict_float(x * 0.636619746685028076171875f + shifter);
    Expr k = Halide::strict_float(kb - shifter);
    Expr r = Halide::strict_float(((x - k * 1.5703125f) - k * 0.000484466552734375f) - k * -6.397578431e-07f);
    r = Halide::clamp(r, -0.9f, 0.9f);
    Expr t = r * r;
    Expr p = (t * -1.950524020e-04f + 8.332090452e-03f) * t + -1.666665375e-01f;
    Expr qpoly = ((t * 2.437514377e-05f + -1.388660166e-03f) * t + 4.166661948e-02f) * t + -0.5f;
    return {(r * t) * p + r, t * qpoly + 1.0f, Halide::reinterpret(Halide::UInt(32), kb)};
}

Expr sincos_approx(Expr x_in, bool want_cos) {
    Halide::Type t = x_in.type();
    SinCosParts sc = sincos_parts(Halide::cast(Halide::Float(32), x_in));
    Expr q = want_cos ? sc.q + 1 : sc.q;
    Expr odd = (sc.q & 1) != 0;  // q and q + 1 differ in parity: one test serves both
    Expr v = want_cos ? Halide::select(odd, sc.sin_r, sc.cos_r) : Halide::select(odd, sc.cos_r, sc.sin_r);
    Expr sign = (q >> 1) << 31;
    v = Halide::reinterpret(Halide::Float(32), Halide::reinterpret(Halide::UInt(32), v) ^ sign);
    return Halide::cast(t, v);
}

// tanh in float32 as a vectorisable rational function (Halide's tanh calls scalar libm): the
// 13/6-degree minimax rational used by Eigen and XLA on [-7.9, 7.9], where tanh rounds to ±1
// beyond; a few ulp, and exact sign and small-|x| behaviour (p/q ≈ x near 0).
Expr tanh_approx(Expr x_in) {
    Halide::Type t = x_in.type();
    Expr x = Halide::clamp(Halide::cast(Halide::Float(32), x_in), -7.90531110763549805f, 7.90531110763549805f);
    Expr x2 = x * x;
    Expr p = -2.76076847742355e-16f;
    for (float a : {2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f, 1.48572235717979e-05f,
                    6.37261928875436e-04f, 4.89352455891786e-03f})
        p = p * x2 + a;
    p = p * x;
    Expr q = 1.19825839466702e-06f;
    for (float b : {1.18534705686654e-04f, 2.26843463243900e-03f, 4.89352518554385e-03f}) q = q * x2 + b;
    return Halide::cast(t, p / q);
}

/// erf for float32 (f64 arguments go through float32 too): a rational minimax approximation
/// on [-4, 4], odd numerator of degree 13 over even denominator of degree 8 (the form used by
/// XLA/Eigen); beyond |x| = 4 erf is ±1 in float32. Max error a few ulp.
Expr erf_approx(Expr x_in) {
    Halide::Type t = x_in.type();
    Expr x = Halide::clamp(Halide::cast(Halide::Float(32), x_in), -4.0f, 4.0f);
    Expr x2 = x * x;
    Expr p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
    p = x2 * p + -2.10102402082508e-06f;
    p = x2 * p + -5.69250639462346e-05f;
    p = x2 * p + -7.34990630326855e-04f;
    p = x2 * p + -2.95459980854025e-03f;
    p = x2 * p + -1.60960333262415e-02f;
    p = x * p;
    Expr q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
    q = x2 * q + -1.68282697438203e-03f;
    q = x2 * q + -7.37332916720468e-03f;
    q = x2 * q + -1.42647390514189e-02f;
    return Halide::cast(t, p / q);
}

/// log(1 + u) accurate for small u (Goldberg's trick: the rounding error of 1 + u cancels).
Expr log1p_approx(Expr u) {
    Expr w = 1 + u;
    return Halide::select(w == fconst(w, 1), u, Halide::log(w) * u / (w - 1));
}

/// Integer division truncating toward zero (ONNX/C semantics; Halide's rounds toward -inf).
Expr trunc_div(Expr a, Expr b) {
    Halide::Type t = a.type();
    Expr q = Halide::cast(t, Halide::abs(a)) / Halide::cast(t, Halide::abs(b));
    return Halide::select((a < 0) != (b < 0), -q, q);
}

Expr pow_expr(LowerContext &ctx, const Node &node, Expr a, Expr b) {
    if (const Tensor *c = ctx.constant(node.inputs[1]); c && c->numel() == 1) {
        double v = c->get(0);
        // Exporters write Pow(x, 2) in decomposed LayerNorm and friends: no libm call for it.
        if (v == 1) return a;
        if (v == 2) return a * a;
        if (v == 3) return a * a * a;
        if (v == 0.5 && a.type().is_float()) return Halide::sqrt(a);
        if (v == -1 && a.type().is_float()) return fconst(a, 1) / a;
    }
    if (a.type().is_float()) return Halide::pow(a, Halide::cast(a.type(), b));
    Expr r = Halide::pow(Halide::cast(Halide::Float(64), a), Halide::cast(Halide::Float(64), b));
    return Halide::cast(a.type(), r);
}

}  // namespace

void lower_elementwise(LowerContext &ctx, const Node &node) {
    const std::string &out = node.outputs.at(0);
    const Shape &os = ctx.shape(out);
    const DType odt = ctx.dtype(out);
    const int rank = (int)os.size();
    Func f = ctx.make_func(node, "", rank);
    std::vector<Var> vs = ctx.vars(rank);
    std::vector<Expr> idx(vs.begin(), vs.end());
    auto in = [&](int k) { return widen(ctx.at(node.inputs.at(k), idx)); };
    const std::string &op = node.op;
    const int n_in = node.num_inputs();
    Expr e;
    double flops = 1;

    if (op == "Add") e = in(0) + in(1);
    else if (op == "Sub") e = in(0) - in(1);
    else if (op == "Mul") e = in(0) * in(1);
    else if (op == "Div") {
        Expr a = in(0), b = in(1);
        const Shape &bs = ctx.shape(node.inputs.at(1));
        // A divisor constant along the innermost axis (LayerNorm's 1/σ, a row sum): one reciprocal
        // per row, which code generation hoists, and a multiply per element instead of a division
        // (about ten instructions on a GPU, a slow port on a CPU); within 1.5 ulp of a / b.
        bool row_constant = rank > 0 && os[rank - 1] > 1 && (bs.empty() || bs.back() == 1);
        e = !a.type().is_float() ? trunc_div(a, b) : row_constant ? a * (fconst(b, 1) / b) : a / b;
    } else if (op == "Pow") {
        e = pow_expr(ctx, node, in(0), in(1));
        flops = 20;
    } else if (op == "Equal") e = in(0) == in(1);
    else if (op == "Less") e = in(0) < in(1);
    else if (op == "Greater") e = in(0) > in(1);
    else if (op == "And") e = in(0) && in(1);
    else if (op == "Or") e = in(0) || in(1);
    else if (op == "Not") e = !in(0);
    else if (op == "PRelu") {
        Expr x = in(0);
        e = Halide::select(x < fconst(x, 0), in(1) * x, x);
    } else if (op == "Min" || op == "Max" || op == "Sum" || op == "Mean") {
        e = in(0);
        for (int k = 1; k < n_in; k++) {
            Expr b = in(k);
            e = op == "Min" ? Halide::min(e, b) : op == "Max" ? Halide::max(e, b) : e + b;
        }
        if (op == "Mean") e = e / fconst(e, n_in);
        flops = n_in;
    } else if (op == "Where") {
        e = Halide::select(ctx.at(node.inputs.at(0), idx), in(1), in(2));
    } else if (op == "Cast") {
        e = ctx.at(node.inputs.at(0), idx);
        // float -> int conversion of an out-of-range value is undefined in Halide as in C.
        e = LowerContext::cast_to(odt, e);
    } else if (op == "Clip") {
        Expr x = in(0);
        double lo = node.get_float("min", -INFINITY), hi = node.get_float("max", INFINITY);
        if (std::isfinite(lo)) x = Halide::max(x, fconst(x, lo));
        if (std::isfinite(hi)) x = Halide::min(x, fconst(x, hi));
        e = x;
    } else {
        // Unary float ops.
        Expr x = in(0);
        auto c = [&](double v) { return fconst(x, v); };
        if (op == "Sqrt") e = Halide::sqrt(x);
        else if (op == "Exp") e = Halide::exp(x), flops = 10;
        else if (op == "Log") e = Halide::log(x), flops = 10;
        else if (op == "Abs") e = Halide::cast(x.type(), Halide::abs(x));
        else if (op == "Neg") e = -x;
        else if (op == "Reciprocal") e = c(1) / x;
        else if (op == "Floor") e = Halide::floor(x);
        else if (op == "Ceil") e = Halide::ceil(x);
        else if (op == "Relu") e = Halide::max(x, c(0));
        else if (op == "LeakyRelu") e = Halide::select(x < c(0), c(node.get_float("alpha", 0.01)) * x, x);
        else if (op == "Elu")
            e = Halide::select(x < c(0), c(node.get_float("alpha", 1.0)) * (Halide::exp(x) - c(1)), x), flops = 12;
        else if (op == "Sigmoid") e = c(1) / (c(1) + Halide::exp(-x)), flops = 12;
        else if (op == "HardSigmoid")
            e = Halide::clamp(c(node.get_float("alpha", 0.2)) * x + c(node.get_float("beta", 0.5)), c(0), c(1)), flops = 4;
        else if (op == "HardSwish") e = x * Halide::clamp(x * c(1.0 / 6) + c(0.5), c(0), c(1)), flops = 5;
        else if (op == "Swish") e = x / (c(1) + Halide::exp(c(-node.get_float("alpha", 1.0)) * x)), flops = 13;
        else if (op == "Tanh") e = tanh_approx(x), flops = 15;
        else if (op == "Erf") e = erf_approx(x), flops = 20;
        else if (op == "Sin") e = sincos_approx(x, false), flops = 20;
        else if (op == "Cos") e = sincos_approx(x, true), flops = 20;
        else if (op == "Softplus") {
            // max(x, 0) + log1p(exp(-|x|)): no overflow for large x, no cancellation for small.
            Expr ax = Halide::abs(x);
            e = Halide::max(x, c(0)) + log1p_approx(Halide::exp(-ax));
            flops = 25;
        } else if (op == "Gelu") {
            std::string approx = node.get_string("approximate", "none");
            if (approx == "tanh") {
                Expr inner = c(std::sqrt(2.0 / M_PI)) * (x + c(0.044715) * x * x * x);
                e = c(0.5) * x * (c(1) + tanh_approx(inner));
            } else {
                user_check(approx == "none", node.describe(), ": approximate='", approx,
                           "' is not supported; valid: none, tanh");
                e = c(0.5) * x * (c(1) + erf_approx(x * c(M_SQRT1_2)));
            }
            flops = 25;
        } else {
            throw InternalError(str_cat(node.describe(), ": no elementwise lowering for op ", op));
        }
    }
    ctx.define(f, vs, LowerContext::cast_to(odt, e));
    ctx.note_cost(f, true, flops);
    ctx.bind_output(out, f);
}

}  // namespace loom
