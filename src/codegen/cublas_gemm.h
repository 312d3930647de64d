/// \file
/// The cuBLAS GEMM that a CUDA artifact's extern stages call (LowerOptions::gemm_extern):
/// C++ source compiled into the artifact next to Halide's pipeline object, defining
/// \code
///   extern "C" int loom_cublas_sgemm(halide_buffer_t *a, halide_buffer_t *b, int32_t m, int32_t n,
///                                    int32_t k, int32_t trans_a, int32_t trans_b, float alpha,
///                                    int32_t tf32, halide_buffer_t *y);
/// \endcode
/// y = alpha · op(a) op(b) in row-major terms (a: [M, K] or [K, M], or [batch, M, K]; b: [K, N] or
/// [N, K]); one cublasSgemm on the device pointers (batched a folded into M when dense, else
/// cublasSgemmStridedBatched with b's stride 0). Bounds queries fill in a's rows of the requested
/// output region and all of b. Inputs are copied to the device through Halide's CUDA device
/// interface when needed (the constant b once: Halide keeps its device copy), y is device-malloc'd
/// when Halide gave it none and marked device-dirty. Math mode CUBLAS_DEFAULT_MATH (full FP32)
/// unless tf32 != 0 (CUBLAS_TF32_TENSOR_OP_MATH). The stream is the legacy default stream, the one
/// Halide's CUDA runtime launches on; the context is the calling thread's (runtime_glue.h).
#pragma once

#include <string>

namespace loom {

/// The C function's name, as extern stages call it.
inline constexpr const char *kCublasSgemm = "loom_cublas_sgemm";

/// Source of the extern functions (compiled with HalideRuntime.h and cublas_v2.h on the path).
std::string cublas_gemm_source();

/// Folder of the CUDA toolkit (CUDA_HOME, else /usr/local/cuda): include/ and lib64/ under it.
std::string cuda_home();

}  // namespace loom
