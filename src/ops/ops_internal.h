/// \file
/// Private to src/ops: one lowering function per op family (src/ops/<family>.cpp), which
/// lower_graph (lower_graph.h) calls for each node by its OpKind.
#pragma once

#include "graph/graph.h"
#include "lower/lower_context.h"

namespace loom {

// One lowering function per op family (src/ops/<family>.cpp). Each defines every output of
// \p node with ctx.make_func / ctx.define / ctx.bind_output.
void lower_elementwise(LowerContext &ctx, const Node &node);
void lower_reduce(LowerContext &ctx, const Node &node);
void lower_matmul(LowerContext &ctx, const Node &node);
/// FusedAttention (called by lower_matmul; src/ops/attention.cpp).
void lower_attention(LowerContext &ctx, const Node &node);
/// Keys per tile of a FusedAttention's online softmax (the tile's scores block is what a
/// schedule keeps in cache).
inline constexpr int kAttentionKeyTile = 64;
void lower_conv(LowerContext &ctx, const Node &node);
void lower_pool(LowerContext &ctx, const Node &node);
void lower_norm(LowerContext &ctx, const Node &node);
void lower_layout(LowerContext &ctx, const Node &node);
void lower_gather(LowerContext &ctx, const Node &node);
void lower_resize(LowerContext &ctx, const Node &node);

/// Bounds Func \p f's vars \p v (ONNX order) to the whole of \p shape. For a library stage's
/// output (or a library operand's copy), constant extents make its strides constants in the kernels
/// that read it (a bias, a GELU, a residual add), so that Halide proves their vector loads aligned;
/// left to bounds inference, the strides and mins reach each kernel as parameters and its vectors
/// are loaded element by element (bench/DECISIONS.md#d131-cuda-library-outputs-bounded).
inline void bound_whole(Halide::Func &f, const std::vector<Halide::Var> &v, const Shape &shape) {
    for (size_t k = 0; k < v.size(); k++) f.bound(v[k], 0, (int)shape[k]);
}

/// The value of \p x at the point \p v of a copy with \p pad_begin more on each spatial dim
/// (dims 2..): \p border outside \p x. One select per dim, its in-bounds side `likely`, so that
/// Halide's loop partitioning gives each loop a steady state without the index clamp (which would
/// make every vector read a gather) and without the select (src/ops/conv.cpp).
Halide::Expr bordered_read(LowerContext &ctx, const std::string &x, const std::vector<Halide::Var> &v,
                           const std::vector<int64_t> &pad_begin, DType dt, const Halide::Expr &border);

/// The input of the Transpose node that produces \p value with permutation \p perm, or "" when
/// \p value has no such producer: a library stage reads the untransposed operand with a transpose
/// flag (a cuBLAS op, a cuDNN pass) instead of a materialized copy (src/ops/layout.cpp).
std::string transpose_source(const LowerContext &ctx, const std::string &value, const std::vector<int64_t> &perm);

/// The BF16 value that FP32 value \p value widens (a Cast to f32 of a bf16 value: widen_half_precision's
/// widening of a bf16 model's input or of a Cast to bf16), or "" when it is none: a library stage
/// that takes BF16 operands reads its bits instead of rounding the widened value back, which is the
/// identity (src/ops/attention.cpp).
std::string bf16_source(const LowerContext &ctx, const std::string &value);

/// The Cast to bf16 that is the only reader of FP32 value \p value (no graph output), as
/// widen_half_precision rounds a bf16 model's output, or nullptr: a library stage computing
/// \p value can write BF16 and be that Cast's value (src/ops/attention.cpp).
const Node *bf16_rounding(const LowerContext &ctx, const std::string &value);

}  // namespace loom
