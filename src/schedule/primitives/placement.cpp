/// \file
/// The placement family: where a Func is computed and stored (compute_root, compute_inline,
/// compute_at, store_root, store_at, compute_with). Whether a compute_at location is legal depends
/// on where every other Func goes, so those checks run in finish, after the placement prepass.

#include <algorithm>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"
#include "support/error.h"

namespace loom::sched_internal {

void validate_compute_inline(CallCheck &k) {
    if (k.f.stages.size() > 1)
        k.fail(k.f.name + " has update stages and cannot be inlined; valid: compute_root(), compute_at(…)");
    if (k.f.is_output) k.fail(k.f.name + " is an output and cannot be inlined; valid: compute_root()");
}

void validate_compute_at(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    k.ident(0, "a func");
    k.ident(1, "a var");
    if (k.f.is_output) k.fail(output_at_root(k.f.name));
    if (!k.m.find(c.args[0].name)) {
        std::string hint = did_you_mean(c.args[0].name, k.m.names());
        k.fail("unknown func '" + c.args[0].name + "'" + (hint.empty() ? "" : hint) + (hint.empty() ? "; " : " ") +
                   "legal: " + join(legal_locations(k.m, k.f.name)),
               &c.args[0].loc);
    }
}

void finish_compute_at(CallCheck &k) {
    std::string why = compute_at_problem(k.m, k.st.func, k.c.args[0].name, k.c.args[1].name);
    if (!why.empty()) k.fail(why);
}

void validate_compute_with(CallCheck &k) {
    std::string g = k.ident(0, "a func");
    k.ident(1, "a var");
    if (!k.m.find(g)) k.fail("unknown func '" + g + "'" + did_you_mean(g, k.m.names()), &k.c.args[0].loc);
    if (g == k.f.name) k.fail("a Func cannot be computed with itself", &k.c.args[0].loc);
}

void finish_compute_with(CallCheck &k) {
    const std::string &g = k.c.args[0].name, &var = k.c.args[1].name;
    auto dims = all_dims(*k.m.find(g));
    if (std::find(dims.begin(), dims.end(), var) == dims.end())
        k.fail(g + " has no var '" + var + "'" + did_you_mean(var, dims) + "; vars: " + join(dims));
}

void apply_compute_root(CallApply &a) { a.f.compute_root(); }

void apply_compute_inline(CallApply &a) { a.f.compute_inline(); }

void apply_compute_at(CallApply &a) { a.f.compute_at(a.level(a.c.args[0].name, a.c.args[1].name)); }

void apply_store_root(CallApply &a) { a.f.store_root(); }

void apply_store_at(CallApply &a) { a.f.store_at(a.level(a.c.args[0].name, a.c.args[1].name)); }

void apply_compute_with(CallApply &a) {
    const DimModel *d = nullptr;
    for (const auto &s : a.final_model.funcs.at(a.c.args[0].name).stages)
        if (!d) d = find_dim(s, a.c.args[1].name);
    a.stage.compute_with(Halide::Stage(a.func_named(a.c.args[0].name)), as_var(*d));
}

}  // namespace loom::sched_internal
