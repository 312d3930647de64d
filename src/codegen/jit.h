/// \file
/// JIT compilation of a lowered (and scheduled) pipeline, and running it on loom::Tensors:
/// the engine of `loom run`, of the op tests and of the CPU benchmarks. Compiled models live in
/// an in-memory cache keyed by (graph, schedule, target), so a benchmark never compiles twice.
#pragma once

#include <Halide.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/jit_segments.h"
#include "codegen/streaming_stores.h"
#include "graph/graph.h"
#include "lower/lowered.h"

namespace loom {

/// The JIT target of this machine (Halide's host detection; HL_JIT_TARGET overrides it), less
/// what runnable_here() removes.
Halide::Target host_target();

/// \p t without features this CPU lacks although Halide 14's detection reports them (AMD Zen 4
/// reported as Sapphire Rapids, which implies AVX512-FP16): for targets that run on this machine.
Halide::Target runnable_here(Halide::Target t);

/// A lowered pipeline compiled once with the JIT, run as often as wanted. A large CPU model is cut
/// into several Pipelines at compute_root boundaries and they compile in parallel (jit_segments.h);
/// the segments then run one after the other, the buffers that cross a cut allocated once (for a
/// model compiled for every size, again whenever the sizes change). A
/// segment that streams stores (stream_stores) compiles through Loom's StreamingJit, since
/// Halide's JIT cannot.
class JitModel {
public:
    /// Compiles \p lowered (already scheduled: the schedule lives in its Funcs) for \p target, in
    /// at most \p max_segments Pipelines of any size (0: default_segment_limits; 1: one Pipeline).
    /// UserError carrying Halide's message when Halide rejects the schedule. Halide's compile-time
    /// "guaranteed to fail an assertion at runtime" warnings are not printed: the run that fails
    /// reports it, as one message; other Halide warnings still go to stderr.
    JitModel(LoweredPipeline lowered, const Halide::Target &target = host_target(), int max_segments = 0);

    /// Runs the model on \p inputs (by graph input name; converted to the graph dtype if they
    /// differ) and returns every graph output by name, in its graph dtype. A model compiled for
    /// every size (graph/symbolic_shapes.h) takes inputs of any size its ranges allow, one compile. Outputs are poisoned
    /// (NaN for floats, 0x5A bytes otherwise) before the run, so unwritten elements show.
    /// UserError naming a missing input or one of the wrong shape, or Halide's runtime message.
    std::map<std::string, Tensor> run(const std::map<std::string, Tensor> &inputs);

    /// Runs once on \p inputs for timing and returns the run's milliseconds. The outputs go to
    /// buffers the model keeps between timed runs, poisoned only when first allocated: run()
    /// validates, this measures the steady state of a model run in a loop.
    double time_run(const std::map<std::string, Tensor> &inputs);

    /// The outputs of the last time_run, in lowered().output_names order (empty before one).
    const std::vector<Tensor> &timed_outputs() const {
        return ran_short_ ? short_->timed_outputs() : timing_outputs_;
    }

    /// time_run \p reps times on the same inputs (after one warm-up run); each run's milliseconds.
    std::vector<double> time_runs(const std::map<std::string, Tensor> &inputs, int reps);

    /// Sends what the compiled code prints through Halide's runtime (halide_print: the sampling
    /// profiler's report after each pipeline run when the target has Target::Profile, and
    /// print()/debug output) to \p sink, appended, instead of stderr; nullptr restores stderr.
    /// measure/profile.h reads the profiler's reports this way.
    void capture_runtime_prints(std::string *sink) { print_sink_ = sink; }

    /// Dynamic shapes: \p short_sizes runs the sizes where \p long_enough (over this model's size
    /// Params) is false. This model was scheduled for the sizes where it holds, its kernels' loops
    /// long enough for their splits (apply_schedule's assume_long_enough: no guarded copies), and
    /// \p short_sizes, planned at the declared ranges' small end, for every size
    /// (bench/DECISIONS.md#d107-dynamic-shapes-small-size-plan).
    void serve_short_sizes_with(std::unique_ptr<JitModel> short_sizes, Halide::Expr long_enough);
    /// The model that runs \p inputs: this one, or the one serve_short_sizes_with gave.
    JitModel &model_for(const std::map<std::string, Tensor> &inputs);
    /// The model serve_short_sizes_with gave, or nullptr.
    const JitModel *short_sizes_model() const { return short_.get(); }

    /// Pipelines the model was compiled as (1: uncut).
    int segments() const { return (int)segmented_.segments.size(); }
    /// Vector stores compiled non-temporal (the schedule's stream_stores; codegen/streaming_stores.h).
    int streamed_stores() const;
    /// Seconds the JIT compile took (wall clock; segments compile in parallel), with the model for
    /// short sizes when there is one.
    double compile_seconds() const { return compile_s_ + (short_ ? short_->compile_seconds() : 0.0); }
    /// CPU seconds the JIT compile took over its segments (each thread's CPU time: a shared
    /// machine's wall clock counts other processes' time too), with the model for short sizes.
    double compile_cpu_seconds() const {
        return compile_cpu_s_ + (short_ ? short_->compile_cpu_seconds() : 0.0);
    }
    /// Milliseconds the last run() took (the realize call only: no conversions).
    double last_run_ms() const { return ran_short_ ? short_->last_run_ms() : last_run_ms_; }
    const LoweredPipeline &lowered() const { return lowered_; }
    const Halide::Target &target() const { return target_; }

private:
    /// The output shapes of a run on \p inputs (output_shapes_): the compiled ones, or, for a model
    /// compiled for every size, the symbolic ones at the sizes read from the inputs, whose size
    /// Params it sets. UserError naming an input or dim the model does not accept.
    void bind_sizes(const std::map<std::string, Tensor> &inputs);
    /// Binds inputs (converted into \p keep where the dtype differs) to the ImageParams.
    void bind_inputs(const std::map<std::string, Tensor> &inputs, std::vector<Tensor> &keep);
    /// One Tensor per graph output in \p outs, every byte poisoned.
    void allocate_poisoned(std::vector<Tensor> &outs) const;
    /// Realizes into \p outs (one per graph output, wrapped as Halide buffers); sets last_run_ms_.
    void realize_into(std::vector<Tensor> &outs);
    /// Cuts (as the constructor says) and compiles the segments.
    void compile(int max_segments);
    /// Allocates each buffer that crosses a cut (dense, the Func's shape) and binds it to the
    /// ImageParam its readers read.
    void allocate_boundaries();
    /// A model compiled for every size: (re)allocates each crossing buffer whose shape at the
    /// sizes of the run being made (sizes_) differs from the one it has.
    void size_boundaries();

    LoweredPipeline lowered_;
    Halide::Target target_;
    SegmentedPipeline segmented_;
    std::vector<Halide::Buffer<>> boundary_buffers_;  ///< per boundary; undefined for graph outputs
    /// Per segment: the segment compiled by Loom's JIT when it streams stores, else null (Halide's).
    std::vector<std::unique_ptr<StreamingJit>> streaming_;
    double compile_s_ = 0;
    double compile_cpu_s_ = 0;
    double last_run_ms_ = 0;
    std::vector<Tensor> timing_outputs_;  ///< time_run's outputs, reused between timed runs
    std::string *print_sink_ = nullptr;   ///< capture_runtime_prints
    std::vector<Shape> output_shapes_;    ///< of the run being made (bind_sizes)
    std::map<std::string, int64_t> sizes_;  ///< the symbols' sizes of the run being made (bind_sizes)
    std::unique_ptr<JitModel> short_;       ///< serve_short_sizes_with
    Halide::Expr long_enough_;              ///< where this model runs rather than short_
    std::map<std::string, int64_t> picked_sizes_;  ///< the sizes model_for decided last
    bool picked_short_ = false;                    ///< and whether short_ runs them
    bool ran_short_ = false;                       ///< short_ made the last run or time_run
};

/// A stable hash of everything that changes the code Loom makes for a graph: nodes, attributes,
/// value types and shapes, inputs/outputs and initializer bytes (16 hex digits).
std::string graph_fingerprint(const Graph &g);

/// Key of the JIT cache.
struct JitKey {
    std::string graph;     ///< graph_fingerprint()
    std::string schedule;  ///< the schedule's text (printer output), "" for none
    std::string target;    ///< Halide::Target::to_string()
    bool operator<(const JitKey &o) const {
        return std::tie(graph, schedule, target) < std::tie(o.graph, o.schedule, o.target);
    }
};

/// The cached model for \p key, calling \p build (lower + schedule + construct) only on a miss.
/// The reference stays valid until jit_cache_clear().
JitModel &jit_cache_get(const JitKey &key, const std::function<std::unique_ptr<JitModel>()> &build);
/// Number of models in the cache.
size_t jit_cache_size();
/// Drops every cached model.
void jit_cache_clear();

}  // namespace loom
