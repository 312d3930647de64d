/// \file
/// The step every compiling command shares: lower a prepared graph, pick its schedule by the one
/// precedence rule (schedule file, else auto-schedule, else default — resolve_schedule), and
/// apply it. Also the model file's hash that schedule headers record.
#pragma once

#include <CLI/CLI.hpp>
#include <Halide.h>

#include <string>
#include <vector>

#include "graph/graph.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"

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
};

/// The lowering for \p target: on CUDA, float GEMMs with constant weights call cuBLAS(Lt) and 2-D
/// convs cuDNN unless \p flags turn them off; elsewhere none (a --tf32 there is a UserError
/// naming \p command).
LowerOptions library_lowering(const Halide::Target &target, const LibraryFlags &flags, const std::string &command);

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
/// header is checked against. \p lower_options go to lower_graph (default: all off).
ScheduledModel schedule_model(const Graph &g, const std::string &spec, const Halide::Target &target,
                              const std::string &model_path, const LowerOptions &lower_options = {});

}  // namespace loom::cli
