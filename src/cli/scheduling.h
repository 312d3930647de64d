/// \file
/// The step every compiling command shares: lower a prepared graph, pick its schedule by the one
/// precedence rule (schedule file, else auto-schedule, else default — resolve_schedule), and
/// apply it. Also the model file's hash that schedule headers record.
#pragma once

#include <CLI/CLI.hpp>
#include <Halide.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/jit.h"

#include "graph/graph.h"
#include "graph/passes.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/size_specialization.h"

namespace loom::cli {

/// Hex sha256 of a file's bytes; UserError when it cannot be read.
std::string file_sha256(const std::string &path);

/// Loom's cost model for \p target: the GPU auto-scheduler for CUDA targets, the CPU one otherwise.
AutoscheduleFn autoscheduler_for(const Halide::Target &target);

/// Which nodes a CUDA target hands to libraries: the flags `compile` and `autoschedule` share, so
/// that a schedule written by one names the Funcs the other lowers.
struct LibraryFlags {
    bool no_cublas = false, no_cudnn = false, tf32 = false;
    std::string precision;           ///< --precision fp32|tf32|bf16|fp16 ("": fp32, or tf32 with --tf32)
    bool unfused_epilogues = false;  ///< LowerOptions::fuse_activation_epilogue off
    bool split_tf32 = false;         ///< LowerOptions::gemm_split_tf32 (--split-tf32)
    bool f16_attention = false;      ///< LowerOptions::attention_f16 (--f16-attention)
};

/// The lowering for \p target: on CUDA, float GEMMs with constant weights call cuBLAS(Lt) and 2-D
/// convs cuDNN unless \p flags turn them off; elsewhere none (a --tf32 there is a UserError
/// naming \p command).
LowerOptions library_lowering(const Halide::Target &target, const LibraryFlags &flags, const std::string &command);
/// Under --precision fp32 on CUDA, LowerOptions::conv_nhwc (and channels_last_depthwise_filters)
/// by the graph's conv mix: on when convs with a kernel over 1x1 and one group hold under
/// kFp32NhwcMaxSpatialShare of the multiply-adds of the convs cuDNN runs (depthwise ones are
/// Halide's and do not count). cuDNN runs 3x3 and 7x7 FP32 convs with NCHW FMA kernels between
/// layout conversions, while a net of 1x1 and depthwise convs gains from channels-last Halide
/// kernels (bench/DECISIONS.md#d117-cuda-tf32-nhwc-convs, #d123-cuda-fp32-nhwc-by-conv-mix).
/// Other precisions and targets: \p lo unchanged.
void choose_fp32_conv_layout(const Graph &g, LowerOptions &lo);
/// The largest share of spatial convs' multiply-adds at which FP32 convs go channels-last
/// (choose_fp32_conv_layout): MobileNetV3-large's is 3%, ResNet-50's 48%, ResNet-18's 99%.
constexpr double kFp32NhwcMaxSpatialShare = 0.25;
/// The share choose_fp32_conv_layout weighs: multiply-adds of the 2-D convs with a kernel over 1x1
/// and one group over those of every 2-D conv other than a depthwise one (0 when there is none).
double spatial_conv_share(const Graph &g);

/// How prepare_graph fuses attention for \p target lowered with \p lo: Loom's Funcs on the CPU,
/// cuDNN's fused attention on CUDA in BF16, or in TF32 with --f16-attention
/// (LowerOptions::attention_extern), else none (CUDA keeps
/// the batched cuBLAS products around a softmax kernel).
AttentionFusion attention_fusion(const Halide::Target &target, const LowerOptions &lo);

/// The slack with which prepare_model runs fuse_linear_exact_gelu (graph/gelu_recognition.h) for
/// \p target lowered with \p lo (exact_gelu_region_slack), or -1 when it does not: it does for CUDA
/// GEMMs on cuBLAS with fused epilogues, at a precision whose rounding lets the exact GELU run as
/// cuBLASLt's tanh-form epilogue (tanh_gelu_within_rounding).
double linear_exact_gelu(const Halide::Target &target, const LowerOptions &lo);

/// The precision \p flags ask for: --precision, else tf32 with --tf32, else fp32; UserError for an
/// unknown name or a --tf32 that contradicts --precision.
Precision library_precision(const LibraryFlags &flags, const std::string &command);

/// Adds --no-cublas, --no-cudnn, --tf32 and --precision to \p cmd.
void add_library_flags(CLI::App *cmd, LibraryFlags &flags);

/// A lowered, scheduled model, ready to compile.
struct ScheduledModel {
    LoweredPipeline pipeline;
    Schedule schedule;       ///< as resolved (with defaults filled in)
    AppliedSchedule applied;
    std::vector<std::string> warnings;  ///< header mismatches, risky splits: for the CLI to print
};

/// Lowers \p g and applies the schedule named by \p spec ("eager" | "inline" | "auto" | a path).
/// \p model_path names the model in an emitted schedule's header and gives the hash a file's
/// header is checked against. \p lower_options go to lower_graph (default: all off). \p autofn
/// plans "auto" in place of the cost model for \p target on this machine (a fixed machine's).
ScheduledModel schedule_model(const Graph &g, const std::string &spec, const Halide::Target &target,
                              const std::string &model_path, const LowerOptions &lower_options = {},
                              const AutoscheduleFn &autofn = nullptr);

/// A model compiled for every size (dynamic shapes), scheduled by schedule_compiled_for_every_size.
struct EverySizeModel {
    ScheduledModel main;  ///< planned at the representative sizes
    /// Planned at the declared ranges' small end, for the sizes where main's loops are too short for
    /// its splits (main then compiles no guarded copies); null where main serves every size.
    std::shared_ptr<ScheduledModel> short_sizes;
    LongEnough long_enough;  ///< where main runs (with short_sizes)
    std::string short_plan;  ///< the input shapes short_sizes was planned at ("x=2x1x64")
    /// "sizes where not (…) run a plan made for x=2x1x64" for the reports; "" without short_sizes.
    std::string describe() const;
};

/// schedule_model for \p g prepared for every size. With \p small_size_plan, under the cost model
/// ("auto", CPU; `--small-size-plan`), where the
/// plan for the representative sizes has kernels whose loops are too short for their splits at
/// some sizes, a second plan is made at the declared ranges' small end (the symbols those kernels
/// test at DynamicDims::least_sizes, rounded up to the power of two their representative size is a
/// multiple of, the others at their representative size; \p prepare_at
/// prepares the model for every size, planned at the input flags it is given, "x=2x1x64"). That
/// plan serves those sizes; the first compiles no guarded copies
/// (bench/DECISIONS.md#d107-dynamic-shapes-small-size-plan). \p autofn plans in place of the
/// cost model for \p target (a fixed machine's, in tests).
EverySizeModel schedule_compiled_for_every_size(const Graph &g,
                                                const std::function<Graph(const std::vector<std::string> &)> &prepare_at,
                                                const std::string &spec, const Halide::Target &target,
                                                const std::string &model_path, bool small_size_plan,
                                                const AutoscheduleFn &autofn = nullptr);

/// The JIT model of \p m: main's, serving the short sizes with short_sizes' where there is one.
std::unique_ptr<JitModel> compile_every_size(const EverySizeModel &m, const Halide::Target &target);

}  // namespace loom::cli
