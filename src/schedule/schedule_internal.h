/// \file
/// Private to src/schedule: the model of a pipeline's loop structure that validation updates call
/// by call, and that apply reuses to name Halide Vars/RVars. Not a public header.
#pragma once

#include <Halide.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lower/lowered.h"
#include "schedule/schedule.h"
#include "schedule/size_specialization.h"

namespace loom::sched_internal {

/// One loop dimension of a stage.
struct DimModel {
    std::string name;         ///< as a schedule names it ("x", "xo", "r.x", "k")
    std::string halide_name;  ///< as Halide matches it ("x", "xo", "r$x", "k$x")
    bool rvar = false;
    bool race_free = true;    ///< false for an RVar the update does not write by (ImpureRVar)
    int64_t extent = -1;      ///< the loop's extent where the shapes fix it, else -1
    /// The loop's extent moves with the input sizes (dynamic shapes; \p extent is then the
    /// representative one): its splits are applied GuardWithIf, correct at every extent.
    bool moves = false;
    /// The inner RVar of a GuardWithIf split that does not divide its extent: the points the last
    /// outer iteration keeps (0: not such an RVar). An rfactor of it hands this to its new var.
    int64_t rvar_guard_keep = 0;
    /// A var that Halide 14 may run unguarded where it is unrolled (guard_lost_unroll_problem): the
    /// var an rfactor made of such an RVar, its points kept in the last round; a var split off it,
    /// how many of its iterations the last round keeps (0: not such a var).
    int64_t guarded_keep = 0;
    std::string guarded_split;  ///< the split that made it ("r.x: 1000 = 15 x 64 + 40"), for messages
};

/// One stage (pure definition or update) of a Func.
struct StageModel {
    std::vector<DimModel> dims;  ///< innermost first, as Halide keeps them
    bool atomic = false;
    bool gpu_mapped = false;
    bool cpu_parallel = false;    ///< parallel/vectorize used (for the CPU-on-GPU check)
    SourceLoc cpu_parallel_loc;
    std::string cpu_parallel_call;
    bool associative = true;      ///< update provably associative (rfactor, atomic)
    bool scheduled = false;       ///< some stage primitive applied (Halide's "touched" schedule)
    SourceLoc unscheduled_loc;    ///< where unscheduled() marked it (line 0: not marked)
    int find(const std::string &n) const;
    std::vector<std::string> names_outer_first() const;
};

/// Where a Func is computed.
struct Placement {
    enum Kind { Default, Inline, Root, At } kind = Default;
    std::string func, var;
    SourceLoc loc;
};

/// One Func, pipeline's or made by rfactor/in.
struct FuncModel {
    std::string name;
    Halide::Func func;                 ///< undefined for Funcs a schedule creates (until applied)
    std::vector<std::string> vars;     ///< pure vars, outermost first
    std::vector<StageModel> stages;    ///< [0] pure, [k + 1] update k
    std::vector<std::string> consumers;
    bool is_output = false;
    bool created = false;
    bool is_input = false;  ///< a graph input (its reading Func): only `in` applies to it
    bool is_extern = false; ///< an extern stage (LoweredFunc::is_extern): nothing applies to it
    std::string rfactor_of;  ///< the Func whose update an rfactor made this one from, and reads it
    Placement place;
    std::string stage_label(int stage) const;  ///< "f" or "f.update(k)"
};

/// The whole pipeline as validation sees it.
struct Model {
    std::map<std::string, FuncModel> funcs;
    std::vector<std::string> order;   ///< pipeline order, created Funcs appended
    std::vector<std::string> inputs;  ///< ImageParam names (for prefetch)
    Halide::Target target;
    std::vector<std::string> warnings;  ///< legal but likely wrong (check_statement appends)
    const LoweredPipeline *pipeline = nullptr;  ///< what build_model read (it outlives the model)
    FuncModel *find(const std::string &n);
    std::vector<std::string> names() const { return order; }
};

/// Builds the model of \p p (dims read from the Halide Funcs, names as LoweredFunc gives them).
Model build_model(const LoweredPipeline &p, const Halide::Target &t);

/// "k" → "k$x", "r.x" → "r$x": the Halide name of an RVar as a schedule writes it.
std::string rvar_halide_name(const std::string &sched_name);

/// Checks and records one statement in \p m (throws UserError); with \p finish, the checks that
/// need the whole schedule (compute_at locations, cycles, GPU mapping) run in finish_checks.
void check_statement(Model &m, const ScheduleStatement &st, const std::string &file);
/// The prepass: records every Func's final placement (compute_at/inline/root) before checking.
void record_placements(Model &m, const Schedule &s);
/// Checks needing the final model: compute_at/store_at/compute_with locations, cycles, GPU
/// mapping on GPU targets.
void finish_checks(Model &m, const Schedule &s);

/// loom::plan_size_specializations (schedule/size_specialization.h) given \p final_model, the
/// model of \p p with every statement of \p s checked (the one apply_schedule builds anyway).
std::map<std::pair<std::string, int>, SizeSpecialization> plan_size_specializations(
    const Schedule &s, const LoweredPipeline &p, const Halide::Target &target, Model &final_model,
    LongEnough *long_enough, bool assume_long_enough);

/// Why \p producer cannot be computed at \p consumer.\p var under \p m's placements ("" = legal).
std::string compute_at_problem(Model &m, const std::string &producer, const std::string &consumer,
                               const std::string &var);
/// The legal compute_at locations of \p producer: "ln_out.{i, j}", …, "root".
std::vector<std::string> legal_locations(Model &m, const std::string &producer);

/// The vars of every stage of \p f, outermost first, each once.
std::vector<std::string> all_dims(const FuncModel &f);

/// Why output \p f cannot be computed inside another Func, and how to wrap it so that it can.
std::string output_at_root(const std::string &f);

/// \p v's items separated by \p sep.
std::string join(const std::vector<std::string> &v, const std::string &sep = ", ");

/// "file:line:col: " for a location (falls back to \p file).
std::string where(const SourceLoc &loc, const std::string &file);

}  // namespace loom::sched_internal
