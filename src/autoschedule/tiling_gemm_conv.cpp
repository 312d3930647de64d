// The GEMM and convolution emitters of tiling.cpp's Ctx (tiling_internal.h): the GEMM micro-kernel
// and its cache blocking (gemm_tile), the channel-tiled and direct convolutions, and the placement
// of a conv's padded input. Split from tiling.cpp as the house style asks (sources under ~800 lines).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "autoschedule/tiling_internal.h"
#include "graph/error.h"

namespace loom::autosched {

namespace {

// k steps a GEMM micro-kernel unrolls (its update's innermost reduction loop).
constexpr int kGemmKUnroll = 4;

// Fewest reduction terms (input channels x taps) per output for Ctx::channel_tile: a 1x1 conv
// with 64 input channels still gains, a 3-channel 3x3 stem does not
// (bench/DECISIONS.md#d30-conv-channel-tiles).
constexpr int64_t kMinChannelTileTerms = 64;

// Reduction terms per output point of update 0 (a conv's input channels x taps).
int64_t reduction_terms(const FuncInfo &f) {
    int64_t k = 1;
    for (auto x : f.rvar_extents[0]) k *= x;
    return k;
}

// A conv that Ctx::channel_tile vectorizes over output channels: weights blocked by lowering
// (LoweredFunc::conv_weight_block), NCHW 2-D, channels a multiple of the block, the vector a
// divisor of it.
bool channel_tiled(const FuncInfo &f, const MachineModel &m) {
    const LoweredFunc &L = *f.lf;
    const int B = L.conv_weight_block, V = m.lanes(L.dtype);
    if (B == 0 || L.vars.size() != 4 || V < 4 || B % V != 0 || L.extents[1] % B != 0 || L.update_rvars.size() != 1 ||
        f.rvar_extents.empty())
        return false;
    // A short reduction (3 input channels x 3x3) leaves the tile's transposing stores to NCHW
    // dominant, and tiles along rows are faster.
    return reduction_terms(f) >= kMinChannelTileTerms;
}

// A channel-tiled conv whose weights fit in half of L2 runs its channel blocks inside row blocks,
// with the padded input computed per row block (in cache); bigger weights are reused across row
// blocks instead (row blocks inside channel blocks, the padded input whole; 512 channels at 7x7,
// 9.4 MB, keep channels outer; bench/DECISIONS.md#d31-conv-channel-block-order).
bool channel_tile_rows_outer(const FuncInfo &f, const MachineModel &m) {
    return (double)f.lf->extents[1] * (double)reduction_terms(f) * f.esize <= (double)m.l2_bytes / 2;
}

}  // namespace

// A conv whose groups have one input channel each (depthwise): its RDom's last RVar (ops/conv.cpp)
// spans one channel.
static bool depthwise(const FuncInfo &c) {
    return c.is_conv && !c.rvar_extents.empty() && c.rvar_extents[0].size() >= 2 && c.rvar_extents[0].back() == 1;
}

// The padded input of a rank-4 conv computed per block of rows of the conv's tile owner: \p pad
// is a pointwise Conv-op Func whose one consumer is a conv (with a reduction) tiled either along
// rows under an epilogue (rows of at least a vector) or over channels with its row blocks outer.
// conv() schedules it (compute_at the row block); its own kernel emits nothing. Returns that
// conv, or "".
std::string conv_of_pad(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                        const FusionPlan &plan, const MachineModel &m, const std::string &pad) {
    auto it = info.find(pad);
    if (it == info.end() || !it->second.is_conv || it->second.has_update || it->second.lf->is_output) return "";
    bool own_kernel = false;  // materialised alone (not inlined into, nor fused with, anything)
    for (const auto &k : plan.kernels) own_kernel |= k.root == pad && k.funcs.size() == 1;
    const FuncDecision *pd = plan.decision(pad);
    if (!own_kernel || !pd || pd->placement != Placement::Root) return "";
    std::string conv;
    for (const auto &f : p.funcs)
        for (const auto &pr : f.producers)
            if (pr == pad) {
                if (!conv.empty() && conv != f.name) return "";
                conv = f.name;
            }
    if (conv.empty()) return "";
    const FuncInfo &c = info.at(conv);
    const FuncDecision *d = plan.decision(conv);
    if (!c.is_conv || !c.has_update || !d || c.lf->vars.size() != 4 || c.rvar_extents.empty()) return "";
    for (const auto &k : plan.kernels) {
        if (std::find(k.funcs.begin(), k.funcs.end(), conv) == k.funcs.end()) continue;
        if (k.kind != "conv") return "";
        const bool epilogue = k.root != conv && !info.at(k.root).is_conv && d->placement == Placement::Tile;
        // A depthwise conv that is a graph output runs its channel blocks in parallel (conv()'s
        // last path): a block reads only its own input channels, so their padded planes are
        // computed there (in L2) instead of in a pass of their own.
        if (k.root == conv && c.lf->is_output && depthwise(c)) return conv;
        if (channel_tiled(c, m))  // channel_tile: under an epilogue, or through a wrapper
            return channel_tile_rows_outer(c, m) && (epilogue || k.root == conv) ? conv : "";
        const int V = m.lanes(c.lf->dtype);  // conv()'s row blocks: only under an epilogue
        return epilogue && c.lf->extents[3] >= V && V >= 4 ? conv : "";
    }
    return "";
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

void Ctx::gemm() {
    const std::string &R = k.root;
    std::string F = fi(R).is_matmul ? R : member_with(Placement::Tile);
    if (F.empty()) return generic();
    const FuncInfo &f = fi(F);
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    int r = (int)v.size();
    if (r < 2 || f.rvar_extents.empty() || f.rvar_extents[0].size() != 1) return generic();
    int V = lanes(F);
    int64_t M = e[r - 2], N = e[r - 1], K = f.rvar_extents[0][0];
    const std::string &i = v[r - 2], &j = v[r - 1];
    const std::string kv = lf(F).update_rvars[0][0];
    bool epilogue = R != F;
    std::vector<std::string> fused_ = names_of(F);
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
    // tiles for the cores (a batch-1 Linear: its column panels are the tasks, below).
    const bool few_rows = gt.ok && (M + gt.MR - 1) / gt.MR < 2 * std::max(1, m.cores);
    const bool short_k = K * (gt.MR + gt.NR) * f.esize <= (int64_t)m.l1_bytes / 2;
    const GemmTile root_tile = epilogue ? GemmTile{} : gemm_tile(f, false, m, knobs);
    const bool ragged = root_tile.ok && (N % root_tile.NR != 0 || (root_tile.NC < N && N % root_tile.NC != 0));
    const bool wrap = !epilogue && knobs.tile_wrappers && gt.ok && !few_rows && (short_k || ragged);
    const bool per_kernel = wrap && short_k;
    if (!epilogue && !wrap) gt = root_tile;
    // T: the Func whose tiles hold the GEMM's results (its epilogue, or its wrapper).
    const std::string T = wrap ? fresh(func_names, F + "_out") : R;
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
    std::vector<std::string> rused = T == R ? names_of(R) : lf(F).vars;
    if (gt.ok) {
        int NR = gt.NR, MR = gt.MR;
        int64_t NC = gt.NC;
        bool block = NC < N;
        // Rows that MR does not divide are guarded (the unrolled rows of the last tile are
        // skipped by an if that loop partitioning moves out of the steady state); ragged columns
        // take the plain path below.
        bool exact_cols = N % NR == 0 && (!block || N % NC == 0), exact_rows = M % MR == 0;
        std::string jb = fresh(rused, "jb"), jr = fresh(rused, "jr"), jo = fresh(rused, "jo"),
                    ji = fresh(rused, "ji"), io = fresh(rused, "io"), ii = fresh(rused, "ii");
        auto tiles = [&](ScheduleStatement &s, bool guard_rows) {
            auto sp = [&](const std::string &a, const std::string &o, const std::string &in_, int64_t fct,
                          bool guard) {
                Args x = {a, o, in_, fct};
                if (guard) x.push_back(ScheduleArg::tail("GuardWithIf"));
                s.add("split", x);
            };
            if (block) sp(j, jb, jr, NC, false);
            sp(block ? jr : j, jo, ji, NR, false);
            sp(i, io, ii, MR, guard_rows);
        };
        if (T != R) {
            ScheduleStatement &ws = add(F);
            comment_kernel(ws);
            ws.comments.push_back(str_cat(T, ": the GEMM's result, stored per tile from its accumulators"));
            ws.add("in", {}, T);
        }
        ScheduleStatement &st = add(T);
        if (T == R) comment_kernel(st);
        st.comments.push_back(per_kernel ? str_cat("micro-kernel ", MR, "x", NR, " (", MR * NR / V,
                                                   " vector accumulators), ", F, " computed per tile (strips of ",
                                                   K * (MR + NR) * f.esize / 1024, " KiB in L1)")
                                         : str_cat("micro-kernel ", MR, "x", NR, " (", MR * NR / V,
                                                   " vector accumulators), column panels of ", block ? NC : N,
                                                   " (B panel ", (block ? NC : N) * K * f.esize / 1024, " KiB in L2)"));
        st.add("compute_root");
        if (per_kernel) {
            kernel_tiles(st, F, T, gt);
            return;
        }
        if (T != F) {
            // Cache blocking (after BLIS/GotoBLAS): the epilogue's tile MC x NC holds the
            // GEMM's results; within it k runs in chunks of KC so that a B strip (KC x NR)
            // stays in L1 while the micro-kernel walks the MC rows, and A's block (MC x KC)
            // and B's (KC x NC) stay in L2 (bench/DECISIONS.md#d24-gemm-cache-blocking).
            int64_t KC = gt.KC;
            bool ksplit = KC < K;
            int64_t MC = gt.MC, NCt = gt.NCt;
            bool jsplit = NCt < N, isplit = MC < M;
            std::string jt = fresh(rused, "jt"), it_ = fresh(rused, "it");
            st.comments.back() = str_cat("micro-kernel ", MR, "x", NR, " (", MR * NR / V,
                                         " vector accumulators) in tiles of ", MC, "x", NCt,
                                         ", k in chunks of ", ksplit ? KC : K, " (B strip ",
                                         (ksplit ? KC : K) * NR * f.esize / 1024, " KiB in L1)");
            if (jsplit) st.add("split", {j, jo, jt, NCt});
            if (isplit) st.add("split", {i, io, it_, MC});
            Args ro = {jsplit ? jt : j, isplit ? it_ : i};
            if (jsplit) ro.push_back(jo);
            if (isplit) ro.push_back(io);
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
            std::string at = par;  // the loop just outside the tile (all outer loops fused)
            if (at.empty()) fs.add("compute_root");  // one tile: the whole result
            else fs.add("compute_at", {T, at});
            fs.add("vectorize", {j, V});
            ScheduleStatement &u = add(F, 0);
            std::vector<std::string> uused = fused_;
            std::string ko = fresh(uused, "ko"), ki = fresh(uused, "ki"), ujo = fresh(uused, "jo"),
                        uji = fresh(uused, "ji"), jvo = fresh(uused, "jvo"), jvi = fresh(uused, "jvi"),
                        uio = fresh(uused, "io"), uii = fresh(uused, "ii");
            auto sp = [&](const std::string &a, const std::string &o, const std::string &in_, int64_t fct,
                          bool guard) {
                Args x = {a, o, in_, fct};
                if (guard) x.push_back(ScheduleArg::tail("GuardWithIf"));
                u.add("split", x);
            };
            if (ksplit) sp(kv, ko, ki, KC, K % KC != 0);
            sp(j, ujo, uji, NR, NCt % NR != 0);
            if (NR > V) sp(uji, jvo, jvi, V, false);
            sp(i, uio, uii, MR, MC % MR != 0);
            // Four k steps unrolled (the loop's own increments and the A/B address updates
            // amortised; bench/DECISIONS.md#d23-gemm-micro-kernel).
            const int64_t kext = ksplit ? KC : K;
            const bool kunroll = kext % kGemmKUnroll == 0 && kext >= 2 * kGemmKUnroll && (!ksplit || K % KC == 0);
            std::string kio = fresh(uused, "kio"), kii = fresh(uused, "kii");
            if (kunroll) sp(ksplit ? ki : kv, kio, kii, kGemmKUnroll, false);
            Args uro = {NR > V ? jvi : uji};
            if (NR > V) uro.push_back(jvo);
            uro.push_back(uii);
            if (kunroll) uro.push_back(kii);
            uro.push_back(kunroll ? kio : ksplit ? ki : kv);
            uro.push_back(uio);
            uro.push_back(ujo);
            if (ksplit) uro.push_back(ko);
            u.add("reorder", uro).add("vectorize", {NR > V ? jvi : uji});
            if (NR > V) u.add("unroll", {jvo});
            u.add("unroll", {uii});
            if (kunroll) u.add("unroll", {kii});
            if (at.empty() && M >= 2 * MR) u.add("parallel", {uio});
        } else {
            pure_loops(st, F, 1);
            ScheduleStatement &u = add(F, 0);
            std::vector<std::string> uused = fused_;
            jb = fresh(uused, "jb"), jr = fresh(uused, "jr"), jo = fresh(uused, "jo"), ji = fresh(uused, "ji"),
            io = fresh(uused, "io"), ii = fresh(uused, "ii");
            if (!exact_cols) {
                // Ragged edges: one guarded vector of j per step, no nested splits. Too few row
                // tiles for the cores (a classifier at batch 1): the column vectors go to the
                // threads instead.
                const bool by_cols = (M + MR - 1) / MR < 2 * std::max(1, m.cores);
                u.add("split", {j, jo, ji, V, ScheduleArg::tail("GuardWithIf")})
                    .add("split", {i, io, ii, MR, ScheduleArg::tail("GuardWithIf")});
                if (by_cols) u.add("reorder", {ji, ii, kv, io, jo});
                else u.add("reorder", {ji, ii, kv, jo, io});
                u.add("vectorize", {ji}).add("parallel", {by_cols ? jo : io});
                inline_members();
                return;
            }
            tiles(u, !exact_rows);
            std::string jvo = fresh(uused, "jvo"), jvi = fresh(uused, "jvi");
            u.add("split", {ji, jvo, jvi, V});
            const int64_t K = fi(F).rvar_extents[0][0];
            const bool kunroll = K % kGemmKUnroll == 0 && K >= 2 * kGemmKUnroll;
            std::string kvo = fresh(uused, "kvo"), kvi = fresh(uused, "kvi");
            if (kunroll) u.add("split", {kv, kvo, kvi, kGemmKUnroll});
            Args ro = {jvi, jvo, ii};
            if (kunroll) ro.push_back(kvi);
            ro.push_back(kunroll ? kvo : kv);
            ro.push_back(jo);
            ro.push_back(io);
            if (block) ro.push_back(jb);
            u.add("reorder", ro).add("vectorize", {jvi}).add("unroll", {jvo}).add("unroll", {ii});
            if (kunroll) u.add("unroll", {kvi});
            // Too few row tiles for the cores: the column panels, or the column tiles, go to the
            // threads, or one row tile would run on one core.
            // A batched GEMM with batches enough for the cores runs its outermost batch var in
            // parallel: one fork and join, not one per batch around the row tiles
            // (bench/DECISIONS.md#d26-gemm-parallel-when-few-row-tiles).
            if (r > 2 && e[0] >= 2 * std::max(1, m.cores)) u.add("parallel", {v[0]});
            else u.add("parallel", {!few_rows ? io : block ? jb : jo});
        }
        inline_members();
        return;
    }
    generic();
}

// GEMM \p F computed per micro-kernel tile (MR x NR) of its wrapper \p T, whose pure-stage
// statement \p st (compute_root) this completes: the tile's initial value, k loop and store
// stay in registers. Rows and columns that the tile does not divide are shifted inwards (the
// wrapper is a pure Func, and gemm() wraps only GEMMs of at least a tile each way), so every
// tile is whole; the row tiles, with the batch vars, run in parallel.
void Ctx::kernel_tiles(ScheduleStatement &st, const std::string &F, const std::string &T, const GemmTile &gt) {
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
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
    if (r > 2 && e[0] >= 2 * std::max(1, m.cores)) {
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
    block_members(T, r > 2 && e[0] >= 2 * std::max(1, m.cores) ? v[0] : io);
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
    const bool kunroll = gt.K % kGemmKUnroll == 0 && gt.K >= 2 * kGemmKUnroll;
    Args uro = {gt.NR > V ? jvi : j};
    if (gt.NR > V) {
        u.add("split", {j, jvo, jvi, V});
        uro.push_back(jvo);
    }
    uro.push_back(i);
    if (kunroll) {
        u.add("split", {kv, kvo, kvi, kGemmKUnroll});
        uro.push_back(kvi);
    }
    uro.push_back(kunroll ? kvo : kv);
    u.add("reorder", uro).add("vectorize", {uro[0].name});
    if (gt.NR > V) u.add("unroll", {jvo});
    u.add("unroll", {i});
    if (kunroll) u.add("unroll", {kvi});
    inline_members();
}

// The padded input of conv \p F that conv_of_pad leaves to conv(), computed at \p owner.\p var
// (a task's rows, in cache) and vectorized along its rows; \p per says per what, in the comment.
void Ctx::place_pads(const std::string &F, const std::string &owner, const std::string &var, const std::string &per) {
    for (const auto &pr : lf(F).producers) {
        if (conv_of_pad(p, info, plan, m, pr) != F) continue;
        ScheduleStatement &ps = add(pr);
        ps.comments.push_back(pr + ": padded input computed per " + per);
        ps.add("compute_at", {owner, var});
        int pl = fit_lanes(lanes(pr), lf(pr).extents.back());
        if (pl) ps.add("vectorize", {lf(pr).vars.back(), pl});
    }
}

// Output channels vectorized, for a conv whose weights lowering blocked by channel
// (LoweredFunc::conv_weight_block, [C_out/16][C_in][kH][kW][16]): a tile of NP (w) x NH (rows)
// pixels x one block of channels is 14 vector accumulators (AVX-512); each reduction step loads the
// block's weight vectors (dense, one stream across steps) and broadcasts NP*NH inputs. The conv is
// computed per tile of its epilogue, or of a wrapper `<conv>_out` when it has none (a graph
// output's wrapper is realized in its place;
// bench/DECISIONS.md#d22-output-reduction-per-tile-of-a-wrapper), stored channels innermost so that
// its accumulators are whole vectors; the epilogue or the wrapper writes them to NCHW. Tasks are
// blocks of rows with every channel block inside when the weights fit in half of L2
// (channel_tile_rows_outer; the padded input is then computed per task), else (n, channel block,
// row block) with the row blocks innermost, so consecutive tasks reuse a channel block's weights
// from L2. Vectorizing over channels keeps every vector full where the rows are short
// (bench/DECISIONS.md#d30-conv-channel-tiles).
bool Ctx::channel_tile(const std::string &R, const std::string &F) {
    const LoweredFunc &L = lf(F);
    if (!channel_tiled(fi(F), m)) return false;
    const int V = lanes(F);
    const auto &v = L.vars;
    const auto &e = L.extents;
    const int64_t W = e[3], H = e[2];
    // A 1x1 conv (one tap: a GEMM over the input channels) takes two channel blocks and one row
    // of pixels: a step loads 2 weight vectors and broadcasts 7 inputs into 14 FMAs, where one
    // block over two rows broadcasts 14 (15 loads). A 3x3 conv is no faster so
    // (bench/DECISIONS.md#d30-conv-channel-tiles).
    const auto &re = fi(F).rvar_extents[0];
    const bool two_blocks = re.size() >= 3 && re[0] * re[1] == 1 && L.conv_weight_block == V &&
                            e[1] % (2 * L.conv_weight_block) == 0;  // AVX-512: a block is one vector
    const int B = L.conv_weight_block * (two_blocks ? 2 : 1);
    const int cvec = B / V;
    // Pixels per tile: 14 accumulators, two rows of 7, which beat one row of 14 and four rows of 7
    // (bench/DECISIONS.md#d30-conv-channel-tiles). Rows a divisor of W wide when one is near (no
    // tail), else ShiftInwards tails.
    const int budget = std::max(1, std::min(14, m.vector_registers - 4) / cvec);
    const int row = two_blocks ? budget : std::max(1, budget / 2);
    int NP = (int)std::min<int64_t>(W, row);
    if (W > row) {
        for (int d = row; d >= (row + 1) / 2; d--)
            if (W % d == 0) {
                NP = d;
                break;
            }
    }
    const int NH = (int)std::max<int64_t>(1, std::min<int64_t>(H, budget / NP));
    const std::string &n = v[0], &c = v[1], &h = v[2], &w = v[3];
    std::string T = R;
    std::vector<std::string> tused = names_of(R);
    if (R == F) {
        T = fresh(func_names, F + "_out");
        ScheduleStatement &ws = add(F);
        comment_kernel(ws);
        ws.comments.push_back(str_cat(T, ": the conv's output, written per tile from the channels-innermost tile"));
        ws.add("in", {}, T);
    }
    std::string co = fresh(tused, c + "o"), ci = fresh(tused, c + "i"), wo = fresh(tused, w + "o"),
                wi = fresh(tused, w + "i"), ho = fresh(tused, h + "o"), hi = fresh(tused, h + "i");
    const bool rows_outer = channel_tile_rows_outer(fi(F), m);
    // Weights past L2 with enough channel blocks for every core: a task is a channel block, all
    // its row blocks inside, so each core streams its own blocks' weights from memory. With the
    // row blocks fused into the parallel loop, both cores took row blocks of one channel block at
    // a time and waited on one weight stream (bench/DECISIONS.md#d31-conv-channel-block-order).
    const bool block_tasks = !rows_outer && e[0] * (e[1] / B) >= 4 * std::max(1, m.cores);
    // Rows outer: tasks of up to 4 tile rows, at least 4 tasks per core where the image has them.
    const int64_t tile_rows = (H + NH - 1) / NH;
    const int RT = rows_outer ? (int)std::clamp<int64_t>(e[0] * tile_rows / (4 * std::max(1, m.cores)), 1, 4) : 1;
    ScheduleStatement &st = add(T);
    if (R != F) comment_kernel(st);
    st.comments.push_back(str_cat("conv channel tile ", NP, " (w) x ", NH, " (rows) x ", B, " (channels): ",
                                  NP * NH * cvec, " vector accumulators over blocked weights; ",
                                  rows_outer ? str_cat("parallel over (n, ", RT * NH, " rows), the channel blocks inside "
                                                       "(the weights stay in L2)")
                                             : block_tasks ? std::string("parallel over (n, channel block), its row blocks inside "
                                                                          "(each core streams its own blocks' weights)")
                                                           : std::string("parallel over (n, channel block, row block), row "
                                                                         "blocks inside (a channel block's weights stay in L2)")));
    st.add("compute_root").add("split", {c, co, ci, B}).add("split", {w, wo, wi, NP});
    std::string hv = h;
    if (NH > 1) {
        st.add("split", {h, ho, hi, NH});
        hv = ho;
    }
    std::string hoo = hv, hoi;
    if (RT > 1) {
        hoo = fresh(tused, hv + "o"), hoi = fresh(tused, hv + "i");
        st.add("split", {hv, hoo, hoi, RT});
    }
    Args ro = {ci, wi};
    if (NH > 1) ro.push_back(hi);
    ro.push_back(wo);
    if (rows_outer) {
        ro.push_back(co);
        if (RT > 1) ro.push_back(hoi);
        ro.push_back(hoo);
    } else {
        ro.push_back(hv);
        ro.push_back(co);
    }
    ro.push_back(n);
    st.add("reorder", ro);
    std::string par = rows_outer ? hoo : block_tasks ? co : fresh(tused, "t");
    if (!rows_outer && !block_tasks) st.add("fuse", {hv, co, par});
    if (e[0] > 1) {
        std::string p2 = fresh(tused, "t");
        st.add("fuse", {par, n, p2});
        par = p2;
    }
    st.add("vectorize", {ci, V}).add("parallel", {par});
    place_pads(F, T, par, "task of " + T + " (its rows stay in cache for every channel block)");  // rows outer only
    ScheduleStatement &fs = add(F);
    note(fs, F);
    fs.add("compute_at", {T, wo}).add("reorder_storage", {c, w, h, n}).add("reorder", {c, w, h})
        .add("vectorize", {c, V});
    if (cvec > 1) fs.add("unroll", {c});
    fs.add("unroll", {w}).add("unroll", {h});
    ScheduleStatement &u = add(F, 0);
    Args reorder = {c, w, h};
    const auto &rv = L.update_rvars[0];
    for (const auto &x : rv) reorder.push_back(x);
    u.add("reorder", reorder).add("vectorize", {c, V});
    if (cvec > 1) u.add("unroll", {c});
    u.add("unroll", {w}).add("unroll", {h});
    // The taps of a 3x3 (or smaller) kernel unrolled, a little faster than looped
    // (bench/DECISIONS.md#d30-conv-channel-tiles).
    if (knobs.conv_unroll_taps && re.size() >= 3 && re[0] * re[1] <= 9) u.add("unroll", {rv[0]}).add("unroll", {rv[1]});
    inline_members();
    return true;
}

// Direct convolution, NCHW: an output tile of WT (w, 1-2 vectors) x CB output channels is a
// block of vector accumulators; the reduction (input channel, taps) runs outside it, so every
// step loads WT/V input vectors and broadcasts CB weights into CB*WT/V FMAs. Work over
// (n, channel block, rows) is parallel (bench/DECISIONS.md#d32-conv-under-epilogue).
void Ctx::conv() {
    const std::string &R = k.root;
    std::string F = fi(R).is_conv ? R : member_with(Placement::Tile);
    if (F.empty() || lf(F).vars.size() < 3 || fi(F).rvar_extents.empty()) return generic();
    if (channel_tile(R, F)) return;
    // A depthwise conv that is a graph output is computed per row of a channel block of its
    // wrapper (realized in its place): its initial value and taps in the row, one store of the
    // result, where at root the initial value was a pass of its own over the output and the
    // update re-read it (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
    const bool wrap = R == F && lf(F).is_output && depthwise(fi(F)) && lf(F).vars.size() == 4 && knobs.tile_wrappers;
    const std::string T = wrap ? fresh(func_names, F + "_out") : R;
    if (wrap) {
        ScheduleStatement &ws = add(F);
        comment_kernel(ws);
        ws.comments.push_back(str_cat(T, ": the conv's output, stored per tile"));
        ws.add("in", {}, T);
    }
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    int r = (int)v.size();
    int V = lanes(F);
    int64_t W = e[r - 1], C = e[1];
    const std::string &w = v[r - 1], &c = v[1];
    int lw = fit_lanes(V, W);
    // Tile width: two vectors when the row holds them, else one (or the lanes that fit).
    int WT = W >= 2 * V ? 2 * V : W >= V ? V : std::max(1, lw);
    int nvec = lw ? std::max(1, WT / lw) : 1;
    int vl = lw ? std::min(lw, WT) : 0;
    // Channel block: accumulators CB * nvec within the registers, keeping ~8 for operands.
    int max_cb = std::max(1, (m.vector_registers - 8) / nvec);
    int CB = 1;
    for (int cb : {8, 4, 2})
        if (cb <= max_cb && C % cb == 0) {
            CB = cb;
            break;
        }
    std::vector<std::string> rused = wrap ? v : names_of(R);
    std::vector<std::string> fused_ = names_of(F);
    const auto &rv = lf(F).update_rvars[0];
    ScheduleStatement &st = add(T);
    if (!wrap) comment_kernel(st);
    st.comments.push_back(str_cat("conv tile ", WT, " (w) x ", CB, " (channels): ", nvec * CB,
                                  " vector accumulators; reduction over ", rv.size(), " dims outside it"));
    st.add("compute_root");
    if (wrap) {
        // The wrapper: (n, channel block) tasks, rows inside, each row of the block computed by
        // the conv's tile (WT x CB accumulators) from the block's padded planes (in L2).
        std::string co = fresh(rused, c + "o"), ci = fresh(rused, c + "i");
        if (CB > 1) st.add("split", {c, co, ci, CB});
        Args ro = {w};
        if (CB > 1) ro.push_back(ci);
        ro.push_back(v[2]);
        ro.push_back(CB > 1 ? co : c);
        ro.push_back(v[0]);
        st.add("reorder", ro);
        std::string par = CB > 1 ? co : c;
        if (e[0] > 1) {
            std::string fz = fresh(rused, "t");
            st.add("fuse", {par, v[0], fz});
            par = fz;
        }
        if (vl) st.add("vectorize", {w, vl});
        st.add("parallel", {par});
        place_pads(F, T, par, "channel block of " + T + " (a depthwise conv reads its own channels)");
        ScheduleStatement &fs = add(F);
        note(fs, F);
        fs.add("compute_at", {T, v[2]});
        if (vl) fs.add("vectorize", {w, vl});
        ScheduleStatement &u = add(F, 0);
        std::string wo = fresh(fused_, w + "o"), wi = fresh(fused_, w + "i");
        std::string wvo = fresh(fused_, w + "vo"), wvi = fresh(fused_, w + "vi");
        Args wsplit = {w, wo, wi, WT};
        // The conv's row is a buffer of its own per row of the wrapper, so a tile past its end is
        // rounded up (computed into the rounded allocation, never copied out) where the reads past
        // the row stay in bounds; guarded, the last tile's vectors were masked or scalar
        // (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
        const bool round_up = W % WT != 0 && p.rows_extend_safely(F);
        if (round_up) u.comments.push_back(str_cat(F, ": its ", W, "-wide rows rounded up to whole tiles of ", WT,
                                                    " (the wrapper copies the row out)"));
        if (W % WT != 0) wsplit.push_back(ScheduleArg::tail(round_up ? "RoundUp" : "GuardWithIf"));
        if (WT < W) u.add("split", wsplit);
        const std::string wv = WT < W ? wi : w;
        if (vl && nvec > 1) u.add("split", {wv, wvo, wvi, vl});
        Args reorder = {vl && nvec > 1 ? wvi : wv};
        if (vl && nvec > 1) reorder.push_back(wvo);
        reorder.push_back(c);
        for (const auto &x : rv) reorder.push_back(x);
        if (WT < W) reorder.push_back(wo);
        u.add("reorder", reorder);
        if (vl) u.add("vectorize", {reorder[0].name});
        if (vl && nvec > 1) u.add("unroll", {wvo});
        if (CB > 1) u.add("unroll", {c});
    } else if (T != F && r == 4 && depthwise(fi(F)) && lw) {
        depthwise_blocks(st, T, F);
        return;
    } else if (T != F && r == 4 && vl == V && W >= V) {
        // Row blocks (after Adams2019's schedule, then measured): a tile of one vector (w) x
        // HT rows x CB channels, HT*CB = 8 accumulators, so each weight broadcast serves HT
        // vectors and each input vector CB FMAs. Work is parallel over (n, row block) with
        // the channel blocks inside, so the padded input's rows for a block are computed
        // there once (in L1/L2) rather than materialised in a kernel of their own
        // (bench/DECISIONS.md#d32-conv-under-epilogue).
        int64_t H = e[2];
        int HT = H >= 2 ? 2 : 1;
        int CB2 = C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
        std::string wo = fresh(rused, w + "o"), wi = fresh(rused, w + "i");
        std::string ho = fresh(rused, v[2] + "o"), hi = fresh(rused, v[2] + "i");
        std::string co = fresh(rused, c + "o"), ci = fresh(rused, c + "i");
        bool wsplit = W > V;
        st.comments.back() = str_cat("conv tile ", V, " (w) x ", HT, " (rows) x ", CB2, " (channels): ",
                                     HT * CB2, " vector accumulators; reduction over ", rv.size(),
                                     " dims outside it; parallel over (n, row block)");
        if (wsplit) st.add("split", {w, wo, wi, V});
        if (HT > 1) st.add("split", {v[2], ho, hi, HT});
        if (CB2 > 1) st.add("split", {c, co, ci, CB2});
        Args ro = {wsplit ? wi : w};
        if (HT > 1) ro.push_back(hi);
        if (CB2 > 1) ro.push_back(ci);
        if (wsplit) ro.push_back(wo);
        ro.push_back(CB2 > 1 ? co : c);
        ro.push_back(HT > 1 ? ho : v[2]);
        ro.push_back(v[0]);
        st.add("reorder", ro);
        std::string par = fresh(rused, "t");
        st.add("fuse", {HT > 1 ? ho : v[2], v[0], par});
        st.add("vectorize", {wsplit ? wi : w, V}).add("parallel", {par});
        place_pads(F, T, par, "row block of " + T + " (the block's rows stay in cache)");
        ScheduleStatement &fs = add(F);
        note(fs, F);
        fs.add("compute_at", {T, wsplit ? wo : (CB2 > 1 ? co : c)});
        fs.add("vectorize", {w, V});
        if (CB2 > 1) fs.add("unroll", {c});
        if (HT > 1) fs.add("unroll", {v[2]});
        ScheduleStatement &u = add(F, 0);
        Args reorder = {w, v[2], c};
        for (const auto &x : rv) reorder.push_back(x);
        u.add("reorder", reorder).add("vectorize", {w});
        if (HT > 1) u.add("unroll", {v[2]});
        if (CB2 > 1) u.add("unroll", {c});
    } else if (T != F) {
        // The epilogue owns the loop nest; its pure splits may shift inwards (WT <= W, CB | C),
        // so the conv computed per tile always has the full tile and no tail.
        std::string wo = fresh(rused, w + "o"), wi = fresh(rused, w + "i");
        std::string co = fresh(rused, c + "o"), ci = fresh(rused, c + "i");
        bool wsplit = WT < W;
        if (wsplit) st.add("split", {w, wo, wi, WT});
        if (CB > 1) st.add("split", {c, co, ci, CB});
        Args ro = {wsplit ? wi : w};
        if (CB > 1) ro.push_back(ci);
        if (wsplit) ro.push_back(wo);
        for (int d = r - 2; d >= 2; d--) ro.push_back(v[d]);
        ro.push_back(CB > 1 ? co : c);
        ro.push_back(v[0]);
        st.add("reorder", ro);
        // Parallel over (n, channel block, rows): fuse outward from the innermost row var.
        std::string par = ro[(wsplit ? 2 : 1) + (CB > 1 ? 1 : 0)].name;
        size_t first = (wsplit ? 2 : 1) + (CB > 1 ? 1 : 0);
        for (size_t q = first + 1; q < ro.size(); q++) {
            std::string fz = fresh(rused, "t");
            st.add("fuse", {par, ro[q].name, fz});
            par = fz;
        }
        if (vl) st.add("vectorize", {wsplit ? wi : w, vl});
        st.add("parallel", {par});
        ScheduleStatement &fs = add(F);
        note(fs, F);
        fs.add("compute_at", {T, wsplit ? wo : par});  // the row var may be fused into par
        if (vl) fs.add("vectorize", {w, vl});
        if (CB > 1) fs.add("unroll", {c});
        ScheduleStatement &u = add(F, 0);
        Args reorder;
        std::string wvo = fresh(fused_, w + "vo"), wvi = fresh(fused_, w + "vi");
        if (vl && nvec > 1) {
            u.add("split", {w, wvo, wvi, vl});
            reorder = {wvi, wvo};
        } else {
            reorder = {w};
        }
        reorder.push_back(c);
        for (const auto &x : rv) reorder.push_back(x);
        u.add("reorder", reorder);
        if (vl) u.add("vectorize", {nvec > 1 ? wvi : w});
        if (vl && nvec > 1) u.add("unroll", {wvo});
        if (CB > 1) u.add("unroll", {c});
    } else {
        // No epilogue: the update's own splits. A row narrower than a vector and no multiple of
        // the tile is one vector rounded up (RoundUp: the last columns are computed into the
        // padded allocation and never read) where the conv is not a graph output; guarded
        // (GuardWithIf), the tail columns ran as scalar code. Wider rows keep the guard: rounding
        // them up too computes more padding than it saves
        // (bench/DECISIONS.md#d33-narrow-conv-rows-round-up). Only where every read past the row
        // stays in bounds (LoweredPipeline::rows_extend_safely).
        const bool round_up = !lf(F).is_output && vl && W < V && W % WT != 0 && p.rows_extend_safely(F);
        if (round_up) {
            while (WT < W) WT *= 2;  // one vector over the whole row: 7 -> 8, 14 -> 16
            vl = WT;
            nvec = 1;
        }
        if (round_up) st.comments.back() = str_cat("conv tile ", WT, " (w, the ", W, "-wide rows rounded up) x ", CB,
                                                  " (channels): ", nvec * CB, " vector accumulators; reduction over ",
                                                  rv.size(), " dims outside it");
        if (vl) {
            Args vec = {w, vl};
            if (round_up) vec.push_back(ScheduleArg::tail("RoundUp"));
            st.add("vectorize", vec);
        }
        std::string par = c;
        if (e[0] > 1) {
            par = fresh(rused, v[0] + c);
            st.add("fuse", {c, v[0], par});
        }
        st.add("parallel", {par});
        ScheduleStatement &u = add(F, 0);
        std::string wo = fresh(fused_, w + "o"), wi = fresh(fused_, w + "i");
        std::string co = fresh(fused_, c + "o"), ci = fresh(fused_, c + "i");
        std::string wvo = fresh(fused_, w + "vo"), wvi = fresh(fused_, w + "vi");
        Args wsplit = {w, wo, wi, WT};
        if (W % WT != 0) wsplit.push_back(ScheduleArg::tail(round_up ? "RoundUp" : "GuardWithIf"));
        u.add("split", wsplit);
        if (vl && nvec > 1) u.add("split", {wi, wvo, wvi, vl});
        if (CB > 1) u.add("split", {c, co, ci, CB});
        Args reorder;
        if (vl && nvec > 1) reorder = {wvi, wvo};
        else reorder = {wi};
        if (CB > 1) reorder.push_back(ci);
        for (const auto &x : rv) reorder.push_back(x);
        reorder.push_back(wo);
        for (int d = r - 2; d >= 2; d--) reorder.push_back(v[d]);
        reorder.push_back(CB > 1 ? co : c);
        reorder.push_back(v[0]);
        u.add("reorder", reorder);
        if (vl) u.add("vectorize", {nvec > 1 ? wvi : wi});
        if (vl && nvec > 1) u.add("unroll", {wvo});
        if (CB > 1) u.add("unroll", {ci});
        u.add("parallel", {CB > 1 ? co : c});
        // The padded input per channel block, in cache, not a pass of its own at root
        // (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
        place_pads(F, F, CB > 1 ? co : c, "channel block of " + F + " (a depthwise conv reads its own channels)");
    }
    inline_members();
}

// A depthwise conv \p F under its epilogue \p T (MobileNetV2's conv + clip): a task per block of
// channels with every row inside; each row of the block is computed by F in whole vectors (the row
// rounded up where T is no graph output and the reads past the row stay in bounds: a 14-wide row is
// one vector, not 8 lanes plus a part), the taps unrolled; the padded input is computed per task,
// so its border test runs once per point instead of once per tap, and tasks are not single rows.
// Tasks of one row of 8 channels ran far slower than their estimates
// (bench/DECISIONS.md#d35-depthwise-conv-under-epilogue).
void Ctx::depthwise_blocks(ScheduleStatement &st, const std::string &T, const std::string &F) {
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    const int V = lanes(F);
    const int64_t C = e[1];
    const std::string &n = v[0], &c = v[1], &h = v[2], &w = v[3];
    const bool round_up = !lf(T).is_output && p.rows_extend_safely(T);
    const int vl = round_up ? V : fit_lanes(V, e[3]);
    int CB = 1;
    for (int cb : {8, 4, 2})
        if (C % cb == 0) {
            CB = cb;
            break;
        }
    std::vector<std::string> tused = names_of(T);
    const std::string co = fresh(tused, c + "o"), ci = fresh(tused, c + "i");
    st.comments.back() = str_cat("depthwise conv in blocks of ", CB, " channels: a task per block, its rows inside, ",
                                 vl, "-lane vectors", round_up ? str_cat(" (", e[3], "-wide rows rounded up)") : "",
                                 ", the taps unrolled, the padded input per task");
    Args vec = {w, vl};
    if (round_up) vec.push_back(ScheduleArg::tail("RoundUp"));
    st.add("split", {c, co, ci, CB}).add("reorder", {w, ci, h, co, n});
    std::string par = co;
    if (e[0] > 1) {
        par = fresh(tused, "t");
        st.add("fuse", {co, n, par});
    }
    st.add("vectorize", vec).add("parallel", {par});  // the last use of st: add() may move it
    ScheduleStatement &fs = add(F);
    note(fs, F);
    fs.add("compute_at", {T, h}).add("vectorize", vec);
    if (CB > 1) fs.add("unroll", {c});
    ScheduleStatement &u = add(F, 0);
    const auto &rv = lf(F).update_rvars[0];
    Args reorder = {w, c};
    for (const auto &x : rv) reorder.push_back(x);
    u.add("reorder", reorder).add("vectorize", vec);
    if (CB > 1) u.add("unroll", {c});
    const auto &re = fi(F).rvar_extents[0];
    if (knobs.conv_unroll_taps && re.size() >= 2 && re[0] * re[1] <= 9) u.add("unroll", {rv[0]}).add("unroll", {rv[1]});
    std::set<std::string> placed;
    for (const auto &pr : lf(F).producers) {
        const FuncDecision *d = plan.decision(pr);
        if (!fi(pr).is_conv || fi(pr).has_update || !d || d->placement != Placement::Inline ||
            std::find(k.funcs.begin(), k.funcs.end(), pr) == k.funcs.end())
            continue;
        ScheduleStatement &ps = add(pr);
        ps.comments.push_back(pr + ": padded input computed per channel block of " + T +
                              " (its border tested once per point, not once per tap)");
        ps.add("compute_at", {T, par});
        if (fit_lanes(V, lf(pr).extents.back())) ps.add("vectorize", {lf(pr).vars.back(), V});
        placed.insert(pr);
    }
    inline_members(placed);
}

GemmTile gemm_tile(const FuncInfo &f, bool epilogue, const MachineModel &m, const ScheduleKnobs &knobs) {
    GemmTile t;
    const auto &e = f.lf->extents;
    size_t r = e.size();
    if (r < 2 || f.rvar_extents.empty() || f.rvar_extents[0].size() != 1) return t;
    t.V = m.lanes(f.lf->dtype);
    t.M = e[r - 2], t.N = e[r - 1], t.K = f.rvar_extents[0][0];
    int V = t.V;
    if (!(t.N >= V && (epilogue || f.inner_var_contiguous))) return t;
    t.ok = true;
    // Gathered B loads (B stored [N, K]) are the bottleneck: one vector of j per row.
    int nrv = t.N >= 2 * V && f.inner_var_contiguous ? 2 : 1;
    if (knobs.gemm_nr_vectors > 0 && f.inner_var_contiguous && t.N >= (int64_t)knobs.gemm_nr_vectors * V)
        nrv = knobs.gemm_nr_vectors;
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
    t.MC = std::min<int64_t>(t.M, (int64_t)tiles * t.MR);
    t.NCt = std::min<int64_t>(t.N, (int64_t)tiles * t.NR);
    // One micro-kernel row per tile (a batch-1 Linear): no other row reuses a B strip from L1, and
    // chunks of k only cut B's panels into short streams
    // (bench/DECISIONS.md#d24-gemm-cache-blocking).
    if (knobs.gemm_kc <= 0 && t.MC <= t.MR) t.KC = t.K;
    return t;
}

}  // namespace loom::autosched
