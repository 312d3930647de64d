/// \file
/// The GPU family: loops mapped to GPU blocks, threads and lanes (gpu_tile, gpu_blocks,
/// gpu_threads, gpu_lanes, gpu_single_thread) and Loom's register budget for a Func's kernels
/// (gpu_max_registers). Each needs a GPU target; a mapped stage is what lets a Func at root run
/// on the GPU (finish_checks).

#include <set>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"

namespace loom::sched_internal {

void validate_gpu_tile(CallCheck &k) {
    const PrimitiveCall &c = k.c;
    StageModel &s = k.stage();
    size_t n = k.n;
    k.gpu_check();
    bool has_tail = !c.args.back().is_int();
    size_t core = n - (has_tail ? 1 : 0);
    size_t ints = 0;
    while (ints < core && c.args[core - 1 - ints].is_int()) ints++;
    size_t names = core - ints;
    if (ints < 1 || ints > 3 || (names != 3 * ints && names != 2 * ints))
        k.fail("expected " + std::string(find_primitive("gpu_tile")->signature));
    std::vector<std::string> vars;
    for (size_t i = 0; i < ints; i++) {
        int d = k.dim(i);
        k.race_check(d);
        vars.push_back(c.args[i].name);
    }
    std::set<std::string> fresh_names;
    for (size_t i = ints; i < names; i++) {
        std::string v = k.fresh(i, {vars[(i - ints) % ints]});
        if (!fresh_names.insert(v).second) k.fail("new var '" + v + "' appears twice", &c.args[i].loc);
    }
    for (size_t i = names; i < core; i++) k.positive(i, "gpu_tile size");
    if (has_tail) k.tail(n - 1);
    for (size_t i = 0; i < ints; i++) {
        std::string o = names == 3 * ints ? c.args[ints + i].name : vars[i];
        std::string in = c.args[names - ints + i].name;
        split_dims(s, s.find(vars[i]), o, in);
    }
    s.gpu_mapped = true;
}

void validate_gpu_loops(CallCheck &k) {
    k.gpu_check();
    for (size_t i = 0; i < k.n; i++) k.race_check(k.dim(i));
    k.stage().gpu_mapped = true;
}

void validate_gpu_single_thread(CallCheck &k) {
    k.gpu_check();
    k.stage().gpu_mapped = true;
}

void validate_gpu_max_registers(CallCheck &k) {
    k.gpu_check();
    k.integer(0, "registers per thread");
    int64_t r = k.c.args[0].value;
    if (r < 16 || r > 255)
        k.fail("registers per thread must be in 16..255 (ptxas's range; 32 lets 2048 threads share an SM's 64K "
               "registers), got " + std::to_string(r),
               &k.c.args[0].loc);
}

void apply_gpu_tile(CallApply &a) {
    bool tail = !a.c.args.back().is_int();
    size_t core = a.n - (tail ? 1 : 0);
    size_t ints = 0;
    while (ints < core && a.c.args[core - 1 - ints].is_int()) ints++;
    bool full = core - ints == 3 * ints;
    Halide::TailStrategy t = a.tail(core);
    auto V = [&](size_t i) { return a.var(i); };
    auto I = [&](size_t i) { return a.expr(i); };
    Halide::Stage &S = a.stage;
    if (ints == 1) {
        if (full) S.gpu_tile(V(0), V(1), V(2), I(3), t);
        else S.gpu_tile(V(0), V(1), I(2), t);
    } else if (ints == 2) {
        if (full) S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), I(6), I(7), t);
        else S.gpu_tile(V(0), V(1), V(2), V(3), I(4), I(5), t);
    } else {
        if (full) S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), V(6), V(7), V(8), I(9), I(10), I(11), t);
        else S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), I(6), I(7), I(8), t);
    }
}

void apply_gpu_blocks(CallApply &a) {
    if (a.n == 1) a.stage.gpu_blocks(a.var(0));
    else if (a.n == 2) a.stage.gpu_blocks(a.var(0), a.var(1));
    else a.stage.gpu_blocks(a.var(0), a.var(1), a.var(2));
}

void apply_gpu_threads(CallApply &a) {
    if (a.n == 1) a.stage.gpu_threads(a.var(0));
    else if (a.n == 2) a.stage.gpu_threads(a.var(0), a.var(1));
    else a.stage.gpu_threads(a.var(0), a.var(1), a.var(2));
}

void apply_gpu_lanes(CallApply &a) { a.stage.gpu_lanes(a.var(0)); }

void apply_gpu_single_thread(CallApply &a) { a.stage.gpu_single_thread(); }

// Halide 14 has no handle for it: codegen passes the budget to ptxas (codegen/aot.h).
void apply_gpu_max_registers(CallApply &a) { a.out.max_registers[a.f.name()] = (int)a.c.args[0].value; }

}  // namespace loom::sched_internal
