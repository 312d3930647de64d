/// \file
/// Ahead-of-time compilation of a lowered, scheduled pipeline into a self-contained artifact folder
/// (`loom compile`), for the host CPU or for CUDA (`host-cuda-cuda_capability_80`: PTX that the
/// driver compiles for the GPU it finds). The folder holds
///
///     lib<name>.a       Halide's pipeline object + Halide's runtime + the C API glue
///     lib<name>.so      the same, linked as a shared object (depends only on libc and libdl, and
///                       on libcublas/libcublasLt when the pipeline has cuBLAS extern stages,
///                       libcudnn/libcudart when it has cuDNN ones)
///     <name>.h          the C API (runtime_glue.h describes it)
///     <name>_halide.h   Halide's own header of the pipeline function (`<name>_halide(...)`); for a
///                       model cut into several pipelines, the declaration of the chain
///                       `<name>_halide_argv` that runs them (aot_segments.h)
///     manifest.txt      name, target, inputs and outputs (what tools/loom_run reads)
///     schedule.sched    the schedule the code was compiled with (when given)
///
/// plus whatever the caller writes into it (the CLI adds data/<input>.npy and
/// data/expected_<output>.npy). Weights are baked into the library as constant Buffers.
/// The folder is written under a temporary name and renamed when complete; an existing folder is
/// replaced only with `force`. Compiling for CUDA needs no GPU: it runs on the build machines.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lower/lowered.h"

namespace loom {

/// How to compile.
struct AotOptions {
    std::string name;           ///< C identifier of the model (prefix of the API); sanitised
    bool force = false;         ///< replace an existing output folder
    std::string schedule_text;  ///< written as schedule.sched when not empty
    std::string cxx = "g++";    ///< compiler for the glue and the shared object (LOOM_CXX overrides)
    /// CUDA: Halide Func name → register budget of its kernels (the schedule's gpu_max_registers;
    /// codegen/ptx_register_caps.h).
    std::map<std::string, int> max_registers;
    /// A budget that spills is raised to the smallest one that does not (the auto-scheduler's
    /// budgets are a rule of thumb), instead of only warned about (a hand schedule's).
    bool raise_spilling_budgets = false;
    /// When set, receives (before `extra` runs) the linker flags of the libraries the extern
    /// stages call (CUDA's, with their rpath; "" for none): a caller that links lib<name>.a into
    /// its own shared object (the training step's trainer) adds them.
    std::string *link_libraries = nullptr;
    /// Host targets: (input index, output index) pairs of one shape and type whose output the
    /// caller would like to write over the input (a training step's parameter and its next value).
    /// Each pipeline's lowered statement is checked (codegen/in_place_outputs.h) and \p in_place,
    /// when set, receives one verdict per pair before `extra` runs (all false on a CUDA target).
    std::vector<std::pair<size_t, size_t>> in_place_candidates;
    std::vector<bool> *in_place = nullptr;
    /// Pipelines the model is cut into at most (0: as default_segment_limits says; 1: uncut).
    int max_pipelines = 0;
};

/// What was written (absolute paths inside the final folder).
struct AotArtifact {
    std::string dir, name, static_lib, shared_lib, header, halide_header, manifest;
    double halide_seconds = 0;  ///< time Halide took to compile the pipeline
    /// Halide pipelines the model was compiled as: a large host model is cut as the JIT cuts it
    /// (aot_segments.h; LOOM_PIPELINES caps it), host and CUDA alike.
    int pipelines = 1;
    /// Things worth a user's attention that did not stop the build (a register budget that
    /// spills, with the budget that would not), for the CLI to print.
    std::vector<std::string> warnings;
};

/// The Halide target for a `--target` name: "host" (this machine), "cuda"
/// (host-cuda-cuda_capability_80), or any Halide target string (a CUDA one that names no
/// capability gets cuda_capability_80, as "cuda"). UserError naming the valid ones.
Halide::Target aot_target(const std::string &name);

/// Compiles \p lowered (already scheduled) for \p target into \p out_dir. \p extra, if given, is
/// called with the temporary folder before it is renamed, to add files. UserError when \p out_dir
/// exists without force, when Halide rejects the schedule, or when the glue cannot be compiled.
AotArtifact compile_aot(const LoweredPipeline &lowered, const Halide::Target &target, const std::string &out_dir,
                        const AotOptions &options,
                        const std::function<void(const std::string &tmp_dir)> &extra = nullptr);

/// The manifest text of an artifact (one `key value…` line each: `name`, `target`, `library`,
/// `input <name> <dtype> <d0> <d1> …`, `output …`).
std::string aot_manifest(const LoweredPipeline &lowered, const Halide::Target &target, const std::string &name);

}  // namespace loom
