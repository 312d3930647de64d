#include "autodiff/vjp_rules.h"

#include <cmath>
#include <numeric>

#include "support/error.h"

namespace loom::autodiff {

namespace {

using Grads = std::vector<std::string>;
constexpr double kPi = 3.14159265358979323846;

// A float mask: 1 where \p cond holds, else 0.
std::string as_f32(GraphEmitter &e, const std::string &cond) {
    std::string v = e.op("Cast", {cond}, e.shape(cond), {{"to", std::string("f32")}}, DType::F32);
    return v;
}

// Gradient of a pointwise op y = f(x): dy * f'(x), f' given as a value of x's shape.
Grads pointwise(VjpArgs &a, const std::string &derivative) { return {a.e.mul(a.dy[0], derivative)}; }

// Where(cond, dy, 0).
std::string gate(VjpArgs &a, const std::string &cond) { return a.e.where(cond, a.dy[0], a.e.scalar(0)); }

// The rule of a binary broadcast op: \p da and \p db are the full-shape gradients (or "").
Grads binary(VjpArgs &a, const std::string &da, const std::string &db) {
    return {a.want(0) && !da.empty() ? a.e.unbroadcast(da, a.xs(0)) : "",
            a.want(1) && !db.empty() ? a.e.unbroadcast(db, a.xs(1)) : ""};
}

std::vector<int64_t> iota(int64_t from, int64_t to) {
    std::vector<int64_t> v;
    for (int64_t i = from; i < to; i++) v.push_back(i);
    return v;
}

// The shape of \p s with \p axes kept as 1.
Shape keep_dims(const Shape &s, const std::vector<int64_t> &axes) {
    Shape k = s;
    for (int64_t ax : axes) k[ax] = 1;
    return k;
}

// Reduce ops: dy reshaped to the keepdims shape.
std::string dy_keepdims(VjpArgs &a) {
    return a.e.reshape(a.dy[0], keep_dims(a.xs(0), a.node.get_ints("axes")));
}
std::string y_keepdims(VjpArgs &a) { return a.e.reshape(a.y(), keep_dims(a.xs(0), a.node.get_ints("axes"))); }

// --- MatMul ------------------------------------------------------------------------------------

Grads matmul(VjpArgs &a) {
    GraphEmitter &e = a.e;
    Shape sa = a.xs(0), sb = a.xs(1);
    std::string A = a.x(0), B = a.x(1), G = a.dy[0];
    if (sa.size() == 1) A = e.reshape(A, {1, sa[0]});
    if (sb.size() == 1) B = e.reshape(B, {sb[0], 1});
    Shape pa = e.shape(A), pb = e.shape(B);
    // The product's full shape with both matrix dims.
    Shape batch_a(pa.begin(), pa.end() - 2), batch_b(pb.begin(), pb.end() - 2);
    Shape full = broadcast_shapes(batch_a, batch_b);
    full.push_back(pa[pa.size() - 2]);
    full.push_back(pb.back());
    G = e.reshape(G, full);
    auto swap_last = [&](const std::string &v) {
        std::vector<int64_t> perm = iota(0, (int64_t)e.shape(v).size());
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        return e.transpose(v, perm);
    };
    auto matmul_shape = [&](const std::string &l, const std::string &r) {
        Shape sl = e.shape(l), sr = e.shape(r);
        Shape s = broadcast_shapes(Shape(sl.begin(), sl.end() - 2), Shape(sr.begin(), sr.end() - 2));
        s.push_back(sl[sl.size() - 2]);
        s.push_back(sr.back());
        return s;
    };
    Grads out(2);
    // A batched A times a 2-D B (a Linear over [batch, seq, features]): B's gradient is one GEMM
    // over the rows of every batch instead of a product per batch summed afterwards. (A's stays
    // batched: its shape is the one the activation's gradient, its epilogue, has.)
    if (sb.size() == 2 && pa.size() >= 3 && a.want(1)) {
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < pa.size(); d++) rows *= pa[d];
        std::string a2 = e.reshape(A, {rows, pa.back()}), g2 = e.reshape(G, {rows, pb.back()});
        // B read through a transpose (a weight stored [N, K]): its gradient is computed in the
        // weight's own layout, so the transposes cancel and the update reads it as stored.
        int k = e.graph().producer(B);
        if (k >= 0 && e.graph().nodes[k].op == "Transpose")
            out[1] = swap_last(e.op("MatMul", {swap_last(g2), a2}, {pb[1], pb[0]}));
        else
            out[1] = e.op("MatMul", {swap_last(a2), g2}, {pb[0], pb[1]});
    }
    if (a.want(0)) {
        std::string bt = swap_last(B);
        std::string da = e.op("MatMul", {G, bt}, matmul_shape(G, bt));
        out[0] = e.reshape(e.unbroadcast(da, pa), sa);
    }
    if (a.want(1) && out[1].empty()) {
        std::string at = swap_last(A);
        std::string db = e.op("MatMul", {at, G}, matmul_shape(at, G));
        out[1] = e.reshape(e.unbroadcast(db, pb), sb);
    }
    return out;
}

Grads gemm(VjpArgs &a) {
    GraphEmitter &e = a.e;
    double alpha = a.node.get_float("alpha", 1.0), beta = a.node.get_float("beta", 1.0);
    int64_t ta = a.node.get_int("transA", 0), tb = a.node.get_int("transB", 0);
    const std::string &A = a.x(0), &B = a.x(1), &G = a.dy[0];
    auto gemm2 = [&](const std::string &l, const std::string &r, int64_t tl, int64_t tr, const Shape &s) {
        return e.op("Gemm", {l, r}, s,
                    {{"alpha", alpha}, {"beta", 1.0}, {"transA", tl}, {"transB", tr}});
    };
    Grads out(3);
    if (a.want(0)) out[0] = ta == 0 ? gemm2(G, B, 0, 1 - tb, a.xs(0)) : gemm2(B, G, tb, 1, a.xs(0));
    if (a.want(1)) out[1] = tb == 0 ? gemm2(A, G, 1 - ta, 0, a.xs(1)) : gemm2(G, A, 1, ta, a.xs(1));
    if (a.node.has_input(2) && a.want(2)) {
        std::string g = beta == 1.0 ? G : e.mul(G, e.scalar(beta));
        out[2] = e.unbroadcast(g, a.xs(2));
    }
    return out;
}

// --- Conv and pooling --------------------------------------------------------------------------

struct Window {
    int sp = 0;
    std::vector<int64_t> kernel, strides, dilations, pb, pe;
};

Window window_of(const Node &n, int sp) {
    Window w;
    w.sp = sp;
    w.kernel = n.get_ints("kernel_shape");
    w.strides = n.get_ints("strides", std::vector<int64_t>(sp, 1));
    w.dilations = n.get_ints("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> pads = n.get_ints("pads", std::vector<int64_t>(2 * sp, 0));
    w.pb.assign(pads.begin(), pads.begin() + sp);
    w.pe.assign(pads.begin() + sp, pads.end());
    return w;
}

// The output padding that makes a ConvTranspose with window \p w map \p out back to \p in dims,
// given end pads \p pe_used.
std::vector<int64_t> output_padding(const Window &w, const Shape &in, const Shape &out, const std::vector<int64_t> &pe_used) {
    std::vector<int64_t> op(w.sp);
    for (int d = 0; d < w.sp; d++)
        op[d] = in[2 + d] - ((out[2 + d] - 1) * w.strides[d] - w.pb[d] - pe_used[d] + w.dilations[d] * (w.kernel[d] - 1) + 1);
    return op;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Scatters \p v ([N*C, T, out...], one channel per tap of \p w) back to input positions:
// a ConvTranspose with one-hot (or \p uniform) taps; returns [N, C, in...].
std::string scatter_taps(GraphEmitter &e, const std::string &v, const Window &w, const Shape &in, const Shape &out,
                         const std::vector<int64_t> &pe_used, bool uniform) {
    int64_t taps = 1;
    for (auto k : w.kernel) taps *= k;
    int64_t nc = in[0] * in[1];
    Shape ws = concat({uniform ? 1 : taps, 1}, w.kernel);
    Tensor wt(DType::F32, ws);
    for (int64_t t = 0; t < taps; t++) wt.set(uniform ? t : t * taps + t, 1.0);
    Shape res = concat({nc, 1}, Shape(in.begin() + 2, in.end()));
    std::string r = e.op("ConvTranspose", {v, e.constant(wt, "taps")}, res,
                         {{"kernel_shape", w.kernel}, {"strides", w.strides}, {"dilations", w.dilations},
                          {"pads", concat(w.pb, pe_used)}, {"group", int64_t(1)},
                          {"output_padding", output_padding(w, in, out, pe_used)}});
    return e.reshape(r, in);
}

// End pads a pooling window needs so every output reads in bounds (ceil_mode reads past pe).
std::vector<int64_t> pooling_end_pads(const Window &w, const Shape &in, const Shape &out) {
    std::vector<int64_t> pe = w.pe;
    for (int d = 0; d < w.sp; d++) {
        int64_t need = (out[2 + d] - 1) * w.strides[d] + w.dilations[d] * (w.kernel[d] - 1) + 1;
        int64_t have = in[2 + d] + w.pb[d] + w.pe[d];
        if (need > have) pe[d] += need - have;
    }
    return pe;
}

// \p x padded for window \p w (begin pads, end pads \p pe) with \p value.
std::string pad_window(GraphEmitter &e, const std::string &x, const Window &w, const std::vector<int64_t> &pe, double value) {
    Shape padded = e.shape(x);
    for (int d = 0; d < w.sp; d++) padded[2 + d] += w.pb[d] + pe[d];
    if (padded == e.shape(x)) return x;
    return e.op("Pad", {x}, padded,
                {{"pads", concat(concat({0, 0}, w.pb), concat({0, 0}, pe))}, {"mode", std::string("constant")}, {"value", value}});
}

// What tap \p t (row-major over the kernel) of window \p w reads of the padded input \p xp at
// every output position: a strided Slice of shape \p out.
std::string tap_slice(GraphEmitter &e, const std::string &xp, const Window &w, int64_t t, const Shape &out) {
    std::vector<int64_t> starts(2 + w.sp, 0), steps = concat({1, 1}, w.strides);
    for (int d = w.sp - 1; d >= 0; d--) {
        starts[2 + d] = (t % w.kernel[d]) * w.dilations[d];
        t /= w.kernel[d];
    }
    return e.op("Slice", {xp}, out, {{"starts", starts}, {"steps", steps}});
}

// The weight gradient of a depthwise convolution (one input channel per group, \p g's channels a
// multiple m of \p x's): per tap, the input at that tap's offset (a strided Slice of the padded
// input) times the output gradient, summed over batch and positions; the taps joined by a Concat.
// No work on the pairs of channels a grouped all-pairs conv would compute and mask out.
std::string depthwise_weight_grad(GraphEmitter &e, const std::string &x, const std::string &g, const Window &w) {
    const Shape xs = e.shape(x), gs = e.shape(g);
    int sp = w.sp;
    int64_t c = xs[1], mult = gs[1] / c;
    Shape os(gs.begin() + 2, gs.end());
    std::string xp = pad_window(e, x, w, pooling_end_pads(w, xs, gs), 0.0);
    // dY as [N, C, m, positions...]; each tap's input slice as [N, C, 1, positions...].
    std::string gv = e.reshape(g, concat({gs[0], c, mult}, os));
    int64_t taps = 1;
    for (auto k : w.kernel) taps *= k;
    std::vector<int64_t> reduce = {0};
    for (int d = 0; d < sp; d++) reduce.push_back(3 + d);
    std::vector<std::string> per_tap;
    for (int64_t t = 0; t < taps; t++) {
        std::string xt = e.reshape(tap_slice(e, xp, w, t, concat({xs[0], c}, os)), concat({xs[0], c, 1}, os));
        per_tap.push_back(e.reshape(e.reduce_sum(e.mul(gv, xt), reduce, false), {c, mult, 1}));  // [C, m, 1]
    }
    std::string joined = taps == 1 ? per_tap[0] : e.op("Concat", per_tap, {c, mult, taps}, {{"axis", int64_t(2)}});
    return e.reshape(joined, concat({c * mult, 1}, w.kernel));
}

// The weight gradient of a convolution of \p x by window \p w whose output gradient is \p g:
// dW[o, c, k] = sum over n and output positions p of g[n, o, p] * x[n, c, p*s + k*d - pad], as a
// conv of x (channels as batch) with g (batch as channels) as its weights, whose stride is the
// forward dilation and whose dilation the forward stride; for groups, only the pairs of one group
// are kept. Shape [g's channels, x's channels / group, kernel...] (a ConvTranspose's weight layout
// when x is its output gradient and g its input).
std::string conv_weight_grad(GraphEmitter &e, const std::string &x, const std::string &g, const Window &w, int64_t group) {
    const Shape xs = e.shape(x), gs = e.shape(g);
    int sp = w.sp;
    if (group > 1 && group == xs[1]) return depthwise_weight_grad(e, x, g, w);
    std::vector<int64_t> swap01 = concat({1, 0}, iota(2, 2 + sp));
    std::string xt = e.transpose(x, swap01), gt = e.transpose(g, swap01);
    Shape rs = {xs[1], gs[1]};
    bool crop = false;
    for (int d = 0; d < sp; d++) {
        int64_t q = (xs[2 + d] + w.pb[d] + w.pe[d] - (w.strides[d] * (gs[2 + d] - 1) + 1)) / w.dilations[d] + 1;
        rs.push_back(q);
        crop = crop || q != w.kernel[d];
    }
    std::string r = e.op("Conv", {xt, gt}, rs,
                         {{"kernel_shape", Shape(gs.begin() + 2, gs.end())}, {"strides", w.dilations},
                          {"dilations", w.strides}, {"pads", concat(w.pb, w.pe)}, {"group", int64_t(1)}});
    if (crop) {
        Shape cs = concat({xs[1], gs[1]}, w.kernel);
        r = e.op("Slice", {r}, cs, {{"starts", std::vector<int64_t>(2 + sp, 0)}, {"steps", std::vector<int64_t>(2 + sp, 1)}});
    }
    if (group == 1) return e.transpose(r, swap01);
    int64_t cg = xs[1] / group, og = gs[1] / group;
    r = e.reshape(r, concat({group, cg, group, og}, w.kernel));
    Shape ms = concat({group, 1, group, 1}, std::vector<int64_t>(sp, 1));
    Tensor eye(DType::F32, ms);
    for (int64_t k = 0; k < group; k++) eye.set(k * group + k, 1.0);
    r = e.reduce_sum(e.mul(r, e.constant(eye, "group_mask")), {0}, false);
    r = e.transpose(r, concat({1, 2, 0}, iota(3, 3 + sp)));
    return e.reshape(r, concat({gs[1], cg}, w.kernel));
}

// Conv, and ConvTranspose (\p transposed), the adjoint of a Conv with the same window: a Conv's
// input gradient is that ConvTranspose and a ConvTranspose's that Conv (the weight [C_in,
// C_out / group, k] is already in Conv's layout for the reverse direction); a ConvTranspose's
// weight gradient is the conv weight gradient with the roles of input and output swapped.
Grads conv_family(VjpArgs &a, bool transposed) {
    GraphEmitter &e = a.e;
    const Shape &xs = a.xs(0), &ys = a.ys();
    int sp = (int)xs.size() - 2;
    Window w = window_of(a.node, sp);
    int64_t group = a.node.get_int("group", 1);
    const std::string &G = a.dy[0];
    std::map<std::string, AttrValue> attrs = {{"kernel_shape", w.kernel}, {"strides", w.strides},
                                              {"dilations", w.dilations}, {"pads", concat(w.pb, w.pe)}, {"group", group}};
    Grads out(3);
    if (a.want(0)) {
        if (!transposed) attrs["output_padding"] = output_padding(w, xs, ys, w.pe);
        out[0] = e.op(transposed ? "Conv" : "ConvTranspose", {G, a.x(1)}, xs, attrs);
    }
    if (a.want(1)) out[1] = transposed ? conv_weight_grad(e, G, a.x(0), w, group) : conv_weight_grad(e, a.x(0), G, w, group);
    if (a.node.has_input(2) && a.want(2)) out[2] = e.reduce_sum(G, concat({0}, iota(2, 2 + sp)), false);
    return out;
}

Grads max_pool(VjpArgs &a) {
    GraphEmitter &e = a.e;
    const Shape &xs = a.xs(0), &ys = a.ys();
    int sp = (int)xs.size() - 2;
    Window w = window_of(a.node, sp);
    user_check(a.node.outputs.size() == 1 || a.node.outputs[1].empty(), a.node.describe(),
               ": no gradient rule for MaxPool's Indices output; export the model without return_indices");
    std::vector<int64_t> pe = pooling_end_pads(w, xs, ys);
    std::string xp = pad_window(e, a.x(0), w, pe, -3.4e38);
    // Each output's gradient goes to the first tap (in row-major order) that holds the maximum, as
    // PyTorch's does: the tap that beats every earlier one and ties or beats every later one. The
    // taps are compared with each other, never with a maximum computed elsewhere: a backward that
    // recomputes X (the save-or-recompute partition) evaluates it in several kernels, which round
    // alike only up to their fused multiply-adds, and an equality test across kernels then held for
    // no tap (the CNN step's stem gradients were off by 50-170%, on the GPU and with this rule's
    // earlier form on the CPU). A comparison flips only between taps within rounding of each other.
    int64_t taps = 1;
    for (auto k : w.kernel) taps *= k;
    Shape flat = concat({xs[0] * xs[1], 1}, Shape(ys.begin() + 2, ys.end()));
    std::string dy = a.dy[0];
    std::vector<std::string> parts, tap_values;
    for (int64_t t = 0; t < taps; t++) tap_values.push_back(tap_slice(e, xp, w, t, ys));
    for (int64_t t = 0; t < taps; t++) {
        std::string m;
        for (int64_t s = 0; s < taps; s++) {
            if (s == t) continue;
            const std::string &xt = tap_values[(size_t)t], &xs_ = tap_values[(size_t)s];
            std::string wins = s < t ? e.binary("Greater", xt, xs_) : e.unary("Not", e.binary("Less", xt, xs_));
            m = m.empty() ? as_f32(e, wins) : e.mul(m, as_f32(e, wins));
        }
        parts.push_back(e.reshape(m.empty() ? dy : e.mul(m, dy), flat));
    }
    std::string stacked = parts.size() == 1 ? parts[0]
                                             : e.op("Concat", parts, concat({flat[0], taps}, Shape(ys.begin() + 2, ys.end())),
                                                    {{"axis", int64_t(1)}});
    return {scatter_taps(e, stacked, w, xs, ys, pe, false)};
}

Grads average_pool(VjpArgs &a) {
    GraphEmitter &e = a.e;
    const Shape &xs = a.xs(0), &ys = a.ys();
    int sp = (int)xs.size() - 2;
    Window w = window_of(a.node, sp);
    bool include_pad = a.node.get_int("count_include_pad", 0) != 0;
    // Each output's divisor: its taps inside the input (or inside input + pads), as ONNX defines.
    Shape os(ys.begin() + 2, ys.end());
    Tensor div(DType::F32, os);
    for (int64_t i = 0; i < div.numel(); i++) {
        int64_t rest = i, count = 1;
        for (int d = sp - 1; d >= 0; d--) {
            int64_t o = rest % os[d];
            rest /= os[d];
            int64_t lo = include_pad ? -w.pb[d] : 0, hi = include_pad ? xs[2 + d] + w.pe[d] : xs[2 + d], c = 0;
            for (int64_t k = 0; k < w.kernel[d]; k++) {
                int64_t p = o * w.strides[d] + k * w.dilations[d] - w.pb[d];
                if (p >= lo && p < hi) c++;
            }
            count *= c;
        }
        div.set(i, 1.0 / (double)std::max<int64_t>(count, 1));
    }
    std::string scaled = e.mul(a.dy[0], e.constant(div, "pool_divisor"));
    // Windows that tile the input exactly (kernel = stride, no pads or dilation): each input
    // element's gradient is its window's, a broadcast (dY as [.., o, 1, ..] expanded to [.., o, s, ..]).
    bool tiles = true;
    for (int d = 0; d < sp; d++)
        tiles = tiles && w.kernel[d] == w.strides[d] && w.dilations[d] == 1 && w.pb[d] == 0 && w.pe[d] == 0 &&
                os[d] * w.strides[d] == xs[2 + d];
    if (tiles) {
        Shape split = {xs[0], xs[1]}, wide = split;
        for (int d = 0; d < sp; d++) {
            split.push_back(os[d]), split.push_back(1);
            wide.push_back(os[d]), wide.push_back(w.strides[d]);
        }
        return {e.reshape(e.expand(e.reshape(scaled, split), wide), xs)};
    }
    Shape flat = concat({xs[0] * xs[1], 1}, os);
    return {scatter_taps(e, e.reshape(scaled, flat), w, xs, ys, pooling_end_pads(w, xs, ys), true)};
}

Grads global_average_pool(VjpArgs &a) {
    const Shape &xs = a.xs(0);
    double n = 1;
    for (size_t d = 2; d < xs.size(); d++) n *= (double)xs[d];
    return {a.e.expand(a.e.mul(a.dy[0], a.e.scalar(1.0 / n)), xs)};
}

// The maximum (or minimum) over \p axes of \p x, kept dims, taken again in the backward from the
// values it is compared with, not read from the forward's output, which a recomputed X need not
// equal bit for bit (see max_pool; where X is recomputed in two kernels the test can still miss).
std::string extreme_again(GraphEmitter &e, const std::string &op, const std::string &x, const std::vector<int64_t> &axes) {
    return e.op(op, {x}, keep_dims(e.shape(x), axes), {{"axes", axes}, {"keepdims", int64_t(1)}}, e.dtype(x));
}

Grads global_max_pool(VjpArgs &a) {
    GraphEmitter &e = a.e;
    std::vector<int64_t> axes = iota(2, (int64_t)a.xs(0).size());
    std::string y = extreme_again(e, "ReduceMax", a.x(0), axes);
    std::string m = as_f32(e, e.binary("Equal", a.x(0), e.expand(y, a.xs(0))));
    std::string count = e.reduce_sum(m, axes, true);
    return {e.mul(m, e.div(a.dy[0], count))};
}

// --- Reductions, softmax -----------------------------------------------------------------------

Grads reduce_sum(VjpArgs &a) { return {a.e.expand(dy_keepdims(a), a.xs(0))}; }

Grads reduce_mean(VjpArgs &a) {
    double n = 1;
    for (int64_t ax : a.node.get_ints("axes")) n *= (double)a.xs(0)[ax];
    return {a.e.expand(a.e.mul(dy_keepdims(a), a.e.scalar(1.0 / n)), a.xs(0))};
}

Grads reduce_extreme(VjpArgs &a) {
    GraphEmitter &e = a.e;
    std::string y = extreme_again(e, a.node.op, a.x(0), a.node.get_ints("axes"));
    std::string m = as_f32(e, e.binary("Equal", a.x(0), y));
    std::string count = e.reduce_sum(m, a.node.get_ints("axes"), true);
    return {e.mul(m, e.div(dy_keepdims(a), count))};
}

Grads reduce_l2(VjpArgs &a) {
    return {a.e.mul(a.x(0), a.e.div(dy_keepdims(a), y_keepdims(a)))};
}

Grads reduce_prod(VjpArgs &a) { return {a.e.mul(a.e.div(y_keepdims(a), a.x(0)), dy_keepdims(a))}; }

Grads softmax(VjpArgs &a) {
    GraphEmitter &e = a.e;
    int64_t axis = a.node.get_int("axis", -1);
    std::string gy = e.mul(a.dy[0], a.y());
    return {e.mul(a.y(), e.sub(a.dy[0], e.reduce_sum(gy, {axis}, true)))};
}

Grads log_softmax(VjpArgs &a) {
    GraphEmitter &e = a.e;
    int64_t axis = a.node.get_int("axis", -1);
    return {e.sub(a.dy[0], e.mul(e.unary("Exp", a.y()), e.reduce_sum(a.dy[0], {axis}, true)))};
}

// --- Layout ------------------------------------------------------------------------------------

Grads reshape(VjpArgs &a) { return {a.e.reshape(a.dy[0], a.xs(0))}; }

Grads transpose(VjpArgs &a) {
    std::vector<int64_t> perm = a.node.get_ints("perm"), inv(perm.size());
    for (size_t i = 0; i < perm.size(); i++) inv[perm[i]] = (int64_t)i;
    return {a.e.transpose(a.dy[0], inv)};
}

Grads expand(VjpArgs &a) { return {a.e.unbroadcast(a.dy[0], a.xs(0))}; }

Grads concat_rule(VjpArgs &a) {
    int64_t axis = a.node.get_int("axis", 0);
    Grads out(a.node.inputs.size());
    int64_t offset = 0;
    for (size_t i = 0; i < a.node.inputs.size(); i++) {
        const Shape &s = a.xs((int)i);
        if (a.want((int)i)) {
            std::vector<int64_t> starts(s.size(), 0), steps(s.size(), 1);
            starts[axis] = offset;
            out[i] = a.e.op("Slice", {a.dy[0]}, s, {{"starts", starts}, {"steps", steps}});
        }
        offset += s[axis];
    }
    return out;
}

Grads split(VjpArgs &a) {
    int64_t axis = a.node.get_int("axis", 0);
    return {a.e.op("Concat", a.dy, a.xs(0), {{"axis", axis}})};
}

Grads slice(VjpArgs &a) {
    GraphEmitter &e = a.e;
    std::vector<int64_t> starts = a.node.get_ints("starts"), steps = a.node.get_ints("steps");
    const Shape &xs = a.xs(0), &ys = a.ys();
    std::string g = a.dy[0];
    Shape cur = ys;
    std::vector<int64_t> begin(xs.size(), 0);
    // Steps > 1: interleave zeros (a trailing axis of size step, padded), then pad to the input.
    for (size_t d = 0; d < xs.size(); d++) {
        user_check(steps[d] > 0, a.node.describe(), ": no gradient rule for a Slice with a negative step (axis ", d,
                   "); reverse with a positive-step Slice and a Transpose-free index instead");
        begin[d] = starts[d];
        if (steps[d] == 1 || cur[d] == 0) continue;
        Shape split = cur;
        split.insert(split.begin() + d + 1, 1);
        g = e.reshape(g, split);
        Shape padded = split;
        padded[d + 1] = steps[d];
        std::vector<int64_t> pads(2 * split.size(), 0);
        pads[split.size() + d + 1] = steps[d] - 1;
        g = e.op("Pad", {g}, padded, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
        cur[d] = cur[d] * steps[d];
        g = e.reshape(g, cur);
    }
    std::vector<int64_t> pads(2 * xs.size(), 0);
    bool crop = false;
    Shape kept = cur;
    for (size_t d = 0; d < xs.size(); d++) {
        int64_t end = xs[d] - begin[d] - cur[d];
        if (end < 0) {  // the interleaved zeros ran past the input: crop them
            kept[d] = cur[d] + end;
            crop = true;
            end = 0;
        }
        pads[d] = begin[d];
        pads[xs.size() + d] = end;
    }
    if (crop)
        g = e.op("Slice", {g}, kept, {{"starts", std::vector<int64_t>(xs.size(), 0)}, {"steps", std::vector<int64_t>(xs.size(), 1)}});
    if (kept != xs)
        g = e.op("Pad", {g}, xs, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
    return {g};
}

Grads pad(VjpArgs &a) {
    user_check(a.node.get_string("mode", "constant") == "constant", a.node.describe(), ": no gradient rule for Pad mode '",
               a.node.get_string("mode", "constant"), "'; only constant padding is differentiable in Loom");
    std::vector<int64_t> pads = a.node.get_ints("pads");
    const Shape &xs = a.xs(0);
    for (auto p : pads)
        user_check(p >= 0, a.node.describe(), ": no gradient rule for a Pad with negative pads (a crop); use a Slice");
    std::vector<int64_t> starts(pads.begin(), pads.begin() + xs.size()), steps(xs.size(), 1);
    return {a.e.op("Slice", {a.dy[0]}, xs, {{"starts", starts}, {"steps", steps}})};
}

Grads tile(VjpArgs &a) {
    GraphEmitter &e = a.e;
    std::vector<int64_t> reps = a.node.get_ints("repeats");
    const Shape &xs = a.xs(0);
    Shape split;
    std::vector<int64_t> axes;
    for (size_t d = 0; d < xs.size(); d++) {
        axes.push_back((int64_t)split.size());
        split.push_back(reps[d]);
        split.push_back(xs[d]);
    }
    return {e.reshape(e.reduce_sum(e.reshape(a.dy[0], split), axes, false), xs)};
}

Grads gather(VjpArgs &a) {
    GraphEmitter &e = a.e;
    int64_t axis = a.node.get_int("axis", 0);
    const Shape &ds = a.xs(0), &is = a.xs(1);
    int64_t n = shape_numel(is), v = ds[axis];
    // One-hot rows of the indices (negative ones count from the end) times dY, summed per row.
    std::string idx = e.reshape(a.x(1), {n, 1});
    if (e.dtype(idx) != DType::I64) idx = e.op("Cast", {idx}, {n, 1}, {{"to", std::string("i64")}}, DType::I64);
    std::string wrapped = e.add(idx, e.scalar((double)v, DType::I64));
    idx = e.where(e.binary("Less", idx, e.scalar(0, DType::I64)), wrapped, idx);
    Tensor range(DType::I64, {v});
    for (int64_t i = 0; i < v; i++) range.set_int(i, i);
    std::string onehot = as_f32(e, e.binary("Equal", idx, e.constant(range, "range")));  // [n, v]
    // dY as [outer, n, inner] with the indexed axis's positions in the middle.
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; d++) outer *= ds[d];
    for (size_t d = axis + 1; d < ds.size(); d++) inner *= ds[d];
    std::string g = e.reshape(a.dy[0], {outer, n, inner});
    std::string ot = e.transpose(onehot, {1, 0});  // [v, n]
    std::string r = e.op("MatMul", {ot, g}, {outer, v, inner});
    return {e.reshape(r, ds), ""};
}

// --- Resize ------------------------------------------------------------------------------------

Grads resize(VjpArgs &a) {
    GraphEmitter &e = a.e;
    user_check(a.evaluate && *a.evaluate, a.node.describe(), ": the Resize rule needs a node evaluator (pass ",
               "reference_evaluator() to differentiate)");
    const Shape xs = a.xs(0), ys = a.ys();
    int r = (int)xs.size();
    std::vector<double> scales = a.node.get_floats("scales");
    // Resize is separable: per resized axis d, dX = dY · R_d with R_d the [out, in] interpolation
    // matrix, found by resizing the unit vectors of that axis with the node's own attributes.
    std::string g = a.dy[0];
    Shape cur = ys;
    for (int d = 0; d < r; d++) {
        if (xs[d] == ys[d] && (scales.empty() || scales[d] == 1.0)) continue;
        Node one = a.node;
        one.inputs = {"unit"};
        one.outputs = {"resized"};
        std::vector<double> s1(r, 1.0);
        if (!scales.empty()) s1[d] = scales[d];
        one.attrs["scales"] = s1;
        Shape in1(r, 1), out1(r, 1);
        in1[d] = xs[d];
        out1[d] = ys[d];
        ValueInfo oi{"resized", DType::F32, out1, {}, true};
        Tensor m(DType::F32, {ys[d], xs[d]});
        for (int64_t i = 0; i < xs[d]; i++) {
            Tensor unit(DType::F32, in1);
            unit.set(i, 1.0);
            std::vector<Tensor> res = (*a.evaluate)(one, {&unit}, {oi});
            internal_check(res.size() == 1 && res[0].numel() == ys[d], "Resize rule: unit resize gave ", res.size(), " outputs");
            for (int64_t o = 0; o < ys[d]; o++) m.set(o * xs[d] + i, res[0].get(o));
        }
        std::vector<int64_t> perm;
        for (int k = 0; k < r; k++)
            if (k != d) perm.push_back(k);
        perm.push_back(d);
        std::vector<int64_t> inv(r);
        for (int k = 0; k < r; k++) inv[perm[k]] = k;
        std::string t = e.transpose(g, perm);
        Shape ts = e.shape(t);
        ts.back() = xs[d];
        t = e.op("MatMul", {t, e.constant(m, "resize_matrix")}, ts);
        g = e.transpose(t, inv);
        cur[d] = xs[d];
    }
    return {g};
}

// --- Pointwise ---------------------------------------------------------------------------------

std::map<std::string, VjpRule> make_rules() {
    std::map<std::string, VjpRule> r;
    r["Add"] = [](VjpArgs &a) { return binary(a, a.dy[0], a.dy[0]); };
    r["Sub"] = [](VjpArgs &a) { return binary(a, a.dy[0], a.want(1) ? a.e.unary("Neg", a.dy[0]) : ""); };
    r["Mul"] = [](VjpArgs &a) {
        return binary(a, a.want(0) ? a.e.mul(a.dy[0], a.x(1)) : "", a.want(1) ? a.e.mul(a.dy[0], a.x(0)) : "");
    };
    r["Div"] = [](VjpArgs &a) {
        std::string da = a.want(0) ? a.e.div(a.dy[0], a.x(1)) : "";
        std::string db = a.want(1) ? a.e.unary("Neg", a.e.div(a.e.mul(a.dy[0], a.y()), a.x(1))) : "";
        return binary(a, da, db);
    };
    r["Pow"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        std::string da, db;
        if (a.want(0)) {
            const Tensor *c = e.graph().constant(a.x(1));
            if (c && c->numel() == 1) {
                double p = c->get(0);
                std::string d = p == 2.0 ? a.x(0) : e.binary("Pow", a.x(0), e.scalar(p - 1));
                da = e.mul(a.dy[0], e.mul(d, e.scalar(p)));
            } else {
                da = e.mul(a.dy[0], e.mul(a.x(1), e.binary("Pow", a.x(0), e.sub(a.x(1), e.scalar(1)))));
            }
        }
        if (a.want(1)) db = e.mul(a.dy[0], e.mul(a.y(), e.unary("Log", a.x(0))));
        return binary(a, da, db);
    };
    r["Neg"] = [](VjpArgs &a) { return Grads{a.e.unary("Neg", a.dy[0])}; };
    r["Sqrt"] = [](VjpArgs &a) { return Grads{a.e.div(a.dy[0], a.e.mul(a.y(), a.e.scalar(2)))}; };
    r["Exp"] = [](VjpArgs &a) { return pointwise(a, a.y()); };
    r["Log"] = [](VjpArgs &a) { return Grads{a.e.div(a.dy[0], a.x(0))}; };
    r["Reciprocal"] = [](VjpArgs &a) {
        return Grads{a.e.unary("Neg", a.e.mul(a.dy[0], a.e.mul(a.y(), a.y())))};
    };
    r["Abs"] = [](VjpArgs &a) {
        return Grads{a.e.where(a.e.binary("Less", a.x(0), a.e.scalar(0)), a.e.unary("Neg", a.dy[0]), a.dy[0])};
    };
    // y > 0 exactly where x > 0 (for LeakyRelu and Elu while alpha > 0); testing the output lets the
    // backward read the activation the next layer's weight gradient saves anyway, so the
    // pre-activation need not be kept.
    r["Relu"] = [](VjpArgs &a) { return Grads{gate(a, a.e.binary("Greater", a.y(), a.e.scalar(0)))}; };
    r["LeakyRelu"] = [](VjpArgs &a) {
        double alpha = a.node.get_float("alpha", 0.01);
        const std::string &s = alpha > 0 ? a.y() : a.x(0);
        return Grads{a.e.where(a.e.binary("Greater", s, a.e.scalar(0)), a.dy[0], a.e.mul(a.dy[0], a.e.scalar(alpha)))};
    };
    r["Elu"] = [](VjpArgs &a) {
        double alpha = a.node.get_float("alpha", 1.0);
        const std::string &s = alpha > 0 ? a.y() : a.x(0);
        return Grads{a.e.where(a.e.binary("Greater", s, a.e.scalar(0)), a.dy[0],
                               a.e.mul(a.dy[0], a.e.add(a.y(), a.e.scalar(alpha))))};
    };
    r["Sigmoid"] = [](VjpArgs &a) { return pointwise(a, a.e.mul(a.y(), a.e.sub(a.e.scalar(1), a.y()))); };
    r["Tanh"] = [](VjpArgs &a) { return pointwise(a, a.e.sub(a.e.scalar(1), a.e.mul(a.y(), a.y()))); };
    r["Erf"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        std::string x2 = e.mul(a.x(0), a.x(0));
        return pointwise(a, e.mul(e.unary("Exp", e.unary("Neg", x2)), e.scalar(2.0 / std::sqrt(kPi))));
    };
    r["Softplus"] = [](VjpArgs &a) { return pointwise(a, a.e.unary("Sigmoid", a.x(0))); };
    r["Sin"] = [](VjpArgs &a) { return pointwise(a, a.e.unary("Cos", a.x(0))); };
    r["Cos"] = [](VjpArgs &a) { return pointwise(a, a.e.unary("Neg", a.e.unary("Sin", a.x(0)))); };
    r["HardSigmoid"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        double alpha = a.node.get_float("alpha", 0.2), beta = a.node.get_float("beta", 0.5);
        std::string z = e.add(e.mul(a.x(0), e.scalar(alpha)), e.scalar(beta));
        std::string inside = e.binary("And", e.binary("Greater", z, e.scalar(0)), e.binary("Less", z, e.scalar(1)));
        return Grads{e.where(inside, e.mul(a.dy[0], e.scalar(alpha)), e.scalar(0))};
    };
    r["HardSwish"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        // x * relu6(x + 3) / 6: 0 below -3, 1 above 3, (2x + 3) / 6 between.
        std::string mid = e.mul(e.add(e.mul(a.x(0), e.scalar(2)), e.scalar(3)), e.scalar(1.0 / 6));
        std::string d = e.where(e.binary("Less", a.x(0), e.scalar(-3)), e.scalar(0),
                                e.where(e.binary("Greater", a.x(0), e.scalar(3)), e.scalar(1), mid));
        return pointwise(a, d);
    };
    r["Swish"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        // y = x s(ax): y' = s(ax) + a x s(ax) (1 - s(ax))
        std::string ax = e.mul(a.x(0), e.scalar(a.node.get_float("alpha", 1.0)));
        std::string s = e.unary("Sigmoid", ax);
        return pointwise(a, e.add(s, e.mul(e.mul(ax, s), e.sub(e.scalar(1), s))));
    };
    r["Gelu"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        const std::string &x = a.x(0);
        if (a.node.get_string("approximate", "none") == "tanh") {
            // y = x/2 (1 + tanh(u)), u = c (x + 0.044715 x^3): y' = (1 + t)/2 + x/2 (1 - t^2) u'
            double c = std::sqrt(2.0 / kPi);
            std::string x2 = e.mul(x, x);
            std::string u = e.mul(e.mul(x, e.add(e.scalar(1), e.mul(x2, e.scalar(0.044715)))), e.scalar(c));
            std::string t = e.unary("Tanh", u);
            std::string du = e.mul(e.add(e.scalar(1), e.mul(x2, e.scalar(3 * 0.044715))), e.scalar(c));
            std::string d = e.add(e.mul(e.add(e.scalar(1), t), e.scalar(0.5)),
                                  e.mul(e.mul(e.mul(x, e.scalar(0.5)), e.sub(e.scalar(1), e.mul(t, t))), du));
            return pointwise(a, d);
        }
        // y = x Phi(x): y' = Phi(x) + x phi(x), with Phi(x) = y / x read from the output (1/2 where
        // |x| < 1e-20, below which Phi rounds to 1/2 and y may be subnormal): erf is not evaluated
        // again, only phi's exp (D159).
        std::string cdf = e.where(e.binary("Less", e.unary("Abs", x), e.scalar(1e-20)), e.scalar(0.5), e.div(a.y(), x));
        std::string pdf = e.mul(e.unary("Exp", e.mul(e.mul(x, x), e.scalar(-0.5))), e.scalar(1 / std::sqrt(2 * kPi)));
        return pointwise(a, e.add(cdf, e.mul(x, pdf)));
    };
    r["Clip"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        double lo = a.node.get_float("min", -INFINITY), hi = a.node.get_float("max", INFINITY);
        std::string inside = e.binary("And", e.unary("Not", e.binary("Less", a.x(0), e.scalar(lo))),
                                      e.unary("Not", e.binary("Greater", a.x(0), e.scalar(hi))));
        return Grads{gate(a, inside)};
    };
    r["PRelu"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        std::string pos = e.binary("Greater", a.x(0), e.scalar(0));
        std::string da = a.want(0) ? e.where(pos, a.dy[0], e.mul(a.dy[0], a.x(1))) : "";
        std::string db = a.want(1) ? e.where(pos, e.scalar(0), e.mul(a.dy[0], a.x(0))) : "";
        return binary(a, da, db);
    };
    r["Where"] = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        Grads out(3);
        if (a.want(1)) out[1] = e.unbroadcast(e.where(a.x(0), a.dy[0], e.scalar(0)), a.xs(1));
        if (a.want(2)) out[2] = e.unbroadcast(e.where(a.x(0), e.scalar(0), a.dy[0]), a.xs(2));
        return out;
    };
    auto extreme = [](VjpArgs &a) {
        GraphEmitter &e = a.e;
        Grads out(a.node.inputs.size());
        // An input holds the extreme where no other input beats it: compared with the other inputs,
        // not with the forward's output, which a backward that recomputes them may round otherwise
        // (see max_pool).
        const std::string beats = a.node.op == "Max" ? "Less" : "Greater";
        for (size_t i = 0; i < out.size(); i++) {
            if (!a.want((int)i)) continue;
            std::string m;
            for (size_t j = 0; j < out.size(); j++) {
                if (j == i) continue;
                std::string holds = as_f32(e, e.unary("Not", e.binary(beats, a.x((int)i), a.x((int)j))));
                m = m.empty() ? holds : e.mul(m, holds);
            }
            std::string g = m.empty() ? a.dy[0] : e.mul(a.dy[0], m);
            out[i] = e.unbroadcast(g, a.xs((int)i));
        }
        return out;
    };
    r["Max"] = extreme;
    r["Min"] = extreme;
    r["Sum"] = [](VjpArgs &a) {
        Grads out(a.node.inputs.size());
        for (size_t i = 0; i < out.size(); i++)
            if (a.want((int)i)) out[i] = a.e.unbroadcast(a.dy[0], a.xs((int)i));
        return out;
    };
    r["Mean"] = [](VjpArgs &a) {
        Grads out(a.node.inputs.size());
        std::string g = a.e.mul(a.dy[0], a.e.scalar(1.0 / (double)out.size()));
        for (size_t i = 0; i < out.size(); i++)
            if (a.want((int)i)) out[i] = a.e.unbroadcast(g, a.xs((int)i));
        return out;
    };
    r["Cast"] = [](VjpArgs &a) {
        return Grads{a.e.op("Cast", {a.dy[0]}, a.xs(0), {{"to", std::string(dtype_name(a.e.dtype(a.x(0))))}},
                            a.e.dtype(a.x(0)))};
    };
    r["MatMul"] = matmul;
    r["Gemm"] = gemm;
    r["Conv"] = [](VjpArgs &a) { return conv_family(a, false); };
    r["ConvTranspose"] = [](VjpArgs &a) { return conv_family(a, true); };
    r["MaxPool"] = max_pool;
    r["AveragePool"] = average_pool;
    r["GlobalAveragePool"] = global_average_pool;
    r["GlobalMaxPool"] = global_max_pool;
    r["ReduceSum"] = reduce_sum;
    r["ReduceMean"] = reduce_mean;
    r["ReduceMax"] = reduce_extreme;
    r["ReduceMin"] = reduce_extreme;
    r["ReduceL2"] = reduce_l2;
    r["ReduceProd"] = reduce_prod;
    r["Softmax"] = softmax;
    r["LogSoftmax"] = log_softmax;
    r["Reshape"] = reshape;
    r["Transpose"] = transpose;
    r["Expand"] = expand;
    r["Concat"] = concat_rule;
    r["Split"] = split;
    r["Slice"] = slice;
    r["Pad"] = pad;
    r["Tile"] = tile;
    r["Gather"] = gather;
    r["Resize"] = resize;
    return r;
}

}  // namespace

const std::map<std::string, VjpRule> &vjp_rules() {
    static const std::map<std::string, VjpRule> rules = make_rules();
    return rules;
}

const std::set<std::string> &zero_gradient_ops() {
    static const std::set<std::string> ops = {"Equal", "Less", "Greater", "And", "Or", "Not", "ArgMax",
                                              "ArgMin", "Floor", "Ceil"};
    return ops;
}

}  // namespace loom::autodiff
