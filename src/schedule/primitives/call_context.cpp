#include "schedule/primitives/call_context.h"

#include <algorithm>
#include <map>

#include "support/error.h"

namespace loom::sched_internal {

void CallCheck::fail(const std::string &msg, const SourceLoc *at) const {
    throw UserError(where(at && at->line > 0 ? *at : c.loc.line > 0 ? c.loc : st.loc, file) +
                    st.stage_name() + "." + c.str() + ": " + msg);
}

void CallCheck::warn(const std::string &msg) const {
    m.warnings.push_back(where(c.loc.line > 0 ? c.loc : st.loc, file) + st.stage_name() + "." + c.str() + ": " +
                         msg);
}

std::string CallCheck::ident(size_t i, const std::string &what) const {
    const ScheduleArg &a = c.args[i];
    if (!a.is_ident()) fail("argument " + std::to_string(i + 1) + " (" + a.str() + ") must be " + what, &a.loc);
    return a.name;
}

int64_t CallCheck::positive(size_t i, const std::string &what) const {
    const ScheduleArg &a = c.args[i];
    if (!a.is_int()) fail(what + " must be an integer, not '" + a.str() + "'", &a.loc);
    if (a.value <= 0) fail(what + " must be positive, not " + std::to_string(a.value), &a.loc);
    return a.value;
}

int64_t CallCheck::integer(size_t i, const std::string &what) const {
    const ScheduleArg &a = c.args[i];
    if (!a.is_int()) fail(what + " must be an integer, not '" + a.str() + "'", &a.loc);
    return a.value;
}

void CallCheck::tail(size_t i) const {
    const ScheduleArg &a = c.args[i];
    const auto &names = tail_strategy_names();
    bool ok = (a.kind == ScheduleArg::Kind::Tail || a.is_ident()) &&
              std::find(names.begin(), names.end(), a.name) != names.end();
    if (!ok) fail("'" + a.str() + "' is not a TailStrategy" + did_you_mean(a.name, names) + " valid: " + join(names), &a.loc);
}

int CallCheck::dim(size_t i) const {
    std::string name = ident(i, "a var of " + st.stage_name());
    StageModel &s = stage();
    int d = s.find(name);
    if (d < 0) {
        auto names = s.names_outer_first();
        std::string hint = did_you_mean(name, names);
        std::string extra;
        if (st.stage >= 0)
            for (const auto &p : f.vars)
                if (p == name) extra = " (" + name + " is a var of " + f.name + " but not of this update stage)";
        fail("unknown var '" + name + "'" + extra + (hint.empty() ? ";" : hint) + " vars of " + st.stage_name() +
                 ": " + join(names),
             &c.args[i].loc);
    }
    return d;
}

std::string CallCheck::fresh(size_t i, const std::set<std::string> &may_reuse) const {
    std::string name = ident(i, "a new var name");
    if (may_reuse.count(name)) return name;
    if (stage().find(name) >= 0 || std::find(f.vars.begin(), f.vars.end(), name) != f.vars.end())
        fail("var '" + name + "' already exists in " + st.stage_name() + "; pick a new name (vars now: " +
                 join(stage().names_outer_first()) + ")",
             &c.args[i].loc);
    if (name.find('.') != std::string::npos)
        fail("new var '" + name + "' may not contain '.'; dotted names are RDom dimensions", &c.args[i].loc);
    return name;
}

void CallCheck::race_check(int d) const {
    StageModel &s = stage();
    const DimModel &dm = s.dims[d];
    if (dm.race_free) return;
    std::vector<std::string> pure;
    for (const auto &x : s.dims)
        if (!x.rvar) pure.push_back(x.name);
    if (s.atomic && s.associative) return;
    if (s.atomic)
        fail(dm.name + " is a reduction var and the update of " + f.name + " is not associative, so atomic() cannot make " +
             c.name + " safe; valid: " + c.name + " over a pure var (" + join(pure) + ")");
    fail(dm.name + " is a reduction var that " + st.stage_name() + " does not write by, so " + c.name +
             " would race; valid: " + c.name + " over a pure var (" + join(pure) + "), rfactor(" + dm.name +
             ", <new var>) first, or atomic() before it if the update is associative",
         &c.args[0].loc);
}

void CallCheck::gpu_check() const {
    if (!has_gpu())
        fail("target " + m.target.to_string() +
             " has no GPU; GPU primitives need a GPU target (host-cuda-cuda_capability_80); on a CPU use "
             "parallel/vectorize");
}

void split_dims(StageModel &s, int d, const std::string &outer, const std::string &inner) {
    DimModel old = s.dims[d];
    DimModel in = old, out = old;
    in.name = in.halide_name = inner;
    out.name = out.halide_name = outer;
    s.dims[d] = in;
    s.dims.insert(s.dims.begin() + d + 1, out);
}

bool any_moves(const StageModel &s) {
    for (const auto &d : s.dims)
        if (d.moves) return true;
    return false;
}

const DimModel *find_dim(const StageModel &s, const std::string &n) {
    int d = s.find(n);
    return d < 0 ? nullptr : &s.dims[d];
}

Halide::VarOrRVar as_var(const DimModel &d) {
    return d.rvar ? Halide::VarOrRVar(Halide::RVar(d.halide_name)) : Halide::VarOrRVar(Halide::Var(d.halide_name));
}

CallApply::CallApply(Model &m, const Model &final_model, const LoweredPipeline &p, AppliedSchedule &out,
                     const ScheduleStatement &st, const PrimitiveCall &c, const FuncModel &before)
    : m(m), final_model(final_model), p(p), out(out), st(st), c(c), before(before), n(c.args.size()),
      f(func_named(st.func)), stage(st.stage < 0 ? Halide::Stage(f) : f.update(st.stage)) {}

Halide::Func CallApply::func_named(const std::string &name) const {
    auto it = out.funcs.find(name);
    if (it != out.funcs.end()) return it->second;
    for (size_t k = 0; k < p.inputs.size() && k < p.input_funcs.size(); k++)  // `x.in(...)` on an input
        if (p.inputs[k].name() == name) return p.input_funcs[k];
    throw InternalError("schedule apply: no func " + name);
}

Halide::VarOrRVar CallApply::var(size_t i) const {
    const ScheduleArg &a = c.args[i];
    const StageModel &now = m.find(st.func)->stages[st.stage + 1];
    if (const DimModel *d = find_dim(now, a.name)) return as_var(*d);
    if (const DimModel *d = find_dim(before.stages[st.stage + 1], a.name)) return as_var(*d);
    throw InternalError("schedule apply: no var " + a.name + " in " + st.stage_name());
}

Halide::TailStrategy CallApply::tail(size_t i) const {
    static const std::map<std::string, Halide::TailStrategy> by_name = {
        {"RoundUp", Halide::TailStrategy::RoundUp},
        {"GuardWithIf", Halide::TailStrategy::GuardWithIf},
        {"Predicate", Halide::TailStrategy::Predicate},
        {"PredicateLoads", Halide::TailStrategy::PredicateLoads},
        {"PredicateStores", Halide::TailStrategy::PredicateStores},
        {"ShiftInwards", Halide::TailStrategy::ShiftInwards},
        {"Auto", Halide::TailStrategy::Auto}};
    Halide::TailStrategy t = i < n ? by_name.at(c.args[i].name) : Halide::TailStrategy::Auto;
    // Dynamic shapes: a split of a loop whose extent moves must hold at every extent, those
    // smaller than its factor included; only a guard does (ShiftInwards needs the extent to reach
    // the factor, RoundUp writes past an output's end).
    bool moving = moves(0) || (c.name == "tile" && moves(1));
    bool rounds_up = t == Halide::TailStrategy::RoundUp || (t == Halide::TailStrategy::Auto && st.stage >= 0);
    if (specialized && guard_round_ups && moving && rounds_up) {
        out.guarded_for_sizes++;
        return Halide::TailStrategy::GuardWithIf;
    }
    bool guard = !specialized && moving;
    if (guard && (t == Halide::TailStrategy::Auto || t == Halide::TailStrategy::RoundUp ||
                  t == Halide::TailStrategy::ShiftInwards)) {
        out.guarded_for_sizes++;
        return Halide::TailStrategy::GuardWithIf;
    }
    return t;
}

bool CallApply::moves(size_t k) const {
    if (k >= n || !c.args[k].is_ident()) return false;
    const DimModel *d = find_dim(before.stages[st.stage + 1], c.args[k].name);
    return d && d->moves;
}

Halide::Expr CallApply::expr(size_t i) const {
    if (narrow_loops && c.name == "split" && i == 3 && narrow(c.args[0].name)) return Halide::Expr(1);
    if (narrow_loops && c.name == "tile") {
        size_t core = n - (c.args.back().is_int() ? 0 : 1), first = core == 8 ? 6 : 4;
        if ((i == first && narrow(c.args[0].name)) || (i == first + 1 && narrow(c.args[1].name))) return Halide::Expr(1);
    }
    if (vector_loops) {  // a factor of the vectorized moving loop: at most the copy's lanes
        size_t core = n - (n > 0 && !c.args.back().is_int() ? 1 : 0), first = core == 8 ? 6 : 4;
        bool of_vector_loop = (c.name == "split" && i == 3 && in_vector_loops(c.args[0].name)) ||
                              (c.name == "tile" && ((i == first && in_vector_loops(c.args[0].name)) ||
                                                    (i == first + 1 && in_vector_loops(c.args[1].name)))) ||
                              ((c.name == "vectorize" || c.name == "unroll") && i == 1 &&
                               in_vector_loops(c.args[0].name));
        if (of_vector_loop) return Halide::Expr((int)std::min<int64_t>(c.args[i].value, vector_lanes));
    }
    if (split_factors && c.name == "split" && i == 3) {
        auto it = split_factors->find(c.args[0].name);
        if (it != split_factors->end()) return Halide::Expr((int)it->second);
    }
    return Halide::Expr((int)c.args[i].value);
}

Halide::LoopLevel CallApply::level(const std::string &g, const std::string &var) const {
    auto it = final_model.funcs.find(g);
    internal_check(it != final_model.funcs.end(), "schedule apply: no func ", g);
    for (const auto &s : it->second.stages)
        if (const DimModel *d = find_dim(s, var)) return Halide::LoopLevel(func_named(g), as_var(*d));
    throw InternalError("schedule apply: no var " + var + " in " + g);
}

}  // namespace loom::sched_internal
