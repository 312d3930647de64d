/// \file
/// Dynamic shapes: a schedule written for the representative size, specialized at run time for
/// the sizes where its own tails are valid. Applied to a model compiled for every size, each split
/// of a loop whose extent moves is GuardWithIf (correct at every extent; bench/DECISIONS.md#d65),
/// which cost the transformer fixture about 2x. A stage whose moving splits are plain loop calls
/// (split, tile, vectorize, unroll, parallel, reorder) gets a Halide specialization taken when every
/// moving loop split in its kernel (its root Func and the stages computed inside it) is at least as
/// long as the schedule needs (its representative extent, or the product of its split factors when
/// that is smaller) and every RoundUp split (Auto's tail for an update's pure var) of an output or a
/// root Func divides its extent: one condition per kernel. That branch keeps the tails as written,
/// as a compile for one size does; other sizes run the guarded general case. A kernel whose
/// condition holds at every size the declared ranges and the model allow keeps the written tails
/// with no guarded copy: half the code to compile.
#pragma once

#include <Halide.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// One stage's specialization: when it is taken, and that condition as text for the report.
struct SizeSpecialization {
    Halide::Expr condition;
    std::string text;
    /// The stage's Func is computed inside a full tile of a specialized Func there: its whole
    /// moving loops unroll and vectorize as written (a constant extent).
    bool whole_loops = false;
    /// The condition holds at every size a run can have (the dims' declared lower ends, raised to
    /// what the model's own requirements allow; DynamicDims::least_sizes): the stage takes the
    /// written tails with no specialization and no guarded copy to compile.
    bool always = false;
    /// With \p always: a RoundUp split of a moving loop (the divisions the condition would test)
    /// is guarded instead, in the one copy of the stage.
    bool guard_round_ups = false;
    /// Further conditions, each a copy of the stage taken in this order after \p condition: the
    /// remainders of a written GuardWithIf tile (`size_batch % 6 == 1`), where Halide's simplifier
    /// folds the last tile's row guards (bench/DECISIONS.md#d128).
    std::vector<std::pair<Halide::Expr, std::string>> more;
    /// Per entry of \p more (or none): the factors that copy splits its loops by instead of the
    /// written ones, by the split var (`i` -> 3 where the schedule writes `split(i, io, ii, 6)`): the
    /// short-rows copy of a kernel whose row tiles are longer than the rows (bench/DECISIONS.md#d144-dynamic-shapes-short-rows-copy).
    std::vector<std::map<std::string, int64_t>> more_factors;
    /// Whether \p condition takes a copy with the tails as written. Not for a kernel whose one moving
    /// split is its rows' RoundUp tile (`size_seq % 8 == 0`): there the guarded copy's full tiles,
    /// which Halide's loop partitioning runs free of guards, are those tails already, so that copy
    /// would be compiled twice (bench/DECISIONS.md#d224-dynamic-shapes-no-written-copy-of-a-divided-tile).
    bool written_copy = true;
    /// Index in \p more of the kernel's narrow copy (-1: none): there every split of a loop whose
    /// extent moves is by 1 and no such loop is vectorized or unrolled (the loops of \p narrow_loops),
    /// so no tail is left to guard, and no loop runs in parallel (too little work to wake the pool). It serves the sizes below the kernel's tiles, where the guarded
    /// copy would run its vectorized tiles as guarded scalar lanes (bench/DECISIONS.md#d155-dynamic-shapes-narrow-copy).
    int narrow = -1;
    /// The stage's loops whose root var moves with the sizes, as the schedule names them.
    std::set<std::string> narrow_loops;
    /// Index in \p more -> lanes, of the kernel's narrow copies in narrower vectors: the narrow
    /// copy's loops (\p narrow_loops split by 1, nothing parallel) but those of \p vector_loops, whose
    /// splits and vectors are by at most those lanes; each is taken where the kernel's vectorized
    /// moving loop reaches its lanes, before the narrow copy
    /// (bench/DECISIONS.md#d233-dynamic-shapes-narrow-copies-in-narrower-vectors).
    std::map<int, int64_t> narrow_vector_lanes;
    /// The stage's loops whose root is the kernel's one vectorized moving var (a conv's columns).
    std::set<std::string> vector_loops;
};

/// Where every kernel's loops are long enough for the splits the schedule writes: the conjunction
/// of the kernels' "extent >= n" terms that do not hold at every size (undefined when none is
/// left), and its text ("size_seq >= 16, ..."). Divisibility terms are not in it.
struct LongEnough {
    Halide::Expr condition;
    std::string text;
};

/// The specializations of \p s on the dynamic pipeline \p p, by (schedule Func name, stage: -1 for
/// the pure definition); empty for a static pipeline or a GPU target. \p long_enough, when given,
/// receives where every kernel's loops are long enough. With \p assume_long_enough the caller runs
/// this pipeline only there (a second plan serves the other sizes; codegen/jit.h): every kernel
/// then takes its written tails in one copy, its RoundUp splits guarded, as where the declared
/// ranges prove its loops long enough (bench/DECISIONS.md#d107-dynamic-shapes-small-size-plan).
std::map<std::pair<std::string, int>, SizeSpecialization> plan_size_specializations(
    const Schedule &s, const LoweredPipeline &p, const Halide::Target &target, LongEnough *long_enough = nullptr,
    bool assume_long_enough = false);

/// How many copies a stage whose moving rows the schedule tiles with GuardWithIf gets, where the
/// planned size has at most 4 of its tiles: the first for the planned size's remainder
/// (`size_batch % 6 == 4`), the next for the smallest sizes by value (`size_batch == 1`, then 2 …);
/// and at most how many a kernel whose rows are shorter than its shortest tile gets, one per
/// smallest size by value, its tile the whole rows (bench/DECISIONS.md#d220-dynamic-shapes-smallest-rows-by-value);
/// a kernel whose tile must divide its rows gets one for every size below its tile (kMostCopiesBelowADividedTile).
/// 3 by default, 0: none (`--tail-copies`). Each folds the last tile's row guards at its sizes and
/// costs compile time (bench/DECISIONS.md#d128, #d136).
int &tail_remainder_copies();

/// What the condition text of a copy for one smallest size ends with.
constexpr const char *kWholeRowsNote = " (rows as one tile)";

/// A kernel whose row tile must divide the rows (a RoundUp split of a root Func) and is at most this
/// long gets a copy of one tile of the whole rows for every size below the tile, whatever
/// tail_remainder_copies() says (when it is not 0): it has no half tile to take those sizes.
constexpr int64_t kMostCopiesBelowADividedTile = 8;

/// What a narrow copy's condition text ends with (SizeSpecialization::narrow).
constexpr const char *kNarrowCopyNote = " (moving loops split by 1, none vectorized)";

/// What the condition text of a narrow copy in narrower vectors ends with, before its lanes and ")".
constexpr const char *kNarrowVectorsNote = " (moving loops split by 1 but the vectorized one, in vectors of ";

/// The condition text's ending of a narrow copy in vectors of \p lanes.
std::string narrow_vectors_note(int64_t lanes);

/// The fewest lanes, and the most copies, of a kernel's narrow copies in narrower vectors
/// (SizeSpecialization::narrow_vector_lanes): half the natural vector, then a quarter.
constexpr int64_t kLeastNarrowVectorLanes = 4;
constexpr int kMostNarrowVectorCopies = 2;

/// The kinds of a kernel's copies a measurement leaves out (`loom bench --generic-without KIND`), to
/// weigh each kind's compile time against what it gains at run time: "half-tile" (D144),
/// "by-value" (one tile of the whole rows per smallest size, D220 and D223), "narrow" (D155),
/// "narrow-vectors" (the narrow copies in narrower vectors, D233), "undivided" (the copies of a Func
/// whose RoundUp tile does not divide its planned extent, D234),
/// "remainder" (the tail copies of a written GuardWithIf tile, D128). Empty by default.
std::set<std::string> &size_copies_left_out();

/// The names size_copies_left_out() knows.
const std::set<std::string> &size_copy_kinds();

/// Sets size_copies_left_out() for its lifetime (one bench row), restoring it on every exit path.
class SizeCopiesLeftOutScope {
public:
    explicit SizeCopiesLeftOutScope(std::set<std::string> kinds) : keep_(size_copies_left_out()) {
        size_copies_left_out() = std::move(kinds);
    }
    ~SizeCopiesLeftOutScope() { size_copies_left_out() = keep_; }
    SizeCopiesLeftOutScope(const SizeCopiesLeftOutScope &) = delete;
    SizeCopiesLeftOutScope &operator=(const SizeCopiesLeftOutScope &) = delete;

private:
    std::set<std::string> keep_;
};

/// Sets tail_remainder_copies() for its lifetime (a bench row or a test comparing counts in one
/// process), restoring the previous count on every exit path; a negative count leaves it as is.
class TailCopiesScope {
public:
    explicit TailCopiesScope(int copies) : keep_(tail_remainder_copies()) {
        if (copies >= 0) tail_remainder_copies() = copies;
    }
    ~TailCopiesScope() { tail_remainder_copies() = keep_; }
    TailCopiesScope(const TailCopiesScope &) = delete;
    TailCopiesScope &operator=(const TailCopiesScope &) = delete;

private:
    int keep_;
};

/// Whether primitive \p name changes one stage's loops (applied to the specialization too) rather
/// than the Func (compute_at, store_in … applied once).
bool changes_stage_loops(const std::string &name);

}  // namespace loom
