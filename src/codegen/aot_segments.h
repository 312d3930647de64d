/// \file
/// An artifact of a cut pipeline (jit_segments.h), host or CUDA: each segment is compiled as a Halide
/// function of its own (`<fn>_s<k>`), and a generated C++ function `<fn>_argv(void **args)` runs
/// them in order. It is the entry the C API glue calls for an uncut pipeline (runtime_glue.h), with
/// the same arguments (every graph input, then every graph output, as halide_buffer_t pointers), so
/// the glue does not know whether the model was cut. The buffers that cross a cut (dense, 64-byte
/// aligned) are allocated on a thread's first call and kept for its later ones, as the JIT keeps
/// them per model: concurrent calls from several threads share nothing. A model compiled for every
/// size takes its sizes after the inputs (every segment too), and its chain computes each crossing
/// buffer's shape at the call's sizes, replacing a kept buffer that is too small. In a CUDA artifact a
/// crossing buffer's data stays on the device: the producing pipeline leaves it there (Halide does
/// not copy outputs back), the next one reads it in place, and the chain returns its device memory
/// to Halide's allocation cache when the call ends (so a captured CUDA graph replays the same
/// addresses, as it does for a pipeline's own intermediate buffers).
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "codegen/jit_segments.h"
#include "lower/lowered.h"

namespace loom {

/// Halide arguments of segment \p k of \p sp: every graph input of \p p (a segment that reads
/// none of one still takes it, so every segment has one calling convention), the size Params of a
/// model compiled for every size, then the boundaries it reads, in SegmentedPipeline::boundaries order.
std::vector<Halide::Argument> segment_arguments(const LoweredPipeline &p, const SegmentedPipeline &sp, size_t k);

/// The storage each crossing buffer of \p sp uses (index per boundary; -1 for a graph output, which
/// lives in the caller's buffer): boundaries whose lives (from the segment that computes one to the
/// last that reads it) do not overlap share one, sized for the largest at each call. A training
/// step's backward crosses its cuts with many buffers that die a segment later; each in storage of
/// its own, the kept buffers grew with the number of cuts.
std::vector<int> crossing_storage(const SegmentedPipeline &sp);

/// Name of segment \p k's Halide function for the pipeline function \p fn.
std::string segment_function(const std::string &fn, size_t k);

/// C++ source defining `extern "C" int <fn>_argv(void **args)` over the segments' `_argv`
/// entries (compiled against Halide's runtime header). A failure to allocate a crossing buffer is
/// reported through halide_error (the glue's last_error shows it) and returns
/// halide_error_code_out_of_memory; a segment's nonzero result stops the chain and is returned.
std::string segment_chain_source(const LoweredPipeline &p, const SegmentedPipeline &sp, const std::string &fn);

}  // namespace loom
