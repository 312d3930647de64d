/// \file
/// The cuBLAS GEMM that a CUDA artifact's extern stages call (LowerOptions::gemm_extern):
/// C++ source compiled into the artifact next to Halide's pipeline object, defining
/// \code
///   extern "C" int loom_cublas_sgemm(halide_buffer_t *a, halide_buffer_t *b, int32_t m, int32_t n,
///                                    int32_t k, int32_t trans_a, int32_t trans_b, float alpha,
///                                    int32_t precision, halide_buffer_t *y);
///   extern "C" int loom_cublaslt_bias_act(halide_buffer_t *a, halide_buffer_t *b,
///                                         halide_buffer_t *bias, int32_t m, int32_t n, int32_t k,
///                                         int32_t trans_a, int32_t trans_b, float alpha,
///                                         int32_t precision, int32_t act, halide_buffer_t *y);
///   extern "C" int loom_cublas_batched(halide_buffer_t *a, halide_buffer_t *b, int32_t inner,
///                                      int32_t outer, int32_t m, int32_t n, int32_t k,
///                                      int32_t trans_b, int32_t precision, halide_buffer_t *y);
///   extern "C" int loom_cublas_conv1x1(halide_buffer_t *x, halide_buffer_t *w, int32_t n, int32_t c,
///                                      int32_t h, int32_t w_, int32_t co, int32_t precision,
///                                      halide_buffer_t *y);
///   extern "C" int loom_cublas_conv1x1_nhwc(halide_buffer_t *x, halide_buffer_t *w,
///                                           halide_buffer_t *bias, int32_t n, int32_t c, int32_t h,
///                                           int32_t w_, int32_t co, int32_t act, int32_t precision,
///                                           halide_buffer_t *y);
/// \endcode
/// y = alpha · op(a) op(b) in row-major terms (a: [M, K] or [K, M], or [batch, M, K]; b: [K, N] or
/// [N, K]); one cuBLASLt GEMM on the device pointers (batched a folded into M when dense, else
/// cublasGemmStridedBatchedEx with b's stride 0). Bounds queries fill in a's rows of the requested
/// output region and all of b. Inputs are copied to the device through Halide's CUDA device
/// interface when needed (the constant b once: Halide keeps its device copy), y is device-malloc'd
/// when Halide gave it none and marked device-dirty. y is FP32; so are the operands, except that
/// a precision plus kGemmBf16Operands (lower/extern_stages.h) says a and b are BF16 bits
/// (CUBLAS_COMPUTE_32F on them). The precision (lower/precision.h: 0 FP32, 1 TF32, 2 BF16, 3 FP16)
/// picks the compute type: CUBLAS_COMPUTE_32F (full FP32), or _32F_FAST_TF32 / _FAST_16BF /
/// _FAST_16F (tensor cores on operands rounded to that precision, FP32 accumulation). The stream is the legacy default stream, the one
/// Halide's CUDA runtime launches on; the context is the calling thread's (runtime_glue.h).
///
/// 3xTF32 (precision FP32 plus kGemmSplitTf32, LowerOptions::gemm_split_tf32; loom_cublas_sgemm and
/// loom_cublaslt_bias_act, neither operand transposed): a holds each row's TF32-exact high parts
/// then its low parts (Halide dims k, part, i[, batch]: [.., M, 2, K]), b the constant [2K, N] of
/// B_lo's rows then B_hi's; two cuBLASLt TF32 GEMMs, [A_hi | A_lo] · [B_lo; B_hi] over 2K into y, then
/// A_hi · B_hi over K added to it (beta 1) with the epilogue, both plans timed before either runs.
///
/// loom_cublas_batched: y[b] = a[b] op(b[b]) for a [(outer,) inner, M, K] and b [(outer,) inner, K, N]
/// ([.., N, K] read through cuBLAS's transpose flag when trans_b: attention's K for Q K^T) that are
/// both computed (attention's Q K^T and P V; the dense batch dims are one to cuBLAS), one strided-batch
/// cuBLASLt call (256-byte aligned matrices) or cublasGemmStridedBatchedEx in the precision's compute
/// type; the whole of a, b and y (the extern is compute_root).
///
/// loom_cublas_conv1x1: a 2-D Conv with a 1x1 kernel, stride 1, no pads and one group is a GEMM per
/// image, y[co, h·W + w] = Σ_c w[co, c] x[c, h·W + w]: one cublasLtMatmul on the channel planes,
/// its algorithm picked by GPU time (several images: one cublasGemmStridedBatchedEx with the weights'
/// stride 0), no bias (that stays a Halide Func). It needs
/// whole images of y (the extern is compute_root) and planes dense in H·W.
///
/// loom_cublas_conv1x1_nhwc: the same conv on channels-innermost tensors (x NHWC, w [Co, C], y
/// NHWC): every pixel is a row of one GEMM, y [N·H·W, Co] = x [N·H·W, C] · w^T, one cublasLtMatmul
/// with the RELU_BIAS epilogue when act is kCublasLtRelu (0: none, the bias stays a Halide Func);
/// the whole of x and y, dense.
///
/// loom_cublaslt_bias_act: y = act(alpha · op(a) op(b) + bias) for 2-D a and a bias of N values
/// (one per output column, Linear's), in one cublasLtMatmul with the CUBLASLT_EPILOGUE_RELU_BIAS
/// (act = kCublasLtRelu) or _GELU_BIAS epilogue (kCublasLtGeluTanh: cuBLASLt's GELU is the tanh
/// approximation, bench/experiments/gpu/cublaslt_gelu_probe.cpp) (LowerOptions::
/// fuse_activation_epilogue: the Gemm's only consumer is that activation); the whole output at
/// once, the plan (descriptors and the fastest of the heuristic's first 8 algorithms, each timed
/// once on the real operands at the first call) kept per shape, a 32 MB workspace kept between
/// calls; the compute type of the precision, as above. With kGemmBf16Output (a bf16 model's
/// output, BF16 operands) y and the bias are BF16 bits (cuBLASLt's bias type is the output's).
#pragma once

#include <string>

#include "lower/extern_stages.h"

namespace loom {

/// Source of the extern functions (compiled with HalideRuntime.h and cublas_v2.h on the path).
std::string cublas_gemm_source();

/// Folder of the CUDA toolkit (CUDA_HOME, else /usr/local/cuda): include/ and lib64/ under it.
std::string cuda_home();

}  // namespace loom
