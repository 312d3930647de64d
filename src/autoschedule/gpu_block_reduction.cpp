/// \file
/// The block-level reduction that GPU reductions and row kernels share: a reduction computed at a
/// block, its rvar split over the block's threads into coalesced partials (rfactor), combined in
/// one or two levels, in shared memory or in one thread's registers (BlockCombine).

#include "autoschedule/gpu_schedule_internal.h"

namespace loom::gpu_autosched {

void GpuCtx::block_reduction(const LoweredFunc &r, const std::string &at, const std::string &var, int threads,
                             bool place, BlockCombine how) {
    int64_t k = rvar_extent(r);
    threads = (int)std::min<int64_t>(threads, std::max<int64_t>(1, pow2_floor(k)));
    if (place) {
        std::string comment = "computed per block of " + at + "; " + std::to_string(threads) +
                              " threads accumulate partials, one combines them" +
                              (how.registers ? " in registers" : "");
        size_t first = s.statements.size();
        if (how.registers && !r.vars.empty()) {
            total_in_registers(r.name, at, var, r.vars.back());
        } else {
            ScheduleStatement pure(r.name);
            pure.add("compute_at", {at, var});
            s.statements.push_back(pure);
        }
        s.statements[first].comments.push_back(comment);
    }
    block_partials(r, r.name, r.update_rvars[0][0], k, threads, at, var, r.name + "_part", r.name + "_part2", {},
                   how);
}

// \p threads threads of the block accumulate coalesced partials into \p part (rfactor), which one
// thread combines. Over 32 threads, two levels, so that no thread combines more than threads/32 + 32
// partials serially: \p part2(w, u) (threads × coalesced, unrolled loads) → part(u) (32 threads) → f.
// When k is a multiple of the vector width × threads, each thread's loads are vectors: part2 sums a
// per-thread register vector part3(v) (rfactor over the vector lane), so that a thread issues a
// quarter of the load instructions and a vectorised body (sin, exp) runs on every lane.
// \p after_rfactor: statements of f that must follow its rfactor. Var names derive from \p r.
void GpuCtx::block_partials(const LoweredFunc &r, const std::string &f, const std::string &rv, int64_t k,
                            int threads, const std::string &at, const std::string &var, const std::string &part,
                            const std::string &part2, const std::vector<ScheduleStatement> &after_rfactor,
                            BlockCombine how) {
    // The partials' thread vars, renamed where \p r has a pure var of that name (a rank-4 row's w).
    const std::string tu = ident(r, "u"), tw = ident(r, "w"), tv = ident(r, "v"), tuw = ident(r, tu + tw);
    std::string ro = ident(r, rv + "o"), ri = ident(r, rv + "i");
    std::string rw = ident(r, rv + "w"), ru = ident(r, rv + "u");
    bool two_levels = threads > 32;
    bool vec = two_levels && k % (how.width * threads) == 0;
    std::string rq = ident(r, rv + "q"), rvv = ident(r, rv + "v");
    ScheduleStatement up(f, 0);
    if (vec) up.add("split", {rv, rq, rvv, how.width, rtail(true)});
    up.add("split", {vec ? rq : rv, ro, ri, threads, rtail(k % threads == 0)});
    if (two_levels) up.add("split", {ri, rw, ru, 32, rtail(true)});
    up.add("rfactor", {two_levels ? ru : ri, tu}, part);
    s.statements.push_back(up);
    s.statements.insert(s.statements.end(), after_rfactor.begin(), after_rfactor.end());
    if (how.registers) {
        s.statements[in_registers(part, at, var, tu)].add("gpu_threads", {tu});
    } else {
        ScheduleStatement ps(part);
        ps.add("compute_at", {at, var}).add("gpu_threads", {tu});
        s.statements.push_back(ps);
    }
    if (two_levels) {
        ScheduleStatement pu(part, 0);
        pu.add("rfactor", {rw, tw}, part2);
        s.statements.push_back(pu);
    }
    // rfactor leaves the new thread var where the RVar was, innermost: a serial loop around a
    // thread loop, which Halide synchronises with a block barrier per iteration. Threads outermost.
    ScheduleStatement pu2(part, 0);
    pu2.add("reorder", {two_levels ? rw : ro, tu});
    // (In registers, the stage runs inside the wrapper's thread loop.)
    auto threads_over = [&](ScheduleStatement &st, const std::string &thread_var) {
        if (!how.registers) st.add("gpu_threads", {thread_var});
    };
    threads_over(pu2, tu);
    s.statements.push_back(pu2);
    if (!two_levels) return;
    // (u, w) fused into one thread dim: the kernel's block stays 1-D (threads ≤ 1024), u innermost.
    if (how.registers) {
        size_t w = in_registers(part2, at, var, tuw);
        s.statements[w].add("fuse", {tu, tw, tuw}).add("gpu_threads", {tuw});
        s.statements[w + 1].add("fuse", {tu, tw, tuw});
    } else {
        ScheduleStatement qs(part2);
        qs.add("compute_at", {at, var}).add("fuse", {tu, tw, tuw}).add("gpu_threads", {tuw});
        s.statements.push_back(qs);
    }
    // The serial loads of one thread: unrolled, so that several are in flight at once.
    int64_t iters = (k + threads - 1) / threads / (vec ? how.width : 1);
    std::vector<ScheduleArg> order = {ro};
    auto unroll_loads = [&](ScheduleStatement &st) {
        if (iters < 2) return;
        int un = (int)std::min<int64_t>(8, pow2_floor(iters));
        std::string roo = ident(r, ro + "o"), roi = ident(r, ro + "i");
        st.add("split", {ro, roo, roi, un, rtail(iters % un == 0)}).add("unroll", {roi});
        order = {roi, roo};
    };
    ScheduleStatement qu(part2, 0);
    if (vec) {
        std::string part3 = part2 + "_vec";
        qu.add("rfactor", {rvv, tv}, part3);
        s.statements.push_back(qu);
        ScheduleStatement qu2(part2, 0);
        qu2.add("fuse", {tu, tw, tuw}).add("reorder", {rvv, tuw}).add("unroll", {rvv});
        threads_over(qu2, tuw);
        s.statements.push_back(qu2);
        ScheduleStatement vs(part3);
        vs.add("compute_at", {part2, tuw}).add("vectorize", {tv});
        s.statements.push_back(vs);
        ScheduleStatement vu(part3, 0);
        vu.add("reorder", {tv, ro, tu, tw}).add("vectorize", {tv});
        unroll_loads(vu);
        s.statements.push_back(vu);
        return;
    }
    unroll_loads(qu);
    order.push_back(tuw);
    qu.add("fuse", {tu, tw, tuw}).add("reorder", order);
    threads_over(qu, tuw);
    s.statements.push_back(qu);
}

// The wrapper `<f>_w` is what the block reads; \p f is computed at the wrapper's \p inner_var:
// inside a thread, in its registers. \p f's statement follows the wrapper's.
size_t GpuCtx::in_registers(const std::string &f, const std::string &at, const std::string &var,
                            const std::string &inner_var) {
    std::string w = f + "_w";
    ScheduleStatement wrap(f);
    wrap.add("in", {}, w);
    s.statements.push_back(wrap);
    ScheduleStatement ws(w);
    ws.add("compute_at", {at, var});
    s.statements.push_back(ws);
    ScheduleStatement fs(f);
    fs.add("compute_at", {w, inner_var});
    s.statements.push_back(fs);
    return s.statements.size() - 2;
}

// With the wrapper's one-element loop (\p inner_var) a thread loop too, \p f's init, update and the
// store run in that thread with no block barrier between them.
void GpuCtx::total_in_registers(const std::string &f, const std::string &at, const std::string &var,
                                const std::string &inner_var) {
    size_t w = in_registers(f, at, var, inner_var);
    s.statements[w].add("gpu_threads", {inner_var});
    s.statements[w + 1].add("store_in", {ScheduleArg::memory("Register")});
}

}  // namespace loom::gpu_autosched
