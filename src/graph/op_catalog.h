/// \file
/// The operators Loom supports and the *canonical form* every later stage may rely on.
///
/// Graph IR ops carry ONNX names and semantics. After `prepare_graph` (passes.h) a graph is in
/// canonical form, so the reference interpreter, the lowering and the cost model handle each op in
/// exactly one way, whatever opset the model came from:
///
/// - Every value has a static, known shape and dtype. No Constant, Identity, Dropout, Shape,
///   Size, ConstantOfShape, Range or Upsample nodes remain (folded, removed or rewritten), and
///   Flatten / Squeeze / Unsqueeze become Reshape. Nodes whose inputs are all constant are folded.
/// - Auxiliary inputs that ONNX allows as either attributes or inputs are attributes, with every
///   default filled in; the auxiliary inputs are removed from `inputs`. Axes are non-negative.
///
/// | op | inputs (canonical) | attributes (canonical) |
/// | --- | --- | --- |
/// | Add Sub Mul Div Pow Equal Less Greater And Or PRelu | a, b (NumPy broadcast) | |
/// | Min Max Sum Mean | 1+ inputs, broadcast | |
/// | Where | cond, a, b (broadcast) | |
/// | Sqrt Exp Log Abs Neg Reciprocal Floor Ceil Relu Sigmoid Tanh Erf Softplus HardSwish Not Sin Cos | x | |
/// | LeakyRelu | x | alpha (0.01) |
/// | Elu | x | alpha (1.0) |
/// | HardSigmoid | x | alpha (0.2), beta (0.5) |
/// | Gelu | x | approximate ("none" or "tanh") |
/// | Clip | x | min, max (floats; ±inf when absent) |
/// | Cast | x | to (dtype name, e.g. "f32") |
/// | MatMul | a, b (NumPy matmul; batch dims broadcast; rank ≥ 1) | |
/// | Gemm | A, B, [C broadcast to output] | alpha, beta, transA, transB |
/// | Conv | X, W, [B] | kernel_shape, strides, pads (begins then ends), dilations, group |
/// | ConvTranspose | X, W, [B] | kernel_shape, strides, pads, dilations, group, output_padding |
/// | MaxPool AveragePool | X | kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad |
/// | GlobalAveragePool GlobalMaxPool | X | |
/// | BatchNormalization | X, scale, B, mean, var | epsilon, momentum (inference mode; a training step updates mean and var with momentum) |
/// | InstanceNormalization | X, scale, B | epsilon |
/// | LayerNormalization | X, Scale, [B] | axis (normalise over axis..rank-1), epsilon |
/// | GroupNormalization | X, scale, bias (size C or num_groups) | num_groups, epsilon |
/// | ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL2 | X | axes (sorted, non-empty), keepdims |
/// | ArgMax ArgMin | X | axis, keepdims, select_last_index; output i64 |
/// | Softmax LogSoftmax | X | axis (a single axis; opset < 13 forms are rewritten) |
/// | Reshape | X | shape (the resolved output shape: no 0 or -1) |
/// | Transpose | X | perm (full permutation) |
/// | Concat | 1+ inputs | axis |
/// | Split | X | axis, split (sizes, one per output) |
/// | Slice | X | starts, steps (one per dim): out[.., i, ..] = X[.., starts[d] + i*steps[d], ..] |
/// | Gather | data, indices (any int dtype; negative means from the end) | axis |
/// | Expand | X | shape (the resolved output shape) |
/// | Tile | X | repeats (one per dim) |
/// | Pad | X | pads (begins then ends, 2×rank), mode ("constant", "reflect", "edge"), value |
/// | Resize | X | scales (per dim, output/input), mode ("nearest", "linear", "cubic"), coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside |
#pragma once

#include <string>
#include <vector>

namespace loom {

/// Coarse families of ops, used to group lowering code, tests and cost-model decisions.
enum class OpKind { Elementwise, Reduce, MatMul, Conv, Pool, Norm, Layout, Gather, Resize, Folded };

/// Every op the ONNX frontend accepts (including the ones folded away before lowering), sorted.
const std::vector<std::string> &supported_ops();
/// True if \p op is in supported_ops().
bool is_supported_op(const std::string &op);
/// The family of a canonical op. InternalError for an op with no family.
OpKind op_kind(const std::string &op);
/// True for ops computed element by element from broadcast inputs (including Cast, Where, Clip).
bool is_elementwise_op(const std::string &op);

}  // namespace loom
