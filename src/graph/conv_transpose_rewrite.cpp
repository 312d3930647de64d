// rewrite_upsampling_conv_transpose (passes.h): a 2-D ConvTranspose whose kernel equals its stride
// s (the learned 2x upsampling of segmentation and text-detection heads) gives each output pixel
// exactly one tap of one input pixel. It is a 1x1 Conv to Cout*s*s channels, one per (channel,
// tap), followed by DepthToSpace (CRD) that moves each tap to its place. The 1x1 conv is a dense
// GEMM over the input's pixels that every conv schedule vectorizes; the ConvTranspose itself
// alternated its weights lane by lane, which Halide computes in deinterleaved half vectors
// (bench/DECISIONS.md#d83-conv-transpose-as-conv-and-depth-to-space).
// It runs after fold_conv_batchnorm, so a BatchNormalization after the ConvTranspose is already in
// its weights and bias.
#include <algorithm>

#include "graph/passes.h"

namespace loom {

namespace {

/// Kernel == stride == s >= 2 in both spatial dims, no dilation, pads or output padding, one
/// group: the output is the input with each pixel spread over an s x s block.
int64_t upsampling_stride(const Node &ct) {
    auto ks = ct.get_ints("kernel_shape"), st = ct.get_ints("strides"), dil = ct.get_ints("dilations"),
         pads = ct.get_ints("pads"), opad = ct.get_ints("output_padding");
    if (ks.size() != 2 || st != ks || ks[0] != ks[1] || ks[0] < 2 || ct.get_int("group", 1) != 1) return 0;
    auto zero = [](const std::vector<int64_t> &v) { return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; }); };
    auto one = [](const std::vector<int64_t> &v) { return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; }); };
    return one(dil) && zero(pads) && zero(opad) ? ks[0] : 0;
}

}  // namespace

int rewrite_upsampling_conv_transpose(Graph &g) {
    int rewritten = 0;
    std::vector<Node> added;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        if (g.nodes[i].op != "ConvTranspose" || g.nodes[i].num_inputs() < 2) continue;
        Node ct = g.nodes[i];
        const int64_t s = upsampling_stride(ct);
        const Tensor *w = g.constant(ct.inputs[1]);
        const Tensor *b = ct.has_input(2) ? g.constant(ct.inputs[2]) : nullptr;
        if (s == 0 || !w || (ct.has_input(2) && !b) || !g.value(ct.inputs[0]).has_shape) continue;
        const Shape sx = g.value(ct.inputs[0]).shape;
        const int64_t cin = w->shape()[0], cout = w->shape()[1], taps = s * s;
        if (sx.size() != 4 || sx[1] != cin) continue;

        // W[c, m, a, b] becomes the 1x1 weight of channel (m, a, b) = m*s*s + a*s + b (CRD order).
        Tensor nw(w->dtype(), {cout * taps, cin, 1, 1}), nb(w->dtype(), {cout * taps});
        for (int64_t m = 0; m < cout; m++)
            for (int64_t t = 0; t < taps; t++) {
                const int64_t q = m * taps + t;
                for (int64_t c = 0; c < cin; c++) nw.set(q * cin + c, w->get((c * cout + m) * taps + t));
                nb.set(q, b ? b->get(m) : 0.0);
            }
        const std::string wn = g.unique_name(ct.name + "_tap_weight"), bname = g.unique_name(ct.name + "_tap_bias");
        g.set_constant(wn, nw);
        g.set_constant(bname, nb);
        const std::string tapped = g.unique_name(ct.outputs[0] + "_taps");
        ValueInfo &tv = g.values[tapped];
        tv.name = tapped;
        tv.dtype = g.value(ct.outputs[0]).dtype;
        tv.shape = {sx[0], cout * taps, sx[2], sx[3]};
        tv.has_shape = true;

        Node conv;
        conv.op = "Conv";
        conv.name = ct.name;  // its Funcs keep the ConvTranspose's name
        conv.inputs = {ct.inputs[0], wn, bname};
        conv.outputs = {tapped};
        conv.attrs = {{"kernel_shape", std::vector<int64_t>{1, 1}}, {"strides", std::vector<int64_t>{1, 1}},
                      {"dilations", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                      {"group", int64_t(1)}};
        Node spread;
        spread.op = "DepthToSpace";
        spread.name = g.unique_name(ct.name + "_to_space");
        spread.inputs = {tapped};
        spread.outputs = {ct.outputs[0]};
        spread.attrs = {{"blocksize", s}, {"mode", std::string("CRD")}};
        g.nodes[i] = conv;
        added.push_back(spread);
        rewritten++;
    }
    for (auto &n : added) g.nodes.push_back(std::move(n));
    if (rewritten) g.topo_sort();
    return rewritten;
}

}  // namespace loom
