/// \file
/// Private to src/schedule: what a primitive family's functions (families.h) receive. A CallCheck
/// is one call being validated against the loop model (schedule_internal.h), with the argument
/// checks every family shares, each failing with one UserError that names the call; a CallApply is
/// one call being applied with Halide's API, with its arguments resolved to Halide Vars, RVars,
/// Exprs and TailStrategies. Not a public header.
#pragma once

#include <Halide.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_internal.h"

namespace loom::sched_internal {

/// One primitive call of a statement, being validated: the model it updates and the checks that
/// read its arguments.
class CallCheck {
public:
    CallCheck(Model &m, const ScheduleStatement &st, const std::string &file, FuncModel &f,
              const PrimitiveCall &c)
        : m(m), st(st), file(file), f(f), c(c), n(c.args.size()) {}

    Model &m;
    const ScheduleStatement &st;
    const std::string &file;  ///< the schedule's path, for messages
    FuncModel &f;             ///< the statement's Func
    const PrimitiveCall &c;
    size_t n;                 ///< c.args.size()

    /// The stage the statement schedules (f's pure definition or update st.stage).
    StageModel &stage() const { return f.stages[st.stage + 1]; }
    bool has_gpu() const { return m.target.has_gpu_feature(); }

    /// Throws "file:line:col: f.call(…): msg", at \p at when it has a position.
    [[noreturn]] void fail(const std::string &msg, const SourceLoc *at = nullptr) const;
    /// Appends "file:line:col: f.call(…): msg" to the model's warnings.
    void warn(const std::string &msg) const;

    /// Argument \p i as a name; fails saying it must be \p what.
    std::string ident(size_t i, const std::string &what) const;
    /// Argument \p i as an integer > 0 (\p what names it in the message).
    int64_t positive(size_t i, const std::string &what) const;
    /// Argument \p i as an integer.
    int64_t integer(size_t i, const std::string &what) const;
    /// Fails unless argument \p i names a TailStrategy.
    void tail(size_t i) const;
    /// Argument \p i as a dim of the stage (its index, innermost first); fails with the valid names.
    int dim(size_t i) const;
    /// Argument \p i as a name the primitive introduces: not an existing dim (unless \p may_reuse).
    std::string fresh(size_t i, const std::set<std::string> &may_reuse = {}) const;
    /// Fails if a parallel loop over dim \p d would race (a reduction var the update does not
    /// write by, unless the stage is atomic and associative).
    void race_check(int d) const;
    /// Fails unless the target has a GPU.
    void gpu_check() const;
};

/// Splits dim \p d of \p s into \p inner (at d) and \p outer (at d + 1), as Halide's split does.
void split_dims(StageModel &s, int d, const std::string &outer, const std::string &inner);

/// Whether a loop of \p s moves with the input sizes (dynamic shapes): what a var split away
/// from its name is taken to do.
bool any_moves(const StageModel &s);
/// The dim of \p s named \p n, or nullptr.
const DimModel *find_dim(const StageModel &s, const std::string &n);
/// The Halide Var or RVar that \p d names.
Halide::VarOrRVar as_var(const DimModel &d);

/// One primitive call of a statement, being applied to the pipeline's Halide Funcs.
class CallApply {
public:
    CallApply(Model &m, const Model &final_model, const LoweredPipeline &p, AppliedSchedule &out,
              const ScheduleStatement &st, const PrimitiveCall &c, const FuncModel &before);

    Model &m;                  ///< the model after this call (names the vars it made)
    const Model &final_model;  ///< the model after the whole schedule (names compute_at's levels)
    const LoweredPipeline &p;
    AppliedSchedule &out;
    const ScheduleStatement &st;
    const PrimitiveCall &c;
    const FuncModel &before;   ///< the statement's Func as the model had it before this call
    size_t n;                  ///< c.args.size()
    Halide::Func f;            ///< the statement's Func
    Halide::Stage stage;       ///< the stage the statement schedules
    /// Dynamic shapes: \p stage is the specialization for large enough sizes
    /// (schedule/size_specialization.h), where the tails stay as written.
    bool specialized = false;
    /// In that specialization, whole moving loops unroll and vectorize as written (the Func is
    /// computed inside full tiles of a specialized consumer).
    bool whole_loops = false;
    /// In a stage taken as written at every size, a split of a moving loop that rounds it up is
    /// guarded (no size is known to divide by its factor).
    bool guard_round_ups = false;
    /// In a specialization: the factor each `split` of a var named here takes instead of the
    /// written one (SizeSpecialization::more_factors); nullptr: as written.
    const std::map<std::string, int64_t> *split_factors = nullptr;
    /// In a kernel's narrow copy (SizeSpecialization::narrow): the stage's loops whose root var
    /// moves, which split by 1 and are neither vectorized nor unrolled (and no loop of the copy runs
    /// in parallel); nullptr elsewhere.
    const std::set<std::string> *narrow_loops = nullptr;
    /// In a narrow copy in narrower vectors (SizeSpecialization::narrow_vector_lanes): the loops of
    /// the kernel's vectorized moving var, which keep their splits, vectors and unrolling, each factor
    /// at most \p vector_lanes, rather than being narrowed; nullptr elsewhere.
    const std::set<std::string> *vector_loops = nullptr;
    int64_t vector_lanes = 0;
    /// Whether loop \p name is one of narrow_loops (and not of vector_loops).
    bool narrow(const std::string &name) const {
        return narrow_loops && narrow_loops->count(name) && !(vector_loops && vector_loops->count(name));
    }
    /// Whether loop \p name is one of vector_loops.
    bool in_vector_loops(const std::string &name) const { return vector_loops && vector_loops->count(name); }

    /// A Func by its schedule name: the pipeline's, one rfactor/in made, or a graph input's.
    Halide::Func func_named(const std::string &name) const;
    /// Argument \p i as the Var or RVar it names in the stage (before or after this call).
    Halide::VarOrRVar var(size_t i) const;
    /// Argument \p i as a TailStrategy (Auto when there is no argument \p i).
    Halide::TailStrategy tail(size_t i) const;
    /// Whether argument \p k names a loop whose extent moves with the input sizes (dynamic shapes).
    bool moves(size_t k) const;
    /// Argument \p i, an integer, as an Expr.
    Halide::Expr expr(size_t i) const;
    /// The LoopLevel of Func \p g at \p var (a var of any stage of g in the final model).
    Halide::LoopLevel level(const std::string &g, const std::string &var) const;
};

}  // namespace loom::sched_internal
