// Conv and ConvTranspose (1-D/2-D/3-D, groups, strides, dilations, asymmetric pads, bias).
//
// Conv: `<node>_pad` (only when there are pads) is the input with a zero border in padded
// coordinates, a pure pointwise Func a schedule can inline or place; `<node>` is the bias (or 0)
// plus one update over the RDom "r" spanning (input channel of the group, kernel taps). As
// everywhere in Loom, r.x is the innermost axis in memory: for a 2-D conv r.x = kw, r.y = kh,
// r.z = input channel (a schedule reorders them freely). On the CPU a 2-D conv's constant float
// weights are read from a copy blocked by 16, 24 or 8 output channels
// (LowerOptions::block_conv_weights), so
// a schedule that vectorizes over output channels loads each weight vector densely.
//
// On CUDA (LowerOptions::conv_extern, gemm_extern) a 2-D conv with constant weights is an extern
// stage: a 1x1 conv a cuBLAS GEMM per image, any other but a depthwise one cuDNN; the bias then
// stays a Halide Func unless cuDNN fuses it with a ReLU. One whose weights are a graph value (a
// training step's parameter) is cuDNN's forward pass, a ConvTranspose by such weights its
// data-gradient pass, and autodiff's filter gradient its filter-gradient pass
// (loom_cudnn_conv_pass). With LowerOptions::conv_nhwc the constant-weight cuDNN stages (1x1 ones
// too) take and give tensors with channels innermost, BF16 under Precision::BF16 and FP32
// otherwise (nhwc_operand, kConvNhwc); in FP32 a 1x1 one of them is a cuBLAS GEMM over the pixels
// instead (loom_cublas_conv1x1_nhwc).
//
// ConvTranspose is lowered in gather form: each output point sums, over the kernel taps and the
// input channels of its group, the input points that map onto it (tap offsets divisible by the
// stride, inside the input).
#include <algorithm>
#include <cstring>

#include "lower/extern_stages.h"
#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

namespace {

struct ConvParams {
    int sp = 0;  // spatial rank
    std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end, out_pad;
    int64_t group = 1;
};

ConvParams conv_params(LowerContext &ctx, const Node &node, bool transpose) {
    const Shape &sx = ctx.shape(node.inputs[0]), &sw = ctx.shape(node.inputs[1]);
    user_check(sx.size() >= 3 && sx.size() <= 5 && sw.size() == sx.size(), node.describe(),
               ": expects input and weight of rank 3..5 (1-D to 3-D), got ", shape_str(sx), " and ",
               shape_str(sw));
    ConvParams p;
    p.sp = (int)sx.size() - 2;
    p.kernel = node.get_ints("kernel_shape", Shape(sw.begin() + 2, sw.end()));
    p.strides = node.get_ints("strides", std::vector<int64_t>(p.sp, 1));
    p.dilations = node.get_ints("dilations", std::vector<int64_t>(p.sp, 1));
    std::vector<int64_t> pads = node.get_ints("pads", std::vector<int64_t>(2 * p.sp, 0));
    p.out_pad = node.get_ints("output_padding", std::vector<int64_t>(p.sp, 0));
    p.group = node.get_int("group", 1);
    user_check((int)p.kernel.size() == p.sp && (int)p.strides.size() == p.sp &&
                   (int)p.dilations.size() == p.sp && (int)pads.size() == 2 * p.sp,
               node.describe(), ": kernel_shape/strides/dilations need ", p.sp,
               " entries and pads ", 2 * p.sp);
    for (int d = 0; d < p.sp; d++) {
        user_check(p.kernel[d] == sw[2 + d], node.describe(), ": kernel_shape does not match weight ",
                   shape_str(sw));
        p.pad_begin.push_back(pads[d]);
        p.pad_end.push_back(pads[p.sp + d]);
    }
    int64_t cin = ctx.static_extent(node, node.inputs[0], 1);
    user_check(p.group >= 1 && cin % p.group == 0, node.describe(), ": group ", p.group,
               " does not divide the ", cin, " input channels");
    if (!transpose)
        user_check(sw[1] * p.group == cin, node.describe(), ": weight ", shape_str(sw),
                   " expects ", sw[1] * p.group, " input channels, input has ", cin);
    else
        user_check(sw[0] == cin, node.describe(), ": weight ", shape_str(sw), " expects ", sw[0],
                   " input channels, input has ", cin);
    return p;
}

// The RDom over (input channel of the group, taps), listed innermost first: r.x = last tap dim.
RDom conv_rdom(const ConvParams &p, int64_t cin_per_group) {
    Halide::Region region;
    for (int d = p.sp - 1; d >= 0; d--) region.push_back({0, (int)p.kernel[d]});
    region.push_back({0, (int)cin_per_group});
    return RDom(region, "r");
}

// Graph value \p x as the NHWC input of an NHWC conv stage (kConvNhwc), bfloat16 bits when \p bf16
// and FP32 otherwise: the Func a conv stage made it in (an output without Halide bias, or an
// earlier copy), else a new copy `<node>_x_nhwc_bf16` / `<node>_x_nhwc` computed at root. An op's
// output that is no graph output is then rebound to a read of the copy, so that its other
// consumers (a residual add, a second conv) share it and its Func, read by the copy alone, is
// inlined into it rather than stored as well.
bool nhwc_operand(LowerContext &ctx, const Node &node, const std::string &x, bool bf16,
                  Halide::ExternFuncArgument &arg) {
    if (Func f = ctx.nhwc(x); f.defined()) {
        arg = f;
        return true;
    }
    const Graph &g = ctx.graph;
    const bool graph_input = g.is_input(x);
    const bool graph_output = g.is_output(x);
    if (!ctx.has_value(x) || ctx.constant(x)) return false;
    const Shape &sx = ctx.shape(x);
    Func copy = ctx.make_func(node, bf16 ? "x_nhwc_bf16" : "x_nhwc", sx);
    std::vector<Var> v = ctx.vars(4);
    Expr value = LowerContext::cast_to(DType::F32, ctx.at(x, exprs(v)));
    ctx.define(copy, v, bf16 ? bf16_bits(value) : value);
    ctx.note_cost(copy, true, bf16 ? 4 : 1);
    LoweredFunc &rec = ctx.record(copy);
    rec.dtype = bf16 ? DType::I16 : DType::F32;
    rec.feeds_extern = true;
    rec.channels_last = true;
    for (int k = 0; k < 4; k++) copy.bound(v[k], 0, (int)sx[k]);
    ctx.note_nhwc(x, copy);
    if (!graph_input && !graph_output) {
        Func view = ctx.make_func(node, "x_view", sx);
        Expr read = LowerContext::call(copy, exprs(v));
        ctx.define(view, v, bf16 ? from_bf16_bits(read) : read);
        ctx.note_cost(view, true, 1);
        ctx.rebind(x, view);
    }
    arg = copy;
    return true;
}

// The extern stage `<node>_cudnn` computing the convolution on the GPU, or an undefined Func when
// it does not fit cuDNN's legacy 2-D API (then the caller lowers it in Halide). When the Conv's only
// consumer is a Relu (LowerOptions::fuse_activation_epilogue), cuDNN applies the bias and the ReLU too and
// \p fused_relu is set: the extern then stands for the Relu's output. Otherwise the bias stays a
// Halide Func. Arguments of loom_cudnn_conv: x, w, bias, N, C, H, W, pads, strides, dilations,
// groups, mode (0: conv, 1: conv + bias + ReLU), precision, then y. An FP32 NHWC 1x1 conv is
// `<node>_cublas` instead, arguments of loom_cublas_conv1x1_nhwc: x, w, bias, N, C, H, W, C_out,
// activation (kCublasLtRelu where cuDNN's mode is 1), precision, then y.
Func cudnn_conv(LowerContext &ctx, const Node &node, const ConvParams &p, bool &fused_relu) {
    fused_relu = false;
    if (!ctx.options.conv_extern || p.sp != 2) return Func();
    const std::string &x = node.inputs[0], &w = node.inputs[1], &y = node.outputs[0];
    const Tensor *cw = ctx.constant(w);
    if (!cw || cw->dtype() != DType::F32 || ctx.dtype(x) != DType::F32 || ctx.dtype(y) != DType::F32 ||
        ctx.constant(x))
        return Func();
    for (int d = 0; d < 2; d++)
        if (p.pad_begin[d] != p.pad_end[d]) return Func();  // cuDNN pads both sides alike
    // Depthwise (one input channel per group): Halide's conv, fused with the bias and activation
    // before and after it, beats cuDNN's grouped direct kernel plus a pass for each
    // (bench/DECISIONS.md#d49-cuda-depthwise-in-halide).
    if (p.group > 1 && ctx.shape(node.inputs[1])[1] == 1) return Func();
    const Shape &sx = ctx.shape(x), &sw = ctx.shape(w), &sy = ctx.shape(y);
    for (auto d : sy)
        if (d <= 0 || d >= (1LL << 31)) return Func();
    const Tensor *cb = node.has_input(2) ? ctx.constant(node.inputs[2]) : nullptr;
    if (node.has_input(2) && (!cb || cb->dtype() != DType::F32 || cb->numel() != sw[0])) return Func();
    // With conv_nhwc, x, the filter and y have channels innermost (kConvNhwc), BF16 in BF16: given
    // NCHW tensors cuDNN converts layouts on every call, the constant filter included
    // (bench/DECISIONS.md#d115-cuda-bf16-nhwc-convs, #d117-cuda-tf32-nhwc-convs). In BF16
    // the bias and any ReLU stay Halide Funcs, fused into the next copy (cuDNN's fused call takes
    // FP32 tensors only); in FP32 cuDNN still applies them, and its NHWC output is the next
    // conv's input as it is.
    const Precision prec = ctx.options.gemm_precision;
    const bool nhwc = ctx.options.conv_nhwc && prec != Precision::FP16, bf16 = nhwc && prec == Precision::BF16;
    const Node *relu =
        bf16 ? nullptr : ctx.sole_activation_consumer(y, [](const Node &n) { return n.op == "Relu"; });
    // In FP32, a 1x1 conv on NHWC tensors is one GEMM with a row per pixel, on cuBLAS: cuDNN has
    // no NHWC FMA kernel for it and ran its generic engine, or NCHW kernels between layout
    // conversions (bench/DECISIONS.md#d124-cuda-fp32-nhwc-1x1-convs-on-cublas).
    bool pointwise = p.group == 1;
    for (int d = 0; d < 2; d++)
        pointwise = pointwise && p.kernel[d] == 1 && p.strides[d] == 1 && p.pad_begin[d] == 0 && p.dilations[d] == 1;
    const bool gemm = nhwc && prec == Precision::FP32 && ctx.options.gemm_extern && pointwise;
    Halide::ExternFuncArgument arg_x, arg_w;
    if (nhwc) {
        if (!nhwc_operand(ctx, node, x, bf16, arg_x)) return Func();
        // Halide order (c/g, s, r, k): the KRSC filter cuDNN's NHWC kernels read, rounded once here
        // in BF16 (a 1x1 one is the [Co, C] matrix of the GEMM).
        const std::vector<int> krsc = {(int)sw[1], (int)sw[3], (int)sw[2], (int)sw[0]};
        const std::string suffix = bf16 ? "_cudnn_bf16" : gemm ? "_cublas_kc" : "_cudnn_krsc";
        const std::string name = ctx.reserve_name("c_" + sanitize_name(w) + suffix);
        Halide::Buffer<uint16_t> wh;
        Halide::Buffer<float> wf32;
        if (bf16) wh = Halide::Buffer<uint16_t>(krsc, name);
        else wf32 = Halide::Buffer<float>(krsc, name);
        const float *wf = static_cast<const float *>(cw->data());
        for (int64_t k = 0; k < sw[0]; k++)
            for (int64_t c = 0; c < sw[1]; c++)
                for (int64_t r = 0; r < sw[2]; r++)
                    for (int64_t q = 0; q < sw[3]; q++) {
                        const float value = wf[((k * sw[1] + c) * sw[2] + r) * sw[3] + q];
                        if (bf16) wh((int)c, (int)q, (int)r, (int)k) = Halide::bfloat16_t(value).to_bits();
                        else wf32((int)c, (int)q, (int)r, (int)k) = value;
                    }
        arg_w = bf16 ? Halide::ExternFuncArgument(wh) : Halide::ExternFuncArgument(wf32);
    } else {
        if (!ctx.extern_operand(x, arg_x)) return Func();
        std::vector<int> sizes(sw.rbegin(), sw.rend());  // Halide order (s, r, c/g, k)
        Halide::Buffer<float> wb(sizes, ctx.reserve_name("c_" + sanitize_name(w) + "_cudnn"));
        std::memcpy(wb.data(), cw->data(), (size_t)cw->numel() * sizeof(float));
        arg_w = Halide::ExternFuncArgument(wb);
    }
    // The bias cuDNN adds in mode 1; mode 0 leaves it to Halide and passes a 1-element placeholder.
    int nbias = relu ? (int)sw[0] : 1;
    Halide::Buffer<float> bb(nbias, ctx.reserve_name("c_" + sanitize_name(node.name) + "_cudnn_bias"));
    std::vector<double> bias = relu && cb ? cb->to_doubles() : std::vector<double>(nbias, 0.0);
    for (int k = 0; k < nbias; k++) bb(k) = (float)bias[k];

    const char *fn = gemm ? kCublasConv1x1Nhwc : kCudnnConv;
    const std::string suffix = gemm ? (relu ? "_relu_cublaslt" : "_cublas") : (relu ? "_relu_cudnn" : "_cudnn");
    Func ext(ctx.reserve_name(ctx.func_base(node) + suffix));
    std::vector<Var> v = ctx.vars(4);
    std::vector<Halide::ExternFuncArgument> args = {arg_x, arg_w, Halide::ExternFuncArgument(bb)};
    for (auto d : sx) args.push_back(Expr((int)d));
    if (gemm) {  // loom_cublas_conv1x1_nhwc: ..., C_out, activation, precision
        for (int64_t e : {sw[0], (int64_t)(relu ? kCublasLtRelu : 0), (int64_t)prec}) args.push_back(Expr((int)e));
    } else {
        const int64_t precision = (int64_t)prec + (nhwc ? kConvNhwc : 0);
        for (int64_t e : {p.pad_begin[0], p.pad_begin[1], p.strides[0], p.strides[1], p.dilations[0], p.dilations[1],
                          p.group, (int64_t)(relu ? 1 : 0), precision})
            args.push_back(Expr((int)e));
    }
    ext.define_extern(fn, args, bf16 ? Halide::UInt(16) : Halide::Float(32),
                      std::vector<Var>(v.rbegin(), v.rend()), Halide::NameMangling::C, Halide::DeviceAPI::CUDA);
    if (nhwc) {
        ext.reorder_storage(v[1], v[3], v[2], v[0]);  // c, w, h, n: NHWC
        if (relu) ctx.note_nhwc(relu->outputs[0], ext);
        else if (!node.has_input(2)) ctx.note_nhwc(y, ext);
    }
    ext.compute_root();  // an extern: no schedule touches it
    // Its buffer is the whole output: constant extents make its strides constants in the kernels
    // that read it, so that Halide proves their vector loads aligned (left to bounds inference the
    // region follows the consumers' clamped reads, and the strides reach a kernel as parameters).
    for (int k = 0; k < 4; k++) ext.bound(v[k], 0, (int)sy[k]);
    ctx.note_extern_call(fn, ext, sy);
    if (relu) {
        fused_relu = true;
        ctx.register_extern(ext, node, sy);
        ctx.fuse_node_into(relu->name, ext);
    }
    return ext;
}

// The extern stage `<node>_cublas` computing a pointwise conv (2-D, 1x1 kernel, stride 1, no pads,
// one group) as a GEMM per image through cuBLAS (LowerOptions::gemm_extern), or an undefined Func.
// cuDNN's legacy API runs such convs as implicit GEMMs well below cuBLAS on small channel counts
// (bench/DECISIONS.md#d48-cuda-1x1-conv-as-gemm). A conv that cuDNN can fuse with its bias and a
// sole ReLU keeps that one call (cudnn_conv). Arguments of loom_cublas_conv1x1: x, w as a
// [C_out, C_in] matrix, N, C, H, W, C_out, precision, then y.
Func cublas_pointwise_conv(LowerContext &ctx, const Node &node, const ConvParams &p) {
    if (!ctx.options.gemm_extern || p.sp != 2 || p.group != 1) return Func();
    // With NHWC convs cuDNN takes it, in the layout of the convs around it (cudnn_conv).
    if (ctx.options.conv_extern && ctx.options.conv_nhwc && ctx.options.gemm_precision != Precision::FP16)
        return Func();
    for (int d = 0; d < 2; d++)
        if (p.kernel[d] != 1 || p.strides[d] != 1 || p.pad_begin[d] != 0 || p.pad_end[d] != 0) return Func();
    const std::string &x = node.inputs[0], &w = node.inputs[1], &y = node.outputs[0];
    const Tensor *cw = ctx.constant(w);
    if (!cw || cw->dtype() != DType::F32 || ctx.dtype(x) != DType::F32 || ctx.dtype(y) != DType::F32 ||
        ctx.constant(x))
        return Func();
    const Shape &sx = ctx.shape(x), &sw = ctx.shape(w);
    if (sx[2] * sx[3] >= (1LL << 31)) return Func();
    for (auto d : ctx.shape(y))
        if (d <= 0 || d >= (1LL << 31)) return Func();
    if (ctx.options.conv_extern && ctx.sole_activation_consumer(y, [](const Node &n) { return n.op == "Relu"; }))
        return Func();  // one cuDNN call with the bias and the ReLU beats a GEMM and a pass
    Halide::ExternFuncArgument arg_x;
    if (!ctx.extern_operand(x, arg_x)) return Func();
    Halide::Buffer<float> wb((int)sw[1], (int)sw[0], ctx.reserve_name("c_" + sanitize_name(w) + "_cublas"));
    std::memcpy(wb.data(), cw->data(), (size_t)cw->numel() * sizeof(float));
    Func ext(ctx.reserve_name(ctx.func_base(node) + "_cublas"));
    std::vector<Var> v = ctx.vars(4);
    std::vector<Halide::ExternFuncArgument> args = {arg_x, Halide::ExternFuncArgument(wb)};
    for (auto d : sx) args.push_back(Expr((int)d));
    args.push_back(Expr((int)sw[0]));
    args.push_back(Expr((int)ctx.options.gemm_precision));
    ext.define_extern(kCublasConv1x1, args, Halide::Float(32), std::vector<Var>(v.rbegin(), v.rend()),
                      Halide::NameMangling::C, Halide::DeviceAPI::CUDA);
    ext.compute_root();  // an extern: no schedule touches it
    ctx.note_extern_call(kCublasConv1x1, ext, ctx.shape(y));
    return ext;
}

// The forward conv's geometry for loom_cudnn_conv_pass: x [n, c, h, w], filter [k, c/group, r, s].
struct ConvGeometry {
    int64_t n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, group;
    int64_t out(int d) const {  // output rows (d 0) or columns (d 1)
        return d == 0 ? (h + 2 * pad_h - dil_h * (r - 1) - 1) / stride_h + 1
                      : (w + 2 * pad_w - dil_w * (s - 1) - 1) / stride_w + 1;
    }
};

// The extern stage `<node>_cudnn_<pass>` running one pass of a 2-D convolution of geometry \p g
// whose operands \p a and \p b are graph values (loom_cudnn_conv_pass: kConvForward a = x, b =
// filter; kConvDataGradient a = the output's gradient, b = filter; kConvFilterGradient a = x, b =
// the output's gradient), or an undefined Func when it does not fit. Its result is the forward
// output, x's gradient or the filter's gradient [k, c/group, r, s].
Func cudnn_conv_pass(LowerContext &ctx, const Node &node, int pass, const std::string &a, const std::string &b,
                     const ConvGeometry &g) {
    if (!ctx.options.conv_extern || ctx.constant(a) || ctx.constant(b) || ctx.dtype(a) != DType::F32 ||
        ctx.dtype(b) != DType::F32 || ctx.dtype(node.outputs[0]) != DType::F32)
        return Func();
    if (g.group < 1 || g.c % g.group != 0 || g.k % g.group != 0 || g.out(0) < 1 || g.out(1) < 1) return Func();
    const Shape xs = {g.n, g.c, g.h, g.w}, ws = {g.k, g.c / g.group, g.r, g.s}, ys = {g.n, g.k, g.out(0), g.out(1)};
    const Shape &want_a = pass == kConvDataGradient ? ys : xs, &want_b = pass == kConvFilterGradient ? ys : ws;
    if (ctx.shape(a) != want_a || ctx.shape(b) != want_b) return Func();
    for (const Shape *sh : {&xs, &ws, &ys}) {
        int64_t total = 1;
        for (auto d : *sh) total *= d;
        if (total >= (1LL << 31)) return Func();
    }
    Halide::ExternFuncArgument arg_a, arg_b;
    if (!ctx.extern_operand(a, arg_a) || !ctx.extern_operand(b, arg_b)) return Func();
    const char *suffix = pass == kConvForward ? "_cudnn" : pass == kConvDataGradient ? "_cudnn_dgrad" : "_cudnn_wgrad";
    Func ext(ctx.reserve_name(ctx.func_base(node) + suffix));
    std::vector<Var> v = ctx.vars(4);
    std::vector<Halide::ExternFuncArgument> args = {arg_a, arg_b, Expr(pass)};
    for (int64_t e : {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w,
                      g.group, (int64_t)ctx.options.gemm_precision})
        args.push_back(Expr((int)e));
    ext.define_extern(kCudnnConvPass, args, Halide::Float(32), std::vector<Var>(v.rbegin(), v.rend()),
                      Halide::NameMangling::C, Halide::DeviceAPI::CUDA);
    ext.compute_root();  // an extern: no schedule touches it
    ctx.note_extern_call(kCudnnConvPass, ext, pass == kConvForward ? ys : pass == kConvDataGradient ? xs : ws);
    return ext;
}

// Whether \p p is a 2-D conv cuDNN's passes take: equal pads on both sides, and not depthwise
// (one input channel per group: Halide's conv with its neighbours fused wins there,
// bench/DECISIONS.md#d49-cuda-depthwise-in-halide).
bool cudnn_pass_fits(const ConvParams &p, int64_t channels_per_group) {
    if (p.sp != 2 || (p.group > 1 && channels_per_group == 1)) return false;
    for (int d = 0; d < 2; d++)
        if (p.pad_begin[d] != p.pad_end[d]) return false;
    return true;
}

// A Conv whose weights are a graph value (an input, a training step's parameter): the forward
// pass on cuDNN. A filter gradient as autodiff writes it (vjp_rules.cpp's conv_weight_grad: a Conv
// of X^T by dY^T, channels and batch swapped, whose strides are the forward dilations and whose
// dilations the forward strides) is cuDNN's filter-gradient pass on X and dY instead, read back
// with the result's first two dims swapped. Undefined when neither fits.
Func cudnn_conv_of_values(LowerContext &ctx, const Node &node, const ConvParams &p, bool &swapped) {
    swapped = false;
    const std::string &x = node.inputs[0], &w = node.inputs[1];
    if (!ctx.options.conv_extern || ctx.constant(w)) return Func();
    const Shape &sx = ctx.shape(x), &sw = ctx.shape(w), &sy = ctx.shape(node.outputs[0]);
    if (!cudnn_pass_fits(p, sw[1]) || sx.size() != 4) return Func();
    std::string X = transpose_source(ctx, x, {1, 0, 2, 3}), G = transpose_source(ctx, w, {1, 0, 2, 3});
    if (!X.empty() && !G.empty() && p.group == 1 && !node.has_input(2)) {
        const Shape &xs = ctx.shape(X), &gs = ctx.shape(G);
        ConvGeometry g{xs[0], xs[1], xs[2], xs[3], gs[1], sy[2], sy[3], p.pad_begin[0], p.pad_begin[1],
                       p.dilations[0], p.dilations[1], p.strides[0], p.strides[1], 1};
        if (g.out(0) == gs[2] && g.out(1) == gs[3])
            if (Func ext = cudnn_conv_pass(ctx, node, kConvFilterGradient, X, G, g); ext.defined()) {
                swapped = true;
                return ext;
            }
    }
    ConvGeometry g{sx[0], sx[1], sx[2], sx[3], sw[0], sw[2], sw[3], p.pad_begin[0], p.pad_begin[1],
                   p.strides[0], p.strides[1], p.dilations[0], p.dilations[1], p.group};
    return cudnn_conv_pass(ctx, node, kConvForward, x, w, g);
}

void lower_conv_forward(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &w = node.inputs[1], &y = node.outputs[0];
    ConvParams p = conv_params(ctx, node, false);
    const Shape &sx = ctx.shape(x), &sw = ctx.shape(w), &sy = ctx.shape(y);
    int rank = (int)sx.size();
    DType dt = ctx.dtype(y);
    int64_t cg = sw[1], mg = sw[0] / p.group;
    bool fused_relu = false;
    bool swapped = false;
    Func ext = cublas_pointwise_conv(ctx, node, p);
    if (!ext.defined()) ext = cudnn_conv(ctx, node, p, fused_relu);
    if (!ext.defined()) ext = cudnn_conv_of_values(ctx, node, p, swapped);
    if (ext.defined()) {
        if (fused_relu) {  // conv + bias + ReLU in one cuDNN call: both values are the extern's
            ctx.bind_output(y, ext);
            return;
        }
        // The node's Func: the extern's output plus the bias, pointwise (fused into the next kernel).
        Func f = ctx.make_func(node, "", rank);
        std::vector<Var> v = ctx.vars(rank);
        std::vector<Expr> at = exprs(v);
        if (swapped) std::swap(at[0], at[1]);  // the filter gradient [K, C, r, s] read as [C, K, r, s]
        Expr e = LowerContext::call(ext, at);
        if (e.type() == Halide::UInt(16)) e = from_bf16_bits(e);  // a BF16 NHWC stage (kConvNhwc)
        if (node.has_input(2)) e += LowerContext::cast_to(dt, ctx.at(node.inputs[2], {v[1]}));  // no bias in the library call
        ctx.define(f, v, e);
        ctx.note_cost(f, true, 1);
        ctx.bind_output(y, f);
        return;
    }

    // Padded input in padded coordinates (0 .. in + pads).
    bool padded = false;
    for (int d = 0; d < p.sp; d++) padded |= p.pad_begin[d] > 0 || p.pad_end[d] > 0;
    Func xin;
    if (padded) {
        Shape ps = sx;
        for (int d = 0; d < p.sp; d++) ps[2 + d] += p.pad_begin[d] + p.pad_end[d];
        xin = ctx.make_func(node, "pad", ps);
        SymShape sym_ps = ctx.sym(x);
        for (int d = 0; d < p.sp; d++) sym_ps[2 + d] = sym_ps[2 + d] + (p.pad_begin[d] + p.pad_end[d]);
        if (sym_ps.size() == ps.size()) ctx.exact_extents(xin, sym_ps);
        std::vector<Var> v = ctx.vars(rank);
        Expr e = bordered_read(ctx, x, v, p.pad_begin, dt, LowerContext::literal(dt, 0));
        ctx.define(xin, v, e);
        ctx.note_cost(xin, true, 1);
        ctx.note_padded_input(xin);
    }

    Func f = ctx.make_func(node, "", rank);
    std::vector<Var> v = ctx.vars(rank);
    Var n = v[0], m = v[1];
    RDom r = conv_rdom(p, cg);
    Expr rc = r[p.sp];  // input channel within the group
    Expr ch = p.group == 1 ? rc : (m / (int)mg) * (int)cg + rc;
    std::vector<Expr> ix = {n, ch}, iw = {m, rc};
    for (int d = 0; d < p.sp; d++) {
        Expr tap = r[p.sp - 1 - d];
        ix.push_back(v[2 + d] * (int)p.strides[d] + tap * (int)p.dilations[d]);
        iw.push_back(tap);
    }
    Expr xv = padded ? LowerContext::call(xin, ix) : LowerContext::cast_to(dt, ctx.at(x, ix));
    const Tensor *cw = ctx.constant(w);
    // Output channels a multiple of 8 but not of 16 block by 24 (24, 72, 120: three AVX2 vectors)
    // or 8 (40, 200), so a channel tile computes no padding channels.
    const int block = sw[0] % kConvWeightBlock == 0 ? kConvWeightBlock : sw[0] % 24 == 0 ? 24 : 8;
    const bool blocked = ctx.options.block_conv_weights && p.sp == 2 && p.group == 1 && cw &&
                         cw->dtype() == DType::F32 && dt == DType::F32 && sw[0] % block == 0;
    const bool depthwise_taps = ctx.options.channels_last_depthwise_filters && p.sp == 2 && p.group > 1 &&
                                cg == 1 && cw && cw->dtype() == DType::F32 && dt == DType::F32;
    Expr wv;
    if (blocked) {  // [C_out / block][C_in][kH][kW][block]: LowerOptions::block_conv_weights
        std::vector<Expr> ib = {m / block, rc};
        ib.insert(ib.end(), iw.begin() + 2, iw.end());
        ib.push_back(m % block);
        wv = LowerContext::call(ctx.blocked_constant(w, 0, block), ib);
    } else if (depthwise_taps) {  // [kH][kW][C_out]: one block of every channel (channels_last_depthwise_filters)
        wv = LowerContext::call(ctx.blocked_constant(w, 0, (int)sw[0]), {Expr(0), rc, iw[2], iw[3], m});
    } else {
        wv = LowerContext::cast_to(dt, ctx.at(w, iw));
    }

    Expr init = node.has_input(2) ? LowerContext::cast_to(dt, ctx.at(node.inputs[2], {m}))
                                  : LowerContext::literal(dt, 0);
    ctx.define(f, v, init);
    ref(f, exprs(v)) += xv * wv;
    ctx.note_update(f, rvar_names(r));
    int64_t taps = cg;
    for (auto k : p.kernel) taps *= k;
    ctx.note_cost(f, false, 2.0 * taps + 1);
    ctx.bind_output(y, f);
    if (blocked) ctx.record(f).conv_weight_block = block;
    if (depthwise_taps) ctx.record(f).depthwise_filter_channels_last = true;
    (void)sy;
}

// A ConvTranspose whose kernel equals its stride in every dim (at most 4), with no dilation, pads
// or output padding: every output is one tap of one input pixel (the usual learned 2x upsampling).
bool non_overlapping_upsample(const ConvParams &p, const Shape &sx, const Shape &sy) {
    bool strided = false;
    for (int d = 0; d < p.sp; d++) {
        if (p.kernel[d] != p.strides[d] || p.strides[d] > 4 || p.dilations[d] != 1 || p.pad_begin[d] != 0 ||
            p.pad_end[d] != 0 || sy[2 + d] != sx[2 + d] * p.strides[d])
            return false;
        strided |= p.strides[d] > 1;
    }
    return strided;
}

void lower_conv_transpose(LowerContext &ctx, const Node &node) {
    const std::string &x = node.inputs[0], &w = node.inputs[1], &y = node.outputs[0];
    ConvParams p = conv_params(ctx, node, true);
    const Shape &sx = ctx.shape(x), &sw = ctx.shape(w);
    int rank = (int)sx.size();
    DType dt = ctx.dtype(y);
    int64_t cg = sx[1] / p.group, mg = sw[1];

    Func f = ctx.make_func(node, "", rank);
    std::vector<Var> v = ctx.vars(rank);
    Var n = v[0], m = v[1];
    Expr init = node.has_input(2) ? LowerContext::cast_to(dt, ctx.at(node.inputs[2], {m}))
                                  : LowerContext::literal(dt, 0);
    // A 2-D ConvTranspose by a filter that is a graph value (a Conv's input gradient in a training
    // step) is the data-gradient pass of the Conv it transposes, on cuDNN: that Conv maps this
    // node's output [N, C_out, ...] through the filter [C_in, C_out / group, kh, kw] to its input.
    const Shape &sy = ctx.shape(y);
    if (ctx.options.conv_extern && !ctx.constant(w) && rank == 4 && cudnn_pass_fits(p, sw[1])) {
        ConvGeometry g{sy[0], sy[1], sy[2], sy[3], sw[0], sw[2], sw[3], p.pad_begin[0], p.pad_begin[1],
                       p.strides[0], p.strides[1], p.dilations[0], p.dilations[1], p.group};
        if (Func ext = cudnn_conv_pass(ctx, node, kConvDataGradient, x, w, g); ext.defined()) {
            ctx.define(f, v, init + LowerContext::call(ext, exprs(v)));
            ctx.note_cost(f, true, 1);
            ctx.bind_output(y, f);
            return;
        }
    }
    if (non_overlapping_upsample(p, sx, ctx.shape(y))) {
        // Each output receives exactly one tap per dim, k = o % stride, from input o / stride: the
        // reduction runs over the input channels only, where the general form below visits every
        // tap and discards all but one per dim (4 of 4 taps computed for 1 kept at 2x2 stride 2).
        // Along the innermost dim the tap alternates from one output to the next, so its weight is
        // a select of the stride's weights, a blend of broadcasts when vectorized.
        // One input channel is no reduction (Halide drops an RVar of extent 1): a pure Func.
        // Grouped (a MaxPool's gradient: one group per channel, one input channel per tap), output
        // channel m reads its group's input channels.
        RDom rc(0, (int)cg, "r");
        Expr c0 = cg == 1 ? Expr(0) : Expr(rc);
        Expr ch = p.group == 1 ? c0 : (m / (int)mg) * (int)cg + c0;
        Expr mm = p.group == 1 ? Expr(m) : Expr(m % (int)mg);
        std::vector<Expr> ix = {n, ch}, iw = {ch, mm};
        for (int d = 0; d < p.sp; d++) {
            const int s = (int)p.strides[d];
            ix.push_back(v[2 + d] / s);
            iw.push_back(v[2 + d] % s);
        }
        const int inner = (int)p.strides[p.sp - 1];
        Expr wv;
        for (int k = inner - 1; k >= 0; k--) {
            std::vector<Expr> iwk = iw;
            iwk.back() = k;
            Expr wk = LowerContext::cast_to(dt, ctx.at(w, iwk));
            wv = k == inner - 1 ? wk : Halide::select(v.back() % inner == k, wk, wv);
        }
        Expr term = LowerContext::cast_to(dt, ctx.at(x, ix)) * wv;
        if (cg == 1) {
            ctx.define(f, v, init + term);
        } else {
            ctx.define(f, v, init);
            ref(f, exprs(v)) += term;
            ctx.note_update(f, rvar_names(rc));
        }
        ctx.note_cost(f, false, 2.0 * cg + inner);
        ctx.bind_output(y, f);
        return;
    }
    // Output o receives input i through tap k when o + pad_begin = i*stride + k*dilation. Without
    // dilation the taps that reach o are those of its phase, k = (o + pad_begin) % stride +
    // stride * j: the reduction visits ceil(kernel / stride) of them per dim (the polyphase form;
    // 4 of a strided 3x3 kernel's 9), each from input (o + pad_begin) / stride - j.
    bool polyphase = true;
    for (int d = 0; d < p.sp; d++) polyphase = polyphase && p.dilations[d] == 1;
    ConvParams visited = p;
    if (polyphase)
        for (int d = 0; d < p.sp; d++) visited.kernel[d] = (p.kernel[d] + p.strides[d] - 1) / p.strides[d];
    RDom r = conv_rdom(visited, cg);
    Expr rc = r[p.sp];
    Expr ch = p.group == 1 ? rc : (m / (int)mg) * (int)cg + rc;
    Expr mm = p.group == 1 ? Expr(m) : Expr(m % (int)mg);
    Expr valid = Halide::Internal::const_true();
    std::vector<Expr> ix = {n, ch}, iw = {ch, mm};
    for (int d = 0; d < p.sp; d++) {
        Expr j = r[p.sp - 1 - d];
        int s = (int)p.strides[d];
        Expr i, tap;
        if (polyphase) {
            Expr t = v[2 + d] + (int)p.pad_begin[d];
            tap = s == 1 ? j : t % s + j * s;
            i = (s == 1 ? t : t / s) - j;
            valid = valid && i >= 0 && i < ctx.extent(x, 2 + d);
            if (p.kernel[d] % s != 0) valid = valid && tap < (int)p.kernel[d];
            tap = Halide::min(tap, (int)p.kernel[d] - 1);
        } else {
            tap = j;
            Expr t = v[2 + d] + (int)p.pad_begin[d] - tap * (int)p.dilations[d];
            i = s == 1 ? t : t / s;
            valid = valid && t >= 0 && i < ctx.extent(x, 2 + d);
            if (s != 1) valid = valid && t % s == 0;
        }
        ix.push_back(Halide::clamp(i, 0, ctx.size(ctx.sym(x)[2 + d] - 1)));
        iw.push_back(tap);
    }
    Expr term = LowerContext::cast_to(dt, ctx.at(x, ix)) * LowerContext::cast_to(dt, ctx.at(w, iw));
    ctx.define(f, v, init);
    ref(f, exprs(v)) += Halide::select(valid, term, LowerContext::literal(dt, 0));
    ctx.note_update(f, rvar_names(r));
    int64_t taps = cg;
    for (auto k : visited.kernel) taps *= k;
    ctx.note_cost(f, false, 3.0 * taps + 1);
    ctx.bind_output(y, f);
}

}  // namespace

Expr bordered_read(LowerContext &ctx, const std::string &x, const std::vector<Var> &v,
                   const std::vector<int64_t> &pad_begin, DType dt, const Expr &border) {
    const int sp = (int)pad_begin.size();
    std::vector<Expr> idx = {v[0], v[1]}, inside;
    for (int d = 0; d < sp; d++) {
        Expr h = v[2 + d] - (int)pad_begin[d];
        inside.push_back(h >= 0 && h < ctx.extent(x, 2 + d));
        idx.push_back(Halide::clamp(Halide::likely(h), 0, ctx.size(ctx.sym(x)[2 + d] - 1)));
    }
    Expr e = LowerContext::cast_to(dt, ctx.at(x, idx));
    for (const auto &in : inside) e = Halide::select(in, Halide::likely(e), border);
    return e;
}

void lower_conv(LowerContext &ctx, const Node &node) {
    if (node.op == "Conv") return lower_conv_forward(ctx, node);
    if (node.op == "ConvTranspose") return lower_conv_transpose(ctx, node);
    throw InternalError("lower_conv: unexpected op " + node.op);
}

}  // namespace loom
