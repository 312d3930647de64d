/// \file
/// The wrapper family: `f.in([consumer]) as w` makes a new Func w that copies f, for all of f's
/// consumers or for one, so that w can be scheduled apart from f (a tile of an input staged in
/// fast memory, an output computed per tile of its wrapper).

#include <algorithm>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"

namespace loom::sched_internal {
namespace {

// An output wrapper's buffer is the caller's: it takes the output's declared bounds, strides and
// alignment (lowering made them constants that Halide specialises the code on).
void copy_buffer_constraints(const Halide::OutputImageParam &from, Halide::OutputImageParam to) {
    const Halide::Internal::Parameter &a = from.parameter();
    Halide::Internal::Parameter b = to.parameter();
    for (int d = 0; d < from.dimensions(); d++) {
        b.set_min_constraint(d, a.min_constraint(d));
        b.set_extent_constraint(d, a.extent_constraint(d));
        b.set_stride_constraint(d, a.stride_constraint(d));
        b.set_min_constraint_estimate(d, a.min_constraint_estimate(d));
        b.set_extent_constraint_estimate(d, a.extent_constraint_estimate(d));
    }
    b.set_host_alignment(a.host_alignment());
}

}  // namespace

void validate_in(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    FuncModel &f = k.f;
    if (k.m.find(c.as_name)) k.fail("a Func named '" + c.as_name + "' already exists; name the wrapper differently");
    FuncModel w;
    w.name = c.as_name;
    w.created = true;
    w.vars = f.vars;
    StageModel pure;
    for (auto it = w.vars.rbegin(); it != w.vars.rend(); ++it) {
        pure.dims.push_back({*it, *it, false, true});
        // The wrapper's loops span the wrapped Func's: they move where its do (dynamic shapes).
        if (!f.stages.empty()) {
            const DimModel *d = find_dim(f.stages[0], *it);
            pure.dims.back().moves = d ? d->moves : any_moves(f.stages[0]);
        }
    }
    w.stages = {pure};
    if (k.n == 1) {
        std::string g = k.ident(0, "a consumer of " + f.name);
        auto &cons = f.consumers;
        auto it = std::find(cons.begin(), cons.end(), g);
        if (it == cons.end()) k.fail(g + " does not consume " + f.name + "; valid: " + join(cons), &c.args[0].loc);
        *it = w.name;
        w.consumers = {g};
    } else {
        w.consumers = f.consumers;
        f.consumers = {w.name};
        // An output's wrapper is realized in its place (LoweredPipeline::output_wrappers): the
        // output becomes a Func that can be computed per tile of the wrapper.
        w.is_output = f.is_output;
        f.is_output = false;
    }
    k.m.funcs[w.name] = w;
    k.m.order.push_back(w.name);
}

void apply_in(CallApply &a) {
    Halide::Func w = a.n == 1 ? a.f.in(a.func_named(a.c.args[0].name)) : a.f.in();
    a.out.funcs[a.c.as_name] = w;
    a.m.find(a.c.as_name)->func = w;
    if (a.n == 0 && a.before.is_output) {  // the wrapper is realized in the output's place
        (*a.p.output_wrappers)[a.st.func] = w;
        copy_buffer_constraints(a.f.output_buffer(), w.output_buffer());
    }
}

}  // namespace loom::sched_internal
