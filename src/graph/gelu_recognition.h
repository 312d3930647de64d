/// \file
/// The linear-layer form of GELU recognition (gelu_recognition.cpp; recognize_gelu itself is one of
/// prepare_graph's passes, graph/passes.h): nn.Linear then the exact GELU as one Gemm and one Gelu,
/// for a CUDA lowering that runs them as one cuBLASLt call.
#pragma once

#include "graph/graph.h"

namespace loom {

/// Replaces MatMul(a [M, K], W [K, N] constant) → Add of a constant bias of N values → an exact
/// (Erf) GELU region, as exporters write nn.Linear then F.gelu on a matrix, with every intermediate
/// read once and no graph output, by Gemm(a, W, bias) → Gelu (approximate 'none'), so that a CUDA
/// lowering that may take the tanh form for it (lower/tanh_gelu.h) runs all three as one cuBLASLt
/// call with the GELU_BIAS epilogue. Float32 only; runs on a prepared graph (prepare_model calls it
/// after prepare_graph when asked to). Returns how many were replaced.
int fuse_linear_exact_gelu(Graph &g);

}  // namespace loom
