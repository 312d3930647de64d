/// \file
/// Whole-model CUDA graphs for a CUDA artifact's `m_run_device` (part of the glue source that
/// codegen/runtime_glue.h generates).
///
/// Why: a batch-1 network is a hundred small kernels and library calls. Halide's runtime spends
/// host time on each launch (context push/pop, module lookup, the pipeline's own bounds and buffer
/// code), and the host, not the GPU, set a network's time (bench/DECISIONS.md#d54-cuda-graph-replay).
/// Once a model is called twice in a row with the same pointers, its whole run is captured into one
/// CUDA graph and later calls with those pointers launch the graph on the legacy default stream:
/// same ordering as a direct run, a few microseconds of host time.
///
/// How, within Halide 14's runtime hooks (no runtime code is replaced):
/// - `halide_set_cuda_get_stream`: while a capture is under way on the calling thread, Halide's
///   kernels (and the cuBLAS/cuDNN extern stages, which ask Halide for the stream) go to the
///   process's capture stream; otherwise to the legacy default stream, as before.
/// - `halide_set_custom_get_library_symbol`: Halide's `cuMemAlloc`/`cuMemFree` go through two
///   wrappers. Memory allocated during a capture belongs to graphs: it is recorded, and a later
///   `cuMemFree` of it (Halide trims its free list of cached allocations) is deferred until no
///   graph is left or being captured; a capture starts after a device sync, as Halide may free
///   buffers of earlier direct runs during it. Allocation inside a capture is made legal by switching the thread to relaxed
///   capture mode around the real call.
/// - Before instantiating, the memsets with which cuBLASLt zeroes its workspace counters before
///   each of Hopper's TF32/BF16 GEMM kernels (one per call, between two kernels) become one memset
///   at the graph's root, where the cuBLAS stage gave each captured call a workspace slot of its own
///   (`loom_cublaslt_private_workspace`; bench/DECISIONS.md#d163-cuda-graph-library-memsets-merged).
/// - Graphs are used only when the capture holds at least two nodes (one kernel gains nothing); a
///   model whose pointers change after a capture recaptures, up to four times, then runs directly;
///   any capture or launch failure falls back to a direct run, never to an error.
/// - `LOOM_CUDA_GRAPHS=0` in the environment, or `m_set_cuda_graphs(model, 0)`, turns it off.
///
/// The chunk expects, before it, the glue's anonymous-namespace helpers (`Model`, `load_driver`,
/// `acquire_context`, the driver typedefs) and defines `cuda_graph_*` functions the C API calls.
#pragma once

#include <string>

namespace loom {

/// C++ source of the graph part of the glue (inside the glue's anonymous namespace, under
/// `#if LOOM_CUDA`).
std::string cuda_graph_glue_source();

}  // namespace loom
