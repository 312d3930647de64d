/// \file
/// Graph passes, and `prepare_graph`: the one function that lists, by name and in order, the
/// passes that take an imported graph to canonical form (op_catalog.h) ready for lowering.
/// With LOOM_DEBUG=1 (or PrepareOptions::dump) the graph is dumped after each pass to stderr.
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>

#include "graph/graph.h"

namespace loom {

/// Shapes given on the command line: `--input x=1x3x224x224` binds a whole input's shape;
/// `--input batch=8` binds a symbolic dim by name wherever it appears.
using InputBindings = std::map<std::string, Shape>;

/// Computes one node's outputs from constant inputs, for constant folding: \p inputs has one entry
/// per node input (nullptr for an omitted one), \p outputs the inferred type and shape of each
/// output. The reference interpreter's evaluate_node is the one Loom uses
/// (reference/folding.h: reference_evaluator), given from above so that graph passes do not
/// depend on the interpreter.
using NodeEvaluator = std::function<std::vector<Tensor>(const Node &node, const std::vector<const Tensor *> &inputs,
                                                        const std::vector<ValueInfo> &outputs)>;

/// Whether and for which code recognize_attention fuses scaled-dot-product attention.
enum class AttentionFusion {
    Off,     ///< leave MatMul → Softmax → MatMul alone (training: autodiff has no rule for the fused op)
    Halide,  ///< every match (Loom's own Funcs, any target)
    Cudnn,   ///< only matches cuDNN's fused attention takes (fits_cudnn_attention)
};

/// Options of prepare_graph.
struct PrepareOptions {
    InputBindings bindings;
    bool fold_conv_bn = true;  ///< fold inference BatchNorm into a preceding Conv's weights
    bool cse = true;           ///< merge identical nodes
    bool horizontal_fusion = true;  ///< fuse_horizontal_slices
    /// rewrite_winograd_convs (graph/winograd_rewrite.h): 3x3 stride-1 convs as Winograd F(2x2, 3x3);
    /// off by default (bench/DECISIONS.md#d169-winograd-f23-as-a-graph-rewrite-opt-in)
    bool winograd = false;
    bool dump = false;         ///< print the graph after each pass (also on with LOOM_DEBUG=1)
    /// recognize_attention's mode; off unless asked for (bench/DECISIONS.md#d88-cpu-fused-attention)
    AttentionFusion attention = AttentionFusion::Off;
    /// Dynamic shapes (graph/symbolic_shapes.h): symbolic dims kept open, with their declared
    /// ranges (`--dim H=32..2048`); a binding in \p bindings is then the representative size.
    std::map<std::string, DimRange> dynamic_dims;
    bool dynamic_all = false;  ///< keep every symbolic input dim open (`--dynamic`)
    bool dynamic() const { return dynamic_all || !dynamic_dims.empty(); }
};

/// Binds every graph input's symbolic/unknown dims. UserError naming an unbound dim and showing
/// the `--input` flag that would bind it.
void bind_input_shapes(Graph &g, const InputBindings &b);

/// In topological order: rewrites each node to canonical form (constant auxiliary inputs become
/// attributes, defaults filled in), infers its output shapes and dtypes, and folds it into an
/// initializer when all its inputs are constant. UserError for rank/dtype mismatches, missing
/// attributes, non-constant inputs that must be constant. \p evaluate computes folded nodes.
void infer_shapes_and_fold(Graph &g, const NodeEvaluator &evaluate);

/// Models stored in f16 or bf16 compute in f32 (graph/half_precision.cpp says why): half
/// initializers become f32 (exact), every node but Cast computes in f32, a half graph input is
/// widened by a Cast before its first reader, a half graph output is rounded by a Cast after its
/// producer, and a Cast to f16/bf16 inside a mixed graph keeps its rounding (its readers get it
/// widened). Returns how many values changed.
int widen_half_precision(Graph &g);

/// Removes Identity and (inference-mode) Dropout nodes, rewiring their consumers.
void remove_identities(Graph &g);
/// Removes nodes whose outputs reach no graph output, and unused initializers.
void eliminate_dead_code(Graph &g);
/// Folds BatchNormalization into the Conv or ConvTranspose that feeds it (when it has no other
/// consumer and constant weights): exact, in double precision, into its weights and bias.
void fold_conv_batchnorm(Graph &g);
/// A Clip whose lower bound is >= 0 and whose input a Relu produces reads the Relu's input instead
/// (clip(relu(x), lo, hi) == clip(x, lo, hi) for lo >= 0; PyTorch exports ReLU6 as Relu then
/// Clip); the Relu goes with dead-code elimination once nothing else reads it. A Conv followed by
/// ReLU6 then has the Clip as its only consumer. Returns how many Clips were rewired.
int absorb_relu_into_clip(Graph &g);
/// Gemm with transB=1 and a constant B (PyTorch's Linear stores weights [N, K]) gets B transposed
/// once at compile time and transB=0, so the kernel reads weights along N, the vectorised dim.
void pretranspose_gemm_weights(Graph &g);
/// Gemm with transB=1 and a B that is a graph value (a training step's parameter, stored [N, K]):
/// B is read through a Transpose node and transB=0, which the CPU scheduler materializes once per
/// run (bench/DECISIONS.md#d90-transposed-gemm-operand-materialized) so the GEMM's micro-kernel
/// loads B along N instead of gathering it; cuBLAS reads the Transpose through its flag. Returns
/// how many Gemms were rewritten.
int transpose_gemm_value_weights(Graph &g);
/// Horizontal fusion of siblings: K isomorphic chains of pointwise ops, last-axis reductions,
/// Softmax or LayerNormalization over the K equal slices of a Split along the last axis, whose
/// results a Concat joins back along that axis, become one chain over the input viewed as
/// [..., K, n] (Reshape in, Reshape out); per-slice constants are stacked into [K, n] (a
/// LayerNorm's per-slice scale and bias become a Mul and an Add after it). Graphs that do not
/// match exactly are left unchanged. (split_stack: 16 LayerNorm+tanh slices → one.)
void fuse_horizontal_slices(Graph &g);
/// Merges nodes with the same op, inputs and attributes.
void eliminate_common_subexpressions(Graph &g);
/// Replaces each 2-D ConvTranspose with constant weights whose kernel equals its stride s >= 2 (no
/// dilation, pads, output padding or groups) by a 1x1 Conv to s*s channels per output channel
/// followed by DepthToSpace (CRD, blocksize s). Runs after fold_conv_batchnorm, which has already
/// folded a following BatchNormalization into the ConvTranspose. Returns how many were replaced.
int rewrite_upsampling_conv_transpose(Graph &g);
/// The GELU recognize_gelu looks for: the tanh approximation or the exact (Erf) form.
enum class GeluForm { Tanh, Exact };
/// Replaces each region of elementwise nodes with scalar constants that computes the GELU of one
/// value in \p form (as exporters decompose F.gelu) by one Gelu node (approximate 'tanh' or
/// 'none'); recognised by evaluating the region, not by its node pattern. Returns how many were
/// replaced.
int recognize_gelu(Graph &g, GeluForm form = GeluForm::Tanh);
/// Replaces Mul(x, HardSigmoid(x)) with alpha 1/6 and beta 1/2 by HardSwish(x), and Mul(x,
/// Sigmoid(x)) by Swish(x) (alpha 1, ONNX opset 24's SiLU), where the gate is read by that Mul only
/// and is no graph output. Returns how many were replaced.
int recognize_swish(Graph &g);
/// Replaces PyTorch's export of GroupNorm, Reshape([N, G, -1]) → InstanceNormalization with
/// constant per-group scale and bias → Reshape back, by one GroupNormalization node (opset 18's
/// per-group scale and bias). Returns how many were replaced.
int recognize_group_norm(Graph &g);
/// Replaces scaled-dot-product attention as exporters write it, MatMul(q, kᵀ) → optional scalar
/// Mul or Div (or scalar Muls on q and kᵀ) → optional Add of a mask that broadcasts to the scores →
/// Softmax over the last axis → MatMul with v, every intermediate read once and no graph output,
/// float32, q/kᵀ/v with equal batch dims, by one FusedAttention node (q, kᵀ, v, [mask]; attribute
/// scale). \p mode Cudnn takes only what fits_cudnn_attention accepts. Returns how many were replaced.
int recognize_attention(Graph &g, AttentionFusion mode);
/// True when cuDNN's fused attention computes a FusedAttention of these operand shapes
/// (q [..., Sq, d], kᵀ [..., d, Sk], v [..., Sk, dv]): rank 3 or 4, d == dv, d a multiple of 8 up
/// to 128, no mask.
bool fits_cudnn_attention(const Shape &q, const Shape &kt, const Shape &v, bool masked);

/// The whole pipeline: bind inputs, remove identities, infer shapes and fold, half-precision
/// widening, upsampling ConvTranspose as Conv + DepthToSpace, conv+bn folding,
/// Relu+Clip absorption, Gemm weight pre-transposition, tanh-GELU and swish recognition, GroupNorm recognition,
/// attention recognition, horizontal fusion of slices, CSE, dead-code elimination, final
/// validation. \p evaluate computes folded nodes (reference/folding.h's prepare_graph passes the
/// reference interpreter).
void prepare_graph(Graph &g, const NodeEvaluator &evaluate, const PrepareOptions &opts = {});

/// Prints the graph (inputs, nodes with shapes, outputs), one node per line.
void print_graph(const Graph &g, std::ostream &os);

}  // namespace loom
