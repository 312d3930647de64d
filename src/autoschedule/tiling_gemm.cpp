// The GEMM emitter of tiling.cpp's Ctx (tiling_internal.h) in three steps: choose_gemm decides
// (GemmPlan: the path, the micro-kernel and its cache blocking, which Func's tiles hold the
// results), emit_gemm writes the statements of that plan, explain_gemm the comment on its tile
// loop. gemm_tile sizes the micro-kernel and the blocking for this emitter and the cost model.
#include <algorithm>
#include <string>
#include <vector>

#include "autoschedule/tiling_internal.h"
#include "support/error.h"

namespace loom::autosched {

namespace {

// k steps a GEMM micro-kernel unrolls (its update's innermost reduction loop).
constexpr int kGemmKUnroll = 4;
// Rows of B per task below which a batch-1 GEMV is not split over its rows (gemv_row_blocks).
constexpr int64_t kGemvRowsPerTask = 64;

// Narrowest vector (f32 lanes: AVX2's width) a GEMM's columns fall back to when they do not fill
// the target's (gemm_lanes).
constexpr int kGemmMinLanes = 8;

// Whether a k loop of \p kext steps unrolls by kGemmKUnroll (four steps amortise the loop's own
// increments and the A/B address updates; bench/DECISIONS.md#d23-gemm-micro-kernel).
bool unrolls_k(int64_t kext) { return kext % kGemmKUnroll == 0 && kext >= 2 * kGemmKUnroll; }

// The side of an epilogue's tile along a dim of \p extent: \p def, unless a last tile that it
// does not divide (shifted inwards, so computed twice in part: a batch's 64 rows in tiles of 48
// computed 96) makes another multiple of \p unit from half to twice def, or the whole extent,
// compute fewer (bench/DECISIONS.md#d90-transposed-gemm-operand-materialized).
int64_t whole_tiles(int64_t extent, int64_t unit, int64_t def) {
    if (extent <= def || extent % def == 0) return std::min(extent, def);
    auto computed = [&](int64_t c) { return (extent + c - 1) / c * c; };
    int64_t best = def;
    for (int64_t c = std::max(unit, def / 2 / unit * unit); c <= 2 * def && c < extent; c += unit)
        if (computed(c) < computed(best)) best = c;
    if (extent <= 2 * def && extent < computed(best)) best = extent;
    return best;
}

}  // namespace

int gemm_lanes(int V, int64_t N) {
    int l = V;
    while (l > kGemmMinLanes && l > N) l /= 2;
    return l;
}

std::string Ctx::member_with(Placement pl) const {
    for (const auto &f : k.funcs)
        if (plan.decision(f)->placement == pl) return f;
    return "";
}

// The GEMM's prologue (Placement::Block) computed per row block \p par of the epilogue: a
// pure Func vectorised along its inner var, a row reduction vectorised by rfactor.
void Ctx::block_members(const std::string &owner, const std::string &par) {
    if (par.empty()) return;
    for (const auto &f : k.funcs) {
        if (plan.decision(f)->placement != Placement::Block) continue;
        ScheduleStatement &ms = add(f);
        note(ms, f);
        ms.add("compute_at", {owner, par});
        const auto &v = lf(f).vars;
        if (v.empty()) continue;
        int lv = fit_lanes(lanes(f), lf(f).extents.back());
        int64_t piece = lv && !fi(f).has_update ? concat_piece(f) : 0;
        if (piece > 0) {  // as in pure_loops: one unrolled vector copy per concatenated input
            std::vector<std::string> used = names_of(f);
            std::string jo = fresh(used, v.back() + "o"), ji = fresh(used, v.back() + "i");
            ms.add("split", {v.back(), jo, ji, piece}).add("unroll", {jo}).add("vectorize", {ji, lv});
        } else if (!fi(f).has_update) {
            if (lv) ms.add("vectorize", {v.back(), lv});
        } else {
            rfactor_rows(f, f, v.back());
        }
    }
}

static const char *gemm_path_name(GemmPlan::Path path) {
    switch (path) {
    case GemmPlan::Path::Generic: return "gemm.generic";
    case GemmPlan::Path::WrapperTiles: return "gemm.wrapper_tiles";
    case GemmPlan::Path::CacheBlocked: return "gemm.cache_blocked";
    case GemmPlan::Path::RootTiles: return "gemm.root_tiles";
    case GemmPlan::Path::RootRagged: return "gemm.root_ragged";
    }
    return "gemm.generic";
}

void Ctx::gemm() {
    GemmPlan g = choose_gemm();
    tiling.path = gemm_path_name(g.path);
    if (g.path != GemmPlan::Path::Generic) {
        tiling.vector_lanes = g.V;
        tiling.wrapper = g.wrap;
        tiling.tile_m = g.gt.MR;
        tiling.tile_n = g.gt.NR;
        tiling.k_chunk = g.ksplit ? g.gt.KC : 0;
        tiling.column_panel = g.block ? g.gt.NC : 0;
    }
    emit_gemm(g);
}

GemmPlan Ctx::choose_gemm() {
    GemmPlan g;
    const std::string &R = k.root;
    const std::string F = fi(R).is_matmul ? R : member_with(Placement::Tile);
    if (F.empty()) return g;
    const FuncInfo &f = fi(F);
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    const int r = (int)v.size();
    if (r < 2 || f.rvar_extents.empty() || f.rvar_extents[0].size() != 1) return g;
    const int64_t M = e[r - 2], N = e[r - 1], K = f.rvar_extents[0][0];
    const int V = gemm_lanes(lanes(F), N);
    const bool epilogue = R != F;
    // j in vector lanes, i unrolled, k outermost in the tile: the accumulators stay in
    // registers. When B is stored [N, K] (a Linear layer) the B loads are gathers; a
    // dot-product form (k in lanes, rfactor) is far slower, so it is not used
    // (bench/DECISIONS.md#d23-gemm-micro-kernel).
    GemmTile gt = gemm_tile(f, true, m, knobs);
    // A GEMM with no epilogue whose micro-kernel strips of A and B (MR x K, K x NR) fit in half of
    // L1 is computed per micro-kernel tile of a wrapper `<gemm>_out` (`in()`; an output's wrapper
    // is realized in its place): its initial value, k loop and store stay in registers. Computed at
    // root, its initial value was a pass of its own over the output, and the short k loop of every
    // micro-kernel loaded and stored its accumulators
    // (bench/DECISIONS.md#d22-output-reduction-per-tile-of-a-wrapper). A longer k takes the
    // epilogue's cache blocking under the wrapper where the root GEMM's columns are ragged (no
    // multiple of its micro-kernel or panel: the root path then steps one guarded vector at a time;
    // the wrapper's tiles shift inwards). Where they divide, blocking under a wrapper is no faster
    // than the root path (bench/DECISIONS.md#d28-ragged-gemm-under-wrapper). Not with too few row
    // tiles for the cores (a batch-1 Linear: its column panels are the tasks, below), unless its
    // rows move with the input sizes and fill a tile at the planned size: the one compile for every
    // size runs more rows than planned, and its root path's rows, guarded, keep their accumulators
    // in memory (bench/DECISIONS.md#d135-dynamic-shapes-moving-gemm-rows-per-wrapper-tile).
    const std::vector<bool> &moves = lf(F).dynamic_vars;
    const bool moving_rows = (int)moves.size() == r && moves[r - 2] && gt.ok && M >= gt.MR;
    const bool few_rows = gt.ok && (M + gt.MR - 1) / gt.MR < 2 * std::max(1, m.cores) && !moving_rows;
    const bool short_k = K * (gt.MR + gt.NR) * f.esize <= (int64_t)m.l1_bytes / 2;
    const GemmTile root_tile = epilogue ? GemmTile{} : gemm_tile(f, false, m, knobs);
    const bool ragged = root_tile.ok && (N % root_tile.NR != 0 || (root_tile.NC < N && N % root_tile.NC != 0));
    // A training step's Linear reads its weight, a graph input, as [N, K] (no blocked copy as for
    // a constant): no root tile vectorizes it, and the generic schedule left the product scalar;
    // the wrapper's micro-kernel gathers B instead (bench/DECISIONS.md#d98-gemm-of-a-parameter-weight).
    const bool gathered_input = !epilogue && !root_tile.ok && !lf(F).input_reads.empty();
    const bool wrap = !epilogue && knobs.tile_wrappers && gt.ok && !few_rows && (short_k || ragged || gathered_input);
    const bool per_kernel = wrap && short_k;
    if (!epilogue && !wrap) gt = root_tile;
    if (!gt.ok) return g;  // no vectorised micro-kernel (N under a vector, or gathered B at root)
    // Such a tile is bound by its loads from L1: a k step loads NR/V vectors of B and broadcasts
    // MR values of A into MR*NR/V FMAs. 4 x 4 vectors takes 8 loads for 16 FMAs, 8 x 2 vectors 10
    // (bench/DECISIONS.md#d27-per-tile-gemm-shape). Not where B is an inlined transpose of its
    // innermost dim (the keys' Kᵀ): its vectors are gathers, and four of them a step cost more.
    bool b_gathers = false;
    for (const auto &pr : lf(F).producers) {
        const FuncDecision *d = plan.decision(pr);
        b_gathers |= pr != f.matmul_a && d && d->placement == Placement::Inline && !fi(pr).transposed_from.empty();
    }
    if (per_kernel && knobs.gemm_mr == 0 && knobs.gemm_nr_vectors == 0 && f.inner_var_contiguous && !b_gathers &&
        N % (4 * V) == 0 && M >= 4 && m.vector_registers >= 32 && K * (4 + 4 * V) * f.esize <= (int64_t)m.l1_bytes * 3 / 4) {
        gt.NR = 4 * V;
        gt.MR = 4;
    }
    g.F = F;
    g.T = wrap ? fresh(func_names, F + "_out") : R;
    g.wrap = wrap;
    g.few_rows = few_rows;
    g.gt = gt;
    g.V = V;
    g.M = M, g.N = N, g.K = K;
    g.esize = f.esize;
    g.block = gt.NC < N;
    // Rows that MR does not divide are guarded (the unrolled rows of the last tile are skipped by
    // an if that loop partitioning moves out of the steady state); ragged columns take the plain
    // path (RootRagged).
    g.exact_rows = M % gt.MR == 0;
    const bool exact_cols = N % gt.NR == 0 && (!g.block || N % gt.NC == 0);
    const int tasks_floor = 2 * std::max(1, m.cores);
    if (per_kernel) {
        g.path = GemmPlan::Path::WrapperTiles;
        g.batch_parallel = r > 2 && e[0] >= tasks_floor;
        g.kunroll = unrolls_k(K);
    } else if (g.T != F) {
        g.path = GemmPlan::Path::CacheBlocked;
        g.ksplit = gt.KC < K;
        g.jsplit = gt.NCt < N;
        g.isplit = gt.MC < M;
        g.kunroll = unrolls_k(g.ksplit ? gt.KC : K) && (!g.ksplit || K % gt.KC == 0);
    } else if (!exact_cols) {
        g.path = GemmPlan::Path::RootRagged;
        // Too few row tiles for the cores (a classifier at batch 1): the column vectors go to the
        // threads instead.
        g.by_cols = (M + gt.MR - 1) / gt.MR < tasks_floor;
    } else {
        g.path = GemmPlan::Path::RootTiles;
        g.kunroll = unrolls_k(K);
        // A batched GEMM with batches enough for the cores runs its outermost batch var in
        // parallel: one fork and join, not one per batch around the row tiles
        // (bench/DECISIONS.md#d26-gemm-parallel-when-few-row-tiles).
        g.batch_parallel = r > 2 && e[0] >= tasks_floor;
    }
    return g;
}

std::string Ctx::explain_gemm(const GemmPlan &g) const {
    const int MR = g.gt.MR, NR = g.gt.NR, V = g.V;
    const std::string kernel = str_cat("micro-kernel ", MR, "x", NR, " (", MR * NR / V, " vector accumulators)");
    switch (g.path) {
    case GemmPlan::Path::WrapperTiles:
        return str_cat(kernel, ", ", g.F, " computed per tile (strips of ", g.K * (MR + NR) * g.esize / 1024,
                       " KiB in L1)");
    case GemmPlan::Path::CacheBlocked: {
        const int64_t kc = g.ksplit ? g.gt.KC : g.K;
        return str_cat(kernel, " in tiles of ", g.gt.MC, "x", g.gt.NCt, ", k in chunks of ", kc, " (B strip ",
                       kc * NR * g.esize / 1024, " KiB in L1)");
    }
    default: {
        if (g.path == GemmPlan::Path::RootRagged && g.by_cols && g.M == 1)
            return str_cat("one row: each task streams its part of B in order, k outside the ", V,
                           "-lane column vectors (accumulators in L1)");
        const int64_t panel = g.block ? g.gt.NC : g.N;
        return str_cat(kernel, ", column panels of ", panel, " (B panel ", panel * g.K * g.esize / 1024, " KiB in L2)");
    }
    }
}

void Ctx::emit_gemm(const GemmPlan &g) {
    if (g.path == GemmPlan::Path::Generic) return generic();
    if (g.wrap) {
        ScheduleStatement &ws = add(g.F);
        comment_kernel(ws);
        ws.comments.push_back(str_cat(g.T, ": the GEMM's result, stored per tile from its accumulators"));
        ws.add("in", {}, g.T);
    }
    ScheduleStatement &st = add(g.T);
    if (!g.wrap) comment_kernel(st);
    st.comments.push_back(explain_gemm(g));
    st.add("compute_root");
    switch (g.path) {
    case GemmPlan::Path::WrapperTiles: kernel_tiles(st, g); break;
    case GemmPlan::Path::CacheBlocked: gemm_cache_blocked(st, g); break;
    case GemmPlan::Path::RootRagged: gemm_root_ragged(st, g); break;
    case GemmPlan::Path::RootTiles: gemm_root_tiles(st, g); break;
    case GemmPlan::Path::Generic: break;
    }
    inline_members();
}

// GEMM F computed per micro-kernel tile (MR x NR) of its wrapper T, whose pure-stage statement
// \p st (compute_root) this completes: the tile's initial value, k loop and store stay in
// registers. Rows and columns that the tile does not divide are shifted inwards (the wrapper is a
// pure Func, and choose_gemm wraps only GEMMs of at least a tile each way), so every tile is
// whole; the row tiles, with the batch vars, run in parallel.
void Ctx::kernel_tiles(ScheduleStatement &st, const GemmPlan &g) {
    const std::string &F = g.F, &T = g.T;
    const GemmTile &gt = g.gt;
    const auto &v = lf(F).vars;
    const int r = (int)v.size(), V = gt.V;
    const std::string &i = v[r - 2], &j = v[r - 1];
    std::vector<std::string> tused = v;
    std::string jo = fresh(tused, j + "o"), ji = fresh(tused, j + "i"), io = fresh(tused, i + "o"),
                ii = fresh(tused, i + "i");
    st.add("split", {j, jo, ji, gt.NR}).add("split", {i, io, ii, gt.MR});
    Args ro = {ji, ii, jo, io};
    for (int d = r - 3; d >= 0; d--) ro.push_back(v[d]);
    st.add("reorder", ro).add("vectorize", {ji, V});
    // A batched GEMM with batches enough for the cores forks once over its outermost batch var;
    // otherwise the row tiles (fused with the batch vars) are the tasks.
    if (g.batch_parallel) {
        st.add("parallel", {v[0]});
    } else {
        std::string par = io;
        for (int d = r - 3; d >= 0; d--) {
            std::string fz = fresh(tused, "t");
            st.add("fuse", {par, v[d], fz});
            par = fz;
        }
        st.add("parallel", {par});
    }
    block_members(T, g.batch_parallel ? v[0] : io);
    ScheduleStatement &fs = add(F);
    note(fs, F);
    fs.add("compute_at", {T, jo}).add("vectorize", {j, V});
    if (gt.NR > V) fs.add("unroll", {j});
    fs.add("unroll", {i});
    ScheduleStatement &u = add(F, 0);
    std::vector<std::string> uused = names_of(F);
    const std::string kv = lf(F).update_rvars[0][0];
    std::string jvo = fresh(uused, "jvo"), jvi = fresh(uused, "jvi"), kvo = fresh(uused, "kvo"),
                kvi = fresh(uused, "kvi");
    Args uro = {gt.NR > V ? jvi : j};
    if (gt.NR > V) {
        u.add("split", {j, jvo, jvi, V});
        uro.push_back(jvo);
    }
    uro.push_back(i);
    if (g.kunroll) {
        u.add("split", {kv, kvo, kvi, kGemmKUnroll});
        uro.push_back(kvi);
    }
    uro.push_back(g.kunroll ? kvo : kv);
    u.add("reorder", uro).add("vectorize", {uro[0].name});
    if (gt.NR > V) u.add("unroll", {jvo});
    u.add("unroll", {i});
    if (g.kunroll) u.add("unroll", {kvi});
}

// Cache blocking (after BLIS/GotoBLAS): the tile MC x NCt of T (the epilogue, or a wrapper) holds
// the GEMM's results; within it k runs in chunks of KC so that a B strip (KC x NR) stays in L1
// while the micro-kernel walks the MC rows, and A's block (MC x KC) and B's (KC x NC) stay in L2
// (bench/DECISIONS.md#d24-gemm-cache-blocking).
void Ctx::gemm_cache_blocked(ScheduleStatement &st, const GemmPlan &g) {
    const std::string &F = g.F, &T = g.T;
    const GemmTile &gt = g.gt;
    const int V = g.V, NR = gt.NR, MR = gt.MR;
    const int64_t K = g.K, KC = gt.KC, MC = gt.MC, NCt = gt.NCt;
    const auto &v = lf(F).vars;
    const int r = (int)v.size();
    const std::string &i = v[r - 2], &j = v[r - 1];
    const std::string kv = lf(F).update_rvars[0][0];
    std::vector<std::string> rused = T == k.root ? names_of(T) : lf(F).vars;
    std::string jo = fresh(rused, "jo"), io = fresh(rused, "io"), jt = fresh(rused, "jt"), it_ = fresh(rused, "it");
    if (g.jsplit) st.add("split", {j, jo, jt, NCt});
    if (g.isplit) st.add("split", {i, io, it_, MC});
    Args ro = {g.jsplit ? jt : j, g.isplit ? it_ : i};
    if (g.jsplit) ro.push_back(jo);
    if (g.isplit) ro.push_back(io);
    for (int d = r - 3; d >= 0; d--) ro.push_back(v[d]);
    st.add("reorder", ro);
    std::string par;
    for (size_t q = 2; q < ro.size(); q++) {
        if (par.empty()) {
            par = ro[q].name;
            continue;
        }
        std::string fz = fresh(rused, "t");
        st.add("fuse", {par, ro[q].name, fz});
        par = fz;
    }
    st.add("vectorize", {ro[0].name, V});
    if (!par.empty()) st.add("parallel", {par});
    block_members(T, par);
    ScheduleStatement &fs = add(F);
    note(fs, F);
    const std::string &at = par;  // the loop just outside the tile (all outer loops fused)
    if (at.empty()) fs.add("compute_root");  // one tile: the whole result
    else fs.add("compute_at", {T, at});
    fs.add("vectorize", {j, V});
    ScheduleStatement &u = add(F, 0);
    std::vector<std::string> uused = names_of(F);
    std::string ko = fresh(uused, "ko"), ki = fresh(uused, "ki"), ujo = fresh(uused, "jo"), uji = fresh(uused, "ji"),
                jvo = fresh(uused, "jvo"), jvi = fresh(uused, "jvi"), uio = fresh(uused, "io"),
                uii = fresh(uused, "ii");
    auto sp = [&](const std::string &a, const std::string &o, const std::string &in_, int64_t fct, bool guard) {
        Args x = {a, o, in_, fct};
        if (guard) x.push_back(ScheduleArg::tail("GuardWithIf"));
        u.add("split", x);
    };
    if (g.ksplit) sp(kv, ko, ki, KC, K % KC != 0);
    sp(j, ujo, uji, NR, NCt % NR != 0);
    if (NR > V) sp(uji, jvo, jvi, V, false);
    sp(i, uio, uii, MR, MC % MR != 0);
    std::string kio = fresh(uused, "kio"), kii = fresh(uused, "kii");
    if (g.kunroll) sp(g.ksplit ? ki : kv, kio, kii, kGemmKUnroll, false);
    Args uro = {NR > V ? jvi : uji};
    if (NR > V) uro.push_back(jvo);
    uro.push_back(uii);
    if (g.kunroll) uro.push_back(kii);
    uro.push_back(g.kunroll ? kio : g.ksplit ? ki : kv);
    uro.push_back(uio);
    uro.push_back(ujo);
    if (g.ksplit) uro.push_back(ko);
    u.add("reorder", uro).add("vectorize", {NR > V ? jvi : uji});
    if (NR > V) u.add("unroll", {jvo});
    u.add("unroll", {uii});
    if (g.kunroll) u.add("unroll", {kii});
    if (at.empty() && g.M >= 2 * MR) u.add("parallel", {uio});
}

// A GEMM at root whose columns the micro-kernel or the panel does not divide: one guarded vector
// of j per step, no nested splits; the column vectors are the tasks where the row tiles are too
// few for the cores.
void Ctx::gemm_root_ragged(ScheduleStatement &st, const GemmPlan &g) {
    const std::string &F = g.F;
    const auto &v = lf(F).vars;
    const int r = (int)v.size();
    const std::string &i = v[r - 2], &j = v[r - 1];
    const std::string kv = lf(F).update_rvars[0][0];
    pure_loops(st, F, 1);
    ScheduleStatement &u = add(F, 0);
    std::vector<std::string> uused = names_of(F);
    std::string jo = fresh(uused, "jo"), ji = fresh(uused, "ji"), io = fresh(uused, "io"), ii = fresh(uused, "ii");
    if (g.by_cols && g.M == 1 && r == 2) {
        // One row (a batch-1 classifier): k outside the column vectors, so each task streams its
        // part of every row of B in order. With k inside, a task read one vector per row, 4 KB and
        // more apart, which the prefetcher loses (bench/DECISIONS.md#d62-batch-1-gemv).
        const int tasks = std::max(1, m.cores);
        if (tasks > 1 && g.K >= kGemvRowsPerTask * tasks) return gemv_row_blocks(u, g, tasks);
        const int64_t chunk = ((g.N + tasks - 1) / tasks + g.V - 1) / g.V * g.V;
        std::string jt = fresh(uused, "jt"), jr = fresh(uused, "jr");
        u.add("split", {j, jt, jr, chunk, ScheduleArg::tail("GuardWithIf")})
            .add("split", {jr, jo, ji, g.V, ScheduleArg::tail("GuardWithIf")})
            .add("reorder", {ji, jo, kv, i, jt})
            .add("vectorize", {ji});
        if (tasks > 1) u.add("parallel", {jt});
        return;
    }
    u.add("split", {j, jo, ji, g.V, ScheduleArg::tail("GuardWithIf")})
        .add("split", {i, io, ii, g.gt.MR, ScheduleArg::tail("GuardWithIf")});
    if (g.by_cols) u.add("reorder", {ji, ii, kv, io, jo});
    else u.add("reorder", {ji, ii, kv, jo, io});
    u.add("vectorize", {ji}).add("parallel", {g.by_cols ? jo : io});
}

// A batch-1 GEMV on several cores: each task sums the products of its own block of B's rows into a
// partial row (rfactor over blocks of k), so it streams one contiguous block of B in order; the
// root Func adds the partial rows. Tasks that each took a chunk of every row of B read it in pieces
// of a few KB, which the prefetcher restarts at each one (bench/DECISIONS.md#d142-gemv-row-blocks).
void Ctx::gemv_row_blocks(ScheduleStatement &u, const GemmPlan &g, int tasks) {
    const std::string &F = g.F;
    const auto &v = lf(F).vars;
    const std::string &i = v[0], &j = v[1];
    const std::string kv = lf(F).update_rvars[0][0];
    std::vector<std::string> uused = names_of(F);
    const std::string ko = fresh(uused, kv + "o"), ki = fresh(uused, kv + "i"), t = fresh(uused, "t"),
                      jo = fresh(uused, "jo"), ji = fresh(uused, "ji");
    const std::string part = fresh(func_names, F + "_rows");
    const int64_t rows = (g.K + tasks - 1) / tasks;
    u.comments.push_back(str_cat(part, ": partial rows of ", F, ", one per block of ", rows, " rows of B (a task each)"));
    u.add("split", {kv, ko, ki, rows}).add("rfactor", {ko, t}, part);
    add(part).add("compute_root").add("vectorize", {j, g.V});
    add(part, 0)
        .add("split", {j, jo, ji, g.V, ScheduleArg::tail("GuardWithIf")})
        .add("reorder", {ji, jo, ki, i, t})
        .add("vectorize", {ji})
        .add("parallel", {t});
    add(F, 0).add("split", {j, jo, ji, g.V, ScheduleArg::tail("GuardWithIf")}).add("vectorize", {ji});
}

// A GEMM at root with column panels of NC (when NC < N) split into micro-kernel tiles MR x NR in
// its update; the row tiles are the tasks, else the column panels or tiles where the row tiles
// are too few for the cores, or the outer batch var where the batches are enough.
void Ctx::gemm_root_tiles(ScheduleStatement &st, const GemmPlan &g) {
    const std::string &F = g.F;
    const GemmTile &gt = g.gt;
    const auto &v = lf(F).vars;
    const int r = (int)v.size();
    const std::string &i = v[r - 2], &j = v[r - 1];
    const std::string kv = lf(F).update_rvars[0][0];
    pure_loops(st, F, 1);
    ScheduleStatement &u = add(F, 0);
    std::vector<std::string> uused = names_of(F);
    std::string jb = fresh(uused, "jb"), jr = fresh(uused, "jr"), jo = fresh(uused, "jo"), ji = fresh(uused, "ji"),
                io = fresh(uused, "io"), ii = fresh(uused, "ii");
    auto sp = [&](const std::string &a, const std::string &o, const std::string &in_, int64_t fct, bool guard) {
        Args x = {a, o, in_, fct};
        if (guard) x.push_back(ScheduleArg::tail("GuardWithIf"));
        u.add("split", x);
    };
    if (g.block) sp(j, jb, jr, gt.NC, false);
    sp(g.block ? jr : j, jo, ji, gt.NR, false);
    sp(i, io, ii, gt.MR, !g.exact_rows);
    std::string jvo = fresh(uused, "jvo"), jvi = fresh(uused, "jvi");
    u.add("split", {ji, jvo, jvi, g.V});
    std::string kvo = fresh(uused, "kvo"), kvi = fresh(uused, "kvi");
    if (g.kunroll) u.add("split", {kv, kvo, kvi, kGemmKUnroll});
    Args ro = {jvi, jvo, ii};
    if (g.kunroll) ro.push_back(kvi);
    ro.push_back(g.kunroll ? kvo : kv);
    ro.push_back(jo);
    ro.push_back(io);
    if (g.block) ro.push_back(jb);
    u.add("reorder", ro).add("vectorize", {jvi}).add("unroll", {jvo}).add("unroll", {ii});
    if (g.kunroll) u.add("unroll", {kvi});
    if (g.batch_parallel) u.add("parallel", {v[0]});
    else u.add("parallel", {!g.few_rows ? io : g.block ? jb : jo});
}

GemmTile gemm_tile(const FuncInfo &f, bool epilogue, const MachineModel &m, const ScheduleKnobs &knobs) {
    GemmTile t;
    const auto &e = f.lf->extents;
    size_t r = e.size();
    if (r < 2 || f.rvar_extents.empty() || f.rvar_extents[0].size() != 1) return t;
    t.M = e[r - 2], t.N = e[r - 1], t.K = f.rvar_extents[0][0];
    t.V = gemm_lanes(m.lanes(f.lf->dtype), t.N);
    int V = t.V;
    if (!(t.N >= V && (epilogue || f.inner_var_contiguous))) return t;
    t.ok = true;
    // Gathered B loads (B stored [N, K]) are the bottleneck: one vector of j per row.
    int nrv = t.N >= 2 * V && f.inner_var_contiguous ? 2 : 1;
    if (knobs.gemm_nr_vectors > 0 && f.inner_var_contiguous && t.N >= (int64_t)knobs.gemm_nr_vectors * V)
        nrv = knobs.gemm_nr_vectors;
    // Under an epilogue a column tile that does not divide the columns is guarded (GuardWithIf)
    // around the split of its vectors, which Halide 14 compiles wrong where the rows are one tile
    // (NaN or doubled sums): such a GEMM takes one vector of columns per tile
    // (bench/DECISIONS.md#d231-guarded-column-tiles-of-one-vector).
    if (epilogue && t.N % ((int64_t)nrv * V) != 0) nrv = 1;
    t.NR = nrv * V;
    int max_mr = std::max(1, (m.vector_registers - 4) / nrv);
    t.MR = (int)std::min<int64_t>({knobs.gemm_mr > 0 ? knobs.gemm_mr : 8, t.M, max_mr});
    t.NC = std::max<int64_t>(t.NR, ((int64_t)m.l2_bytes / 2 / (t.K * f.esize)) / t.NR * t.NR);
    // Column panels that divide N: a ragged last panel sends the whole GEMM down the plain path
    // (one guarded vector per step; bench/DECISIONS.md#d25-gemm-weights-in-column-panels). The
    // widest divisor not under half the L2 budget, else one panel up to twice it.
    if (t.NC < t.N && t.N % t.NR == 0 && t.N % t.NC != 0) {
        int64_t d = t.NC;
        while (d > t.NR && t.N % d != 0) d -= t.NR;
        if (d * 2 >= t.NC) t.NC = d;
        else if (t.N <= 2 * t.NC) t.NC = t.N;
    }
    t.KC = 1;
    if (knobs.gemm_kc > 0) t.KC = knobs.gemm_kc;
    else
        while (t.KC * 2 * t.NR * f.esize <= m.l1_bytes * 3 / 4) t.KC *= 2;
    int tiles = knobs.gemm_tile_kernels > 0 ? knobs.gemm_tile_kernels : 8;
    t.MC = whole_tiles(t.M, t.MR, (int64_t)tiles * t.MR);
    t.NCt = whole_tiles(t.N, t.NR, (int64_t)tiles * t.NR);
    // One micro-kernel row per tile (a batch-1 Linear): no other row reuses a B strip from L1, and
    // chunks of k only cut B's panels into short streams
    // (bench/DECISIONS.md#d24-gemm-cache-blocking).
    if (knobs.gemm_kc <= 0 && t.MC <= t.MR) t.KC = t.K;
    return t;
}

}  // namespace loom::autosched
