// MatMul (NumPy semantics), Gemm, Conv and ConvTranspose (1-D/2-D/3-D, groups, dilations), and
// FusedAttention (recognize_attention's node) computed the unfused way: scores, softmax, product.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

void check_declared(const OpArgs &a, const Shape &computed) {
    a.check(computed == a.out_shape(0), "the attributes give output shape ", shape_str(computed),
            " but ", shape_str(a.out_shape(0)), " is declared");
}

std::vector<Tensor> op_matmul(const OpArgs &a) {
    const Tensor &A = a.input(0), &B = a.input(1);
    a.check(A.rank() >= 1 && B.rank() >= 1, "MatMul operands must have rank >= 1, got ",
            shape_str(A.shape()), " and ", shape_str(B.shape()));
    Shape sa = A.shape(), sb = B.shape();
    bool drop_m = sa.size() == 1, drop_n = sb.size() == 1;
    if (drop_m) sa.insert(sa.begin(), 1);
    if (drop_n) sb.push_back(1);
    const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
    a.check(sb[sb.size() - 2] == K, "inner dims differ: ", shape_str(A.shape()), " @ ",
            shape_str(B.shape()));
    Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    Shape batch = broadcast_shapes(a, {ba, bb});
    Shape os = batch;
    if (!drop_m) os.push_back(M);
    if (!drop_n) os.push_back(N);
    check_declared(a, os);

    Broadcaster bc(batch, {ba, bb});
    const std::vector<double> x = to_f64(A), y = to_f64(B);
    const int64_t nb = shape_numel(batch), rows = nb * M;
    std::vector<double> out(rows * N);
#pragma omp parallel for if (rows * N * K > kParallelMin)
    for (int64_t r = 0; r < rows; r++) {
        int64_t b = r / M, i = r % M;
        const double *pa = x.data() + (bc.offset(0, b) * M + i) * K;
        const double *pb = y.data() + bc.offset(1, b) * K * N;
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += pa[k] * pb[k * N + j];
            out[r * N + j] = acc;
        }
    }
    return {output_from(a, out)};
}

std::vector<Tensor> op_fused_attention(const OpArgs &a) {
    const Tensor &Q = a.input(0), &KT = a.input(1), &V = a.input(2);
    const Tensor *mask = a.optional(3);
    const Shape &sq = Q.shape(), &sk = KT.shape(), &sv = V.shape();
    const size_t r = sq.size();
    a.check(r >= 2 && sk.size() == r && sv.size() == r, "q, kt and v must have one rank >= 2, got ", shape_str(sq),
            ", ", shape_str(sk), " and ", shape_str(sv));
    const int64_t Sq = sq[r - 2], d = sq[r - 1], Sk = sk[r - 1], dv = sv[r - 1];
    a.check(sk[r - 2] == d && sv[r - 2] == Sk && Shape(sq.begin(), sq.end() - 2) == Shape(sk.begin(), sk.end() - 2) &&
                Shape(sq.begin(), sq.end() - 2) == Shape(sv.begin(), sv.end() - 2),
            "q ", shape_str(sq), ", kt ", shape_str(sk), " and v ", shape_str(sv), " do not fit [..., Sq, d], [..., d, Sk], [..., Sk, dv]");
    Shape scores(sq.begin(), sq.end() - 1);
    scores.push_back(Sk);
    Shape os(sq.begin(), sq.end() - 1);
    os.push_back(dv);
    check_declared(a, os);
    if (mask)
        a.check(broadcast_shapes(a, {mask->shape(), scores}) == scores, "mask ", shape_str(mask->shape()),
                " does not broadcast to the scores ", shape_str(scores));
    Broadcaster bc(scores, {mask ? mask->shape() : Shape{}});
    const double scale = a.node.get_float("scale", 1.0);
    const std::vector<double> q = to_f64(Q), kt = to_f64(KT), v = to_f64(V);
    const std::vector<double> m = mask ? to_f64(*mask) : std::vector<double>{0.0};
    const int64_t rows = shape_numel(os) / std::max<int64_t>(dv, 1);
    std::vector<double> out(shape_numel(os));
#pragma omp parallel for if (rows * Sk * (d + dv) > kParallelMin)
    for (int64_t row = 0; row < rows; row++) {
        const int64_t b = row / Sq;
        const double *pq = q.data() + row * d, *pk = kt.data() + b * d * Sk, *pv = v.data() + b * Sk * dv;
        std::vector<double> s(Sk);
        double mx = -INFINITY;
        for (int64_t j = 0; j < Sk; j++) {
            double acc = 0;
            for (int64_t k = 0; k < d; k++) acc += pq[k] * pk[k * Sk + j];
            s[j] = scale * acc + m[bc.offset(0, row * Sk + j)];
            mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < Sk; j++) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t c = 0; c < dv; c++) {
            double acc = 0;
            for (int64_t j = 0; j < Sk; j++) acc += s[j] * pv[j * dv + c];
            out[row * dv + c] = acc / sum;
        }
    }
    return {output_from(a, out)};
}

std::vector<Tensor> op_gemm(const OpArgs &a) {
    const Tensor &A = a.input(0), &B = a.input(1);
    const Tensor *C = a.optional(2);
    a.check(A.rank() == 2 && B.rank() == 2, "A and B must be 2-D, got ", shape_str(A.shape()),
            " and ", shape_str(B.shape()));
    const double alpha = a.node.get_float("alpha", 1.0), beta = a.node.get_float("beta", 1.0);
    const bool ta = a.node.get_int("transA", 0) != 0, tb = a.node.get_int("transB", 0) != 0;
    const int64_t M = ta ? A.shape()[1] : A.shape()[0], K = ta ? A.shape()[0] : A.shape()[1];
    const int64_t K2 = tb ? B.shape()[1] : B.shape()[0], N = tb ? B.shape()[0] : B.shape()[1];
    a.check(K == K2, "inner dims differ: A ", shape_str(A.shape()), (ta ? " (transposed)" : ""),
            ", B ", shape_str(B.shape()), (tb ? " (transposed)" : ""));
    check_declared(a, {M, N});
    std::vector<double> c;
    std::unique_ptr<Broadcaster> cb;
    if (C) {
        a.check(broadcast_shapes(a, {C->shape(), {M, N}}) == Shape{M, N}, "C ",
                shape_str(C->shape()), " does not broadcast to ", M, "x", N);
        c = to_f64(*C);
        cb = std::make_unique<Broadcaster>(Shape{M, N}, std::vector<Shape>{C->shape()});
    }
    const std::vector<double> x = to_f64(A), y = to_f64(B);
    std::vector<double> out(M * N);
#pragma omp parallel for if (M * N * K > kParallelMin)
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += x[ta ? k * M + i : i * K + k] * y[tb ? j * K + k : k * N + j];
            double v = alpha * acc;
            if (C) v += beta * c[cb->offset(0, i * N + j)];
            out[i * N + j] = v;
        }
    return {output_from(a, out)};
}

// Geometry of a convolution, padded to 3 spatial dims (missing dims have size 1, kernel 1).
struct ConvGeom {
    int64_t N, C, M, G;
    std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, st{1, 1, 1}, pb{0, 0, 0},
        pe{0, 0, 0}, dil{1, 1, 1}, opad{0, 0, 0};
};

// Reads the attributes shared by Conv and ConvTranspose. \p w_in_dim is the dim of W that counts
// input channels per group (1 for Conv, 0 for ConvTranspose).
ConvGeom conv_geom(const OpArgs &a, bool transposed) {
    const Tensor &X = a.input(0), &W = a.input(1);
    const int r = X.rank() - 2;
    a.check(r >= 1 && r <= 3, "X must be 3-D to 5-D (N, C, spatial…), got ", shape_str(X.shape()));
    a.check(W.rank() == X.rank(), "W ", shape_str(W.shape()), " must have the rank of X ",
            shape_str(X.shape()));
    ConvGeom g;
    g.N = X.shape()[0];
    g.C = X.shape()[1];
    g.G = a.node.get_int("group", 1);
    a.check(g.G >= 1 && g.C % g.G == 0, "group=", g.G, " does not divide the ", g.C, " input channels");
    if (transposed) {
        a.check(W.shape()[0] == g.C, "W ", shape_str(W.shape()), " must have ", g.C, " rows (C)");
        g.M = W.shape()[1] * g.G;
    } else {
        g.M = W.shape()[0];
        a.check(W.shape()[1] * g.G == g.C, "W ", shape_str(W.shape()), " needs C/group = ",
                g.C / g.G, " input channels");
        a.check(g.M % g.G == 0, "group=", g.G, " does not divide the ", g.M, " output channels");
    }
    std::vector<int64_t> wk(W.shape().begin() + 2, W.shape().end());
    std::vector<int64_t> ks = ints_or(a, "kernel_shape", r, 0);
    if (a.node.has("kernel_shape"))
        a.check(ks == wk, "kernel_shape does not match W ", shape_str(W.shape()));
    std::vector<int64_t> st = ints_or(a, "strides", r, 1), dil = ints_or(a, "dilations", r, 1);
    std::vector<int64_t> pads = ints_or(a, "pads", 2 * r, 0);
    std::vector<int64_t> opad = transposed ? ints_or(a, "output_padding", r, 0) : std::vector<int64_t>(r, 0);
    for (int d = 0; d < r; d++) {
        g.in[d] = X.shape()[2 + d];
        g.k[d] = wk[d];
        g.st[d] = st[d];
        g.dil[d] = dil[d];
        g.pb[d] = pads[d];
        g.pe[d] = pads[r + d];
        g.opad[d] = opad[d];
        a.check(st[d] >= 1 && dil[d] >= 1, "strides and dilations must be >= 1");
        const int64_t span = dil[d] * (wk[d] - 1) + 1;
        g.out[d] = transposed ? st[d] * (g.in[d] - 1) + opad[d] + span - g.pb[d] - g.pe[d]
                              : (g.in[d] + g.pb[d] + g.pe[d] - span) / st[d] + 1;
    }
    Shape os{g.N, g.M};
    for (int d = 0; d < r; d++) os.push_back(g.out[d]);
    check_declared(a, os);
    if (a.optional(2)) a.check(a.input(2).numel() == g.M, "bias B must have ", g.M, " elements");
    return g;
}

std::vector<Tensor> op_conv(const OpArgs &a) {
    const ConvGeom g = conv_geom(a, false);
    const std::vector<double> x = to_f64(a.input(0)), w = to_f64(a.input(1));
    const std::vector<double> bias = a.optional(2) ? to_f64(a.input(2)) : std::vector<double>(g.M, 0.0);
    const int64_t Cg = g.C / g.G, Mg = g.M / g.G;
    const int64_t in_sz = g.in[0] * g.in[1] * g.in[2], k_sz = g.k[0] * g.k[1] * g.k[2];
    const int64_t out_sz = g.out[0] * g.out[1] * g.out[2];
    std::vector<double> out(g.N * g.M * out_sz);
#pragma omp parallel for if (g.N * g.M * out_sz * Cg * k_sz > kParallelMin)
    for (int64_t nm = 0; nm < g.N * g.M; nm++) {
        const int64_t n = nm / g.M, m = nm % g.M, grp = m / Mg;
        double *o = out.data() + nm * out_sz;
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                    double acc = bias[m];
                    for (int64_t c = 0; c < Cg; c++) {
                        const double *xc = x.data() + (n * g.C + grp * Cg + c) * in_sz;
                        const double *wc = w.data() + (m * Cg + c) * k_sz;
                        for (int64_t k0 = 0; k0 < g.k[0]; k0++) {
                            int64_t i0 = o0 * g.st[0] - g.pb[0] + k0 * g.dil[0];
                            if (i0 < 0 || i0 >= g.in[0]) continue;
                            for (int64_t k1 = 0; k1 < g.k[1]; k1++) {
                                int64_t i1 = o1 * g.st[1] - g.pb[1] + k1 * g.dil[1];
                                if (i1 < 0 || i1 >= g.in[1]) continue;
                                for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                                    int64_t i2 = o2 * g.st[2] - g.pb[2] + k2 * g.dil[2];
                                    if (i2 < 0 || i2 >= g.in[2]) continue;
                                    acc += xc[(i0 * g.in[1] + i1) * g.in[2] + i2] *
                                           wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
                                }
                            }
                        }
                    }
                    o[(o0 * g.out[1] + o1) * g.out[2] + o2] = acc;
                }
    }
    return {output_from(a, out)};
}

// Input position feeding output \p o through kernel tap \p k along one dim, or -1.
inline int64_t transposed_source(int64_t o, int64_t k, int64_t st, int64_t pb, int64_t dil, int64_t in) {
    int64_t t = o + pb - k * dil;
    if (t < 0 || t % st != 0) return -1;
    t /= st;
    return t < in ? t : -1;
}

// Written as a gather over outputs (not the textbook scatter) so output channels run in parallel.
std::vector<Tensor> op_conv_transpose(const OpArgs &a) {
    const ConvGeom g = conv_geom(a, true);
    const std::vector<double> x = to_f64(a.input(0)), w = to_f64(a.input(1));
    const std::vector<double> bias = a.optional(2) ? to_f64(a.input(2)) : std::vector<double>(g.M, 0.0);
    const int64_t Cg = g.C / g.G, Mg = g.M / g.G;
    const int64_t in_sz = g.in[0] * g.in[1] * g.in[2], k_sz = g.k[0] * g.k[1] * g.k[2];
    const int64_t out_sz = g.out[0] * g.out[1] * g.out[2];
    std::vector<double> out(g.N * g.M * out_sz);
#pragma omp parallel for if (g.N * g.M * out_sz * Cg * k_sz > kParallelMin)
    for (int64_t nm = 0; nm < g.N * g.M; nm++) {
        const int64_t n = nm / g.M, m = nm % g.M, grp = m / Mg, mg = m % Mg;
        double *o = out.data() + nm * out_sz;
        for (int64_t o0 = 0; o0 < g.out[0]; o0++)
            for (int64_t o1 = 0; o1 < g.out[1]; o1++)
                for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
                    double acc = bias[m];
                    for (int64_t c = 0; c < Cg; c++) {
                        const int64_t ch = grp * Cg + c;
                        const double *xc = x.data() + (n * g.C + ch) * in_sz;
                        const double *wc = w.data() + (ch * Mg + mg) * k_sz;
                        for (int64_t k0 = 0; k0 < g.k[0]; k0++) {
                            int64_t i0 = transposed_source(o0, k0, g.st[0], g.pb[0], g.dil[0], g.in[0]);
                            if (i0 < 0) continue;
                            for (int64_t k1 = 0; k1 < g.k[1]; k1++) {
                                int64_t i1 = transposed_source(o1, k1, g.st[1], g.pb[1], g.dil[1], g.in[1]);
                                if (i1 < 0) continue;
                                for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                                    int64_t i2 = transposed_source(o2, k2, g.st[2], g.pb[2], g.dil[2], g.in[2]);
                                    if (i2 < 0) continue;
                                    acc += xc[(i0 * g.in[1] + i1) * g.in[2] + i2] *
                                           wc[(k0 * g.k[1] + k1) * g.k[2] + k2];
                                }
                            }
                        }
                    }
                    o[(o0 * g.out[1] + o1) * g.out[2] + o2] = acc;
                }
    }
    return {output_from(a, out)};
}

}  // namespace

void register_linalg_ops(OpTable &t) {
    t["MatMul"] = op_matmul;
    t["Gemm"] = op_gemm;
    t["FusedAttention"] = op_fused_attention;
    t["Conv"] = op_conv;
    t["ConvTranspose"] = op_conv_transpose;
}

}  // namespace loom::ref
