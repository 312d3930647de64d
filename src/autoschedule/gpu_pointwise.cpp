/// \file
/// GPU pointwise kernels: a pure Func computed at root, its innermost var in 4-wide vectors and the
/// two innermost vars split over 2-D blocks of kPointThreads threads (outer vars fused into a third
/// block dim); with the var-fusing and block-mapping helpers the other kernel kinds share.

#include "autoschedule/gpu_schedule_internal.h"

namespace loom::gpu_autosched {

void GpuCtx::pointwise_kernel(const LoweredFunc &f) {
    ScheduleStatement st(f.name);
    st.add("compute_root");
    int rank = (int)f.vars.size();
    if (rank == 0) {
        st.add("gpu_single_thread");
        s.statements.push_back(st);
        return;
    }
    st.comments.push_back("pointwise kernel: " + std::to_string(kVec) + " elements per thread (16-byte accesses), " +
                          std::to_string(kPointThreads) + " threads per block");
    if (rank == 4 && num_updates(f) == 0 && plan.channels_last.count(f.name)) return channels_last_kernel(f);
    std::string x = f.vars.back();
    int64_t nx = f.extents.back();
    int v = nx % kVec == 0 ? kVec : 1;
    std::string xq = x;
    if (v > 1) {
        xq = ident(f, x + "q");
        std::string xv = ident(f, x + "v");
        st.add("split", {x, xq, xv, v});
        st.add("vectorize", {xv});
    }
    int64_t nq = nx / v;
    std::string xo = ident(f, x + "o"), xt = ident(f, x + "t");
    if (rank == 1) {
        int tx = (int)std::min<int64_t>(kPointThreads, pow2_floor(nq));
        st.add("split", {xq, xo, xt, tx, tail(nq % tx == 0)});
        st.add("gpu_blocks", {xo}).add("gpu_threads", {xt});
        s.statements.push_back(st);
        return;
    }
    std::string y = f.vars[rank - 2];
    int64_t ny = f.extents[rank - 2];
    int tx = (int)std::min<int64_t>(kPointThreads, pow2_floor(nq));
    int ty = (int)std::max<int64_t>(1, std::min<int64_t>(kPointThreads / tx, pow2_floor(ny)));
    std::string yo = ident(f, y + "o"), yt = ident(f, y + "t");
    st.add("split", {xq, xo, xt, tx, tail(nq % tx == 0)});
    st.add("split", {y, yo, yt, ty, tail(ny % ty == 0)});
    std::vector<ScheduleArg> order;
    if (v > 1) order.push_back(ident(f, x + "v"));
    for (auto n : {xt, yt, xo, yo}) order.push_back(n);
    st.add("reorder", order);
    st.add("gpu_threads", {xt, yt});
    std::vector<ScheduleArg> blocks = {xo, yo};
    if (rank >= 3) {
        std::string outer = fuse_outer(st, f, rank - 2);
        if (outer_extent(f, rank - 2) > kMaxGridYZ) {  // past gridDim.z's limit: make it blockIdx.x
            st.add("reorder", {outer, xo, yo});
            blocks.insert(blocks.begin(), outer);
        } else {
            blocks.push_back(outer);
        }
    }
    st.add("gpu_blocks", blocks);
    s.statements.push_back(st);
}

namespace {

// The channels-last tiling of rank-4 Func \p f (vars n, c, h, w) into \p st: channels split into
// 16-byte vectors (4-wide when they do not divide), threads along the channels then the columns,
// rows and images fused into one block dim; \p inner (a reduction's RVars) run serially inside each
// thread, outside the vector. Splits of an update take GuardWithIf (Halide refuses RoundUp there).
// Returns the thread var along the channels and the vector width.
std::pair<std::string, int> channels_last_tiles(ScheduleStatement &st, const LoweredFunc &f,
                                                const std::vector<std::string> &inner, bool update) {
    const std::string &n = f.vars[0], &c = f.vars[1], &h = f.vars[2], &w = f.vars[3];
    const int64_t nc = f.extents[1], nw = f.extents[3];
    const int want = 16 / std::max(1, dtype_size(f.dtype));
    int v = nc % want == 0 ? want : nc % kVec == 0 ? kVec : 1;
    std::string cq = c, cv = ident(f, c + "v");
    if (v > 1) {
        cq = ident(f, c + "q");
        st.add("split", {c, cq, cv, v});
        st.add("vectorize", {cv});
    }
    const int64_t nq = nc / v;
    const int tx = (int)std::min<int64_t>(kPointThreads, pow2_floor(nq));
    const int ty = (int)std::max<int64_t>(1, std::min<int64_t>(kPointThreads / tx, pow2_floor(nw)));
    std::string co = ident(f, c + "o"), ct = ident(f, c + "t"), wo = ident(f, w + "o"), wt = ident(f, w + "t");
    std::string hn = ident(f, h + "_" + n);
    st.add("split", {cq, co, ct, tx, tail(!update && nq % tx == 0)});
    st.add("split", {w, wo, wt, ty, tail(!update && nw % ty == 0)});
    st.add("fuse", {h, n, hn});
    // Past gridDim.z's limit the fused rows take blockIdx.x.
    std::vector<ScheduleArg> blocks = {co, wo, hn};
    if (f.extents[0] * f.extents[2] > kMaxGridYZ) blocks = {hn, co, wo};
    std::vector<ScheduleArg> order;
    if (v > 1) order.push_back(cv);
    for (const auto &r : inner) order.push_back(r);
    order.push_back(ct);
    order.push_back(wt);
    order.insert(order.end(), blocks.begin(), blocks.end());
    st.add("reorder", order);
    st.add("gpu_threads", {ct, wt});
    st.add("gpu_blocks", blocks);
    return {ct, v};
}

// bound(v, 0, extent) on every var of rank-4 Func \p f of static shape (unless lowering bounded
// it): its buffer's strides are then constants in the kernels that read it, which lets Halide
// prove their channel vectors aligned (whole-vector loads); left to bounds inference they reach a
// kernel as parameters, and each vector is loaded element by element.
void bound_static(ScheduleStatement &st, const LoweredFunc &f) {
    if (!f.sym_extents.empty() || !f.func.defined() || !f.func.function().schedule().bounds().empty()) return;
    for (int k = 0; k < 4; k++)
        if (f.extents[k] <= 0) return;
    for (int k = 0; k < 4; k++) st.add("bound", {f.vars[k], 0, f.extents[k]});
}

}  // namespace

void GpuCtx::channels_last_kernel(const LoweredFunc &f) {
    ScheduleStatement st(f.name);
    st.add("compute_root");
    st.comments.push_back("channels-last kernel: stored NHWC, threads along the channels, then the columns");
    st.add("reorder_storage", {f.vars[1], f.vars[3], f.vars[2], f.vars[0]});
    bound_static(st, f);
    channels_last_tiles(st, f, {}, false);
    s.statements.push_back(st);
}

// The reduction's consumers read a wrapper `<r>_w` tiled as a channels-last kernel; each thread
// computes its vector of channels of \p r (init, then every tap) in registers and stores it once,
// instead of reading and writing the output in memory at every tap
// (bench/DECISIONS.md#d118-gpu-channels-last-taps-in-registers).
void GpuCtx::channels_last_reduction(const LoweredFunc &r) {
    const std::string w = r.name + "_w";
    ScheduleStatement wrap(r.name);
    wrap.add("in", {}, w);
    s.statements.push_back(wrap);
    ScheduleStatement ws(w);
    ws.add("compute_root");
    ws.comments.push_back("channels-last reduction: its wrapper stored NHWC, threads along the channels; each "
                          "thread's channels reduced in registers");
    const std::string &n = r.vars[0], &c = r.vars[1], &h = r.vars[2], &x = r.vars[3];
    ws.add("reorder_storage", {c, x, h, n});
    bound_static(ws, r);
    const auto [ct, v] = channels_last_tiles(ws, r, {}, false);
    s.statements.push_back(ws);
    ScheduleStatement fs(r.name);
    fs.add("compute_at", {w, ct}).add("reorder", {c, x, h, n});
    ScheduleStatement up(r.name, 0);
    std::vector<ScheduleArg> order = {c};
    for (const auto &tap : r.update_rvars[0]) order.push_back(tap);
    for (const std::string *d : {&x, &h, &n}) order.push_back(*d);
    up.add("reorder", order);
    if (v > 1) {
        fs.add("vectorize", {c});
        up.add("vectorize", {c});
    }
    s.statements.push_back(fs);
    s.statements.push_back(up);
}

bool channels_last_global_pool(const LoweredFunc &r) {
    if (r.vars.size() != 4 || num_updates(r) != 1 || r.update_rvars.empty() || r.update_rvars[0].size() != 2 ||
        r.extents[2] != 1 || r.extents[3] != 1 || !r.func.defined())
        return false;
    const auto &rvars = r.func.function().update(0).schedule().rvars();
    if (rvars.size() != 2) return false;
    const int64_t *cols = Halide::Internal::as_const_int(rvars[0].extent);
    const int64_t *rows = Halide::Internal::as_const_int(rvars[1].extent);
    return cols && rows && *rows >= 2 && *rows <= kMaxPoolRows && r.extents[1] % kVec == 0;
}

// Threads along the channels of a block of channels_last_pool: the largest divisor of the \p nq
// channel vectors up to a warp that leaves at least two blocks per SM of an H100 (132 SMs) over
// the \p images, or the largest divisor up to a warp when none does.
static int pool_channel_threads(int64_t nq, int64_t images) {
    int best = 1, best_spread = 0;
    for (int t = 1; t <= 32 && t <= nq; t++) {
        if (nq % t) continue;
        best = t;
        if (images * (nq / t) >= 2 * 132) best_spread = t;
    }
    return best_spread ? best_spread : best;
}

// A global pool of NHWC data (output rows and columns 1): the wrapper `<r>_w` holds a block of
// channel vectors of one image, a thread per vector; the input rows are split over a second
// thread dim by rfactor, each thread summing one row's columns of its vector into `<r>_rows`
// (shared memory), which the channel thread sums in registers. One thread per output summing
// every tap serially (Halide's default) or per vector (channels_last_reduction) left most of the
// GPU idle (bench/DECISIONS.md#d130-gpu-channels-last-global-pool).
void GpuCtx::channels_last_pool(const LoweredFunc &r) {
    const std::string w = r.name + "_w", part = r.name + "_rows";
    const std::string &n = r.vars[0], &c = r.vars[1], &h = r.vars[2], &x = r.vars[3];
    const std::string &rx = r.update_rvars[0][0], &ry = r.update_rvars[0][1];
    const int64_t rows = *Halide::Internal::as_const_int(r.func.function().update(0).schedule().rvars()[1].extent);
    const int64_t nq = r.extents[1] / kVec;
    const int tx = pool_channel_threads(nq, r.extents[0]);
    const std::string cq = ident(r, c + "q"), cv = ident(r, c + "v"), co = ident(r, c + "o"), ct = ident(r, c + "t");
    const std::string xhn = ident(r, x + "_" + h + "_" + n), xh = ident(r, x + "_" + h), u = ident(r, "u");
    ScheduleStatement wrap(r.name);
    wrap.add("in", {}, w);
    s.statements.push_back(wrap);
    ScheduleStatement ws(w);
    ws.add("compute_root");
    ws.comments.push_back("channels-last global pool: a block per " + std::to_string(tx * kVec) +
                          " channels of an image, a thread per vector of them and per input row (" +
                          std::to_string(rows) + "); the rows' partials summed in registers");
    ws.add("reorder_storage", {c, x, h, n});
    bound_static(ws, r);
    ws.add("split", {c, cq, cv, kVec}).add("vectorize", {cv});
    ws.add("split", {cq, co, ct, tx, tail(true)});
    ws.add("fuse", {x, h, xh}).add("fuse", {xh, n, xhn});
    ws.add("reorder", {cv, ct, co, xhn}).add("gpu_threads", {ct}).add("gpu_blocks", {co, xhn});
    s.statements.push_back(ws);
    ScheduleStatement fs(r.name);
    fs.add("compute_at", {w, ct}).add("reorder", {c, x, h, n}).add("vectorize", {c});
    s.statements.push_back(fs);
    ScheduleStatement rf(r.name, 0);
    rf.add("rfactor", {ry, u}, part);
    s.statements.push_back(rf);
    ScheduleStatement up(r.name, 0);
    up.add("reorder", {c, ry, x, h, n}).add("vectorize", {c});
    s.statements.push_back(up);
    // The partials: one row of one channel vector per thread, the block's channels by its rows.
    ScheduleStatement ps(part);
    ps.add("compute_at", {w, co});
    ps.add("split", {c, cq, cv, kVec}).add("vectorize", {cv});
    ps.add("reorder", {cv, cq, u, x, h, n}).add("gpu_threads", {cq, u});
    s.statements.push_back(ps);
    ScheduleStatement pu(part, 0);
    pu.add("split", {c, cq, cv, kVec}).add("vectorize", {cv});
    pu.add("reorder", {cv, rx, cq, u, x, h, n}).add("gpu_threads", {cq, u});
    s.statements.push_back(pu);
}

int64_t outer_extent(const LoweredFunc &f, int n) {
    int64_t e = 1;
    for (int k = 0; k < n; k++) e *= f.extents[k];
    return e;
}

std::string fuse_outer(ScheduleStatement &st, const LoweredFunc &f, int n) {
    std::string fused = f.vars[n - 1];
    for (int k = n - 2; k >= 0; k--) {
        std::string nn = ident(f, f.vars[k] + "_" + fused);
        st.add("fuse", {fused, f.vars[k], nn});
        fused = nn;
    }
    return fused;
}

void add_blocks(ScheduleStatement &up, const LoweredFunc &r, std::vector<ScheduleArg> first) {
    std::vector<ScheduleArg> b = std::move(first);
    for (auto it = r.vars.rbegin(); it != r.vars.rend() && b.size() < 3; ++it) b.push_back(*it);
    up.add("gpu_blocks", b);
}

}  // namespace loom::gpu_autosched
