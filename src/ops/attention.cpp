// FusedAttention (recognize_attention's node): softmax(scale · q·kᵀ + mask) · v without the S×S
// scores. Keys are cut into tiles of kAttentionKeyTile; each (query, key tile) pair yields its
// softmax statistics, the tile's max and its sum of exponentials, and its unnormalized product
// with v, all three in one Func, `<node>_tile_stats`; the tiles are then merged by rescaling each
// with exp(tile max − row max) (FlashAttention's online softmax, merged after the key loop as
// flash-decoding merges its splits). Funcs (outermost dims first; batch dims … of q):
//   <node>_keys[…, nT, d, T]              key tile t's keys (kᵀ's columns tT … tT + T − 1)
//   <node>_values[…, nT, T, C]            its values, then the columns 1 and 0 (C: dv + 2 padded)
//   <node>_qk[…, Sq, nT, T]               q·kᵀ, update over "k" (d)
//   <node>_tile_max[…, Sq, nT]            scale · qk + mask, max over the tile, update over "r"
//   <node>_prob[…, Sq, nT, T]             exp(logit − tile max), 0 past Sk
//   <node>_tile_stats[…, Sq, nT, C]       Σ prob·v (dv columns), Σ prob, the tile max; update "r"
//   <node>_max[…, Sq]                     max over tiles, update over "t"
//   <node>_rescale[…, Sq, nT]             exp(tile max − max)
//   <node>_sum[…, Sq]                     Σ rescale · tile sum, update over "t"
//   <node>_weight[…, Sq, nT]              rescale / sum
//   <node>[…, Sq, dv]                     Σ weight · tile product, update over "t"
// A schedule computes keys, values, qk, tile_max and prob at tile_stats' key tile and tile_stats at the
// output's query tile, so that only a query tile × key tile block of scores exists at a time
// (the eager schedule computes every Func at root, as the unfused ops would).
// With LowerOptions::attention_extern (CUDA, BF16) the node is instead one cuDNN fused-attention
// extern stage (codegen/cudnn_attention.h) on BF16 copies of q, k (kᵀ transposed back) and v,
// `<node>_q_bf16`, `<node>_k_bf16`, `<node>_v_bf16`, its BF16 output widened by the node's Func;
// under TF32 with LowerOptions::attention_f16, on FP16 copies `<node>_q_f16` … and an FP16 output.
#include <algorithm>
#include <limits>

#include "lower/extern_stages.h"

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

// The cuDNN extern of a FusedAttention (LowerOptions::attention_extern): rank 3 runs as one batch
// of heads. An operand that widens a BF16 value (bf16_source) is read as its bits: a whole dense
// graph input of rank 4 goes to cuDNN as it is, anything else through a copy of the bits, since
// rounding the widened value back to BF16 is the identity. A sole reader of the output that rounds
// it to BF16 (D100's Cast before a bf16 graph output) is the extern itself. With
// LowerOptions::attention_f16 every operand is an FP16 copy (rounded to nearest) and the output FP16.
void lower_attention_extern(LowerContext &ctx, const Node &node) {
    const bool f16 = ctx.options.attention_f16;
    const Halide::Type half = f16 ? Halide::Float(16) : Halide::UInt(16);
    const std::string &q = node.inputs[0], &kt = node.inputs[1], &v = node.inputs[2], &y = node.outputs[0];
    const Shape &sq = ctx.shape(q), &sk = ctx.shape(kt);
    const int r = (int)sq.size();
    const int64_t B = r == 4 ? sq[0] : 1, H = sq[r - 3], Sq = sq[r - 2], d = sq[r - 1], Sk = sk[r - 1];
    std::vector<Var> v4 = ctx.vars(4);
    const Var b = v4[0], h = v4[1], s = v4[2], c = v4[3];
    // value [b, h, s, c] (kt's Transpose read at [b, h, c, s]), BF16 bits or FP32 rounded to them.
    auto operand = [&](const char *suffix, int64_t S, const std::string &value, bool transposed) {
        std::string src = value;
        if (transposed) {  // kᵀ: the Transpose's input k, when the Transpose is kᵀ of a rank-4 k
            const int t = ctx.graph.producer(value);
            if (r == 4 && t >= 0 && ctx.graph.nodes[t].op == "Transpose" &&
                ctx.graph.nodes[t].get_ints("perm") == std::vector<int64_t>{0, 1, 3, 2}) {
                src = ctx.graph.nodes[t].inputs[0];
                transposed = false;
            }
        }
        const std::string bits = f16 ? std::string() : bf16_source(ctx, src);
        std::vector<Expr> idx = transposed ? std::vector<Expr>{b, h, c, s} : std::vector<Expr>{b, h, s, c};
        const auto &ins = ctx.graph.inputs;
        const bool graph_input = !bits.empty() && std::find(ins.begin(), ins.end(), bits) != ins.end();
        Halide::ExternFuncArgument whole;
        if (graph_input && !transposed && r == 4 && ctx.shape(bits) == Shape{B, H, S, d} &&
            ctx.extern_operand(bits, whole))
            return whole;
        Func f = ctx.make_func(node, suffix, Shape{B, H, S, d});
        if (!bits.empty()) {
            ctx.define(f, v4, ctx.at(bits, idx));
            ctx.note_cost(f, true, 0);
        } else {
            Expr x = LowerContext::cast_to(DType::F32, ctx.at(src, idx));  // rank 3 drops b
            ctx.define(f, v4, f16 ? Halide::cast(half, x) : bf16_bits(x));
            ctx.note_cost(f, true, f16 ? 1 : 4);
        }
        LoweredFunc &rec = ctx.record(f);
        rec.dtype = f16 ? DType::F16 : DType::I16;
        rec.feeds_extern = true;
        bound_whole(f, v4, Shape{B, H, S, d});
        return Halide::ExternFuncArgument(f);
    };
    Func ext(ctx.reserve_name(ctx.func_base(node) + "_cudnn_attention"));
    std::vector<Halide::ExternFuncArgument> args = {operand(f16 ? "q_f16" : "q_bf16", Sq, q, false),
                                                    operand(f16 ? "k_f16" : "k_bf16", Sk, kt, true),
                                                    operand(f16 ? "v_f16" : "v_bf16", Sk, v, false)};
    for (Expr e : {Expr((int)B), Expr((int)H), Expr((int)Sq), Expr((int)Sk), Expr((int)d),
                   Expr((float)node.get_float("scale", 1.0)), Expr((int)f16)})
        args.push_back(e);
    ext.define_extern(kCudnnAttention, args, half, {c, s, h, b}, Halide::NameMangling::C,
                      Halide::DeviceAPI::CUDA);
    ext.compute_root();  // an extern: no schedule touches it
    bound_whole(ext, v4, Shape{B, H, Sq, d});  // as a library GEMM's output
    ctx.note_extern_call(kCudnnAttention, ext, Shape{B, H, Sq, d});
    if (const Node *cast = r == 4 && !f16 ? bf16_rounding(ctx, y) : nullptr) {
        ctx.register_extern(ext, node, Shape{B, H, Sq, d});
        ctx.fuse_node_into(cast->name, ext);
    }
    Func f = ctx.make_func(node, "", r);
    std::vector<Var> vo = ctx.vars(r);
    std::vector<Expr> idx = exprs(vo);
    if (r == 3) idx.insert(idx.begin(), Expr(0));
    Expr o = LowerContext::call(ext, idx);
    ctx.define(f, vo, f16 ? Halide::cast(Halide::Float(32), o) : from_bf16_bits(o));
    ctx.note_cost(f, true, 2);
    ctx.bind_output(y, f);
}

}  // namespace

void lower_attention(LowerContext &ctx, const Node &node) {
    if (ctx.options.attention_extern) return lower_attention_extern(ctx, node);
    const std::string &q = node.inputs[0], &kt = node.inputs[1], &v = node.inputs[2], &y = node.outputs[0];
    const std::string mask = node.has_input(3) ? node.inputs[3] : std::string();
    const Shape &sq = ctx.shape(q), &sk = ctx.shape(kt), &sv = ctx.shape(v);
    const int r = (int)sq.size(), nb = r - 2;
    internal_check(r >= 2 && (int)sk.size() == r && (int)sv.size() == r, node.describe(), ": operand ranks differ");
    const int64_t Sq = sq[r - 2], d = sq[r - 1], Sk = sk[r - 1], dv = sv[r - 1];
    const int64_t T = std::min<int64_t>(kAttentionKeyTile, Sk), nT = (Sk + T - 1) / T;
    const Shape batch(sq.begin(), sq.begin() + nb);
    // dv products, the sum and the max, padded with zero columns to a multiple of 16 so that whole
    // vectors cover a row.
    const int64_t cols = (dv + 2 + 15) / 16 * 16;
    const Expr scale = Expr((float)node.get_float("scale", 1.0));
    const Expr neg_inf = Expr(-std::numeric_limits<float>::infinity());
    auto at = [&](const std::string &value, const std::vector<Expr> &idx) {
        return LowerContext::cast_to(DType::F32, ctx.at(value, idx));
    };

    // Key tile t's keys and values, copied once per tile for the dense loads of the products:
    // keys[…, t, k, r] = kᵀ[…, k, tT + r], values[…, t, r, c] = v[…, tT + r, c] with two more
    // columns, 1 (the tile's sum of probabilities) and 0 (the slot of its max); rows past Sk repeat
    // the last key (their probabilities are 0).
    std::vector<Var> vp = ctx.vars(nb + 3);
    const std::vector<Expr> bp(vp.begin(), vp.begin() + nb);
    const Var p0 = vp[nb], p1 = vp[nb + 1], p2 = vp[nb + 2];
    Func keys = ctx.make_func(node, "keys", with(batch, {nT, d, T}));
    ctx.define(keys, vp, at(kt, cat(bp, {p1, Halide::min(p0 * (int)T + p2, (int)Sk - 1)})));
    ctx.note_cost(keys, true, 0);
    Func values = ctx.make_func(node, "values", with(batch, {nT, T, cols}));
    ctx.define(values, vp,
               Halide::select(p2 < (int)dv, at(v, cat(bp, {Halide::min(p0 * (int)T + p1, (int)Sk - 1), Halide::min(p2, (int)dv - 1)})),
                              Halide::select(p2 == (int)dv, 1.0f, 0.0f)));
    ctx.note_cost(values, true, 0);

    // qk[…, i, t, r] = Σ_k q[…, i, k] keys[…, t, k, r]
    Func qk = ctx.make_func(node, "qk", with(batch, {Sq, nT, T}));
    {
        RDom k({{0, (int)d}}, "k");
        ctx.define(qk, vp, Expr(0.0f));
        ref(qk, exprs(vp)) += at(q, cat(bp, {p0, k.x})) * LowerContext::call(keys, cat(bp, {p1, k.x, p2}));
        ctx.note_update(qk, {"k"});
        ctx.note_cost(qk, false, 2.0 * d);
    }
    // The logit of query i and key tT + r (masked by the caller past Sk).
    auto logit = [&](const std::vector<Expr> &b, Expr i, Expr t, Expr rk) {
        Expr e = LowerContext::call(qk, cat(b, {i, t, rk})) * scale;
        if (!mask.empty()) e = e + at(mask, cat(b, {i, Halide::min(t * (int)T + rk, (int)Sk - 1)}));
        return e;
    };

    // tile_max[…, i, t] = max over the tile's keys
    std::vector<Var> vt = ctx.vars(nb + 2);
    const std::vector<Expr> bt(vt.begin(), vt.begin() + nb);
    const Var ti = vt[nb], tt = vt[nb + 1];
    Func tile_max = ctx.make_func(node, "tile_max", with(batch, {Sq, nT}));
    {
        RDom rr({{0, (int)T}}, "r");
        ctx.define(tile_max, vt, neg_inf);
        ref(tile_max, exprs(vt)) = Halide::max(LowerContext::call(tile_max, exprs(vt)),
                                               Halide::select(tt * (int)T + rr.x < (int)Sk, logit(bt, ti, tt, rr.x), neg_inf));
        ctx.note_update(tile_max, {"r"});
        ctx.note_cost(tile_max, false, 3.0 * T);
    }
    // prob[…, i, t, r] = exp(logit − tile max); 0 past Sk and in a tile the mask hides entirely
    Func prob = ctx.make_func(node, "prob", with(batch, {Sq, nT, T}));
    {
        Expr m = LowerContext::call(tile_max, cat(bp, {p0, p1}));
        ctx.define(prob, vp, Halide::select(p1 * (int)T + p2 < (int)Sk && m > neg_inf, Halide::exp(logit(bp, p0, p1, p2) - m), 0.0f));
        ctx.note_cost(prob, true, 20);
    }
    // tile_stats[…, i, t, c]: c < dv Σ prob·v[…, j, c], c == dv Σ prob, c == dv + 1 the tile max, then 0
    Func stats = ctx.make_func(node, "tile_stats", with(batch, {Sq, nT, cols}));
    {
        RDom rr({{0, (int)T}}, "r");
        // The max column is written by the update, not the init, so that the init reads nothing a
        // schedule computes per key tile.
        ctx.define(stats, vp, Expr(0.0f));
        ref(stats, exprs(vp)) = Halide::select(p2 == (int)dv + 1, LowerContext::call(tile_max, cat(bp, {p0, p1})),
                                               LowerContext::call(stats, exprs(vp)) +
                                                   LowerContext::call(prob, cat(bp, {p0, p1, rr.x})) *
                                                       LowerContext::call(values, cat(bp, {p1, rr.x, p2})));
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

std::string bf16_source(const LowerContext &ctx, const std::string &value) {
    const int p = ctx.graph.producer(value);
    if (p < 0) return "";
    const Node &n = ctx.graph.nodes[p];
    if (n.op != "Cast" || ctx.dtype(value) != DType::F32 || ctx.dtype(n.inputs[0]) != DType::BF16) return "";
    return n.inputs[0];
}

const Node *bf16_rounding(const LowerContext &ctx, const std::string &value) {
    const std::vector<int> users = ctx.graph.consumers(value);
    if (users.size() != 1 || ctx.graph.is_output(value)) return nullptr;
    const Node &cast = ctx.graph.nodes[users[0]];
    return cast.op == "Cast" && ctx.dtype(cast.outputs[0]) == DType::BF16 ? &cast : nullptr;
}

}  // namespace loom
