/// \file
/// The cuDNN convolution that a CUDA artifact's extern stages call (LowerOptions::conv_extern):
/// C++ source compiled into the artifact next to Halide's pipeline object, defining
/// \code
///   extern "C" int loom_cudnn_conv(halide_buffer_t *x, halide_buffer_t *w, halide_buffer_t *bias,
///                                  int32_t n, int32_t c, int32_t h, int32_t w, int32_t pad_h,
///                                  int32_t pad_w, int32_t stride_h, int32_t stride_w, int32_t dil_h,
///                                  int32_t dil_w, int32_t groups, int32_t mode, int32_t precision,
///                                  halide_buffer_t *y);
/// \endcode
/// mode 0: y = conv2d(x, w) (cross-correlation, NCHW float32; the bias and everything after stay
/// Halide Funcs); mode 1: y = relu(conv2d(x, w) + bias) in one cudnnConvolutionBiasActivationForward
/// (the extern is then the Relu's output, LowerOptions::fuse_activation_epilogue). x is the whole input
/// (n × c × h × w: its bounds query asks for all of it), w the constant [K, C/groups, R, S] filter,
/// bias the constant [K] bias (mode 1; a 1-element placeholder in mode 0); the output region Halide asks for must be the whole output (the
/// extern is compute_root). The algorithm is
/// chosen once per shape by cudnnFindConvolutionForwardAlgorithm (timed on the device, as
/// PyTorch's `cudnn.benchmark`), its math set by the precision (lower/precision.h): CUDNN_FMA_MATH
/// (full FP32) for 0, CUDNN_TENSOR_OP_MATH (TF32) for 1, _ALLOW_CONVERSION (tensor cores on
/// operands converted to 16 bits) for 2 (BF16) and 3 (FP16); the
/// workspace is kept between calls. Precision plus kConvNhwc (lower/extern_stages.h): w stored KRSC
/// (Halide order c/g, s, r, k) and x and y in whatever layout their strides give (lowering stores
/// them NHWC), so that cuDNN converts no layout; under BF16 (mode 0 only) x, w and y are bfloat16
/// bits and cuDNN runs BF16 kernels with FP32 accumulation, otherwise they are FP32 and the math is
/// the precision's. Stream: the legacy default stream (Halide's); context: the
/// calling thread's (runtime_glue.h).
///
/// \code
///   extern "C" int loom_cudnn_conv_pass(halide_buffer_t *a, halide_buffer_t *b, int32_t pass, int32_t n,
///                                       int32_t c, int32_t h, int32_t w, int32_t k, int32_t r, int32_t s,
///                                       int32_t pad_h, int32_t pad_w, int32_t stride_h, int32_t stride_w,
///                                       int32_t dil_h, int32_t dil_w, int32_t groups, int32_t precision,
///                                       halide_buffer_t *y);
/// \endcode
/// One pass of the 2-D convolution of x [n, c, h, w] by the filter [k, c/groups, r, s] (pads,
/// strides, dilations as above) whose operands are all graph values (a training step's parameters
/// and gradients, or an inference model's weight inputs): pass 0 forward (a = x, b = filter, y =
/// conv output), 1 data gradient (a = the output's gradient, b = filter, y = x's gradient: a
/// ConvTranspose by a computed filter), 2 filter gradient (a = x, b = the output's gradient, y =
/// the filter's gradient). Every operand whole and dense NCHW; y's region may differ from the result
/// (a consumer's GPU tiles round it up, or it needs a part: the result then goes through a dense
/// copy whose part inside the region cudnnTransformTensor writes into y); the algorithm is Find's fastest that
/// the precision allows, chosen once per shape; the call goes on Halide's stream (captured with the
/// model's CUDA graph when the glue captures).
///
/// cuDNN is not in /usr/local/cuda on the GPU machines seen so far, only in PyTorch's wheels
/// (`site-packages/nvidia/cudnn/lib`): bench/gpu/run_gpu_bench.sh puts it on LD_LIBRARY_PATH.
#pragma once

#include <string>

#include "lower/extern_stages.h"

namespace loom {


/// Source of the extern function (compiled with HalideRuntime.h and cudnn.h on the path).
std::string cudnn_conv_source();

}  // namespace loom
