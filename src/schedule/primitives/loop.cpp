/// \file
/// The loop family: a stage's loops (split, fuse, reorder, tile) and how each one runs
/// (vectorize, unroll, parallel). Validation keeps the stage's dims as Halide will have them, with
/// the extents the shapes fix, and warns where a split runs past a loop's extent.

#include <algorithm>
#include <tuple>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"
#include "support/error.h"

namespace loom::sched_internal {
namespace {

int64_t ceil_div(int64_t e, int64_t f) { return e <= 0 ? -1 : (e + f - 1) / f; }

void reorder_dims(StageModel &s, const std::vector<int> &idx) {
    std::vector<int> slots = idx;
    std::sort(slots.begin(), slots.end());
    std::vector<DimModel> moved;
    for (int i : idx) moved.push_back(s.dims[i]);
    auto dims = s.dims;
    for (size_t j = 0; j < slots.size(); j++) dims[slots[j]] = moved[j];
    s.dims = dims;
}

// The TailStrategy Halide uses for a split of \p dm: the one written, else what Auto picks.
std::string effective_tail(const CallCheck &k, const DimModel &dm, const ScheduleArg *written, std::string &why) {
    why.clear();
    if (written && written->name != "Auto") return written->name;
    if (k.st.stage < 0) {
        why = " (the default for a pure definition)";
        return "ShiftInwards";
    }
    if (dm.rvar) return "GuardWithIf";
    why = " (the default for a pure var of an update)";
    return "RoundUp";
}

// A reduction's initial value (`f(…) = 0` before its updates) of a Func that is not an output:
// running its loop past the extent only writes more of its own buffer, nothing is read.
bool constant_init(const FuncModel &f) {
    if (f.is_output || f.stages.size() < 2 || !f.func.defined()) return false;
    for (const auto &v : f.func.function().definition().values())
        if (!Halide::Internal::is_const(v)) return false;
    return true;
}

// A Func that is not an output, none of whose definitions reads anything by pure var \p var
// (a keepdims axis of extent 1 rounded up to a warp's lanes): the points past the extent only
// write more of its own buffer, which Halide sizes to the rounded loop, and read in bounds.
bool reads_ignore(const FuncModel &f, const std::string &var) {
    if (f.is_output || !f.func.defined()) return false;
    if (std::find(f.vars.begin(), f.vars.end(), var) == f.vars.end()) return false;
    struct CallArgs : Halide::Internal::IRVisitor {
        std::string self, var;
        bool uses = false;
        using IRVisitor::visit;
        void visit(const Halide::Internal::Call *op) override {
            if (op->name != self)
                for (const auto &a : op->args) uses |= Halide::Internal::expr_uses_var(a, var);
            IRVisitor::visit(op);
        }
    } calls;
    calls.self = f.func.name();
    calls.var = var;
    const Halide::Internal::Function &fn = f.func.function();
    std::vector<Halide::Internal::Definition> defs = {fn.definition()};
    for (const auto &u : fn.updates()) defs.push_back(u);
    for (const auto &d : defs) {
        for (const auto &v : d.values()) v.accept(&calls);
        for (const auto &a : d.args()) a.accept(&calls);
    }
    return !calls.uses;
}

// A Func that is not an output, split along its rows (the innermost var), whose reads past the
// end of a row stay in bounds (LoweredPipeline::rows_extend_safely: a padded input clamps them
// on every path): the points past the extent only fill its own buffer, which Halide sizes to
// the rounded loop (a 14-wide depthwise row computed as one 16-lane vector).
bool rounds_rows_safely(const CallCheck &k, const FuncModel &f, const DimModel &dm) {
    return !f.is_output && !f.vars.empty() && dm.halide_name == f.vars.back() && k.m.pipeline &&
           k.m.pipeline->find(f.name) && k.m.pipeline->rows_extend_safely(f.name);
}

// Warns when splitting \p dm by \p factor makes the loop cover points outside its extent: a
// factor larger than the extent with ShiftInwards or RoundUp still runs `factor` points (a
// schedule written for a larger model, run on a smaller one). Legal to Halide, but the Func
// and what it reads are then accessed out of bounds, which fails at run time.
void split_warning(const CallCheck &k, const DimModel &dm, int64_t factor, size_t tail_index) {
    const PrimitiveCall &c = k.c;
    if (dm.extent <= 0 || factor <= dm.extent) return;
    if (k.st.stage < 0 && constant_init(k.f)) return;
    if (reads_ignore(k.f, dm.halide_name)) return;
    if (rounds_rows_safely(k, k.f, dm)) return;
    const ScheduleArg *written = tail_index < c.args.size() ? &c.args[tail_index] : nullptr;
    std::string why, tail = effective_tail(k, dm, written, why);
    if (tail != "ShiftInwards" && tail != "RoundUp") return;
    PrimitiveCall fixed = c;
    ScheduleArg guard = ScheduleArg::tail("GuardWithIf");
    if (written) fixed.args[tail_index] = guard;
    else fixed.args.push_back(guard);  // the tail is always the last argument
    std::string e = std::to_string(dm.extent), fs = std::to_string(factor);
    k.warn("factor " + fs + " exceeds the extent " + e + " of " + dm.name + "; with TailStrategy::" + tail + why +
           " the loop still runs " + fs + " points, " + std::to_string(factor - dm.extent) + " outside " + dm.name +
           ", so this Func and what it reads are accessed out of bounds; valid: " + fixed.str() +
           " or a factor of at most " + e);
}

// Halide 14 can drop the guard of a GuardWithIf split of an RVar once the split's inner RVar
// is rfactored (halide/Halide#8600, fixed upstream in 2025). Where a loop over the new var (or
// a var split off it) is unrolled, the copies past the points the last round keeps may then run
// unguarded, read past the reduction's end and give a wrong result: a classifier's softmax sum
// over 1000 logits split by 64, 4 vectors unrolled, was NaN (reproduced in plain Halide 14, with
// the buffers' extents known); its max, scheduled alike, kept the guard. A warning, not an
// error: which stages lose it is not known in advance.
void guard_lost_unroll_problem(const CallCheck &k, const DimModel &dm) {
    if (dm.guarded_keep <= 0 || dm.extent <= 0 || dm.guarded_keep >= dm.extent) return;
    k.warn("Halide 14 can lose the guard of the split " + dm.guarded_split + " once it is rfactored "
           "(halide/Halide#8600, fixed upstream); unrolled, the last " + std::to_string(dm.extent - dm.guarded_keep) +
           " of the " + std::to_string(dm.extent) + " copies of " + dm.name + " in " + k.f.name +
           " would then run past the reduction's end and give wrong results (NaN); check the result with "
           "`loom run --check`, or split the RVar by a factor that divides its extent, or vectorize " + dm.name +
           " without unrolling it");
}

}  // namespace

void validate_split(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    StageModel &s = k.stage();
    int d = k.dim(0);
    std::string old = c.args[0].name;
    std::string outer = k.fresh(1, {old}), inner = k.fresh(2, {old});
    if (outer == inner) k.fail("outer and inner must differ", &c.args[2].loc);
    int64_t factor = k.positive(3, "split factor");
    if (k.n > 4) k.tail(4);
    split_warning(k, s.dims[d], factor, 4);
    int64_t e = s.dims[d].extent;
    const int64_t keep = s.dims[d].guarded_keep;
    std::string why, t = effective_tail(k, s.dims[d], k.n > 4 ? &c.args[4] : nullptr, why);
    split_dims(s, d, outer, inner);
    s.dims[d].moves = false;  // the inner loop runs `factor` points whatever the sizes
    s.dims[d].extent = factor;
    s.dims[d + 1].extent = ceil_div(e, factor);
    s.dims[d].guarded_keep = s.dims[d + 1].guarded_keep = 0;
    s.dims[d].rvar_guard_keep = s.dims[d + 1].rvar_guard_keep = 0;
    if (keep > 0) {
        // A split of a var that keeps `keep` points in the last round: the outer var's last round
        // keeps ceil(keep / factor) iterations.
        s.dims[d + 1].guarded_keep = ceil_div(keep, factor);
    } else if (s.dims[d].rvar && t == "GuardWithIf" && e > factor && e % factor != 0) {
        s.dims[d].rvar_guard_keep = e % factor;
        s.dims[d].guarded_split = c.args[0].name + ": " + std::to_string(e) + " = " + std::to_string(e / factor) +
                                  " x " + std::to_string(factor) + " + " + std::to_string(e % factor);
    }
}

void validate_fuse(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    StageModel &s = k.stage();
    int di = k.dim(0), dout = k.dim(1);
    if (di == dout) k.fail("fuse needs two different vars");
    std::string fused = k.fresh(2, {c.args[0].name, c.args[1].name});
    DimModel fd = s.dims[di];
    fd.rvar = s.dims[di].rvar || s.dims[dout].rvar;
    fd.race_free = s.dims[di].race_free && s.dims[dout].race_free;
    fd.name = fd.halide_name = fused;
    fd.extent = s.dims[di].extent > 0 && s.dims[dout].extent > 0 ? s.dims[di].extent * s.dims[dout].extent : -1;
    s.dims[di] = fd;
    s.dims.erase(s.dims.begin() + dout);
}

void validate_reorder(CallCheck &k) {
    std::vector<int> idx;
    std::set<std::string> seen;
    for (size_t i = 0; i < k.n; i++) {
        idx.push_back(k.dim(i));
        if (!seen.insert(k.c.args[i].name).second)
            k.fail("'" + k.c.args[i].name + "' appears twice; list each var once", &k.c.args[i].loc);
    }
    reorder_dims(k.stage(), idx);
}

void validate_tile(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    StageModel &s = k.stage();
    size_t n = k.n;
    bool has_tail = !c.args.back().is_int();
    size_t core = n - (has_tail ? 1 : 0);
    if (core != 6 && core != 8) k.fail("expected " + std::string(find_primitive("tile")->signature));
    k.dim(0);
    k.dim(1);
    std::string x = c.args[0].name, y = c.args[1].name;
    std::string xo = x, yo = y, xi, yi;
    size_t i = 2;
    if (core == 8) xo = k.fresh(2, {x}), yo = k.fresh(3, {y}), i = 4;
    xi = k.fresh(i, {x});
    yi = k.fresh(i + 1, {y});
    std::set<std::string> names = {xo, yo, xi, yi};
    if (names.size() != 4) k.fail("the new vars must all differ");
    int64_t fx = k.positive(i + 2, "x factor");
    int64_t fy = k.positive(i + 3, "y factor");
    if (has_tail) k.tail(n - 1);
    split_warning(k, s.dims[s.find(x)], fx, i + 4);
    split_warning(k, s.dims[s.find(y)], fy, i + 4);
    for (auto [v, o, in, fac] : {std::make_tuple(x, xo, xi, fx), std::make_tuple(y, yo, yi, fy)}) {
        int d = s.find(v);
        int64_t e = s.dims[d].extent;
        split_dims(s, d, o, in);
        s.dims[d].moves = false;
        s.dims[d].extent = fac;
        s.dims[d + 1].extent = ceil_div(e, fac);
    }
    reorder_dims(s, {s.find(xi), s.find(yi), s.find(xo), s.find(yo)});
}

void validate_loop_type(CallCheck &k) {
    const std::string &p = k.c.name;
    StageModel &s = k.stage();
    int d = k.dim(0);
    if (p == "unroll" && k.n == 1) guard_lost_unroll_problem(k, s.dims[d]);
    if (k.n > 1) {
        // Halide splits off an inner loop of this size (the var stays as the outer loop).
        int64_t factor = k.positive(1, p == "parallel" ? "task size" : p + " factor");
        if (k.n > 2) k.tail(2);
        split_warning(k, s.dims[d], factor, 2);
        s.dims[d].extent = ceil_div(s.dims[d].extent, factor);
    }
    if (p != "unroll") {
        k.race_check(d);
        if (!s.cpu_parallel) {
            s.cpu_parallel = true;
            s.cpu_parallel_loc = k.c.loc;
            s.cpu_parallel_call = k.c.str();
        }
    }
}

void apply_split(CallApply &a) { a.stage.split(a.var(0), a.var(1), a.var(2), a.expr(3), a.tail(4)); }

void apply_fuse(CallApply &a) { a.stage.fuse(a.var(0), a.var(1), a.var(2)); }

void apply_reorder(CallApply &a) {
    std::vector<Halide::VarOrRVar> vs;
    for (size_t i = 0; i < a.n; i++) vs.push_back(a.var(i));
    a.stage.reorder(vs);
}

void apply_tile(CallApply &a) {
    bool tail = !a.c.args.back().is_int();
    size_t core = a.n - (tail ? 1 : 0);
    if (core == 8)
        a.stage.tile(a.var(0), a.var(1), a.var(2), a.var(3), a.var(4), a.var(5), a.expr(6), a.expr(7), a.tail(8));
    else a.stage.tile(a.var(0), a.var(1), a.var(2), a.var(3), a.expr(4), a.expr(5), a.tail(6));
}

// Dynamic shapes: a whole loop whose extent moves cannot be vectorized or unrolled as written
// (Halide needs a constant extent): unrolled, it stays a plain loop; vectorized, apply_vectorize
// splits it. Counted with the guarded splits.
bool keeps_moving_loop(CallApply &a) {
    if (!a.moves(0) || a.n != 1 || (a.specialized && a.whole_loops)) return false;
    if (!a.specialized) a.out.guarded_for_sizes++;
    return true;
}

// The lanes a whole moving pure loop that the schedule vectorizes takes instead, by a guarded
// split: the target's natural vector of the Func's type, at most its representative extent (a
// power of two); 1 (none) for an RVar or a loop planned shorter than two.
int guarded_whole_loop_lanes(const CallApply &a) {
    const DimModel *d = find_dim(a.before.stages[a.st.stage + 1], a.c.args[0].name);
    if (!d || d->rvar || d->extent < 2 || a.f.outputs() != 1) return 1;
    int natural = a.m.target.natural_vector_size(a.f.output_types()[0]);
    int lanes = 1;
    while (lanes * 2 <= natural && lanes * 2 <= d->extent && (!a.vector_loops || lanes * 2 <= a.vector_lanes))
        lanes *= 2;
    return lanes;
}

// Whether the schedule computes another Func at a loop of \p a's Func (whose loop order must stay
// as the plan wrote it).
bool hosts_a_func(const CallApply &a) {
    for (const auto &st : a.out.schedule.statements)
        for (const auto &c : st.calls)
            if (c.name == "compute_at" && !c.args.empty() && c.args[0].name == a.st.func) return true;
    return false;
}

void apply_vectorize(CallApply &a) {
    if (a.narrow(a.c.args[0].name)) return;
    if (keeps_moving_loop(a)) {
        // A whole loop of a Func that spans its host's moving width (a conv computed per channel
        // block over whole rows) has no constant extent: vectorized by a guarded split, its full
        // vectors run as vectors where the loop is long enough, rather than the whole loop as
        // scalars (bench/DECISIONS.md#d161-dynamic-shapes-whole-moving-loops-vectorized-by-a-guarded-split).
        int lanes = guarded_whole_loop_lanes(a);
        if (lanes <= 1) return;
        a.stage.vectorize(a.var(0), lanes, Halide::TailStrategy::GuardWithIf);
        // In an update its vectors' loop goes just outside the reduction's loops: inside it the
        // accumulators sit at fixed addresses through the reduction, where LLVM keeps them in
        // registers, as the compile for one size does with the whole loop vectorized.
        if (a.st.stage >= 0 && !hosts_a_func(a)) {
            std::vector<Halide::VarOrRVar> order;
            size_t after_reduction = 0;
            for (const auto &d : a.before.stages[a.st.stage + 1].dims) {
                if (d.name == a.c.args[0].name || d.name == "__outermost") continue;
                order.push_back(as_var(d));
                if (d.rvar) after_reduction = order.size();
            }
            if (after_reduction == 0) return;
            order.insert(order.begin() + after_reduction, a.var(0));
            a.stage.reorder(order);
        }
        return;
    }
    if (a.n == 1) a.stage.vectorize(a.var(0));
    else a.stage.vectorize(a.var(0), a.expr(1), a.tail(2));
}

void apply_unroll(CallApply &a) {
    if (a.narrow(a.c.args[0].name) || keeps_moving_loop(a)) return;
    if (a.n == 1) a.stage.unroll(a.var(0));
    else a.stage.unroll(a.var(0), a.expr(1), a.tail(2));
}

void apply_parallel(CallApply &a) {
    // A narrow copy serves sizes below the kernel's tiles: too little work to wake the thread pool.
    if (a.narrow_loops) return;
    if (a.n == 1) a.stage.parallel(a.var(0));
    else a.stage.parallel(a.var(0), a.expr(1), a.tail(2));
}

}  // namespace loom::sched_internal
