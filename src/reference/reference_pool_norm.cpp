// Pooling (Max/Average with pads, dilations, ceil_mode, count_include_pad; Global*) and the
// normalisations (BatchNormalization in inference mode, Instance-, Layer- and GroupNormalization).
#include <array>
#include <cmath>
#include <limits>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

std::vector<Tensor> pool(const OpArgs &a, bool is_max) {
    const Tensor &X = a.input(0);
    const int r = X.rank() - 2;
    a.check(r >= 1 && r <= 3, "X must be 3-D to 5-D (N, C, spatial…), got ", shape_str(X.shape()));
    std::vector<int64_t> ks = a.node.need_ints("kernel_shape");
    a.check((int)ks.size() == r, "kernel_shape has ", ks.size(), " entries for ", r, " spatial dims");
    std::vector<int64_t> st = ints_or(a, "strides", r, 1), dil = ints_or(a, "dilations", r, 1);
    std::vector<int64_t> pads = ints_or(a, "pads", 2 * r, 0);
    const bool include_pad = a.node.get_int("count_include_pad", 0) != 0;
    const Shape &os = a.out_shape(0);
    a.check((int)os.size() == X.rank() && os[0] == X.shape()[0] && os[1] == X.shape()[1],
            "output ", shape_str(os), " does not match input ", shape_str(X.shape()));

    std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, s{1, 1, 1}, d{1, 1, 1}, pb{0, 0, 0},
        pe{0, 0, 0};
    for (int i = 0; i < r; i++) {
        in[i] = X.shape()[2 + i];
        k[i] = ks[i];
        s[i] = st[i];
        d[i] = dil[i];
        pb[i] = pads[i];
        pe[i] = pads[r + i];
        out[i] = os[2 + i];
        a.check(s[i] >= 1 && d[i] >= 1 && k[i] >= 1, "kernel_shape, strides, dilations must be >= 1");
        // The declared extent decides ceil_mode; it must lie between the floor and ceil formulas.
        const int64_t span = d[i] * (k[i] - 1) + 1, room = in[i] + pb[i] + pe[i] - span;
        const int64_t lo = room / s[i] + 1, hi = (room + s[i] - 1) / s[i] + 1;
        a.check(out[i] >= lo && out[i] <= hi, "declared output ", shape_str(os),
                " does not fit kernel_shape/strides/pads/dilations: spatial dim ", i, " should be ",
                lo, lo == hi ? "" : str_cat(" (or ", hi, " with ceil_mode)"));
    }
    const int64_t NC = X.shape()[0] * X.shape()[1];
    const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
    const std::vector<double> x = to_f64(X);
    std::vector<double> y(NC * out_sz);
    std::vector<double> idx(a.wants(1) ? NC * out_sz : 0);
    const bool want_idx = a.wants(1);
#pragma omp parallel for if (NC * out_sz * k[0] * k[1] * k[2] > kParallelMin)
    for (int64_t nc = 0; nc < NC; nc++) {
        const double *xc = x.data() + nc * in_sz;
        for (int64_t o0 = 0; o0 < out[0]; o0++)
            for (int64_t o1 = 0; o1 < out[1]; o1++)
                for (int64_t o2 = 0; o2 < out[2]; o2++) {
                    const int64_t oo[3] = {o0, o1, o2};
                    double acc = is_max ? -INFINITY : 0.0;
                    int64_t count = 0, arg = -1;
                    for (int64_t k0 = 0; k0 < k[0]; k0++)
                        for (int64_t k1 = 0; k1 < k[1]; k1++)
                            for (int64_t k2 = 0; k2 < k[2]; k2++) {
                                const int64_t kk[3] = {k0, k1, k2};
                                bool inside = true, in_pads = true;
                                int64_t pos[3];
                                for (int q = 0; q < 3; q++) {
                                    pos[q] = oo[q] * s[q] - pb[q] + kk[q] * d[q];
                                    inside = inside && pos[q] >= 0 && pos[q] < in[q];
                                    // ceil_mode windows may run past the end padding: not counted.
                                    in_pads = in_pads && pos[q] >= -pb[q] && pos[q] < in[q] + pe[q];
                                }
                                if (include_pad && in_pads) count++;
                                if (!inside) continue;
                                const int64_t off = (pos[0] * in[1] + pos[1]) * in[2] + pos[2];
                                const double v = xc[off];
                                if (!include_pad) count++;
                                if (!is_max) acc += v;
                                else if (v > acc || arg < 0) acc = v, arg = off;
                            }
                    const int64_t o = nc * out_sz + (o0 * out[1] + o1) * out[2] + o2;
                    y[o] = is_max ? acc : (count ? acc / count : 0.0);
                    if (want_idx) idx[o] = arg < 0 ? 0 : (double)(nc * in_sz + arg);
                }
    }
    std::vector<Tensor> r_out{output_from(a, y)};
    if (want_idx) {
        a.check(is_max, "only MaxPool has an Indices output");
        a.check(a.node.get_int("storage_order", 0) == 0, "storage_order=1 (column-major indices) is not supported");
        r_out.push_back(output_from(a, idx, 1));
    }
    return r_out;
}

std::vector<Tensor> op_max_pool(const OpArgs &a) { return pool(a, true); }
std::vector<Tensor> op_average_pool(const OpArgs &a) { return pool(a, false); }

std::vector<Tensor> global_pool(const OpArgs &a, bool is_max) {
    const Tensor &X = a.input(0);
    a.check(X.rank() >= 3, "X must have rank >= 3 (N, C, spatial…), got ", shape_str(X.shape()));
    const int64_t NC = X.shape()[0] * X.shape()[1], sp = X.numel() / std::max<int64_t>(NC, 1);
    const std::vector<double> x = to_f64(X);
    std::vector<double> y(NC);
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t c = 0; c < NC; c++) {
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = 0; i < sp; i++) acc = is_max ? std::max(acc, x[c * sp + i]) : acc + x[c * sp + i];
        y[c] = is_max ? acc : acc / sp;
    }
    return {output_from(a, y)};
}

std::vector<Tensor> op_global_average_pool(const OpArgs &a) { return global_pool(a, false); }
std::vector<Tensor> op_global_max_pool(const OpArgs &a) { return global_pool(a, true); }

// Per-channel vector of \p t (an input of \p C elements).
std::vector<double> per_channel(const OpArgs &a, int i, int64_t C, const char *what) {
    const Tensor &t = a.input(i);
    a.check(t.numel() == C, what, " has ", t.numel(), " elements, expected ", C, " (one per channel)");
    return to_f64(t);
}

std::vector<Tensor> op_batch_norm(const OpArgs &a) {
    const Tensor &X = a.input(0);
    a.check(a.node.get_int("training_mode", 0) == 0 && !a.wants(1),
            "training mode is not supported; the reference runs inference only");
    a.check(X.rank() >= 2, "X must have rank >= 2, got ", shape_str(X.shape()));
    const int64_t N = X.shape()[0], C = X.shape()[1], sp = X.numel() / std::max<int64_t>(N * C, 1);
    const double eps = a.node.get_float("epsilon", 1e-5);
    auto scale = per_channel(a, 1, C, "scale"), bias = per_channel(a, 2, C, "B"),
         mean = per_channel(a, 3, C, "mean"), var = per_channel(a, 4, C, "var");
    std::vector<double> x = to_f64(X);
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t nc = 0; nc < N * C; nc++) {
        const int64_t c = nc % C;
        const double mul = scale[c] / std::sqrt(var[c] + eps);
        for (int64_t i = 0; i < sp; i++) x[nc * sp + i] = (x[nc * sp + i] - mean[c]) * mul + bias[c];
    }
    return {output_from(a, x)};
}

// Normalises each of \p rows contiguous runs of \p len elements of \p x in place (population
// variance); mean and 1/sqrt(var+eps) of each row go to \p mean / \p inv_std.
void normalize_rows(std::vector<double> &x, int64_t rows, int64_t len, double eps,
                    std::vector<double> &mean, std::vector<double> &inv_std) {
    mean.assign(rows, 0);
    inv_std.assign(rows, 0);
#pragma omp parallel for if (rows * len > kParallelMin)
    for (int64_t r = 0; r < rows; r++) {
        double *p = x.data() + r * len;
        double m = 0, v = 0;
        for (int64_t i = 0; i < len; i++) m += p[i];
        m /= len;
        for (int64_t i = 0; i < len; i++) v += (p[i] - m) * (p[i] - m);
        const double is = 1.0 / std::sqrt(v / len + eps);
        for (int64_t i = 0; i < len; i++) p[i] = (p[i] - m) * is;
        mean[r] = m;
        inv_std[r] = is;
    }
}

std::vector<Tensor> op_instance_norm(const OpArgs &a) {
    const Tensor &X = a.input(0);
    a.check(X.rank() >= 3, "X must have rank >= 3 (N, C, spatial…), got ", shape_str(X.shape()));
    const int64_t N = X.shape()[0], C = X.shape()[1], sp = X.numel() / std::max<int64_t>(N * C, 1);
    auto scale = per_channel(a, 1, C, "scale"), bias = per_channel(a, 2, C, "B");
    std::vector<double> x = to_f64(X), mean, inv;
    normalize_rows(x, N * C, sp, a.node.get_float("epsilon", 1e-5), mean, inv);
    for (int64_t i = 0; i < (int64_t)x.size(); i++) {
        const int64_t c = (i / sp) % C;
        x[i] = x[i] * scale[c] + bias[c];
    }
    return {output_from(a, x)};
}

std::vector<Tensor> op_layer_norm(const OpArgs &a) {
    const Tensor &X = a.input(0);
    int64_t axis = a.node.get_int("axis", -1);
    if (axis < 0) axis += X.rank();
    a.check(axis >= 0 && axis < X.rank(), "axis ", a.node.get_int("axis", -1), " is out of range for rank ",
            X.rank());
    const Shape norm_shape(X.shape().begin() + axis, X.shape().end());
    const int64_t len = shape_numel(norm_shape), rows = X.numel() / std::max<int64_t>(len, 1);
    const Tensor &S = a.input(1);
    const Tensor *B = a.optional(2);
    a.check(broadcast_shapes(a, {norm_shape, S.shape()}) == norm_shape, "Scale ", shape_str(S.shape()),
            " does not broadcast to the normalised shape ", shape_str(norm_shape));
    if (B)
        a.check(broadcast_shapes(a, {norm_shape, B->shape()}) == norm_shape, "B ", shape_str(B->shape()),
                " does not broadcast to the normalised shape ", shape_str(norm_shape));
    Broadcaster bc(norm_shape, {S.shape(), B ? B->shape() : Shape{}});
    const std::vector<double> s = to_f64(S), b = B ? to_f64(*B) : std::vector<double>{0.0};
    std::vector<double> x = to_f64(X), mean, inv;
    normalize_rows(x, rows, len, a.node.get_float("epsilon", 1e-5), mean, inv);
#pragma omp parallel for if (X.numel() > kParallelMin)
    for (int64_t i = 0; i < (int64_t)x.size(); i++) {
        const int64_t j = i % len;
        x[i] = x[i] * s[bc.offset(0, j)] + b[bc.offset(1, j)];
    }
    std::vector<Tensor> r{output_from(a, x)};
    // Optional outputs Mean and InvStdDev: shape X[:axis] followed by ones.
    if (a.wants(1)) r.push_back(output_from(a, mean, 1));
    if (a.wants(2)) {
        r.resize(2);
        r.push_back(output_from(a, inv, 2));
    }
    return r;
}

std::vector<Tensor> op_group_norm(const OpArgs &a) {
    const Tensor &X = a.input(0);
    a.check(X.rank() >= 3, "X must have rank >= 3 (N, C, spatial…), got ", shape_str(X.shape()));
    const int64_t N = X.shape()[0], C = X.shape()[1], sp = X.numel() / std::max<int64_t>(N * C, 1);
    const int64_t G = a.node.need_int("num_groups");
    a.check(G >= 1 && C % G == 0, "num_groups=", G, " does not divide the ", C, " channels");
    const Tensor &S = a.input(1), &B = a.input(2);
    // Opset 18 gives one scale/bias per group, opset 21 one per channel.
    a.check((S.numel() == C || S.numel() == G) && B.numel() == S.numel(), "scale and bias must both have ",
            C, " (channels) or ", G, " (groups) elements, got ", S.numel(), " and ", B.numel());
    const bool per_group = S.numel() != C;
    const std::vector<double> s = to_f64(S), b = to_f64(B);
    std::vector<double> x = to_f64(X), mean, inv;
    normalize_rows(x, N * G, (C / G) * sp, a.node.get_float("epsilon", 1e-5), mean, inv);
    for (int64_t i = 0; i < (int64_t)x.size(); i++) {
        const int64_t c = (i / sp) % C, k = per_group ? c / (C / G) : c;
        x[i] = x[i] * s[k] + b[k];
    }
    return {output_from(a, x)};
}

}  // namespace

void register_pool_norm_ops(OpTable &t) {
    t["MaxPool"] = op_max_pool;
    t["AveragePool"] = op_average_pool;
    t["GlobalAveragePool"] = op_global_average_pool;
    t["GlobalMaxPool"] = op_global_max_pool;
    t["BatchNormalization"] = op_batch_norm;
    t["InstanceNormalization"] = op_instance_norm;
    t["LayerNormalization"] = op_layer_norm;
    t["GroupNormalization"] = op_group_norm;
}

}  // namespace loom::ref
