/// \file
/// The C functions that extern stages call (LowerOptions::gemm_extern, conv_extern and attention_extern): their names
/// and argument codes, shared by the op lowerings that define the stages (src/ops) and by the code
/// generator that compiles the functions into a CUDA artifact (codegen/cublas_gemm.h,
/// codegen/cudnn_conv.h, codegen/cudnn_attention.h, which document each function's arguments).
#pragma once

namespace loom {

inline constexpr const char *kCublasSgemm = "loom_cublas_sgemm";
inline constexpr const char *kCublasLtBiasAct = "loom_cublaslt_bias_act";
inline constexpr const char *kCublasConv1x1 = "loom_cublas_conv1x1";
inline constexpr const char *kCublasConv1x1Nhwc = "loom_cublas_conv1x1_nhwc";
inline constexpr const char *kCublasBatched = "loom_cublas_batched";
inline constexpr const char *kCudnnConv = "loom_cudnn_conv";
inline constexpr const char *kCudnnConvPass = "loom_cudnn_conv_pass";
/// loom_cudnn_conv_pass's passes.
inline constexpr int kConvForward = 0, kConvDataGradient = 1, kConvFilterGradient = 2;
inline constexpr const char *kCudnnAttention = "loom_cudnn_attention";
/// Added to a GEMM stage's precision argument (loom_cublas_sgemm, loom_cublaslt_bias_act) when its
/// A and B are bfloat16 bits rather than FP32: cuBLAS then computes in FP32 from BF16 operands.
inline constexpr int kGemmBf16Operands = 16;
/// Added to a GEMM stage's precision argument, beside kGemmBf16Operands, when its output is
/// bfloat16 bits rather than FP32 (cuBLAS rounds the FP32 accumulator once, as it writes it): the
/// product's readers are all BF16 copies for other library stages (loom_cublas_sgemm), or its one
/// reader is a bf16 model's rounding before a graph output (either stage; loom_cublaslt_bias_act's
/// bias is then BF16 bits too).
inline constexpr int kGemmBf16Output = 32;
/// Added to a GEMM stage's precision argument (loom_cublas_sgemm, loom_cublaslt_bias_act; precision
/// FP32) when A and B are FP32 high/low pairs for 3xTF32 (LowerOptions::gemm_split_tf32): A is
/// [.., M, 2K] holding [A_hi | A_lo] along each row, B is [2K, N] holding B_lo's rows then B_hi's.
inline constexpr int kGemmSplitTf32 = 64;
/// Added to loom_cudnn_conv's precision argument when x, the filter and y have their channels
/// innermost (NHWC; the filter KRSC): bfloat16 bits under Precision::BF16 (BF16 tensor-core kernels
/// accumulating in FP32), FP32 otherwise; cuDNN then converts no layout of its own.
inline constexpr int kConvNhwc = 8;
/// loom_cublaslt_bias_act's activations.
inline constexpr int kCublasLtRelu = 1, kCublasLtGeluTanh = 2;

}  // namespace loom
