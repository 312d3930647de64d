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
/// call with the GELU_BIAS epilogue. A Gemm(a, W, bias) (transA 0) that such a region reads, as
/// torch.onnx writes nn.Linear on a matrix, stays and only the region becomes the Gelu. Float32 only
/// (a bf16 model's, widened by widen_half_precision, too); runs on a prepared graph (prepare_model
/// calls it after prepare_graph when asked to). \p slack: how far from the exact GELU, relative to
/// its argument, a region may compute (0: to float32's rounding of its constants; a bf16 model's √2
/// is 1.4140625, within 2.6e-5·|x|: lower/tanh_gelu.h, exact_gelu_region_slack). Returns how many
/// were replaced.
int fuse_linear_exact_gelu(Graph &g, double slack = 0);

}  // namespace loom
