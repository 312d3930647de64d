/// \file
/// GPU row kernels: a pure kernel with the reductions it reads computed inside it (softmax,
/// LayerNorm, statistics over segments of a row, Concat inputs per row). Short rows and short
/// segments take one warp's lanes each and sum their statistics by register shuffles
/// (warp_row_kernel); any other row is one block per row, its statistics block reductions
/// (block_row_kernel).

#include "autoschedule/gpu_schedule_internal.h"

namespace loom::gpu_autosched {

namespace {

// How a block row kernel maps its row onto one block.
struct RowLayout {
    bool segmented = false;  // its statistics cover segments of the row, several per row
    bool plain = false;      // whole-row statistics and no Concat inputs
    int v = 1;               // vector width of the row's accesses
    int threads = 0;         // threads per row (the block)
    int piece = 1;           // contiguous elements per thread when segmented (else v)
};

RowLayout choose_row_layout(const LoweredPipeline &p, const KernelPlan &plan, const LoweredFunc &c) {
    RowLayout l;
    int64_t n = c.extents.back();
    // Rows cut into segments (several statistics per row): one vector per thread, so that the
    // 4-element pieces of every segment have a thread.
    for (const auto &rn : plan.stats_of(c.name)) l.segmented |= plan.segment.count(rn) > 0;
    // A plain row (whole-row statistics, no Concat inputs): 8-byte vectors, 8 to 16 elements per
    // thread, up to 512 threads, statistics combined in registers (BlockCombine;
    // bench/DECISIONS.md#d37-gpu-row-kernel).
    l.plain = !l.segmented && plan.branches_of(c.name).empty();
    int width = l.plain ? kRowVec : kVec;
    l.v = n % width == 0 ? width : 1;
    // Otherwise 16 elements (four 16-byte vectors) per thread: 256 threads for rows of 4096, 512
    // for 8192. Concat inputs keep it: more threads a row leave each with too little of the
    // row (bench/DECISIONS.md#d41-gpu-segments-and-concat).
    l.threads = (int)std::max<int64_t>(32, std::min<int64_t>(2 * kRowThreads, pow2_floor(n / (l.plain ? 8 : 16))));
    // A segmented row is short and latency-bound (two barriers per statistic for a few KB): each
    // thread takes a piece of two vectors when every segment splits evenly, so that half as many
    // threads per row let twice as many rows share an SM
    // (bench/DECISIONS.md#d41-gpu-segments-and-concat).
    l.piece = l.v;
    if (l.segmented && l.v == kVec && n % (2 * kVec) == 0) {
        l.piece = 2 * kVec;
        for (const auto &rn : plan.stats_of(c.name))
            if (plan.segment.count(rn) && rvar_extent(*p.find(rn)) % l.piece != 0) l.piece = l.v;
    }
    if (l.segmented && n / l.piece <= 1024) l.threads = (int)std::max<int64_t>(32, pow2_floor(n / l.piece));
    return l;
}

}  // namespace

void GpuCtx::row_kernel(const LoweredFunc &c) {
    if (WarpRows w = warp_rows(p, plan, c); w.lanes > 0) return warp_row_kernel(c, w);
    block_row_kernel(c);
}

// One block per row of c; c's row split over T threads × vectors; c's reductions computed per block.
void GpuCtx::block_row_kernel(const LoweredFunc &c) {
    const RowLayout l = choose_row_layout(p, plan, c);
    const int v = l.v, threads = l.threads, piece = l.piece;
    int rank = (int)c.vars.size();
    std::string j = c.vars.back();
    int64_t n = c.extents.back();
    ScheduleStatement st(c.name);
    st.comments.push_back("row kernel: one block per row, " + std::to_string(threads) + " threads × " +
                          std::to_string(v) + "-wide vectors; fuses " + join(plan.stats_of(c.name)));
    st.add("compute_root");
    std::string jq = j, jv = ident(c, j + "v"), jo = ident(c, j + "o"), jt = ident(c, j + "t");
    if (v > 1) st.add("split", {j, jq = ident(c, j + "q"), jv, v});
    if (piece > v) st.add("split", {jq, jt, jo, piece / v, tail(true)});  // a thread's piece: contiguous
    else st.add("split", {jq, jo, jt, threads, tail((n / v) % threads == 0)});
    std::string row = fuse_outer(st, c, rank - 1);
    std::vector<ScheduleArg> order;
    if (v > 1) order.push_back(jv);
    for (auto x : {jo, jt, row}) order.push_back(x);
    st.add("reorder", order);
    if (v > 1) st.add("vectorize", {jv});
    int64_t jo_ext = piece > v ? piece / v : (n / v + threads - 1) / threads;
    if (jo_ext >= 2 && jo_ext <= 16) st.add("unroll", {jo});  // loads in flight
    st.add("gpu_threads", {jt}).add("gpu_blocks", {row});
    // Register budget: the kernel alternates loads with block barriers, so it wants every
    // resident block it can get, and ptxas alone takes a few registers more than that allows.
    // 512 threads at 32 registers fit 4 blocks (2048 threads) per SM; 256 threads at 40 fit 6
    // (at 32 the LayerNorm row spills; bench/DECISIONS.md#d37-gpu-row-kernel).
    if (!l.segmented && threads >= 256) st.add("gpu_max_registers", {(int64_t)(threads >= 512 ? 32 : 40)});
    s.statements.push_back(st);
    for (const auto &bn : plan.branches_of(c.name)) {
        const LoweredFunc &b = *p.find(bn);
        ScheduleStatement bs(bn);
        bs.comments.push_back("concat input: computed per row of " + c.name + " over its own slice only");
        bs.add("compute_at", {c.name, row}).add("gpu_threads", {b.vars.back()});
        s.statements.push_back(bs);
    }
    for (const auto &rn : plan.stats_of(c.name)) {
        const LoweredFunc &r = *p.find(rn);
        if (plan.segment.count(rn)) segment_reduction(r, c.name, row, threads, piece);
        else block_reduction(r, c.name, row, threads, true, l.plain ? BlockCombine{kRowVec, true} : BlockCombine{});
    }
}

// Segment statistic \p r computed per block (row) of \p at. When each segment splits into
// \p piece-element pieces that the block's threads cover, the pieces are summed by one thread
// each (consecutive elements: 16-byte loads), then one thread per segment adds its segment's
// pieces; otherwise one thread per segment reduces it serially.
void GpuCtx::segment_reduction(const LoweredFunc &r, const std::string &at, const std::string &row, int threads,
                               int piece) {
    std::string v = segment_var(p, at, r), rv = r.update_rvars[0][0];
    int64_t k = rvar_extent(r), segs = 1;
    for (size_t d = 0; d < r.vars.size(); d++)
        if (r.vars[d] == v) segs = r.extents[d];
    bool pieces = k % piece == 0 && (k / piece) * segs <= threads;
    // One thread per segment sums it in registers and stores it once (BlockCombine::registers).
    // It halves the barriers (bench/DECISIONS.md#d39-gpu-statistics-in-registers).
    size_t w = in_registers(r.name, at, row, v);
    s.statements[w - 1].comments.push_back(
        "segment statistic: per block of " + at + ", " + std::to_string(segs) + " segments of " + std::to_string(k) +
        (pieces ? ", summed in " + std::to_string(piece) + "-element pieces by " + std::to_string((k / piece) * segs) +
                      " threads"
                : ", one thread per segment") +
        ", in registers");
    s.statements[w].add("gpu_threads", {v});
    if (!pieces) return;
    std::string ro = ident(r, rv + "o"), ri = ident(r, rv + "i"), part = r.name + "_part";
    ScheduleStatement up(r.name, 0);
    up.add("split", {rv, ro, ri, piece, rtail(true)}).add("rfactor", {ro, "u"}, part);
    s.statements.push_back(up);
    // (u, segment) fused into one thread dim: Halide sizes a block by the largest extent of each
    // thread dim over its stages, so a second dim would multiply the row's threads. Each thread
    // sums its piece in registers too.
    std::vector<ScheduleArg> order = {"u", v};
    for (auto it = r.vars.rbegin(); it != r.vars.rend(); ++it)
        if (*it != v) order.push_back(*it);
    std::string uv = ident(r, "u_" + v);
    size_t pw = in_registers(part, at, row, uv);
    s.statements[pw].add("reorder", order).add("fuse", {"u", v, uv}).add("gpu_threads", {uv});
    ScheduleStatement pu(part, 0);
    std::vector<ScheduleArg> uorder = {ri};
    uorder.insert(uorder.end(), order.begin(), order.end());
    pu.add("reorder", uorder).add("unroll", {ri});
    s.statements.push_back(pu);
}

// Rows cut into short segments (LayerNorm over [B, 16, 64] feeding a [B, 1024] kernel), or
// short rows themselves (w.rows per block): one warp's w.lanes lanes per segment or row,
// w.vec floats each; each statistic a tree of rfactor'ed lane Funcs halving the lanes at
// every level, so that it is summed by log2(lanes) register shuffles with no block barrier and
// no shared memory. It replaces a block reduction with four barriers
// (bench/DECISIONS.md#d42-gpu-warp-segments).
void GpuCtx::warp_row_kernel(const LoweredFunc &c, const WarpRows &w) {
    const int lanes = w.lanes, vec = w.vec;
    int rank = (int)c.vars.size();
    std::string j = c.vars.back();
    const std::vector<std::string> &stats = plan.stats_of(c.name);
    const LoweredFunc &r0 = *p.find(stats[0]);
    int64_t k = rvar_extent(r0), n = c.extents.back();
    ScheduleStatement st(c.name);
    std::string jl = ident(c, j + "l"), jv = ident(c, j + "v"), at;  // at: the warp's var
    st.add("compute_root");
    if (w.rows == 0) {
        st.comments.push_back("row kernel of segments: one block per row, one warp's " + std::to_string(lanes) +
                              " lanes × " + std::to_string(vec) + " floats per " + std::to_string(k) +
                              "-wide segment (" + std::to_string(n / k) + " segments); fuses " + join(stats));
        std::string jj = ident(c, j + "j");
        at = ident(c, j + "s");
        st.add("split", {j, at, jj, k, tail(true)}).add("split", {jj, jl, jv, vec, tail(true)});
        std::string row = fuse_outer(st, c, rank - 1);
        st.add("reorder", {jv, jl, at, row}).add("vectorize", {jv});
        st.add("gpu_lanes", {jl}).add("gpu_threads", {at}).add("gpu_blocks", {row});
    } else {
        st.comments.push_back("row kernel of short rows: " + std::to_string(w.rows) + " rows per block, one warp's " +
                              std::to_string(lanes) + " lanes × " + std::to_string(vec * w.groups) +
                              " floats per " + std::to_string(n) + "-wide row" +
                              (w.groups > 1 ? " (" + std::to_string(w.groups) + " vectors a lane, a warp apart)" : "") +
                              "; fuses " + join(stats));
        std::vector<ScheduleArg> order = lane_split(st, c, j, w);
        ScheduleArg lane = order.back();
        std::string row = fuse_outer(st, c, rank - 1), rb = ident(c, row + "b");
        at = ident(c, row + "r");
        st.add("split", {row, rb, at, w.rows, tail(true)});
        order.push_back(at);
        order.push_back(rb);
        st.add("reorder", order).add("vectorize", {order[0]});
        if (w.groups > 1) st.add("unroll", {order[1]});
        st.add("gpu_lanes", {lane}).add("gpu_threads", {at}).add("gpu_blocks", {rb});
    }
    s.statements.push_back(st);
    for (const auto &bn : plan.buffered_of(c.name)) {
        const LoweredFunc &b = *p.find(bn);
        ScheduleStatement bs(bn);
        const std::vector<std::string> &kept = plan.buffered_of(c.name);
        bool feeds_kept = std::any_of(b.consumers.begin(), b.consumers.end(), [&](const std::string &u) {
            return std::find(kept.begin(), kept.end(), u) != kept.end();
        });
        bs.comments.push_back(feeds_kept ? "the row's values, read by a statistic and by the values kept above: loaded "
                                           "once per lane, in registers"
                                         : "read by a statistic and by " + c.name + ": computed once per lane, in registers");
        bs.add("compute_at", {c.name, at});
        std::vector<ScheduleArg> inner = lane_split(bs, b, b.vars.back(), w);
        if (w.groups > 1) bs.add("reorder", inner).add("unroll", {inner[1]});
        bs.add("vectorize", {inner[0]}).add("gpu_lanes", {inner.back()});
        s.statements.push_back(bs);
    }
    for (const auto &rn : stats) warp_statistic(*p.find(rn), c.name, at, w);
}

// Splits row var \p j of \p f into a lane's vectors: (vector, lane), or (vector, group, lane) when
// each lane holds w.groups vectors a warp's width apart; returns the new vars innermost first.
std::vector<ScheduleArg> GpuCtx::lane_split(ScheduleStatement &st, const LoweredFunc &f, const std::string &j,
                                            const WarpRows &w) {
    std::string jl = ident(f, j + "l"), jv = ident(f, j + "v");
    if (w.groups == 1) {
        st.add("split", {j, jl, jv, w.vec, tail(true)});
        return {jv, jl};
    }
    std::string jq = ident(f, j + "q"), jg = ident(f, j + "g");
    st.add("split", {j, jq, jv, w.vec, tail(true)}).add("split", {jq, jg, jl, w.lanes, tail(true)});
    return {jv, jg, jl};
}

// Statistic \p r of warp row kernel \p c, computed at the warp's var \p at. It is computed per
// lane over its keepdims var rounded up to the lanes (Halide 14 cannot store a per-warp scalar
// outside a lane loop), and consumers read lane 0.
void GpuCtx::warp_statistic(const LoweredFunc &r, const std::string &c, const std::string &at, const WarpRows &w) {
    const int lanes = w.lanes, vec = w.vec;
    const std::string &rn = r.name;
    std::string kd = keepdims_var(r, w.rows == 0 ? segment_var(p, c, r) : ""), rv = r.update_rvars[0][0];
    std::string kdo = ident(r, kd + "o"), kdl = ident(r, kd + "l");
    ScheduleStatement rs(rn);
    rs.comments.push_back(std::string(w.rows == 0 ? "segment" : "row") + " statistic: " + std::to_string(lanes) +
                          " lanes per " + (w.rows == 0 ? "segment" : "row") + ", summed by a tree of " +
                          "register shuffles; every lane holds it, consumers read lane 0");
    rs.add("compute_at", {c, at}).add("split", {kd, kdo, kdl, lanes, tail(true)}).add("gpu_lanes", {kdl});
    s.statements.push_back(rs);
    // Level `lanes`: each lane sums its vec consecutive elements (times its groups, a warp apart).
    std::string prev = ident(r, "rl"), rvv = ident(r, "rv"), rg = ident(r, "rg");
    std::string u = ident(r, "u" + std::to_string(lanes));
    ScheduleStatement up(rn, 0);
    if (w.groups == 1) {
        up.add("split", {rv, prev, rvv, vec, rtail(true)});
    } else {
        std::string rq = ident(r, "rq");
        up.add("split", {rv, rq, rvv, vec, rtail(true)}).add("split", {rq, rg, prev, lanes, rtail(true)});
    }
    up.add("rfactor", {prev, u}, rn + "_l" + std::to_string(lanes));
    s.statements.push_back(up);
    lane_level(rn + "_l" + std::to_string(lanes), c, at, rvv, u, w.groups > 1 ? rg : "");
    // Each further level adds lane l + half to lane l (a shuffle down), half = lanes/2 … 2.
    for (int half = lanes / 2; half >= 2; half /= 2) {
        std::string hs = std::to_string(half), ro = ident(r, "ro" + hs), ur = ident(r, "u" + hs + "r"),
                    uh = ident(r, "u" + hs);
        ScheduleStatement lv(rn, 0);
        lv.add("split", {prev, ro, ur, half, rtail(true)}).add("rfactor", {ur, uh}, rn + "_l" + hs);
        s.statements.push_back(lv);
        lane_level(rn + "_l" + hs, c, at, ro, uh);
        prev = ur;
    }
    ScheduleStatement fin(rn, 0);
    fin.add("split", {kd, kdo, kdl, lanes, tail(true)}).add("unroll", {prev}).add("gpu_lanes", {kdl});
    s.statements.push_back(fin);
}

// One level \p f of a warp tree: computed at \p at.\p var, its lanes \p lane, its two (or vec)
// terms \p terms unrolled in each lane (and its \p groups, when a lane holds several vectors).
void GpuCtx::lane_level(const std::string &f, const std::string &at, const std::string &var, const std::string &terms,
                        const std::string &lane, const std::string &groups) {
    ScheduleStatement pure(f);
    pure.add("compute_at", {at, var}).add("gpu_lanes", {lane});
    s.statements.push_back(pure);
    ScheduleStatement up(f, 0);
    if (groups.empty()) {
        up.add("reorder", {terms, lane}).add("unroll", {terms});
    } else {
        up.add("reorder", {terms, groups, lane}).add("unroll", {terms}).add("unroll", {groups});
    }
    up.add("gpu_lanes", {lane});
    s.statements.push_back(up);
}

}  // namespace loom::gpu_autosched
