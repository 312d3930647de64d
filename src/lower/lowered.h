/// \file
/// The result of lowering a Graph: one Halide Pipeline whose Funcs are named after the graph
/// (DESIGN.md "Names"), plus what a schedule, the CLI and the cost model need to know about each
/// Func. This is the surface a schedule is written against.
#pragma once

#include <Halide.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "lower/precision.h"

namespace loom {

/// One Func of the lowered pipeline.
struct LoweredFunc {
    std::string name;  ///< Halide Func name: the sanitised node name, or node name + "_" + helper
    Halide::Func func;
    std::string node;  ///< graph node it implements
    std::string op;    ///< that node's op ("Conv", "LayerNormalization" …)
    std::vector<std::string> vars;   ///< pure vars, outermost first ("n","c","h","w")
    std::vector<int64_t> extents;    ///< extent of each pure var, outermost first (representative when dynamic)
    /// Per pure var: whether its extent moves with the input sizes (dynamic shapes); empty: none
    /// does. A schedule's splits of such a var must be correct at every extent.
    std::vector<bool> dynamic_vars;
    /// Per pure var whose extent moves: that extent as an Expr over the size Params, where lowering
    /// knows it (undefined otherwise; empty when no var moves). A schedule's specialization for
    /// large enough extents reads it (schedule_apply.h).
    std::vector<Halide::Expr> dynamic_extents;
    /// Dynamic shapes: the Func's exact extents as symbolic dims, outermost first, for a Func bound
    /// to a graph value whose shape moves (empty otherwise, and for helpers, whose moving extents
    /// lowering only guesses). A cut (codegen/jit_segments.h) passes such a Func between pipelines
    /// in a buffer of that shape at each run's sizes.
    SymShape sym_extents;
    /// For each update stage k, the reduction vars as a schedule names them ("k", "r.x", "r.y").
    std::vector<std::vector<std::string>> update_rvars;
    std::vector<std::string> producers;  ///< Funcs (not inputs) this Func reads
    std::vector<std::string> consumers;  ///< Funcs reading this one
    std::vector<std::string> input_reads;  ///< graph inputs (ImageParams) this Func reads
    bool is_output = false;     ///< a graph output
    bool is_pointwise = false;  ///< pure definition only, one point of each producer per point
    DType dtype = DType::F32;
    double flops_per_point = 1;  ///< rough arithmetic per output point (all stages), for cost models
    /// Read by an extern stage (a cuBLAS GEMM, LowerOptions::gemm_extern): it must be realized
    /// (compute_root or at a block), never inlined.
    bool feeds_extern = false;
    /// An extern stage itself (a cuDNN conv whose bias and ReLU the library applies, bound to the
    /// ReLU's output): computed at root by lowering, no loops a schedule can touch.
    bool is_extern = false;
    /// A pointwise helper inside one node that only factors its expression (Softmax's `<node>_exp`,
    /// read by the sum and by the output): the defaults (eager, Funcs a schedule leaves out) inline
    /// it, so an unscheduled op computes as before; a schedule may still buffer it per row.
    bool inline_by_default = false;
    /// A conv's or pool's input copied into a constant border (ops/conv.cpp bordered_read): each
    /// point a select between a clamped read and the border.
    bool padded_input = false;
    /// A Conv whose constant weights are stored in blocks of this many output channels, the block
    /// innermost (LowerOptions::block_conv_weights); 0: weights stored as in the graph. The cost
    /// model vectorizes such a conv over output channels (one dense load per weight vector).
    int conv_weight_block = 0;
    /// A depthwise Conv whose constant filter is stored [kH][kW][C_out]
    /// (LowerOptions::channels_last_depthwise_filters): a vector over its output channels loads
    /// each tap's weights in one dense load, so the cost model may vectorize it over channels.
    bool depthwise_filter_channels_last = false;
    /// A rank-4 (n, c, h, w) Func stored channels innermost (NHWC), the layout an NHWC cuDNN stage
    /// reads (LowerOptions::conv_nhwc): the GPU auto-scheduler stores
    /// it so (reorder_storage) and runs its threads along the channels, so that its reads of
    /// NHWC library outputs and its own writes stay coalesced.
    bool channels_last = false;

    /// The constant extent of update \p k's RVar when that update has exactly one, else -1.
    int64_t single_rvar_extent(int k = 0) const;
};

/// Options of lower_graph. The library and alignment options are off by default (CPU path).
struct LowerOptions {
    /// CUDA targets only: a float MatMul/Gemm whose B is a constant matrix (A 2-D, or batched
    /// with a 2-D B) becomes a Halide extern stage (`<node>_cublas`, compute_root, DeviceAPI::CUDA)
    /// calling `loom_cublas_sgemm` (codegen/cublas_gemm.h), compiled into the artifact; bias,
    /// beta·C and everything after stay Halide Funcs that read the extern's output. A float 2-D
    /// Conv with a constant 1x1 filter, stride 1, no pads and one group is such a GEMM too
    /// (`loom_cublas_conv1x1`), unless conv_extern fuses it with a sole ReLU in one cuDNN call.
    bool gemm_extern = false;
    /// The precision cuBLAS and cuDNN compute in (lower/precision.h): FP32 math, or tensor cores
    /// on operands rounded to TF32, BF16 or FP16 with FP32 accumulation; passed to each library
    /// stage as its `precision` argument. Halide Funcs stay FP32 whatever this says, except the BF16
    /// copies that library stages read in BF16 (a GEMM's A, a conv's NHWC input: D93, D115).
    Precision gemm_precision = Precision::FP32;
    /// With gemm_extern under Precision::FP32: a GEMM with a constant B (`loom_cublas_sgemm`,
    /// `loom_cublaslt_bias_act`) runs as 3xTF32 on tensor cores instead of FP32 FMA: each operand is
    /// split into a high part exact in TF32 and the low rest (x = hi + lo; B at compile time, A by a
    /// Halide copy `<node>_a_tf32x2` [.., M, 2K] holding [A_hi | A_lo]), and cuBLASLt adds
    /// A_hi·B_lo + A_lo·B_hi (one TF32 GEMM over 2K) and then A_hi·B_hi (one over K, beta 1, with
    /// the epilogue); A_lo·B_lo (2^-22 of the product) is dropped. Off by default: the tensor cores
    /// truncate as they accumulate, so the error is several times FP32 FMA's and grows with K
    /// (bench/DECISIONS.md#d200-cuda-fp32-gemms-as-3xtf32-opt-in).
    bool gemm_split_tf32 = false;
    /// CUDA targets only: a float 2-D Conv with a constant filter and symmetric pads (not a
    /// depthwise one: Halide's fused conv is faster there) becomes a
    /// Halide extern stage (`<node>_cudnn`, compute_root, DeviceAPI::CUDA) calling
    /// `loom_cudnn_conv` (codegen/cudnn_conv.h); the bias and everything after stay Halide Funcs.
    bool conv_extern = false;
    /// With conv_extern, under Precision::FP32, TF32 or BF16: those cuDNN stages (1x1 convs too,
    /// which then leave cuBLAS; under FP32 with gemm_extern a 1x1 one is a cuBLASLt GEMM over the
    /// pixels on the same tensors, `loom_cublas_conv1x1_nhwc`) read and write tensors with the
    /// channels innermost (NHWC; the
    /// filter KRSC, laid out at compile time), bfloat16 bits under BF16 and FP32 otherwise; each
    /// input is a Halide copy stored NHWC (LoweredFunc::channels_last) that the value's other
    /// consumers share. Off (and under FP16): FP32 NCHW stages, cuDNN converting layouts itself.
    /// The CLI sets it for TF32 and BF16 (library_lowering), and for FP32 by the graph's conv mix
    /// (choose_fp32_conv_layout).
    bool conv_nhwc = false;
    /// A depthwise 2-D Conv (one input channel per group) with a constant float filter reads it
    /// stored [kH][kW][C_out], the channels innermost (LowerContext::blocked_constant with one block
    /// of every channel): a channels-last kernel's thread then loads its vector of channels' weights
    /// once per tap, where the graph's [C_out][1][kH][kW] puts them kH·kW apart, a load per channel;
    /// so does a CPU kernel vectorized over channels (LoweredFunc::depthwise_filter_channels_last).
    /// On by default (the CPU's layout); the CLI sets it with conv_nhwc on CUDA.
    bool channels_last_depthwise_filters = true;
    /// CUDA targets in BF16 (or TF32 with attention_f16): a FusedAttention (graph/passes.h
    /// recognize_attention, its Cudnn mode) becomes one extern stage (`<node>_cudnn_attention`)
    /// calling `loom_cudnn_attention` (codegen/cudnn_attention.h) on BF16 copies of q, k and v made
    /// by Halide Funcs.
    bool attention_extern = false;
    /// With attention_extern under TF32: cuDNN's attention on FP16 copies of q, k and v, its output
    /// FP16: FP16 keeps TF32's 10 mantissa bits (the product's operands lose no more than TF32's
    /// tensor cores drop), but not its range: a q, k or v element past 65504 becomes infinite.
    /// Opt-in (`--f16-attention`; bench/DECISIONS.md#d208-cuda-tf32-attention-on-fp16-copies).
    bool attention_f16 = false;
    /// With conv_extern / gemm_extern: a Conv or a Gemm with a constant row bias whose only consumer
    /// is its activation (and whose output is not a graph output) has its bias and activation
    /// applied by the library: a Relu after a Conv (cudnnConvolutionBiasActivationForward), a Relu
    /// or a tanh-form Gelu after a Gemm (cuBLASLt's RELU_BIAS / GELU_BIAS epilogues). The
    /// activation's output is the extern stage itself, so no pass over the result is left in Halide.
    bool fuse_activation_epilogue = true;
    /// CUDA targets: every graph input and output is declared this many bytes aligned (Halide's
    /// host_alignment; 0 = element size). Halide's PTX backend then stores 8-byte vectors whole
    /// (an element-aligned 2-float store is two scalar stores). Device pointers must be 16-byte
    /// aligned anyway (the kernels' 16-byte loads assume it); the C API checks them, and stages a
    /// misaligned host pointer through an aligned copy (codegen/runtime_glue).
    int buffer_alignment = 0;
    /// A constant matrix (rank 2, at least 32 KiB) whose rows are a multiple of 1 KiB long is
    /// stored with 64 bytes after each row. A GEMM's micro-kernel reads a strip of B one row per
    /// k step; rows 4 KiB apart all map to one L1 set (12 ways), so the strip never stays in L1
    /// (bench/DECISIONS.md#d25-gemm-weights-in-column-panels; block_matmul_weights now stores such
    /// a B in panels; the padding serves other constants).
    /// library_lowering turns it off for CUDA, whose libraries and device copies take dense weights.
    bool pad_constant_rows = true;
    /// A 2-D Conv of one group with constant float weights and a multiple of
    /// kConvWeightBlock output channels stores them as [C_out / 16][C_in][kH][kW][16] (oneDNN's
    /// OIhw16o); other multiples of 8 by 24 or 8 (three or one AVX2 vectors), so no block is
    /// partial: a tile of output channels, vectorized over them, then streams its weights
    /// sequentially. Stored [C_out][C_in][kH][kW], a 16-channel vector is 16 loads 4.6 KB apart
    /// (512x512 3x3); transposed, each step of the reduction jumps 2 KB and the prefetcher loses the
    /// stream (bench/DECISIONS.md#d30-conv-channel-tiles). Off for CUDA (cuDNN and the device
    /// copies take dense weights), like pad_constant_rows.
    bool block_conv_weights = true;
    /// A MatMul/Gemm whose B is a constant float [K, N] matrix (N a multiple of 16, at least 32)
    /// reads it from column panels [N/16][K][16]: a micro-kernel's strip of B, one row per k step,
    /// is then one sequential stream instead of a jump of a row (4 KiB and more) per step, which the
    /// prefetcher loses (bench/DECISIONS.md#d25-gemm-weights-in-column-panels). Such a B no longer
    /// needs pad_constant_rows. Off for CUDA, like the other layouts.
    bool block_matmul_weights = true;
};

/// Channels (columns) per block of LowerOptions::block_conv_weights and block_matmul_weights: a
/// whole AVX-512 vector of floats, two AVX2 vectors.
constexpr int kConvWeightBlock = 16;

/// A lowered graph.
struct LoweredPipeline {
    std::vector<LoweredFunc> funcs;          ///< producers before consumers
    std::vector<Halide::ImageParam> inputs;  ///< graph inputs, in graph order
    std::vector<std::string> input_names;    ///< graph names of inputs
    /// The Func reading each input (`<input>_read`, vars named by layout): inlined by Halide unless a
    /// schedule wraps it (`x.in(consumer) as x_tile`, e.g. to stage a row in GPU shared memory).
    std::vector<Halide::Func> input_funcs;
    std::vector<Shape> input_shapes;
    std::vector<DType> input_dtypes;
    std::vector<std::string> output_names;   ///< graph names of outputs, in graph order
    std::vector<std::string> output_funcs;   ///< the Func computing each output
    std::vector<Shape> output_shapes;
    std::vector<DType> output_dtypes;
    /// Dynamic shapes (graph/symbolic_shapes.h): the symbols, ranges and requirements of a graph
    /// compiled for every size (inactive otherwise); each input's and output's symbolic shape
    /// (empty for a static one); one int32 Param per symbol, which the caller sets from the input
    /// shapes before each run (bind_dynamic_sizes), and which every extent that moves reads.
    DynamicDims dynamic;
    std::vector<SymShape> input_syms, output_syms;
    std::map<std::string, Halide::Param<int32_t>> size_params;
    /// The Expr of a symbolic dim over size_params (a constant for a static one).
    Halide::Expr size_expr(const SymDim &d) const;
    /// C functions the pipeline's extern stages call ("loom_cublas_sgemm"): the artifact must
    /// define them (codegen/aot.cpp compiles codegen/cublas_gemm.h's source in).
    std::vector<std::string> extern_calls;
    /// Output shape (outermost first) of every extern stage, by Func name: those not listed as a
    /// LoweredFunc too, so that a cut (codegen/jit_segments.h) can pass their whole buffers on.
    std::map<std::string, Shape> extern_shapes;
    /// Funcs whose stores are non-temporal (the schedule's `stream_stores`, codegen/streaming_stores.h):
    /// a code generation choice Halide 14's Funcs cannot hold. Shared like the Funcs' schedules, so
    /// that apply_schedule records it through a const pipeline and every copy sees it.
    std::shared_ptr<std::set<std::string>> streaming_stores = std::make_shared<std::set<std::string>>();
    /// Graph outputs the schedule computes through a wrapper (`f.in() as w` on an output Func f:
    /// Halide's `f.compute_at(f.in(), x); f = f.in()` idiom): output Func name -> the wrapper, which
    /// the pipeline realizes in f's place. f is then an internal Func that can be computed per tile
    /// of the wrapper, so a reduction's initial value and its updates run in one loop nest (a GEMM's
    /// accumulators stay in registers) instead of two passes over the output. Shared and recorded
    /// by apply_schedule like streaming_stores.
    std::shared_ptr<std::map<std::string, Halide::Func>> output_wrappers =
        std::make_shared<std::map<std::string, Halide::Func>>();

    /// The Func called \p name, or nullptr.
    const LoweredFunc *find(const std::string &name) const;
    LoweredFunc *find(const std::string &name);
    /// Names of all Funcs (for "did you mean" and listings).
    std::vector<std::string> func_names() const;
    /// The Func realized for graph output \p k: its wrapper (output_wrappers) or its output Func.
    Halide::Func realized_output(size_t k) const;
    /// Halide name of realized_output(\p k).
    std::string realized_output_name(size_t k) const { return realized_output(k).name(); }
    /// The LoweredFunc whose values the realized Func \p name holds: the Func itself, or the
    /// output Func a wrapper stands for; nullptr for neither.
    const LoweredFunc *find_realized(const std::string &name) const;
    /// Whether computing Func \p name past the end of its rows (its innermost dim: a row rounded
    /// up to whole vectors) stays inside every buffer it reads: each path of producers from it
    /// ends at a padded input (the pointwise `<node>_pad` Func of a Conv or pool, which clamps its
    /// reads) before it reaches a graph input. A 1x1 conv reads its input directly, and a row
    /// rounded up to a vector read past the input (the inverted_residual fixture's 14-wide rows).
    bool rows_extend_safely(const std::string &name) const;

    /// The Halide pipeline over the realized outputs.
    Halide::Pipeline pipeline() const;
};

/// The value of an extent Expr (an RDom's): its constant, or with dynamic shapes its value at the
/// size Params' estimates (the representative sizes); -1 when it is neither.
int64_t representative_extent(const Halide::Expr &e);

/// The Halide type of a dtype (bool is Halide's Bool, one byte in buffers; bf16 is its 16 bits as
/// UInt(16), since Halide 14's BFloat(16) crashes its x86 code generator and has no CUDA
/// arithmetic; Loom has no u16 dtype, so a UInt(16) Expr always holds bf16 bits).
Halide::Type halide_type(DType t);

/// The bf16 bits (UInt(16)) of a float32 Expr, rounded to nearest even (NaN stays NaN).
Halide::Expr bf16_bits(Halide::Expr x);
/// The float32 that bf16 bits (UInt(16)) hold (exact).
Halide::Expr from_bf16_bits(Halide::Expr bits);

/// The high part of a float32 Expr for 3xTF32 (LowerOptions::gemm_split_tf32): x rounded to 10
/// stored mantissa bits (nearest, ties away; exact in TF32), or x itself where that rounding
/// overflows (within 2^-11 of FLT_MAX) or x is not finite.
Halide::Expr tf32_high(Halide::Expr x);
/// The low part x - tf32_high(x) (exact in float32), 0 for an infinite x and NaN for a NaN.
Halide::Expr tf32_low(Halide::Expr x);
/// The same two parts of a float, computed at compile time (a constant B): x == high + low.
float tf32_high(float x);
float tf32_low(float x);

/// Turns a graph identifier into a Halide/schedule identifier: "/encoder/fc1/Gemm" →
/// "encoder_fc1_gemm" (lower case, runs of non-alphanumerics become one '_', no leading digit).
std::string sanitize_name(const std::string &name);

/// The pure var names for a tensor of rank \p rank, outermost first (i; i,j; b,i,j; n,c,h,w;
/// n,c,d,h,w; d0…dN beyond).
std::vector<std::string> var_names_for_rank(int rank);

}  // namespace loom
