/// \file
/// Cutting a scheduled pipeline into several Halide Pipelines at compute_root boundaries, so that a
/// large model compiles as several smaller pipelines, in parallel (DESIGN.md: "Where compile time
/// demands it, lowering may cut the graph into several Pipelines at compute_root boundaries;
/// schedule files do not change when it does"). Halide lowers a pipeline in passes whose time grows
/// with the whole statement (vectorize, interleave detection, loop partitioning and loop-invariant
/// code motion), and one pipeline compiles on one thread (bench/DECISIONS.md#d51-jit-segments).
///
/// A cut is legal between two groups of root-computed Funcs when nothing after it is computed
/// inside, stored inside, fused with or wrapped around anything before it: every value that
/// crosses it is then a whole buffer (a compute_root Func the graph made, a global `in()` wrapper
/// of one, or a library stage's output, with no other wrappers) of exactly the Func's shape. A root that a split rounds past
/// its extents, or that such a group reads, never crosses.
/// Each segment is a deep copy of the scheduled Func graph whose calls to the crossing Funcs read
/// ImageParams instead; its outputs are the graph outputs it computes and the crossing Funcs that
/// later segments read. The schedule is the same Halide schedule, applied once to the whole graph.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lower/lowered.h"

namespace loom {

/// One Pipeline of a cut model.
struct PipelineSegment {
    Halide::Pipeline pipeline;
    /// What the pipeline realizes, in its output order: Func names (graph output Funcs, and the
    /// crossing Funcs that later segments read).
    std::vector<std::string> outputs;
    /// For each output, its index in SegmentedPipeline::boundaries, or -1 for a graph output that
    /// no later segment reads.
    std::vector<int> boundary_of_output;
    /// For each output that is a graph output, its index in LoweredPipeline::output_funcs; else -1.
    std::vector<int> graph_output_of_output;
    /// Boundaries this segment reads (indices into SegmentedPipeline::boundaries).
    std::vector<int> reads;
    int funcs = 0;  ///< Funcs it holds (for reports and tests)
};

/// A value that crosses a cut: computed by one segment, read by later ones through an ImageParam.
struct SegmentBoundary {
    std::string func;            ///< the crossing Func's name
    int producer = -1;           ///< segment that computes it
    /// Its index in LoweredPipeline::output_funcs when it is also a graph output (later segments
    /// then read the caller's output buffer), else -1.
    int graph_output = -1;
    Halide::ImageParam param;    ///< what later segments read it through
    Halide::Type type;
    /// The Func's extents, Halide order (innermost first): the buffer is dense over [0, extent) in
    /// every dimension, and both sides of the cut are compiled for exactly that shape.
    std::vector<int> extents;
    /// Dimensions from the innermost in memory outwards: the producer's reorder_storage, kept
    /// across the cut (Li2018 stores channels innermost, and its schedule's reader of a buffer
    /// written NCHW ran slower; bench/DECISIONS.md#d51-jit-segments), and the identity for a graph
    /// output, whose layout the caller's buffer fixes.
    std::vector<int> storage_order;
    std::vector<int> strides;  ///< per dimension (Halide order), dense in storage_order
    /// A model compiled for every size (graph/symbolic_shapes.h): the Func's extents as symbolic
    /// dims, Halide order; both sides of the cut are compiled for a dense buffer of that shape at
    /// the run's sizes (extents and strides above are the representative ones). Empty when the
    /// shape is fixed.
    SymShape sym_extents;

    /// The extents and strides (Halide order) at \p sizes (symbol -> size): the fixed ones when
    /// the shape does not move.
    void shape_at(const std::map<std::string, int64_t> &sizes, std::vector<int> &extents_at,
                  std::vector<int> &strides_at) const;
};

/// A scheduled LoweredPipeline as consecutive segments (one segment: uncut).
struct SegmentedPipeline {
    std::vector<PipelineSegment> segments;
    std::vector<SegmentBoundary> boundaries;
};

/// Where the cuts would go: root groups in execution order, each with its Funcs, and the positions
/// (between group k-1 and k) where a cut is legal. Exposed for tests and `LOOM_DEBUG` output.
struct CutPlan {
    std::vector<std::string> roots;        ///< root-computed Funcs, producers first
    std::vector<int> weight;               ///< Funcs each root's group holds (its compile cost)
    std::vector<bool> legal_before;        ///< legal_before[k]: a cut between roots k-1 and k
    std::vector<int> cuts;                 ///< chosen cut positions, ascending
};

/// Funcs a segment holds at least: below that a pipeline's fixed compile cost (LLVM module set-up,
/// runtime linking) outweighs what cutting saves.
constexpr int kMinFuncsPerSegment = 12;

/// Plans at most \p max_segments segments of roughly equal weight for the scheduled \p p (its
/// Funcs' loop levels are locked, as lowering would). Fewer when legal cuts are missing or the
/// model is small (\p min_weight Funcs per segment at least).
CutPlan plan_cuts(const LoweredPipeline &p, int max_segments, int min_weight);

/// For every Func the scheduled \p p computes (`in()` wrappers included), the root Func whose loop
/// nest computes it: itself when computed at root, else the root of the Func it is computed at; ""
/// when inlined. The kernels a profile (measure/profile.h) adds Func times up into.
std::map<std::string, std::string> kernel_roots(const LoweredPipeline &p);

/// One line per segment of \p plan: its root Funcs in order ("pipeline 2 of 5 (14 computed Funcs): conv3,
/// relu3, …"), for LOOM_DEBUG=1 and tests.
std::string describe_cuts(const CutPlan &plan);

/// Builds the segments of \p plan (no cut: one segment, the whole pipeline as is).
SegmentedPipeline cut_pipeline(const LoweredPipeline &p, const CutPlan &plan);

/// Who runs the segments of a cut model.
enum class SegmentRunner {
    Jit,       ///< the JIT (codegen/jit.h): host buffers between the pipelines, CPU targets only
    Artifact,  ///< an artifact's generated chain (codegen/aot_segments.h), which also keeps CUDA
               ///< pipelines' crossing buffers on the device and passes them to library stages
};

/// What a compile of \p p for \p target uses: planned within default_segment_limits (or in at most
/// \p max_segments Pipelines of any size when it is positive, where cutting is possible at all)
/// and built, the Func graph analysed once. LOOM_DEBUG=1 prints the cut (describe_cuts).
SegmentedPipeline segment_pipeline(const LoweredPipeline &p, const Halide::Target &target, int max_segments = 0,
                                   SegmentRunner runner = SegmentRunner::Jit);

/// Runs \p work(0) … \p work(n-1) on as many threads at once as the machine has (the segments'
/// compiles); every call runs, then the first exception, in index order, is rethrown. Given \p cost
/// (one estimate per call), the costliest calls start first, so that a long one does not start
/// last while the other threads idle.
void run_in_parallel(size_t n, const std::function<void(size_t)> &work, const std::vector<int> &cost = {});

/// The compile-cost estimate of each segment of \p segs (its Funcs), for run_in_parallel.
std::vector<int> segment_costs(const SegmentedPipeline &segs);

/// How far a pipeline is cut.
struct SegmentLimits {
    int max_segments = 1;                      ///< Pipelines at most
    int min_funcs = kMinFuncsPerSegment;       ///< Funcs a segment holds at least
};

/// Pipelines the JIT cuts a large CPU model into, on any machine.
constexpr int kJitSegments = 16;

/// The limits for \p p on \p target when \p runner runs the segments: kJitSegments for the JIT,
/// up to twice the hardware threads (8 to 16) for an artifact, kMinFuncsPerSegment Funcs each, or with LOOM_PIPELINES=N N Pipelines whatever
/// their size (1 turns cutting off). The JIT keeps GPU pipelines and pipelines with extern stages
/// whole, whatever LOOM_PIPELINES says (it has no device buffers between pipelines); artifacts
/// (`loom compile`, host and CUDA) cut them too. A LOOM_PIPELINES that is not a positive number is
/// a UserError on every target.
SegmentLimits default_segment_limits(const LoweredPipeline &p, const Halide::Target &target,
                                     SegmentRunner runner = SegmentRunner::Jit);

}  // namespace loom
