/// \file
/// GPU register-tiled GEMM and 2-D conv in Halide, each computed inside its pointwise epilogue's
/// threads (or, for a GEMM with no such epilogue, as its own kernel). Each first chooses its tile
/// (choose_*_tile), says it in the kernel's comment (explain_*_tile), then emits the loop nest.
/// Library stages (cuBLAS, cuDNN) need nothing here: lowering computes them at root.

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "autoschedule/gpu_schedule_internal.h"

namespace loom::gpu_autosched {

namespace {

// Each thread of a GEMM block computes a ti × tj register tile of the kGemmTile × kGemmTile block tile.
struct GemmTile {
    int ti = 4, tj = 4;  // 8x4 ran far slower (bench/DECISIONS.md#d44-gpu-gemm-and-conv-in-halide)
};

GemmTile choose_gemm_tile() {
    GemmTile t;
    if (const char *e = std::getenv("LOOM_GPU_GEMM_TILE")) {  // bench variants: "<ti>x<tj>"
        int a = 0, b = 0;
        if (std::sscanf(e, "%dx%d", &a, &b) == 2 && a > 0 && b > 0 && kGemmTile % a == 0 && kGemmTile % b == 0)
            t.ti = a, t.tj = b;
    }
    return t;
}

std::string explain_gemm_tile(const GemmTile &t, const LoweredFunc &g, bool self) {
    return "GEMM" + std::string(self ? "" : " " + g.name + " with its epilogue") + ": " + std::to_string(kGemmTile) +
           "×" + std::to_string(kGemmTile) + " tiles per block, " + std::to_string(t.ti) + "×" + std::to_string(t.tj) +
           " per thread (" + std::to_string((kGemmTile / t.ti) * (kGemmTile / t.tj)) + " threads), k in float4 lanes";
}

// Largest of \p cands (descending) that divides \p n (1 if none).
int pick_div(int64_t n, std::initializer_list<int> cands) {
    for (int c : cands)
        if (c >= 1 && n % c == 0) return c;
    return 1;
}

// A conv block's output tile: (tx·rw) w × th h × (tc·cr) c; each thread a cr (channels) × rw (w)
// register tile. Every size divides its extent, so that all splits are exact.
struct ConvTile {
    int cr = 4, rw = 4;  // the fastest tile tried (bench/DECISIONS.md#d44-gpu-gemm-and-conv-in-halide)
    int tx = 1, tc = 1, th = 1;
};

ConvTile choose_conv_tile(const LoweredFunc &c) {
    int64_t C = c.extents[1], H = c.extents[2], W = c.extents[3];
    ConvTile t;
    if (const char *e = std::getenv("LOOM_GPU_CONV_TILE")) {  // bench variants: "<cr>x<rw>"
        int a = 0, b = 0;
        if (std::sscanf(e, "%dx%d", &a, &b) == 2 && a > 0 && b > 0) t.cr = a, t.rw = b;
    }
    t.cr = pick_div(C, {t.cr, 4, 2, 1});
    t.rw = pick_div(W, {t.rw, 4, 2, 1});
    t.tx = pick_div(W / t.rw, {8, 4, 2, 1});
    t.tc = pick_div(C / t.cr, {4, 2, 1});
    t.th = 1;
    for (int h : {16, 8, 4, 2, 1})
        if (H % h == 0 && t.tx * t.tc * h <= 128) { t.th = h; break; }
    return t;
}

std::string explain_conv_tile(const ConvTile &t, const LoweredFunc &g) {
    return "conv " + g.name + " with its epilogue: block tile " + std::to_string(t.tx * t.rw) + " w × " +
           std::to_string(t.th) + " h × " + std::to_string(t.tc * t.cr) + " c (" + std::to_string(t.tx * t.th * t.tc) +
           " threads), " + std::to_string(t.cr) + " c × " + std::to_string(t.rw) + " w per thread in registers";
}

}  // namespace

// Kernel \p c (the GEMM itself, or its pointwise epilogue) is tiled into kGemmTile × kGemmTile
// blocks; each thread computes a ti × tj register tile. The reduction k is split by 4 and
// rfactor'ed into a 4-wide vector lane, so that every operand load is a 16-byte float4
// (A(i, k..k+3), B(j, k..k+3) when k is innermost in memory), and the per-thread partials
// (ti × tj × 4 floats) stay in registers; a last unrolled step adds the 4 lanes. No shared-memory
// staging: the schedule language cannot wrap graph inputs or constant weights with in(), so
// operand reuse across threads comes from L1.
void GpuCtx::gemm_kernel(const LoweredFunc &c, const LoweredFunc &g) {
    const GemmTile tile = choose_gemm_tile();
    const int ti = tile.ti, tj = tile.tj;
    bool self = &c == &g;
    std::string i = c.vars[0], j = c.vars[1];
    std::string io = ident(c, i + "o"), ii = ident(c, i + "i"), it = ident(c, i + "t"), ir = ident(c, i + "r");
    std::string jo = ident(c, j + "o"), ji = ident(c, j + "i"), jt = ident(c, j + "t"), jr = ident(c, j + "r");
    int64_t k = rvar_extent(g);
    ScheduleStatement st(c.name);
    st.comments.push_back(explain_gemm_tile(tile, g, self));
    st.add("compute_root");
    st.add("split", {j, jo, ji, kGemmTile, tail(true)}).add("split", {i, io, ii, kGemmTile, tail(true)});
    st.add("split", {ji, jt, jr, tj, tail(true)}).add("split", {ii, it, ir, ti, tail(true)});
    st.add("reorder", {jr, ir, jt, it, jo, io});
    if (!self) {
        st.add("vectorize", {jr}).add("unroll", {ir});
        st.add("gpu_threads", {jt, it}).add("gpu_blocks", {jo, io});
        s.statements.push_back(st);
        ScheduleStatement gp(g.name);
        gp.add("compute_at", {c.name, jt}).add("vectorize", {g.vars[1]}).add("unroll", {g.vars[0]});
        s.statements.push_back(gp);
    } else {
        st.add("unroll", {jr}).add("unroll", {ir});
        st.add("gpu_threads", {jt, it}).add("gpu_blocks", {jo, io});
        s.statements.push_back(st);
    }
    std::string kv = g.update_rvars[0][0];
    std::string ko = ident(g, kv + "o"), kl = ident(g, kv + "v"), lanes = g.name + "_lanes";
    ScheduleStatement up(g.name, 0);
    up.add("split", {kv, ko, kl, kVec, rtail(true)}).add("rfactor", {kl, "v"}, lanes);
    s.statements.push_back(up);
    std::string gi = g.vars[0], gj = g.vars[1];
    ScheduleStatement up2(g.name, 0);
    if (self) {
        // The GEMM is its own kernel: its update runs in the same thread tiles as its init. Halide
        // refuses RoundUp on an update's split vars (a training step's GEMMs reach this), and
        // GuardWithIf on a split that divides costs nothing.
        up2.add("split", {gj, jo, ji, kGemmTile, tail(false)}).add("split", {gi, io, ii, kGemmTile, tail(false)});
        up2.add("split", {ji, jt, jr, tj, tail(false)}).add("split", {ii, it, ir, ti, tail(false)});
        up2.add("reorder", {kl, jr, ir, jt, it, jo, io}).add("unroll", {kl}).add("unroll", {jr}).add("unroll", {ir});
        up2.add("gpu_threads", {jt, it}).add("gpu_blocks", {jo, io});
    } else {
        up2.add("reorder", {kl, gj, gi}).add("unroll", {kl}).add("unroll", {gj}).add("unroll", {gi});
    }
    s.statements.push_back(up2);
    ScheduleStatement lp(lanes);
    lp.comments.push_back("per-thread partials: " + std::to_string(ti * tj * kVec) + " floats in registers");
    // j and the k lane both vectorized: A(i, k..k+3) and B(k, j..j+3) are float4 loads whichever
    // of k or j is innermost in B (the PTX of the Linear workload: only v4 loads).
    lp.add("compute_at", {self ? g.name : c.name, jt}).add("reorder", {gj, "v", gi});
    lp.add("vectorize", {gj}).add("vectorize", {"v"}).add("unroll", {gi});
    s.statements.push_back(lp);
    ScheduleStatement lu(lanes, 0);
    int64_t kos = k / kVec;
    lu.add("reorder", {gj, "v", gi, ko}).add("vectorize", {gj}).add("vectorize", {"v"}).add("unroll", {gi});
    if (kos % 2 == 0) {
        std::string koo = ident(g, ko + "o"), koi = ident(g, ko + "i");
        lu.add("split", {ko, koo, koi, 2, rtail(true)}).add("unroll", {koi});
    }
    s.statements.push_back(lu);
}

// Conv \p g + pointwise epilogue \p c (vars n, c, h, w): the conv is computed at the epilogue's
// innermost thread var with its reduction (r.z, r.y, r.x) outside the unrolled register tile, the
// padded input inlined; the epilogue writes from registers. All splits exact (ConvTile), so no
// producer reads past its input. An epilogue stored channels innermost (LoweredFunc::channels_last:
// a BF16 copy a cuDNN stage reads, whose producers are NHWC too) is stored so and runs its threads
// along the channels first, each thread's channels a vector, so that reads and writes stay coalesced.
void GpuCtx::conv_kernel(const LoweredFunc &c, const LoweredFunc &g) {
    ConvTile t = choose_conv_tile(c);
    const bool nhwc = c.channels_last;
    if (nhwc) {
        t.tc = pick_div(c.extents[1] / t.cr, {32, 16, 8, 4, 2, 1});
        t.tx = pick_div(c.extents[3] / t.rw, {4, 2, 1});
        t.th = 1;
        for (int h : {16, 8, 4, 2, 1})
            if (c.extents[2] % h == 0 && t.tx * t.tc * h <= 128) {
                t.th = h;
                break;
            }
    }
    std::string n = c.vars[0], ch = c.vars[1], h = c.vars[2], w = c.vars[3];
    std::string wo = ident(c, w + "o"), wi = ident(c, w + "i"), wt = ident(c, w + "t"), wr = ident(c, w + "r");
    std::string ho = ident(c, h + "o"), ht = ident(c, h + "t");
    std::string co = ident(c, ch + "o"), ci = ident(c, ch + "i"), ct = ident(c, ch + "t"), crr = ident(c, ch + "r");
    std::string con = ident(c, ch + "_" + n);
    ScheduleStatement st(c.name);
    st.comments.push_back(explain_conv_tile(t, g) + (nhwc ? ", stored NHWC, threads along c" : ""));
    st.add("compute_root");
    if (nhwc) st.add("reorder_storage", {ch, w, h, n});
    st.add("split", {w, wo, wi, (int64_t)(t.tx * t.rw), tail(true)}).add("split", {wi, wt, wr, (int64_t)t.rw, tail(true)});
    st.add("split", {h, ho, ht, (int64_t)t.th, tail(true)});
    st.add("split", {ch, co, ci, (int64_t)(t.tc * t.cr), tail(true)}).add("split", {ci, ct, crr, (int64_t)t.cr, tail(true)});
    if (nhwc) st.add("reorder", {crr, wr, ct, wt, ht, wo, ho, co, n});
    else st.add("reorder", {wr, crr, wt, ht, ct, wo, ho, co, n});
    st.add("fuse", {co, n, con});
    if (nhwc) {
        st.add("vectorize", {crr}).add("unroll", {wr});
        st.add("gpu_threads", {ct, wt, ht}).add("gpu_blocks", {wo, ho, con});
    } else {
        st.add("unroll", {wr}).add("unroll", {crr});
        st.add("gpu_threads", {wt, ht, ct}).add("gpu_blocks", {wo, ho, con});
    }
    s.statements.push_back(st);
    const std::string &gn = g.vars[0], &gc = g.vars[1], &gh = g.vars[2], &gw = g.vars[3];
    ScheduleStatement gp(g.name);
    const auto &rv = g.update_rvars[0];  // r.x (kw), r.y (kh), r.z (input channel)
    ScheduleStatement up(g.name, 0);
    if (nhwc) {
        gp.add("compute_at", {c.name, ct}).add("reorder", {gc, gw, gh, gn});
        gp.add("vectorize", {gc}).add("unroll", {gw});
        up.add("reorder", {gc, gw, rv[0], rv[1], rv[2], gh, gn});
        up.add("vectorize", {gc}).add("unroll", {gw}).add("unroll", {rv[0]});
    } else {
        gp.add("compute_at", {c.name, wt}).add("reorder", {gw, gc, gh, gn});
        gp.add("unroll", {gw}).add("unroll", {gc});
        up.add("reorder", {gw, gc, rv[0], rv[1], rv[2], gh, gn});
        up.add("unroll", {gw}).add("unroll", {gc}).add("unroll", {rv[0]});
    }
    s.statements.push_back(gp);
    s.statements.push_back(up);
}

}  // namespace loom::gpu_autosched
