/// \file
/// cuDNN's fused attention, the extern stage of a FusedAttention on CUDA in BF16, or in TF32 with
/// LowerOptions::attention_f16 (LowerOptions::attention_extern): C++ source compiled into the
/// artifact, defining
/// \code
///   extern "C" int loom_cudnn_attention(halide_buffer_t *q, halide_buffer_t *k, halide_buffer_t *v,
///                                       int32_t b, int32_t h, int32_t sq, int32_t sk, int32_t d,
///                                       float scale, int32_t fp16, halide_buffer_t *o);
/// \endcode
/// o = softmax(scale · q kᵀ) v for q [b, h, sq, d], k and v [b, h, sk, d] and o [b, h, sq, d], all
/// dense BF16 (uint16 bits in Halide, which has no BF16 arithmetic on CUDA) or, where fp16 is 1,
/// FP16 (plans kept per shape and type), FP32 accumulation and
/// softmax inside cuDNN: one operation of the backend API's unified SDPA forward
/// (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, cuDNN >= 9.13.1; the scale a by-value tensor), the
/// plan of the heuristic's first engine configuration that finalizes, kept per shape, its workspace
/// kept between calls. Bounds queries ask for all of q, k and v; the output region must be the whole
/// output (the extern is compute_root). Stream: the one Halide enqueues on (the glue's capture
/// stream while it records the run as a CUDA graph); context: the calling thread's. cuDNN comes
/// from PyTorch's wheel on the GPU machines (LD_LIBRARY_PATH), as for codegen/cudnn_conv.h.
/// bench/gpu/RESULTS_SERVING.md has its speed against PyTorch's flash attention.
#pragma once

#include <string>

#include "lower/extern_stages.h"

namespace loom {

/// Source of loom_cudnn_attention (compiled with HalideRuntime.h and cudnn.h on the path).
std::string cudnn_attention_source();

}  // namespace loom
