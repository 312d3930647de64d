/// \file
/// The reduction family: how an update stage reduces (rfactor, atomic) or that it keeps Halide's
/// default loops on purpose (unscheduled). rfactor makes a new Func, the intermediate that
/// reduces over the RVars it does not keep.

#include <algorithm>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"

namespace loom::sched_internal {

void validate_rfactor(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    FuncModel &f = k.f;
    StageModel &s = k.stage();
    std::vector<std::string> rv, newv;
    std::vector<std::string> rnames;
    for (const auto &d : s.dims)
        if (d.rvar) rnames.push_back(d.name);
    for (size_t i = 0; i < k.n; i += 2) {
        int d = k.dim(i);
        if (!s.dims[d].rvar)
            k.fail(c.args[i].name + " is a pure var; rfactor takes reduction vars of " + k.st.stage_name() + ": " +
                       join(rnames),
                   &c.args[i].loc);
        rv.push_back(c.args[i].name);
        newv.push_back(k.fresh(i + 1));
    }
    if (!s.associative)
        k.fail("the update of " + f.name + " is not associative, so it cannot be factored; "
               "valid: schedule it serially or parallelize over pure vars");
    if (k.m.find(c.as_name)) k.fail("a Func named '" + c.as_name + "' already exists; name the new Func differently");
    // The intermediate: pure vars of f plus the new vars; its update reduces over the RVars not
    // preserved; f's update keeps the preserved ones (Halide's rfactor).
    FuncModel in;
    in.name = c.as_name;
    in.created = true;
    in.vars = f.vars;
    for (const auto &v : newv) in.vars.push_back(v);
    StageModel pure;
    for (auto it = in.vars.rbegin(); it != in.vars.rend(); ++it) {
        pure.dims.push_back({*it, *it, false, true});
        // f's pure vars move as they do in f's pure stage (dynamic shapes).
        const DimModel *d = find_dim(f.stages[0], *it);
        pure.dims.back().moves = d ? d->moves : any_moves(f.stages[0]);
    }
    StageModel upd;
    for (size_t i = 0; i < newv.size(); i++) {
        // The new var spans the RVar it replaces, and inherits a dropped guard's risk.
        const DimModel &from = s.dims[s.find(rv[i])];
        DimModel nv{newv[i], newv[i], false, true, from.extent};
        nv.guarded_keep = from.rvar_guard_keep;
        nv.moves = from.moves;
        nv.guarded_split = from.guarded_split;
        upd.dims.push_back(nv);
        for (auto &d : pure.dims)
            if (d.name == newv[i]) d.extent = from.extent, d.moves = from.moves;
    }
    StageModel kept;
    for (const auto &d : s.dims) {
        bool preserved = std::find(rv.begin(), rv.end(), d.name) != rv.end();
        if (d.rvar && !preserved) upd.dims.push_back(d);
        if (!d.rvar) upd.dims.push_back(d);
        if (!d.rvar || preserved) kept.dims.push_back(d);
    }
    kept.associative = s.associative;
    s = kept;
    in.stages = {pure, upd};
    in.consumers = {f.name};
    in.rfactor_of = f.name;
    // An earlier intermediate of f's update is read by this one now (a tree of rfactors).
    for (auto &[name, g] : k.m.funcs)
        if (g.rfactor_of == f.name && g.consumers == std::vector<std::string>{f.name}) {
            g.consumers = {in.name};
            g.rfactor_of = in.name;
        }
    k.m.funcs[in.name] = in;
    k.m.order.push_back(in.name);
}

void validate_atomic(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    if (k.st.stage < 0) k.fail("atomic applies to update stages: `" + k.f.name + ".update(k).atomic()`");
    if (k.n == 1 && !(c.args[0].is_int() && (c.args[0].value == 0 || c.args[0].value == 1)))
        k.fail("the argument is override_associativity_test: 0 or 1");
    StageModel &s = k.stage();
    s.atomic = true;
    if (k.n == 1 && c.args[0].value == 1) s.associative = true;
}

void validate_unscheduled(CallCheck &k) {
    if (k.st.stage < 0)
        k.fail("unscheduled() marks an update stage left at Halide's default loops: `" + k.f.name +
               ".update(k).unscheduled()`; a pure stage needs no mark");
    if (k.stage().scheduled)
        k.fail("unscheduled() says the stage has no schedule; it cannot share `" + k.f.name + ".update(" +
               std::to_string(k.st.stage) + ")` with other primitives (drop one)");
    k.stage().unscheduled_loc = k.c.loc.line > 0 ? k.c.loc : k.st.loc;
}

void apply_rfactor(CallApply &a) {
    std::vector<std::pair<Halide::RVar, Halide::Var>> pairs;
    for (size_t i = 0; i < a.n; i += 2) {
        const DimModel *d = find_dim(a.before.stages[a.st.stage + 1], a.c.args[i].name);
        pairs.emplace_back(Halide::RVar(d->halide_name), Halide::Var(a.c.args[i + 1].name));
    }
    Halide::Func intermediate = a.stage.rfactor(pairs);
    a.out.funcs[a.c.as_name] = intermediate;
    a.m.find(a.c.as_name)->func = intermediate;
}

void apply_atomic(CallApply &a) { a.stage.atomic(a.n == 1 && a.c.args[0].value == 1); }

void apply_unscheduled(CallApply &a) { a.stage.unscheduled(); }

}  // namespace loom::sched_internal
