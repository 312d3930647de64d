// Resize (nearest / N-linear / cubic, ONNX coordinate transformation modes), written after
// ONNX's reference implementation: every output coordinate maps to a few (index, weight) taps per
// dim, outside indices clamp to the edge (or drop out with exclude_outside), and the N-d result is
// the tensor product of the per-dim taps.
#include <cmath>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

struct Tap {
    int64_t index;
    double weight;
};

// ONNX's cubic convolution coefficients for the taps at i0-1, i0, i0+1, i0+2 (ratio in (0, 1]).
void cubic_coeffs(double r, double A, double c[4]) {
    const double s = 1 - r;
    c[0] = ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A;
    c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    c[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
    c[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
}

struct ResizeAttrs {
    std::string mode, ctm, nearest;
    double cubic_a;
    bool exclude_outside;
};

double original_coordinate(const OpArgs &a, const ResizeAttrs &at, int64_t x, double scale, int64_t in,
                           int64_t out) {
    const std::string &m = at.ctm;
    if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
    if (m == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (m == "align_corners") return out == 1 ? 0.0 : x * double(in - 1) / double(out - 1);
    if (m == "asymmetric") return x / scale;
    if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
    if (m == "half_pixel_symmetric") {
        const double adjustment = out / (scale * in), center = in / 2.0;
        return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    if (m == "tf_crop_and_resize")
        a.fail("coordinate_transformation_mode 'tf_crop_and_resize' is not supported by the reference");
    a.fail("coordinate_transformation_mode '", m,
           "' is not valid; use half_pixel, pytorch_half_pixel, align_corners, asymmetric or "
           "half_pixel_symmetric");
}

std::vector<Tap> taps_for(const OpArgs &a, const ResizeAttrs &at, int64_t x, double scale, int64_t in,
                          int64_t out) {
    const double xo = original_coordinate(a, at, x, scale, in, out);
    const double fl = std::floor(xo);
    const bool integral = xo == fl;
    // Like ONNX's reference: the left neighbour is strictly left of xo, ratio in (0, 1].
    const int64_t i0 = integral ? (int64_t)fl - 1 : (int64_t)fl;
    const double r = integral ? 1.0 : xo - fl;
    std::vector<Tap> t;
    if (at.mode == "nearest") {
        bool up;  // take i0 + 1 rather than i0
        if (integral) up = true;
        else if (at.nearest == "round_prefer_floor") up = r > 0.5;
        else if (at.nearest == "round_prefer_ceil") up = r >= 0.5;
        else if (at.nearest == "floor") up = false;
        else if (at.nearest == "ceil") up = true;
        else
            a.fail("nearest_mode '", at.nearest, "' is not valid; use round_prefer_floor, round_prefer_ceil, "
                   "floor or ceil");
        t.push_back({up ? i0 + 1 : i0, 1.0});
    } else if (at.mode == "linear") {
        t = {{i0, 1 - r}, {i0 + 1, r}};
    } else if (at.mode == "cubic") {
        double c[4];
        cubic_coeffs(r, at.cubic_a, c);
        for (int k = 0; k < 4; k++) t.push_back({i0 - 1 + k, c[k]});
    } else {
        a.fail("mode '", at.mode, "' is not valid; use nearest, linear or cubic");
    }
    if (at.exclude_outside && at.mode != "nearest") {
        double sum = 0;
        for (Tap &p : t) {
            if (p.index < 0 || p.index >= in) p.weight = 0;
            sum += p.weight;
        }
        if (sum != 0)
            for (Tap &p : t) p.weight /= sum;
    }
    std::vector<Tap> kept;
    for (Tap &p : t) {
        p.index = std::min(std::max<int64_t>(p.index, 0), in - 1);
        if (p.weight != 0) kept.push_back(p);
    }
    if (kept.empty()) kept.push_back({0, 0.0});  // every weight cancelled: contributes nothing
    return kept;
}

std::vector<Tensor> op_resize(const OpArgs &a) {
    const Tensor &X = a.input(0);
    const int r = X.rank();
    const Shape &os = a.out_shape(0);
    a.check((int)os.size() == r, "output rank ", os.size(), " differs from input rank ", r);
    const bool upsample = a.node.op == "Upsample";
    ResizeAttrs at;
    at.mode = a.node.get_string("mode", "nearest");
    at.ctm = a.node.get_string("coordinate_transformation_mode", upsample ? "asymmetric" : "half_pixel");
    at.nearest = a.node.get_string("nearest_mode", upsample ? "floor" : "round_prefer_floor");
    at.cubic_a = a.node.get_float("cubic_coeff_a", -0.75);
    at.exclude_outside = a.node.get_int("exclude_outside", 0) != 0;
    std::vector<double> scales = a.node.get_floats("scales");
    if (scales.empty() && upsample && a.optional(1)) scales = a.input(1).to_doubles();
    if (scales.empty())
        for (int d = 0; d < r; d++) scales.push_back(X.shape()[d] ? double(os[d]) / X.shape()[d] : 1.0);
    a.check((int)scales.size() == r, "scales has ", scales.size(), " entries for rank ", r);
    for (int d = 0; d < r; d++) {
        a.check(scales[d] > 0, "scales must be positive, got ", scales[d], " for dim ", d);
        a.check(X.shape()[d] > 0 || os[d] == 0, "cannot resize an empty dim ", d);
        if (a.node.get_int("antialias", 0) != 0)
            a.check(scales[d] >= 1 || at.mode == "nearest",
                    "antialias=1 with downsampling is not supported by the reference");
    }

    std::vector<std::vector<std::vector<Tap>>> taps(r);  // [dim][output coordinate]
    for (int d = 0; d < r; d++)
        for (int64_t x = 0; x < os[d]; x++) taps[d].push_back(taps_for(a, at, x, scales[d], X.shape()[d], os[d]));

    const std::vector<double> xv = to_f64(X);
    const std::vector<int64_t> ist = shape_strides(X.shape());
    const int64_t n = shape_numel(os);
    std::vector<double> y(n);
#pragma omp parallel for if (n > kParallelMin)
    for (int64_t i = 0; i < n; i++) {
        const std::vector<int64_t> o = unflatten(i, os);
        std::vector<size_t> k(r, 0);  // odometer over the taps of each dim
        double acc = 0;
        for (;;) {
            double w = 1;
            int64_t off = 0;
            for (int d = 0; d < r; d++) {
                const Tap &t = taps[d][o[d]][k[d]];
                w *= t.weight;
                off += t.index * ist[d];
            }
            acc += w * xv[off];
            int d = r - 1;
            while (d >= 0 && ++k[d] == taps[d][o[d]].size()) k[d--] = 0;
            if (d < 0) break;
        }
        y[i] = acc;
    }
    return {output_from(a, y)};
}

}  // namespace

void register_resize_ops(OpTable &t) {
    t["Resize"] = op_resize;
    t["Upsample"] = op_resize;
}

}  // namespace loom::ref
