/// \file
/// Graph outputs written over graph inputs. A training step reads each parameter and writes its
/// next value as an output; handing the pipeline the parameter's own buffer for both holds the
/// parameters once instead of twice (bench/DECISIONS.md#d218-parameters-updated-in-place). That is
/// correct only when no read of the input sees an element the output has already overwritten,
/// which depends on the order Halide gives the loop nests: so it is decided on the lowered
/// statement of each pipeline (a custom lowering pass that records and changes nothing), for every
/// pipeline of a cut model (codegen/aot_segments.h).
#pragma once

#include <Halide.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lower/lowered.h"

namespace loom {

/// An input buffer and an output buffer of one shape and type that may share storage (Halide
/// buffer names: the input's ImageParam, the output Func the pipeline realizes).
struct InPlacePair {
    std::string input, output;
};

/// What one lowered statement says about a pair.
struct InPlaceFacts {
    bool reads_input = false;     ///< it loads the input (or names its buffer past the entry checks)
    bool writes_output = false;   ///< it holds the output's production
    /// With writes_output: every read of the input outside the production comes before it and in
    /// no loop around it, and inside it the input is read only by the stores of the output, each at
    /// the element it writes, by a production that stores each element once (no store of the output
    /// reads the output). Then writing the output into the input's buffer changes no value read.
    bool safe = false;
    std::string why;  ///< the first reason it is not safe ("" when it is, or when it does not write it)
};

/// The facts of \p pair in the lowered statement \p s (for tests; the pass calls it).
InPlaceFacts in_place_facts(const Halide::Internal::Stmt &s, const InPlacePair &pair);

/// Makes each output of \p pairs (input index, output index of \p p) realized after every
/// root-computed Func that reads its input: Halide orders a pipeline's root Funcs depth first from
/// its outputs, following only the calls, so a training step's update of a layer's weight could be
/// realized before the input gradient that reads the weight (and then could not be written over
/// it). The output's definition gets `+ 0 · reader(0, …)` for each such reader that does not itself
/// depend on the output: a call that orders the realizations and that Halide's simplifier removes
/// (x · 0 is 0 to it), so the computed values are the same. Returns how many calls were added.
int order_reads_before_outputs(const LoweredPipeline &p, const std::vector<std::pair<size_t, size_t>> &pairs);

/// Decides, for a model compiled as one or several pipelines, which pairs may share storage.
/// `watch` adds the recording pass to each pipeline before it is compiled (the pipelines may
/// compile in parallel); `verdicts` reads the result once all were.
class InPlaceCheck {
  public:
    explicit InPlaceCheck(std::vector<InPlacePair> pairs);
    /// Adds the pass to \p pipeline, the \p index-th (in execution order) of \p count.
    void watch(Halide::Pipeline &pipeline, size_t index, size_t count);
    /// Per pair: true when the pipeline that writes the output found it safe and no later pipeline
    /// reads the input. False for every pair when some pipeline was not lowered.
    std::vector<bool> verdicts() const;
    /// Per pair, why it may not share ("" where it may), for LOOM_DEBUG and tests.
    std::vector<std::string> reasons() const;

  private:
    struct State {
        std::mutex mutex;
        std::vector<InPlacePair> pairs;
        std::vector<std::vector<InPlaceFacts>> facts;  // [pipeline][pair]
        std::vector<bool> lowered;                     // [pipeline]
    };
    std::shared_ptr<State> state_;
};

}  // namespace loom
