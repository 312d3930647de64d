// FusedAttention (recognize_attention's node): softmax(scale · q·kᵀ + mask) · v without the S×S
// scores. Keys are cut into tiles of kAttentionKeyTile; each (query, key tile) pair yields its
// softmax statistics, the tile's max and its sum of exponentials, and its unnormalized product
// with v, all three in one Func, `<node>_tile_stats`; the tiles are then merged by rescaling each
// with exp(tile max − row max) (FlashAttention's online softmax, merged after the key loop as
// flash-decoding merges its splits). Funcs (outermost dims first; batch dims … of q):
//   <node>_qk[…, Sq, Sk]                  q·kᵀ, update over "k" (d)
//   <node>_tile_max[…, Sq, nT]            scale · qk + mask, max over the tile, update over "r"
//   <node>_prob[…, Sq, nT, T]             exp(logit − tile max), 0 past Sk
//   <node>_tile_stats[…, Sq, nT, dv + 2]  Σ prob·v (dv columns), Σ prob, the tile max; update "r"
//   <node>_max[…, Sq]                     max over tiles, update over "t"
//   <node>_rescale[…, Sq, nT]             exp(tile max − max)
//   <node>_sum[…, Sq]                     Σ rescale · tile sum, update over "t"
//   <node>_weight[…, Sq, nT]              rescale / sum
//   <node>[…, Sq, dv]                     Σ weight · tile product, update over "t"
// A schedule computes qk, tile_max and prob at tile_stats' key tile and tile_stats at the
// output's query tile, so that only a query tile × key tile block of scores exists at a time
// (the eager schedule computes every Func at root, as the unfused ops would).
#include <algorithm>
#include <limits>

#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace {

template <typename T>
std::vector<T> cat(std::vector<T> a, const std::vector<T> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

Shape with(Shape s, std::initializer_list<int64_t> tail) {
    s.insert(s.end(), tail);
    return s;
}

}  // namespace

void lower_attention(LowerContext &ctx, const Node &node) {
    const std::string &q = node.inputs[0], &kt = node.inputs[1], &v = node.inputs[2], &y = node.outputs[0];
    const std::string mask = node.has_input(3) ? node.inputs[3] : std::string();
    const Shape &sq = ctx.shape(q), &sk = ctx.shape(kt), &sv = ctx.shape(v);
    const int r = (int)sq.size(), nb = r - 2;
    internal_check(r >= 2 && (int)sk.size() == r && (int)sv.size() == r, node.describe(), ": operand ranks differ");
    const int64_t Sq = sq[r - 2], d = sq[r - 1], Sk = sk[r - 1], dv = sv[r - 1];
    const int64_t T = std::min<int64_t>(kAttentionKeyTile, Sk), nT = (Sk + T - 1) / T;
    const Shape batch(sq.begin(), sq.begin() + nb);
    const Expr scale = Expr((float)node.get_float("scale", 1.0));
    const Expr neg_inf = Expr(-std::numeric_limits<float>::infinity());
    auto at = [&](const std::string &value, const std::vector<Expr> &idx) {
        return LowerContext::cast_to(DType::F32, ctx.at(value, idx));
    };

    // qk[…, i, j] = Σ_k q[…, i, k] kᵀ[…, k, j]
    Func qk = ctx.make_func(node, "qk", with(batch, {Sq, Sk}));
    std::vector<Var> vq = ctx.vars(r);
    {
        RDom k({{0, (int)d}}, "k");
        std::vector<Expr> b(vq.begin(), vq.begin() + nb);
        ctx.define(qk, vq, Expr(0.0f));
        ref(qk, exprs(vq)) += at(q, cat(b, {vq[nb], k.x})) * at(kt, cat(b, {k.x, vq[nb + 1]}));
        ctx.note_update(qk, {"k"});
        ctx.note_cost(qk, false, 2.0 * d);
    }
    // The logit of query i and key j (j clamped into range: callers mask what lies past Sk).
    auto logit = [&](const std::vector<Expr> &b, Expr i, Expr j) {
        Expr jc = Halide::min(j, (int)Sk - 1);
        Expr e = LowerContext::call(qk, cat(b, {i, jc})) * scale;
        if (!mask.empty()) e = e + at(mask, cat(b, {i, jc}));
        return e;
    };

    // tile_max[…, i, t] = max over the tile's keys
    std::vector<Var> vt = ctx.vars(nb + 2);
    const std::vector<Expr> bt(vt.begin(), vt.begin() + nb);
    const Var ti = vt[nb], tt = vt[nb + 1];
    Func tile_max = ctx.make_func(node, "tile_max", with(batch, {Sq, nT}));
    {
        RDom rr({{0, (int)T}}, "r");
        Expr j = tt * (int)T + rr.x;
        ctx.define(tile_max, vt, neg_inf);
        ref(tile_max, exprs(vt)) = Halide::max(LowerContext::call(tile_max, exprs(vt)),
                                               Halide::select(j < (int)Sk, logit(bt, ti, j), neg_inf));
        ctx.note_update(tile_max, {"r"});
        ctx.note_cost(tile_max, false, 3.0 * T);
    }
    // prob[…, i, t, r] = exp(logit − tile max); 0 past Sk and in a tile the mask hides entirely
    std::vector<Var> vp = ctx.vars(nb + 3);
    const std::vector<Expr> bp(vp.begin(), vp.begin() + nb);
    Func prob = ctx.make_func(node, "prob", with(batch, {Sq, nT, T}));
    {
        Var i = vp[nb], t = vp[nb + 1], rk = vp[nb + 2];
        Expr j = t * (int)T + rk, m = LowerContext::call(tile_max, cat(bp, {i, t}));
        ctx.define(prob, vp, Halide::select(j < (int)Sk && m > neg_inf, Halide::exp(logit(bp, i, j) - m), 0.0f));
        ctx.note_cost(prob, true, 20);
    }
    // tile_stats[…, i, t, c]: c < dv Σ prob·v[…, j, c], c == dv Σ prob, c == dv + 1 the tile max
    Func stats = ctx.make_func(node, "tile_stats", with(batch, {Sq, nT, dv + 2}));
    {
        Var i = vp[nb], t = vp[nb + 1], c = vp[nb + 2];
        RDom rr({{0, (int)T}}, "r");
        Expr j = Halide::min(t * (int)T + rr.x, (int)Sk - 1);
        Expr p = LowerContext::call(prob, cat(bp, {i, t, rr.x}));
        Expr vj = at(v, cat(bp, {j, Halide::min(c, (int)dv - 1)}));
        ctx.define(stats, vp, Halide::select(c == (int)dv + 1, LowerContext::call(tile_max, cat(bp, {i, t})), 0.0f));
        ref(stats, exprs(vp)) += Halide::select(c < (int)dv, p * vj, c == (int)dv, p, 0.0f);
        ctx.note_update(stats, {"r"});
        ctx.note_cost(stats, false, 2.0 * T);
    }
    auto stat = [&](const std::vector<Expr> &b, Expr i, Expr t, Expr c) {
        return LowerContext::call(stats, cat(b, {i, t, c}));
    };
    // The merge over key tiles.
    std::vector<Var> vr = ctx.vars(nb + 1);
    const std::vector<Expr> br(vr.begin(), vr.begin() + nb);
    Func row_max = ctx.make_func(node, "max", with(batch, {Sq}));
    {
        RDom rt({{0, (int)nT}}, "t");
        ctx.define(row_max, vr, neg_inf);
        ref(row_max, exprs(vr)) = Halide::max(LowerContext::call(row_max, exprs(vr)),
                                              stat(br, vr[nb], rt.x, (int)dv + 1));
        ctx.note_update(row_max, {"t"});
        ctx.note_cost(row_max, false, (double)nT);
    }
    Func rescale = ctx.make_func(node, "rescale", with(batch, {Sq, nT}));
    {
        Expr m = stat(bt, ti, tt, (int)dv + 1);
        ctx.define(rescale, vt, Halide::select(m > neg_inf, Halide::exp(m - LowerContext::call(row_max, cat(bt, {ti}))), 0.0f));
        ctx.note_cost(rescale, true, 20);
    }
    Func sum = ctx.make_func(node, "sum", with(batch, {Sq}));
    {
        RDom rt({{0, (int)nT}}, "t");
        ctx.define(sum, vr, Expr(0.0f));
        ref(sum, exprs(vr)) += LowerContext::call(rescale, cat(br, {vr[nb], rt.x})) * stat(br, vr[nb], rt.x, (int)dv);
        ctx.note_update(sum, {"t"});
        ctx.note_cost(sum, false, 2.0 * nT);
    }
    Func weight = ctx.make_func(node, "weight", with(batch, {Sq, nT}));
    ctx.define(weight, vt, LowerContext::call(rescale, exprs(vt)) / LowerContext::call(sum, cat(bt, {ti})));
    ctx.note_cost(weight, true, 1);

    Func f = ctx.make_func(node, "", r);
    std::vector<Var> vo = ctx.vars(r);
    const std::vector<Expr> bo(vo.begin(), vo.begin() + nb);
    RDom rt({{0, (int)nT}}, "t");
    ctx.define(f, vo, Expr(0.0f));
    ref(f, exprs(vo)) += LowerContext::call(weight, cat(bo, {vo[nb], rt.x})) * stat(bo, vo[nb], rt.x, vo[nb + 1]);
    ctx.note_update(f, {"t"});
    ctx.note_cost(f, false, 2.0 * nT);
    ctx.bind_output(y, f);
}

}  // namespace loom
