/// \file
/// What every extern-stage source compiled into a CUDA artifact shares (codegen/cublas_gemm.h,
/// codegen/cudnn_conv.h): Halide's runtime headers, `fail(what, code)` (reports through
/// halide_error, prefixed with the extern's name, and returns -1), `set_dim(buffer, d, min,
/// extent)` (answers a bounds query), `stage_stream()` (the stream to enqueue on: Halide's, i.e.
/// the capture stream while the glue captures a CUDA graph, codegen/cuda_graph_glue.h) and
/// `gpu_time_ms(enqueue)` (a candidate library call's GPU time, its calls queued behind a host
/// callback so that the library's host path is not what is timed), in an anonymous namespace so
/// that several externs link into one library.
#pragma once

#include <string>

namespace loom {

/// The shared prelude of an extern source whose C function is \p fn ("loom_cublas_sgemm").
std::string extern_stage_prelude(const std::string &fn);

}  // namespace loom
