// The convolution emitter of tiling.cpp's Ctx (tiling_internal.h) in three steps: choose_conv
// decides (ConvPlan: the path, the tile, which Func's tiles hold the result), emit_conv writes the
// statements of that plan, explain_conv the comment on its tile loop. The depthwise conv under an
// epilogue is an emitter of its own (depthwise_blocks). conv_of_pad and place_pads put a conv's
// padded input where its tiles read it.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autoschedule/tiling_internal.h"
#include "support/error.h"

namespace loom::autosched {

namespace {

// Fewest reduction terms (input channels x taps) per output for Ctx::channel_tile: a 1x1 conv
// with 64 input channels still gains, a 3-channel 3x3 stem does not
// (bench/DECISIONS.md#d30-conv-channel-tiles).
constexpr int64_t kMinChannelTileTerms = 64;

// Bytes of a cache line: NCHW rows shorter than this are shared between tasks of adjacent rows
// (bench/DECISIONS.md#d197-narrow-nchw-outputs-split-by-channels).
constexpr int64_t kCacheLineBytes = 64;

// Reduction terms per output point of update 0 (a conv's input channels x taps).
int64_t reduction_terms(const FuncInfo &f) {
    int64_t k = 1;
    for (auto x : f.rvar_extents[0]) k *= x;
    return k;
}

// A conv whose output is one pixel per image and channel (1x1 spatial).
bool one_pixel(const FuncInfo &f) {
    const auto &e = f.lf->extents;
    return e.size() == 4 && e[2] == 1 && e[3] == 1;
}

// The lanes of a channel tile: a vector, or half of a 16-lane one where the weight blocks (24 or 8
// channels: 168, 240) hold no whole vector and the output is one pixel, which has no row to
// vectorize instead (bench/DECISIONS.md#d193-one-pixel-convs-half-vectors), or its rows are at
// most half a vector wide, which a row tile would fill only in part (7 of 16 lanes; 14-wide rows
// keep their row tiles: bench/DECISIONS.md#d195-narrow-rows-half-vector-channel-tiles).
int channel_tile_lanes(const FuncInfo &f, const MachineModel &m) {
    const int B = f.lf->conv_weight_block, V = m.lanes(f.lf->dtype);
    const bool narrow = f.lf->extents.size() == 4 && f.lf->extents[3] <= V / 2;
    return B != 0 && B % V != 0 && V >= 16 && B % (V / 2) == 0 && (one_pixel(f) || narrow) ? V / 2 : V;
}

// A conv that Ctx::channel_tile can vectorize over output channels: weights blocked by lowering
// (LoweredFunc::conv_weight_block, which divides the channels), NCHW 2-D, the vector a divisor of
// the block.
bool channel_tile_fits(const FuncInfo &f, const MachineModel &m) {
    const LoweredFunc &L = *f.lf;
    const int B = L.conv_weight_block, V = channel_tile_lanes(f, m);
    return B != 0 && L.vars.size() == 4 && V >= 4 && B % V == 0 && L.update_rvars.size() == 1 && !f.rvar_extents.empty();
}

// A conv that Ctx::channel_tile vectorizes over output channels by its own shape (Ctx::tiles_channels
// adds the 1x1 convs feeding depthwise convs vectorized over channels).
bool channel_tiled(const FuncInfo &f, const MachineModel &m) {
    if (!channel_tile_fits(f, m)) return false;
    // A short reduction (3 input channels x 3x3) leaves the tile's transposing stores to NCHW
    // dominant, and tiles along rows are faster.
    // Wide rows with a short reduction tile channels too on AVX2 since their outputs are stored
    // channels innermost for their readers (bench/DECISIONS.md#d176-avx2-short-reductions-tile-channels).
    // A one-pixel output (a squeeze-excitation's expanding 1x1 conv) has no row to vectorize and its
    // NCHW stores are already channels innermost (bench/DECISIONS.md#d190-one-pixel-convs-tile-channels).
    return reduction_terms(f) >= kMinChannelTileTerms || one_pixel(f);
}

// A channel-tiled conv whose weights fit in half of L2 runs its channel blocks inside row blocks,
// with the padded input computed per row block (in cache); bigger weights are reused across row
// blocks instead (row blocks inside channel blocks, the padded input whole; 512 channels at 7x7,
// 9.4 MB, keep channels outer; bench/DECISIONS.md#d31-conv-channel-block-order).
bool channel_tile_rows_outer(const FuncInfo &f, const MachineModel &m) {
    return (double)f.lf->extents[1] * (double)reduction_terms(f) * f.esize <= (double)m.l2_bytes / 2;
}

// The lanes of a depthwise conv vectorized over its channels: a vector, or half of a 16-lane one,
// that divides the channels (AVX-512 with MobileNet's 72 or 120 channels); 0 when none does.
int depthwise_channel_lanes(const LoweredFunc &L, const MachineModel &m) {
    const int V = m.lanes(L.dtype);
    const int64_t C = L.extents.size() == 4 ? L.extents[1] : 0;
    if (V >= 4 && C > 0 && C % V == 0) return V;
    return V >= 16 && C > 0 && C % (V / 2) == 0 ? V / 2 : 0;
}

// A conv of one tap per input channel (1x1): a GEMM over the input channels.
bool one_tap(const FuncInfo &f) {
    if (f.rvar_extents.empty()) return false;
    const auto &re = f.rvar_extents[0];
    return re.size() >= 3 && re[0] * re[1] == 1;
}

// The conv that emit_conv tiles in the conv kernel rooted at \p root (choose_conv's F), or "".
std::string conv_of_kernel(const std::map<std::string, FuncInfo> &info, const FusionPlan &plan,
                           const std::string &root) {
    for (const Kernel &k : plan.kernels) {
        if (k.root != root) continue;
        if (k.kind != KernelKind::Conv) return "";
        if (info.at(root).is_conv) return root;
        for (const auto &f : k.funcs)
            if (plan.decision(f)->placement == Placement::Tile) return info.at(f).is_conv ? f : "";
        return "";
    }
    return "";
}

}  // namespace

// A conv whose groups have one input channel each (depthwise): its RDom's last RVar (ops/conv.cpp)
// spans one channel.
static bool depthwise(const FuncInfo &c) {
    return c.is_conv && !c.rvar_extents.empty() && c.rvar_extents[0].size() >= 2 && c.rvar_extents[0].back() == 1;
}

// The padded input of a rank-4 conv computed per block of rows of the conv's tile owner: \p pad
// is a pointwise Conv-op Func whose one consumer is a conv (with a reduction) tiled either along
// rows under an epilogue (rows of at least a vector) or over channels with its row blocks outer
// (then the pad's kernel may hold producers inlined into it as well).
// conv() schedules it (compute_at the row block); its own kernel emits only those producers'
// compute_inline. Returns that conv, or "".
std::string conv_of_pad(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                        const FusionPlan &plan, const MachineModel &m, const std::string &pad) {
    auto it = info.find(pad);
    if (it == info.end() || !it->second.is_conv || it->second.has_update || it->second.lf->is_output) return "";
    const Kernel *pad_kernel = nullptr;
    for (const auto &k : plan.kernels)
        if (k.root == pad) pad_kernel = &k;
    const FuncDecision *pd = plan.decision(pad);
    if (!pad_kernel || !pd || pd->placement != Placement::Root) return "";
    // Materialised alone, or with pointwise producers inlined into it and nothing else (an FPN's
    // upsample + add, a ReLU): those are computed per task with it.
    const bool alone = pad_kernel->funcs.size() == 1;
    bool only_inlined = true;
    for (const auto &f : pad_kernel->funcs) {
        const FuncDecision *fd = plan.decision(f);
        only_inlined &= f == pad || (fd && fd->placement == Placement::Inline);
    }
    if (!only_inlined) return "";
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
        if (k.kind != KernelKind::Conv) return "";
        const bool epilogue = k.root != conv && !info.at(k.root).is_conv && d->placement == Placement::Tile;
        // A depthwise conv under an epilogue (depthwise_blocks) or at root (conv_root_tiles) runs a
        // task per channel block, which reads only its own channels: their padded planes, with the
        // pointwise producers inlined into the pad (the ReLU of the 1x1 conv before), are computed
        // in the task, in cache, instead of in a pass of their own
        // (bench/DECISIONS.md#d143-depthwise-pads-per-block).
        if (depthwise(c) && (epilogue ? fit_lanes(m.lanes(c.lf->dtype), c.lf->extents[3]) != 0 : k.root == conv))
            return conv;
        // A channel tile with its row blocks outer computes the pad per task with the producers
        // inlined into it: at root, the task's rows of a 160x160 pad of 96 channels came back from
        // memory for every channel block (bench/DECISIONS.md#d125-fused-conv-pads-per-task).
        if (channel_tiled(c, m))  // channel_tile: under an epilogue, or through a wrapper
            return channel_tile_rows_outer(c, m) && (epilogue || k.root == conv) ? conv : "";
        if (!alone) return "";
        // A depthwise conv that is a graph output runs its channel blocks in parallel (conv()'s
        // last path): a block reads only its own input channels, so their padded planes are
        // computed there (in L2) instead of in a pass of their own.
        if (k.root == conv && c.lf->is_output && depthwise(c)) return conv;
        const int V = m.lanes(c.lf->dtype);  // conv()'s row blocks: only under an epilogue
        return epilogue && c.lf->extents[3] >= V && V >= 4 ? conv : "";
    }
    return "";
}

// The padded input of conv \p F that conv_of_pad leaves to conv(), computed at \p owner.\p var
// (a task's rows, in cache) and vectorized along its rows; \p per says per what, in the comment.
void Ctx::place_pads(const std::string &F, const std::string &owner, const std::string &var, const std::string &per) {
    for (const auto &pr : lf(F).producers) {
        if (conv_of_pad(p, info, plan, m, pr) != F) continue;
        tiling.pad_per = per.substr(0, per.find(" of "));
        ScheduleStatement &ps = add(pr);
        ps.comments.push_back(pr + ": padded input computed per " + per);
        ps.add("compute_at", {owner, var});
        if (int pl = row_lanes(pr)) ps.add("vectorize", {lf(pr).vars.back(), pl});
    }
}

// Useful FMAs per load of a channel tile NP (w) x NH (rows) x cvec vectors: each reduction step
// loads cvec weight vectors and broadcasts NP * NH inputs into NP * NH * cvec FMAs, of which the
// part past a W x H image that the tile does not divide is recomputed (ShiftInwards tiles).
static double channel_tile_score(int64_t W, int64_t H, int cvec, int NP, int NH) {
    const double waste = (double)((W + NP - 1) / NP * NP) / (double)W * (double)((H + NH - 1) / NH * NH) / (double)H;
    return (double)(NP * NH * cvec) / ((double)(cvec + NP * NH) * waste);
}

// With 16 registers a tile of two rows of 2 or 3 pixels leaves a 7x7 image a third to a half
// recomputed (8 or 9 of 7 columns, 8 of 7 rows); a tile that scores more than 5% better
// (channel_tile_score), with at least 8 accumulators to cover the FMA latency, replaces it
// (4 x 1 at 7x7; bench/DECISIONS.md#d81-avx2-channel-tiles-without-waste). A 1x1 conv's one
// row of 7 (7 accumulators, no waste) beats 4 x 2 (8 of 7 columns and rows)
// (bench/DECISIONS.md#d187-avx2-one-tap-tiles-of-seven).
static void better_avx2_tile(int64_t W, int64_t H, int cvec, int budget, bool one_tap, int &NP, int &NH) {
    double best = channel_tile_score(W, H, cvec, NP, NH) * 1.05;
    const int min_accumulators = one_tap ? 7 : 8;
    for (int np = (int)std::min<int64_t>(W, budget); np >= 1; np--)  // ties: the wider row (NCHW lines)
        for (int nh = 1; nh <= std::min<int64_t>(H, budget / np); nh++) {
            if (np * nh * cvec < min_accumulators) continue;
            const double s = channel_tile_score(W, H, cvec, np, nh);
            if (s > best) {
                best = s;
                NP = np;
                NH = nh;
            }
        }
}

// Whether the conv's padded input is wider than a stride-1 conv of its taps reads: it steps by
// more than one pixel along its rows.
bool Ctx::reads_strided_rows(const std::string &F) const {
    const LoweredFunc &L = lf(F);
    const int64_t row_taps = fi(F).rvar_extents[0][0];
    for (const auto &pr : L.producers)
        if (lf(pr).padded_input && lf(pr).extents.size() == 4 && lf(pr).extents[3] > L.extents[3] + row_taps - 1)
            return true;
    return false;
}

// Output channels vectorized, for a conv whose weights lowering blocked by channel
// (LoweredFunc::conv_weight_block B, [C_out/B][C_in][kH][kW][B]): a tile of NP (w) x NH (rows)
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
void Ctx::choose_channel_tile(ConvPlan &c) {
    const std::string &R = k.root, &F = c.F;
    const LoweredFunc &L = lf(F);
    const int V = channel_tile_lanes(fi(F), m);
    const auto &e = L.extents;
    const int64_t W = e[3], H = e[2];
    // A 1x1 conv (one tap: a GEMM over the input channels) takes two channel blocks and one row
    // of pixels: a step loads 2 weight vectors and broadcasts 7 inputs into 14 FMAs, where one
    // block over two rows broadcasts 14 (15 loads). A 3x3 conv is no faster so
    // (bench/DECISIONS.md#d30-conv-channel-tiles).
    // With 32 registers a conv of several taps takes them too where its inputs are not reused from
    // tap to tap (stride 2: each tap broadcasts new inputs, so the step is bound by its loads) or
    // where two rows of 7 would recompute a row (7x7 images): two weight vectors per 7 broadcasts
    // (bench/DECISIONS.md#d198-two-channel-blocks-for-strided-and-7x7-convs).
    const auto &re = fi(F).rvar_extents[0];
    const bool several_taps_pay = m.vector_registers >= 32 && (reads_strided_rows(F) || e[2] % 2 == 1);
    const bool two_blocks = re.size() >= 3 && (re[0] * re[1] == 1 || several_taps_pay) &&
                            L.conv_weight_block == V &&
                            e[1] % (2 * L.conv_weight_block) == 0;  // AVX-512: a block is one vector
    const int B = L.conv_weight_block * (two_blocks ? 2 : 1);
    const int cvec = B / V;
    // Pixels per tile: 14 accumulators, two rows of 7, which beat one row of 14 and four rows of 7
    // (bench/DECISIONS.md#d30-conv-channel-tiles). With 16 registers, 8-10: LLVM keeps the inputs
    // that the next tap reuses in registers too, and 12 accumulators spilled them
    // (bench/DECISIONS.md#d59-avx2-conv-channel-tiles). Rows a divisor of W wide when one is near
    // (no tail), else ShiftInwards tails.
    // A 1x1 conv has no next tap to keep inputs for: 12 of 16 registers
    // (bench/DECISIONS.md#d59-avx2-conv-channel-tiles).
    const bool one_tap = re.size() >= 3 && re[0] * re[1] == 1;
    const int accumulators = m.vector_registers >= 32 ? std::min(14, m.vector_registers - 4)
                                                      : m.vector_registers - (one_tap ? 4 : 6);
    const int budget = std::max(1, accumulators / cvec);
    const int row = two_blocks ? budget : std::max(1, budget / 2);
    int NP = (int)std::min<int64_t>(W, row);
    if (W > row) {
        for (int d = row; d >= std::max(std::min(row, 2), (row + 1) / 2); d--)
            if (W % d == 0) {
                NP = d;
                break;
            }
    }
    int NH = (int)std::max<int64_t>(1, std::min<int64_t>(H, budget / NP));
    if (m.vector_registers < 32) better_avx2_tile(W, H, cvec, budget, one_tap, NP, NH);
    c.path = ConvPlan::Path::ChannelTile;
    c.wrap = R == F;
    c.T = c.wrap ? fresh(func_names, F + "_out") : R;
    c.V = V;
    c.W = W;
    c.WT = NP;
    c.HT = NH;
    c.CB = B;
    // Stored NCHW with rows shorter than a cache line (7x7, 14x14), tasks of rows would share
    // every line of every channel plane between cores, which then pass the lines back and forth
    // at each store: tasks are channel blocks instead, where there are two a core
    // (bench/DECISIONS.md#d197-narrow-nchw-outputs-split-by-channels).
    const int cores = std::max(1, m.cores);
    const int64_t blocks = e[0] * (e[1] / B);  // channel blocks of every image (B divides the channels)
    const bool narrow_nchw =
        cores > 1 && W * fi(F).esize < kCacheLineBytes && blocks >= 2 * cores && !output_channels_innermost(R);
    c.rows_outer = channel_tile_rows_outer(fi(F), m) && !narrow_nchw;
    // Weights past L2 with enough channel blocks for every core: a task is a channel block, all
    // its row blocks inside, so each core streams its own blocks' weights from memory. With the
    // row blocks fused into the parallel loop, both cores took row blocks of one channel block at
    // a time and waited on one weight stream (bench/DECISIONS.md#d31-conv-channel-block-order).
    c.block_tasks = !c.rows_outer && (narrow_nchw || blocks >= 4 * cores);
    // Rows outer: tasks of up to 4 tile rows, at least 4 tasks per core where the image has them.
    const int64_t tile_rows = (H + NH - 1) / NH;
    c.RT = c.rows_outer ? (int)std::clamp<int64_t>(e[0] * tile_rows / (4 * cores), 1, 4) : 1;
}

void Ctx::channel_tile(ScheduleStatement &st, const ConvPlan &c) {
    const std::string &F = c.F, &T = c.T;
    const LoweredFunc &L = lf(F);
    const int V = c.V, NP = c.WT, NH = c.HT, B = c.CB, RT = c.RT, cvec = B / V;
    const auto &v = L.vars;
    const auto &e = L.extents;
    const std::string &n = v[0], &cv = v[1], &h = v[2], &w = v[3];
    std::vector<std::string> tused = names_of(k.root);
    std::string co = fresh(tused, cv + "o"), ci = fresh(tused, cv + "i"), wo = fresh(tused, w + "o"),
                wi = fresh(tused, w + "i"), ho = fresh(tused, h + "o"), hi = fresh(tused, h + "i");
    if (output_channels_innermost(k.root)) {
        st.comments.push_back(str_cat(T, ": stored channels innermost (every reader takes a pixel's channels together)"));
        st.add("reorder_storage", {cv, w, h, n});
    }
    st.add("split", {cv, co, ci, B}).add("split", {w, wo, wi, NP});
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
    if (c.rows_outer) {
        ro.push_back(co);
        if (RT > 1) ro.push_back(hoi);
        ro.push_back(hoo);
    } else {
        ro.push_back(hv);
        ro.push_back(co);
    }
    ro.push_back(n);
    st.add("reorder", ro);
    std::string par = c.rows_outer ? hoo : c.block_tasks ? co : fresh(tused, "t");
    if (!c.rows_outer && !c.block_tasks) st.add("fuse", {hv, co, par});
    if (e[0] > 1) {
        std::string p2 = fresh(tused, "t");
        st.add("fuse", {par, n, p2});
        par = p2;
    }
    st.add("vectorize", {ci, V}).add("parallel", {par});
    for (const std::string &X : tile_convs(c)) {
        place_pads(X, T, par, "task of " + T + " (its rows stay in cache for every channel block)");  // rows outer only
        if (std::string P = staged_input(X, c); !P.empty()) stage_channels_innermost(X, P);
        const auto &xv = lf(X).vars;
        ScheduleStatement &fs = add(X);
        note(fs, X);
        fs.add("compute_at", {T, wo}).add("reorder_storage", {xv[1], xv[3], xv[2], xv[0]}).add("reorder", {xv[1], xv[3], xv[2]})
            .add("vectorize", {xv[1], V});
        if (cvec > 1) fs.add("unroll", {xv[1]});
        fs.add("unroll", {xv[3]}).add("unroll", {xv[2]});
        ScheduleStatement &u = add(X, 0);
        Args reorder = {xv[1], xv[3], xv[2]};
        const auto &rv = lf(X).update_rvars[0];
        const auto &re = fi(X).rvar_extents[0];
        // A 1x1 conv's input channels unrolled by four, as a GEMM's k: fewer loop steps between
        // the FMAs (bench/DECISIONS.md#d152-conv-outputs-channels-innermost-for-1x1-readers).
        std::string channels_unrolled;
        if (knobs.conv_unroll_taps && one_tap(fi(X)) && rv.size() == 3 && re[2] % 4 == 0 && re[2] >= 16) {
            std::vector<std::string> uused = names_of(X);
            std::string base = rv[2];
            base.erase(std::remove(base.begin(), base.end(), '.'), base.end());  // r.z -> rz
            const std::string ko = fresh(uused, base + "o"), ki = fresh(uused, base + "i");
            u.add("split", {rv[2], ko, ki, 4});
            for (const auto &x : {ki, rv[0], rv[1], ko}) reorder.push_back(x);
            channels_unrolled = ki;
        } else {
            for (const auto &x : rv) reorder.push_back(x);
        }
        u.add("reorder", reorder).add("vectorize", {xv[1], V});
        if (cvec > 1) u.add("unroll", {xv[1]});
        u.add("unroll", {xv[3]}).add("unroll", {xv[2]});
        // The taps of a 3x3 (or smaller) kernel unrolled, a little faster than looped
        // (bench/DECISIONS.md#d30-conv-channel-tiles).
        if (knobs.conv_unroll_taps && re.size() >= 3 && re[0] * re[1] <= 9)
            u.add("unroll", {rv[0]}).add("unroll", {rv[1]});
        if (!channels_unrolled.empty()) u.add("unroll", {channels_unrolled});
    }
}

// A 1x1 conv's tile reads, at each reduction step, one input per tile row from the next channel
// plane of its NCHW input: the Cin x rows cache lines of one tile's reduction outgrow L1 when the
// input channels are many, and every step waits on L2. Read from a copy stored channels innermost,
// one cache line serves 16 steps. The copy is a pass over the input, so it is made only where each
// input element feeds many FMAs (output channels x the outputs per input pixel, at least
// kStagedFlopsPerInput): 7x7 and 14x14 ResNet bottlenecks and the strided downsamples, not a
// 56x56 conv to 64 channels (bench/DECISIONS.md#d80-channels-innermost-1x1-inputs).
constexpr int64_t kStagedFlopsPerInput = 128;

// A 3x3 conv's padded input stored so gained nothing at 7x7 and 14x14 and lost at stride 2
// (bench/DECISIONS.md#d80-channels-innermost-1x1-inputs).
std::string Ctx::staged_input(const std::string &X, const ConvPlan &c) const {
    const LoweredFunc &L = lf(X);
    const auto &re = fi(X).rvar_extents;
    if (!knobs.stage_conv_inputs || re.empty() || re[0].size() < 3 || re[0][0] * re[0][1] != 1 ||
        L.vars.size() != 4 || L.producers.size() != 1)
        return "";
    const std::string &P = L.producers[0];
    const LoweredFunc &LP = lf(P);
    const FuncDecision *d = plan.decision(P);
    if ((d && d->placement != Placement::Root && d->placement != Placement::Inline) || LP.vars.size() != 4 ||
        !LP.update_rvars.empty() ||
        (d && d->placement == Placement::Root && (output_channels_innermost(P) || pointwise_channels_innermost(P))))
        return "";
    const int64_t cin = re[0][2];
    if (LP.extents[1] != cin || cin % c.V != 0) return "";
    const int64_t lines_per_tile = cin * c.HT;  // one cache line per channel and tile row
    const double outputs_per_input = (double)(L.extents[2] * L.extents[3]) / (double)(LP.extents[2] * LP.extents[3]);
    return lines_per_tile * 64 > m.l1_bytes && L.extents[1] * outputs_per_input >= kStagedFlopsPerInput ? P : "";
}

void Ctx::stage_channels_innermost(const std::string &X, const std::string &P) {
    const std::string S = fresh(func_names, X + "_in");
    ScheduleStatement &w = add(P);
    w.comments.push_back(str_cat(S, ": ", P, " as ", X, " reads it, stored channels innermost (a 1x1 conv over ",
                                 lf(P).extents[1], " channels: one cache line serves ", 64 * lanes(P) / m.vector_bytes,
                                 " reduction steps)"));
    w.add("in", {X}, S);
    const auto &v = lf(P).vars;
    ScheduleStatement &st = add(S);
    st.add("compute_root").add("reorder_storage", {v[1], v[3], v[2], v[0]}).add("reorder", {v[1], v[3], v[2], v[0]})
        .add("vectorize", {v[1], lanes(P)});
    if (lf(P).extents[2] >= 2 * std::max(1, m.cores)) st.add("parallel", {v[2]});
}

// A channel tile's stores run over output channels, and a 1x1 conv's broadcasts over input
// channels: with the activation between them stored NCHW, every tile row of the consumer reads a
// new cache line per input channel and the producer's vectors are scattered over channel planes.
// Stored channels innermost, both are dense and no copy (stage_channels_innermost) is needed
// (bench/DECISIONS.md#d152-conv-outputs-channels-innermost-for-1x1-readers). A reader that takes
// the producer a row at a time (a padded input, a depthwise conv, a pool) would gather from it
// instead, so every reader must take a pixel's channels together.
bool Ctx::reads_pixel_channels(const std::string &f) const {
    const FuncDecision *d = plan.decision(f);
    const LoweredFunc &L = lf(f);
    if (!d || L.is_output || L.vars.size() != 4) return false;
    if (read_by_depthwise_channels(f)) return true;
    const std::string F = conv_of_kernel(info, plan, d->kernel);
    if (!F.empty() && depthwise_channels(F)) return true;  // its every loop runs over channel vectors
    if (F.empty() || !tiles_channels(F)) return false;
    if (f == F) return one_tap(fi(F));
    if (f == d->kernel) return true;
    if (d->placement == Placement::Tile)  // a second conv of the tile (tile_convs), tiled as F
        return fi(f).is_conv && one_tap(fi(f)) && L.extents == lf(F).extents && L.update_rvars.size() == 1;
    if (d->placement != Placement::Inline || fi(f).has_update || L.padded_input || L.consumers.empty()) return false;
    for (const auto &c : L.consumers)
        if (plan.decision(c)->kernel != d->kernel || !reads_pixel_channels(c)) return false;
    return true;
}

bool Ctx::output_channels_innermost(const std::string &root) const {
    if (!knobs.stage_conv_inputs) return false;
    const std::string F = conv_of_kernel(info, plan, root);
    const LoweredFunc &L = lf(root);
    if (F.empty() || !(tiles_channels(F) || depthwise_channels(F)) || L.is_output || L.vars.size() != 4 ||
        L.consumers.empty())
        return false;
    for (const auto &c : L.consumers)
        if (!reads_pixel_channels(c)) return false;
    return true;
}

// A pointwise kernel whose every reader takes a pixel's channels together (the channel shuffle
// before ShuffleNetV2's conv5) stores its output channels innermost as a conv tile does: NCHW, a 1x1
// conv's tile reads a new cache line per input channel and tile row, which with hundreds of
// channels and the tile's weight strip outgrows L1
// (bench/DECISIONS.md#d186-pointwise-outputs-channels-innermost-for-1x1-readers).
bool Ctx::pointwise_channels_innermost(const std::string &root) const {
    if (!knobs.stage_conv_inputs) return false;
    const FuncDecision *d = plan.decision(root);
    const LoweredFunc &L = lf(root);
    if (!d || d->kernel != root || d->placement != Placement::Root || L.is_output || L.vars.size() != 4 ||
        L.consumers.empty() || fi(root).has_update || L.padded_input || L.extents[1] % lanes(root) != 0)
        return false;
    for (const auto &kn : plan.kernels)
        if (kn.root == root && kn.kind != KernelKind::Pointwise) return false;
    for (const auto &c : L.consumers)
        if (!reads_pixel_channels(c)) return false;
    return true;
}

// A DepthwiseChannels producer stored NCHW writes each vector's lanes a channel plane apart, so the
// planes' spacing decides which L1 sets its stores hit (bench/DECISIONS.md#d191-rounded-rows-alias-channel-planes).
bool Ctx::reads_channel_plane_scatter(const std::string &F) const {
    for (const auto &P : lf(F).producers) {
        const FuncDecision *d = plan.decision(P);
        if (!d || d->kernel != P || d->placement != Placement::Root) continue;
        const std::string D = conv_of_kernel(info, plan, P);
        if (!D.empty() && depthwise_channels(D) && !output_channels_innermost(P)) return true;
    }
    return false;
}

// NCHW, a depthwise conv's vectors run along a row: every tap is a load per output vector (two
// and a shuffle at stride 2) for one FMA. Vectorized over channels, with the filter stored
// [kH][kW][C] and the padded input channels innermost, a tap is one dense weight load for a tile
// of pixels and one dense input load per pixel, as ONNX Runtime's NCHWc kernels do
// (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels). The kernel's padded input must
// be computed in it (per row block), where it is stored so; a graph output keeps NCHW stores.
bool Ctx::depthwise_channels(const std::string &F, bool source) const {
    auto it = info.find(F);
    if (!knobs.stage_conv_inputs || it == info.end() || !depthwise(it->second)) return false;
    const LoweredFunc &L = lf(F);
    if (!L.depthwise_filter_channels_last || L.vars.size() != 4 || L.update_rvars.size() != 1 ||
        depthwise_channel_lanes(L, m) == 0)
        return false;
    const FuncDecision *d = plan.decision(F);
    if (!d) return false;
    const std::string &R = d->kernel;
    // At the root of its kernel (its activation inlined into several readers: a squeeze-excitation
    // pool and scale) it runs per tile of a wrapper `<conv>_out`, as under an epilogue.
    if (R == F) {
        if (L.is_output || !knobs.tile_wrappers) return false;
    } else if (d->placement != Placement::Tile || fi(R).is_conv || lf(R).is_output || lf(R).extents != L.extents ||
               conv_of_kernel(info, plan, R) != F) {
        return false;
    }
    // A 3x3 kernel at stride 1 reads its row taps as unaligned loads of the NCHW row, as fast, so
    // storing its channel vectors back to NCHW is not worth it
    // (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels).
    const int64_t row_taps = it->second.rvar_extents[0][0];
    int pads = 0;
    bool strided = false;
    for (const auto &pr : L.producers) {
        if (!lf(pr).padded_input) continue;
        const FuncDecision *pd = plan.decision(pr);
        if (conv_of_pad(p, info, plan, m, pr) != F && !(pd && pd->placement == Placement::Inline && pd->kernel == R))
            return false;
        strided = lf(pr).extents[3] > L.extents[3] + row_taps - 1;  // wider than a stride-1 conv reads
        pads++;
    }
    // At root only a strided conv pays: the wrapper's channel vectors stored to NCHW (for an SE
    // pool) cost more than a 5x5 stride-1 conv's taps save
    // (bench/DECISIONS.md#d167-root-depthwise-convs-vectorized-over-channels).
    return pads == 1 && (strided || (row_taps >= 5 && R != F)) && (!source || source_channels_innermost(F));
}

// Fewest input channels of a 1x1 conv channel-tiled only because depthwise convs read it: with
// fewer, the tile's stores outweigh its short reduction and rows are faster
// (bench/DECISIONS.md#d177-sixteen-channel-sources-of-depthwise-convs).
constexpr int64_t kMinDepthwiseSourceTerms = 16;

// A 1x1 conv that Ctx::tiles_channels may tile over channels for depthwise readers.
static bool short_channel_tile(const FuncInfo &x, const MachineModel &m) {
    return channel_tile_fits(x, m) && one_tap(x) && reduction_terms(x) >= kMinDepthwiseSourceTerms;
}

// Whether what depthwise conv \p F's padded input reads (through pointwise Funcs inlined into it)
// is stored channels innermost: each such value the output of a 1x1 conv kernel that channel tiles
// and whose readers are all such depthwise convs: a pad that transposes an NCHW input costs more
// than the channel vectors save (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels).
bool Ctx::source_channels_innermost(const std::string &F) const {
    std::vector<std::string> todo;
    for (const auto &pr : lf(F).producers)
        if (lf(pr).padded_input) todo.insert(todo.end(), lf(pr).producers.begin(), lf(pr).producers.end());
    int sources = 0;
    while (!todo.empty()) {
        const std::string f = todo.back();
        todo.pop_back();
        const FuncDecision *d = plan.decision(f);
        if (d && d->placement == Placement::Inline && !fi(f).has_update) {
            todo.insert(todo.end(), lf(f).producers.begin(), lf(f).producers.end());
            continue;
        }
        if (!d || d->placement != Placement::Root || lf(f).is_output) return false;
        const std::string S = conv_of_kernel(info, plan, f);
        if (S.empty() || !one_tap(fi(S)) || !(channel_tiled(fi(S), m) || short_channel_tile(fi(S), m))) return false;
        for (const auto &c : lf(f).consumers)
            if (!read_by_depthwise_channels(c, false)) return false;
        sources++;
    }
    return sources > 0;
}

// A 1x1 conv whose output only such depthwise convs read is channel-tiled whatever its reduction:
// its tile then stores the channels innermost for their padded inputs, which would otherwise
// transpose an NCHW output (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels).
bool Ctx::tiles_channels(const std::string &F) const {
    const FuncInfo &x = fi(F);
    if (channel_tiled(x, m)) return true;
    if (!knobs.stage_conv_inputs || !short_channel_tile(x, m)) return false;
    const FuncDecision *d = plan.decision(F);
    if (!d || (d->kernel != F && d->placement != Placement::Tile)) return false;
    const LoweredFunc &R = lf(d->kernel);
    if (R.is_output || R.consumers.empty()) return false;
    for (const auto &c : R.consumers)
        if (!read_by_depthwise_channels(c)) return false;
    return true;
}

bool Ctx::read_by_depthwise_channels(const std::string &f, bool source) const {
    const LoweredFunc &L = lf(f);
    const FuncDecision *d = plan.decision(f);
    if (!d || L.is_output || L.vars.size() != 4) return false;
    if (L.padded_input && d->placement == Placement::Root)
        return depthwise_channels(conv_of_pad(p, info, plan, m, f), source);
    if (L.padded_input) {  // an inline member of the depthwise kernel
        for (const auto &c : L.consumers)
            if (!depthwise_channels(c, source)) return false;
        return !L.consumers.empty();
    }
    if (d->placement != Placement::Inline || fi(f).has_update || L.consumers.empty()) return false;
    for (const auto &c : L.consumers)
        if (!read_by_depthwise_channels(c, source)) return false;
    return true;
}

std::vector<std::string> Ctx::tile_convs(const ConvPlan &c) const {
    std::vector<std::string> out = {c.F};
    if (c.T == c.F) return out;
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        const FuncInfo &x = fi(f);
        if (f == c.F || !d || d->placement != Placement::Tile || !x.is_conv || !x.has_update || x.rvar_extents.empty() ||
            lf(f).extents != lf(c.F).extents || lf(f).update_rvars.size() != 1)
            continue;
        out.push_back(f);
    }
    return out;
}

// Direct convolution, NCHW: an output tile of WT (w, 1-2 vectors) x CB output channels is a
// block of vector accumulators; the reduction (input channel, taps) runs outside it, so every
// step loads WT/V input vectors and broadcasts CB weights into CB*WT/V FMAs. Work over
// (n, channel block, rows) is parallel (bench/DECISIONS.md#d32-conv-under-epilogue).
static const char *conv_path_name(ConvPlan::Path path) {
    switch (path) {
    case ConvPlan::Path::Generic: return "conv.generic";
    case ConvPlan::Path::ChannelTile: return "conv.channel_tile";
    case ConvPlan::Path::DepthwiseOutput: return "conv.depthwise_output";
    case ConvPlan::Path::DepthwiseBlocks: return "conv.depthwise_blocks";
    case ConvPlan::Path::DepthwiseChannels: return "conv.depthwise_channels";
    case ConvPlan::Path::RowBlocks: return "conv.row_blocks";
    case ConvPlan::Path::EpilogueTiles: return "conv.epilogue_tiles";
    case ConvPlan::Path::RootTiles: return "conv.root_tiles";
    }
    return "conv.generic";
}

void Ctx::conv() {
    ConvPlan c = choose_conv();
    tiling.path = conv_path_name(c.path);
    if (c.path != ConvPlan::Path::Generic) {
        // A channel tile's vectors run over output channels, V lanes each.
        tiling.vector_lanes = c.path == ConvPlan::Path::ChannelTile ? c.V : c.vl;
        tiling.wrapper = c.wrap;
        tiling.tile_w = c.WT;
        tiling.tile_rows = c.HT;
        tiling.tile_channels = c.CB;
        tiling.round_up = c.round_up;
        if (c.path == ConvPlan::Path::ChannelTile)
            tiling.tasks = c.rows_outer ? "rows" : c.block_tasks ? "channel_blocks" : "channel_and_row_blocks";
    }
    emit_conv(c);
}

ConvPlan Ctx::choose_conv() {
    ConvPlan c;
    const std::string &R = k.root;
    const std::string F = fi(R).is_conv ? R : member_with(Placement::Tile);
    if (F.empty() || lf(F).vars.size() < 3 || fi(F).rvar_extents.empty()) return c;
    c.F = F;
    if (tiles_channels(F)) {
        choose_channel_tile(c);
        return c;
    }
    // A depthwise conv that is a graph output is computed per row of a channel block of its
    // wrapper (realized in its place): its initial value and taps in the row, one store of the
    // result, where at root the initial value was a pass of its own over the output and the
    // update re-read it (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
    // Another conv with no epilogue whose output outgrows half of L2 is computed per row block of a
    // wrapper (RowBlocks): at root, its initial value was a pass through memory of its own and the
    // update read it back (bench/DECISIONS.md#d121-large-root-convs-per-row-block).
    const auto &e = lf(F).extents;
    const bool dw = depthwise(fi(F));
    const bool large = fi(F).points * fi(F).esize > (double)m.l2_bytes / 2 && e.size() == 4 && e[3] >= lanes(F);
    const bool dw_channels = dw && depthwise_channels(F);
    c.wrap = R == F && lf(F).vars.size() == 4 && knobs.tile_wrappers &&
             (dw ? lf(F).is_output || dw_channels : !lf(F).is_output && large);
    c.T = c.wrap ? fresh(func_names, F + "_out") : R;
    const int r = (int)lf(F).vars.size();
    const int V = lanes(F);
    const int64_t W = e[r - 1], C = e[1];
    const int lw = fit_lanes(V, W);
    c.V = V;
    c.W = W;
    // Tile width: two vectors when the row holds them, else one (or the lanes that fit).
    c.WT = W >= 2 * V ? 2 * V : W >= V ? V : std::max(1, lw);
    c.nvec = lw ? std::max(1, c.WT / lw) : 1;
    c.vl = lw ? std::min(lw, c.WT) : 0;
    // Channel block: accumulators CB * nvec within the registers, keeping ~8 for operands.
    const int max_cb = std::max(1, (m.vector_registers - 8) / c.nvec);
    for (int cb : {8, 4, 2})
        if (cb <= max_cb && C % cb == 0) {
            c.CB = cb;
            break;
        }
    const bool epilogue = c.T != F;
    if (dw_channels) {
        c.path = ConvPlan::Path::DepthwiseChannels;
    } else if (c.wrap && dw) {
        c.path = ConvPlan::Path::DepthwiseOutput;
        // The conv's row is a buffer of its own per row of the wrapper, so a tile past its end is
        // rounded up (computed into the rounded allocation, never copied out) where the reads past
        // the row stay in bounds; guarded, the last tile's vectors were masked or scalar
        // (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
        c.round_up = W % c.WT != 0 && p.rows_extend_safely(F);
    } else if (epilogue && r == 4 && depthwise(fi(F)) && lw) {
        c.path = ConvPlan::Path::DepthwiseBlocks;
    } else if (epilogue && r == 4 && c.vl == V && W >= V) {
        c.path = ConvPlan::Path::RowBlocks;
        // HT rows x CB channels: 8 accumulators, so each weight broadcast serves HT vectors and
        // each input vector CB FMAs.
        c.HT = e[2] >= 2 ? 2 : 1;
        c.CB = C % 4 == 0 ? 4 : C % 2 == 0 ? 2 : 1;
    } else if (epilogue) {
        c.path = ConvPlan::Path::EpilogueTiles;
    } else {
        c.path = ConvPlan::Path::RootTiles;
        // A row no multiple of the tile is rounded up (RoundUp: the last columns are computed into
        // the padded allocation and never read) where the conv is not a graph output and every read
        // past the row stays in bounds (LoweredPipeline::rows_extend_safely). Guarded
        // (GuardWithIf), the tail ran as scalar code on AVX2 and as masked vectors, still slower
        // than the wasted columns, on AVX-512 (bench/DECISIONS.md#d33-narrow-conv-rows-round-up,
        // bench/DECISIONS.md#d61-conv-row-tails-rounded-up).
        // Nor where a producer vectorized over channels stores NCHW: the rounded rows widen its
        // channel planes (56 -> 64 wide at 56 rows: 14 KiB apart), and its vectors' lanes, a plane
        // apart, then fall into two L1 sets (bench/DECISIONS.md#d191-rounded-rows-alias-channel-planes).
        c.round_up = !lf(F).is_output && c.vl && W % c.WT != 0 && p.rows_extend_safely(F) &&
                     !reads_channel_plane_scatter(F);
        if (c.round_up && W < V) {
            while (c.WT < W) c.WT *= 2;  // one vector over the whole row: 7 -> 8, 14 -> 16
            c.vl = c.WT;
            c.nvec = 1;
        }
        // Channel counts with few small factors (ShuffleNet's 58, 116) leave a tile of one row
        // with 2-4 accumulators, too few chains to hide the FMA latency: rows are added to the tile
        // (dividing the height) until it holds about 8
        // (bench/DECISIONS.md#d102-conv-root-tile-rows).
        const int acc = c.CB * (c.vl ? c.nvec : 1);
        const int budget = std::max(1, m.vector_registers - 8);
        if (r == 4 && c.vl && acc < 8)
            for (int ht : {4, 2})
                if (acc * ht <= std::max(8, acc) && acc * ht <= budget && e[2] % ht == 0) {
                    c.HT = ht;
                    break;
                }
    }
    return c;
}

std::string Ctx::explain_conv(const ConvPlan &c) const {
    if (c.path == ConvPlan::Path::ChannelTile)
        return str_cat("conv channel tile ", c.WT, " (w) x ", c.HT, " (rows) x ", c.CB, " (channels): ",
                       c.WT * c.HT * (c.CB / c.V), " vector accumulators over blocked weights; ",
                       c.rows_outer ? str_cat("parallel over (n, ", c.RT * c.HT, " rows), the channel blocks inside "
                                              "(the weights stay in L2)")
                       : c.block_tasks ? std::string("parallel over (n, channel block), its row blocks inside "
                                                     "(each core streams its own blocks' weights)")
                                       : std::string("parallel over (n, channel block, row block), row "
                                                     "blocks inside (a channel block's weights stay in L2)"));
    const size_t dims = lf(c.F).update_rvars[0].size();
    if (c.path == ConvPlan::Path::RowBlocks)
        return str_cat("conv tile ", c.V, " (w) x ", c.HT, " (rows) x ", c.CB, " (channels): ", c.HT * c.CB,
                       " vector accumulators; reduction over ", dims, " dims outside it; parallel over (n, row block)");
    const std::string rows = c.HT > 1 ? str_cat(" x ", c.HT, " (rows)") : std::string();
    if (c.path == ConvPlan::Path::RootTiles && c.round_up)
        return str_cat("conv tile ", c.WT, " (w, the ", c.W, "-wide rows rounded up)", rows, " x ", c.CB,
                       " (channels): ", c.nvec * c.CB * c.HT, " vector accumulators; reduction over ", dims,
                       " dims outside it");
    return str_cat("conv tile ", c.WT, " (w)", rows, " x ", c.CB, " (channels): ", c.nvec * c.CB * c.HT,
                   " vector accumulators; reduction over ", dims, " dims outside it");
}

void Ctx::emit_conv(const ConvPlan &c) {
    if (c.path == ConvPlan::Path::Generic) return generic();
    if (c.wrap) {
        ScheduleStatement &ws = add(c.F);
        comment_kernel(ws);
        ws.comments.push_back(str_cat(c.T, c.path == ConvPlan::Path::ChannelTile
                                               ? ": the conv's output, written per tile from the channels-innermost tile"
                                               : ": the conv's output, stored per tile"));
        ws.add("in", {}, c.T);
    }
    ScheduleStatement &st = add(c.T);
    if (!c.wrap) comment_kernel(st);
    std::set<std::string> placed;
    st.comments.push_back(explain_conv(c));
    st.add("compute_root");
    switch (c.path) {
    case ConvPlan::Path::ChannelTile: channel_tile(st, c); break;
    case ConvPlan::Path::DepthwiseOutput: conv_depthwise_output(st, c); break;
    case ConvPlan::Path::DepthwiseBlocks: return depthwise_blocks(st, c.T, c.F);  // it places the members
    case ConvPlan::Path::DepthwiseChannels: return depthwise_channel_tiles(st, c.T, c.F);  // so does it
    case ConvPlan::Path::RowBlocks: conv_row_blocks(st, c); break;
    case ConvPlan::Path::EpilogueTiles: conv_epilogue_tiles(st, c); break;
    case ConvPlan::Path::RootTiles: placed = conv_root_tiles(st, c); break;
    default: break;
    }
    inline_members(placed);
}

// A depthwise conv that is a graph output, per row of its wrapper T: (n, channel block) tasks,
// rows inside, each row of the block computed by the conv's tile (WT x CB accumulators) from the
// block's padded planes (in L2).
void Ctx::conv_depthwise_output(ScheduleStatement &st, const ConvPlan &c) {
    const std::string &F = c.F, &T = c.T;
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    const std::string &w = v[3], &cv = v[1];
    const auto &rv = lf(F).update_rvars[0];
    const int WT = c.WT, CB = c.CB, vl = c.vl, nvec = c.nvec;
    std::vector<std::string> rused = v;
    std::string co = fresh(rused, cv + "o"), ci = fresh(rused, cv + "i");
    if (CB > 1) st.add("split", {cv, co, ci, CB});
    Args ro = {w};
    if (CB > 1) ro.push_back(ci);
    ro.push_back(v[2]);
    ro.push_back(CB > 1 ? co : cv);
    ro.push_back(v[0]);
    st.add("reorder", ro);
    std::string par = CB > 1 ? co : cv;
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
    std::vector<std::string> fused_ = names_of(F);
    std::string wo = fresh(fused_, w + "o"), wi = fresh(fused_, w + "i");
    std::string wvo = fresh(fused_, w + "vo"), wvi = fresh(fused_, w + "vi");
    Args wsplit = {w, wo, wi, WT};
    if (c.round_up) u.comments.push_back(str_cat(F, ": its ", c.W, "-wide rows rounded up to whole tiles of ", WT,
                                                  " (the wrapper copies the row out)"));
    if (c.W % WT != 0) wsplit.push_back(ScheduleArg::tail(c.round_up ? "RoundUp" : "GuardWithIf"));
    if (WT < c.W) u.add("split", wsplit);
    const std::string wv = WT < c.W ? wi : w;
    if (vl && nvec > 1) u.add("split", {wv, wvo, wvi, vl});
    Args reorder = {vl && nvec > 1 ? wvi : wv};
    if (vl && nvec > 1) reorder.push_back(wvo);
    reorder.push_back(cv);
    for (const auto &x : rv) reorder.push_back(x);
    if (WT < c.W) reorder.push_back(wo);
    u.add("reorder", reorder);
    if (vl) u.add("vectorize", {reorder[0].name});
    if (vl && nvec > 1) u.add("unroll", {wvo});
    if (CB > 1) u.add("unroll", {cv});
}

// Row blocks under the epilogue T (after Adams2019's schedule, then measured): a tile of one
// vector (w) x HT rows x CB channels. Work is parallel over (n, row block) with the channel blocks
// inside, so the padded input's rows for a block are computed there once (in L1/L2) rather than
// materialised in a kernel of their own (bench/DECISIONS.md#d32-conv-under-epilogue).
void Ctx::conv_row_blocks(ScheduleStatement &st, const ConvPlan &c) {
    const std::string &F = c.F, &T = c.T;
    const auto &v = lf(F).vars;
    const std::string &w = v[3], &cv = v[1];
    const int V = c.V, HT = c.HT, CB = c.CB;
    std::vector<std::string> rused = names_of(c.wrap ? F : T);  // a wrapper has F's vars
    std::string wo = fresh(rused, w + "o"), wi = fresh(rused, w + "i");
    std::string ho = fresh(rused, v[2] + "o"), hi = fresh(rused, v[2] + "i");
    std::string co = fresh(rused, cv + "o"), ci = fresh(rused, cv + "i");
    const bool wsplit = c.W > V;
    if (wsplit) st.add("split", {w, wo, wi, V});
    if (HT > 1) st.add("split", {v[2], ho, hi, HT});
    if (CB > 1) st.add("split", {cv, co, ci, CB});
    Args ro = {wsplit ? wi : w};
    if (HT > 1) ro.push_back(hi);
    if (CB > 1) ro.push_back(ci);
    if (wsplit) ro.push_back(wo);
    ro.push_back(CB > 1 ? co : cv);
    ro.push_back(HT > 1 ? ho : v[2]);
    ro.push_back(v[0]);
    st.add("reorder", ro);
    std::string par = fresh(rused, "t");
    st.add("fuse", {HT > 1 ? ho : v[2], v[0], par});
    st.add("vectorize", {wsplit ? wi : w, V}).add("parallel", {par});
    for (const std::string &X : tile_convs(c)) {
        place_pads(X, T, par, "row block of " + T + " (the block's rows stay in cache)");
        const auto &xv = lf(X).vars;
        ScheduleStatement &fs = add(X);
        note(fs, X);
        fs.add("compute_at", {T, wsplit ? wo : (CB > 1 ? co : cv)});
        fs.add("vectorize", {xv[3], V});
        if (CB > 1) fs.add("unroll", {xv[1]});
        if (HT > 1) fs.add("unroll", {xv[2]});
        ScheduleStatement &u = add(X, 0);
        Args reorder = {xv[3], xv[2], xv[1]};
        for (const auto &x : lf(X).update_rvars[0]) reorder.push_back(x);
        u.add("reorder", reorder).add("vectorize", {xv[3]});
        if (HT > 1) u.add("unroll", {xv[2]});
        if (CB > 1) u.add("unroll", {xv[1]});
    }
}

// Tiles of WT x CB under the epilogue T, which owns the loop nest; its pure splits may shift
// inwards (WT <= W, CB | C), so the conv computed per tile always has the full tile and no tail.
// Parallel over (n, channel block, rows).
void Ctx::conv_epilogue_tiles(ScheduleStatement &st, const ConvPlan &c) {
    const std::string &F = c.F, &T = c.T;
    const auto &v = lf(F).vars;
    const int r = (int)v.size();
    const std::string &w = v[r - 1], &cv = v[1];
    const int WT = c.WT, CB = c.CB, vl = c.vl, nvec = c.nvec;
    std::vector<std::string> rused = names_of(T);
    std::string wo = fresh(rused, w + "o"), wi = fresh(rused, w + "i");
    std::string co = fresh(rused, cv + "o"), ci = fresh(rused, cv + "i");
    const bool wsplit = WT < c.W;
    if (wsplit) st.add("split", {w, wo, wi, WT});
    if (CB > 1) st.add("split", {cv, co, ci, CB});
    Args ro = {wsplit ? wi : w};
    if (CB > 1) ro.push_back(ci);
    if (wsplit) ro.push_back(wo);
    for (int d = r - 2; d >= 2; d--) ro.push_back(v[d]);
    ro.push_back(CB > 1 ? co : cv);
    ro.push_back(v[0]);
    st.add("reorder", ro);
    // Fuse outward from the innermost row var.
    const size_t first = (wsplit ? 2 : 1) + (CB > 1 ? 1 : 0);
    std::string par = ro[first].name;
    for (size_t q = first + 1; q < ro.size(); q++) {
        std::string fz = fresh(rused, "t");
        st.add("fuse", {par, ro[q].name, fz});
        par = fz;
    }
    if (vl) st.add("vectorize", {wsplit ? wi : w, vl});
    st.add("parallel", {par});
    for (const std::string &X : tile_convs(c)) {
        const auto &xv = lf(X).vars;
        const std::string &xw = xv[r - 1], &xc = xv[1];
        ScheduleStatement &fs = add(X);
        note(fs, X);
        fs.add("compute_at", {T, wsplit ? wo : par});  // the row var may be fused into par
        if (vl) fs.add("vectorize", {xw, vl});
        if (CB > 1) fs.add("unroll", {xc});
        ScheduleStatement &u = add(X, 0);
        Args reorder;
        std::vector<std::string> fused_ = names_of(X);
        std::string wvo = fresh(fused_, xw + "vo"), wvi = fresh(fused_, xw + "vi");
        if (vl && nvec > 1) {
            u.add("split", {xw, wvo, wvi, vl});
            reorder = {wvi, wvo};
        } else {
            reorder = {xw};
        }
        reorder.push_back(xc);
        for (const auto &x : lf(X).update_rvars[0]) reorder.push_back(x);
        u.add("reorder", reorder);
        if (vl) u.add("vectorize", {nvec > 1 ? wvi : xw});
        if (vl && nvec > 1) u.add("unroll", {wvo});
        if (CB > 1) u.add("unroll", {xc});
    }
}

// A conv with no epilogue: the root's channels (fused with n) in parallel, the update's own
// WT x CB tiles; the padded input per channel block.
std::set<std::string> Ctx::conv_root_tiles(ScheduleStatement &st, const ConvPlan &c) {
    const std::string &F = c.F;
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    const int r = (int)v.size();
    const std::string &w = v[r - 1], &cv = v[1];
    const auto &rv = lf(F).update_rvars[0];
    const int WT = c.WT, CB = c.CB, vl = c.vl, nvec = c.nvec;
    std::vector<std::string> rused = names_of(F);
    if (vl) {
        Args vec = {w, vl};
        if (c.round_up) vec.push_back(ScheduleArg::tail("RoundUp"));
        st.add("vectorize", vec);
    }
    std::string par = cv;
    if (e[0] > 1) {
        par = fresh(rused, v[0] + cv);
        st.add("fuse", {cv, v[0], par});
    }
    st.add("parallel", {par});
    ScheduleStatement &u = add(F, 0);
    std::vector<std::string> fused_ = names_of(F);
    std::string wo = fresh(fused_, w + "o"), wi = fresh(fused_, w + "i");
    std::string co = fresh(fused_, cv + "o"), ci = fresh(fused_, cv + "i");
    std::string wvo = fresh(fused_, w + "vo"), wvi = fresh(fused_, w + "vi");
    Args wsplit = {w, wo, wi, WT};
    if (c.W % WT != 0) wsplit.push_back(ScheduleArg::tail(c.round_up ? "RoundUp" : "GuardWithIf"));
    u.add("split", wsplit);
    if (vl && nvec > 1) u.add("split", {wi, wvo, wvi, vl});
    if (CB > 1) u.add("split", {cv, co, ci, CB});
    const int HT = c.HT;
    std::string ho, hi;
    if (HT > 1) {
        ho = fresh(fused_, v[2] + "o"), hi = fresh(fused_, v[2] + "i");
        u.add("split", {v[2], ho, hi, HT});
    }
    Args reorder;
    if (vl && nvec > 1) reorder = {wvi, wvo};
    else reorder = {wi};
    if (CB > 1) reorder.push_back(ci);
    if (HT > 1) reorder.push_back(hi);
    for (const auto &x : rv) reorder.push_back(x);
    reorder.push_back(wo);
    for (int d = r - 2; d >= 2; d--) reorder.push_back(HT > 1 && d == 2 ? ho : v[d]);
    reorder.push_back(CB > 1 ? co : cv);
    reorder.push_back(v[0]);
    u.add("reorder", reorder);
    if (vl) u.add("vectorize", {nvec > 1 ? wvi : wi});
    if (vl && nvec > 1) u.add("unroll", {wvo});
    if (CB > 1) u.add("unroll", {ci});
    if (HT > 1) u.add("unroll", {hi});
    // With a batch, the images and channel blocks are one parallel loop: a training step's
    // gradient convs have few channel blocks (one, for a MaxPool's scatter) and many images,
    // which a parallel loop over the blocks alone, inside the images, left serial
    // (bench/DECISIONS.md#d76-conv-root-tiles-parallel-over-batch).
    std::string tasks = CB > 1 ? co : cv;
    if (e[0] > 1) {
        std::string t = fresh(fused_, v[0] + tasks);
        u.add("fuse", {tasks, v[0], t});
        tasks = t;
    }
    u.add("parallel", {tasks});
    // The padded input per channel block, in cache, not a pass of its own at root
    // (bench/DECISIONS.md#d34-depthwise-output-conv-per-channel-block).
    place_pads(F, F, tasks, "channel block of " + F + " (a depthwise conv reads its own channels)");
    return place_member_pads(F, F, tasks);
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
    tiling.round_up = round_up;
    tiling.vector_lanes = vl;
    tiling.tile_channels = CB;
    st.comments.back() = str_cat("depthwise conv in blocks of ", CB, " channels: a task per block, its rows inside, ",
                                 vl, "-lane vectors", round_up ? str_cat(" (", e[3], "-wide rows rounded up)") : "",
                                 ", the taps unrolled around the block's accumulators, the padded input per task");
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
    const auto &re = fi(F).rvar_extents[0];
    // The taps innermost around one vector of each channel of the block: the block's accumulators
    // stay in registers for every tap instead of being loaded and stored once per tap
    // (bench/DECISIONS.md#d101-depthwise-taps-in-registers).
    const bool taps_inside = knobs.conv_unroll_taps && re.size() >= 2 && re[0] * re[1] <= 25;
    if (taps_inside) {
        std::vector<std::string> fused_ = names_of(F);
        const std::string wo = fresh(fused_, w + "o"), wi = fresh(fused_, w + "i");
        Args split = {w, wo, wi, vl};
        if (round_up) split.push_back(ScheduleArg::tail("RoundUp"));
        Args reorder = {wi};
        for (const auto &x : rv) reorder.push_back(x);
        reorder.push_back(c);
        reorder.push_back(wo);
        u.add("split", split).add("reorder", reorder).add("vectorize", {wi});
        if (CB > 1) u.add("unroll", {c});
        u.add("unroll", {rv[0]}).add("unroll", {rv[1]});
    } else {
        Args reorder = {w, c};
        for (const auto &x : rv) reorder.push_back(x);
        u.add("reorder", reorder).add("vectorize", vec);
        if (CB > 1) u.add("unroll", {c});
    }
    place_pads(F, T, par, "channel block of " + T + " (a depthwise conv reads its own channels)");
    inline_members(place_member_pads(F, T, par));
}

// Depthwise conv \p F under its epilogue \p T (or, at root, its wrapper), vectorized over channels
// (Ctx::depthwise_channels):
// tasks of row blocks; in a row, tiles of WT pixels x one channel vector, the taps unrolled around
// their WT accumulators. The padded input is stored channels innermost and slides down the task's
// rows (stored per task, computed per row): each of its rows, with the pointwise producers inlined
// into it, is computed once, where per output row a 5x5 kernel's pad recomputed five.
void Ctx::depthwise_channel_tiles(ScheduleStatement &st, const std::string &T, const std::string &F) {
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    const int V = depthwise_channel_lanes(lf(F), m);
    const std::string &n = v[0], &c = v[1], &h = v[2], &w = v[3];
    const int64_t W = e[3], H = e[2];
    // Tile width: the first of 4..8 pixels dividing the row (7 for MobileNet's 7 and 14), else 4
    // (or the row) with the last tile guarded.
    int WT = 0;
    for (int t : {4, 8, 7, 5, 6})
        if (W % t == 0) {
            WT = t;
            break;
        }
    if (WT == 0) WT = (int)std::min<int64_t>(W, 4);
    const bool guard = W % WT != 0;
    // Rows per task: two tasks per core. A task recomputes the rows of the padded input that it
    // shares with the next (kernel - stride), so tasks are few; where the rows do not divide, the
    // last task shifts inwards and recomputes a row or two.
    const int64_t tasks = 2 * std::max(1, m.cores);
    const bool cl = output_channels_innermost(k.root);  // F itself where T is its wrapper
    // Stored NCHW with rows shorter than a cache line, tasks of rows would write the same lines of
    // every channel plane from two cores: tasks are channel blocks instead, all rows inside, where
    // there are two a core (bench/DECISIONS.md#d199-narrow-depthwise-outputs-split-by-channels).
    const bool channel_tasks = m.cores > 1 && !cl && W * fi(F).esize < kCacheLineBytes &&
                               e[0] * (e[1] / V) >= 2 * (int64_t)m.cores;
    const int64_t RH = channel_tasks ? 1 : std::max<int64_t>(1, (H + tasks - 1) / tasks);
    std::vector<std::string> tused = names_of(info.count(T) ? T : F);  // a wrapper has F's vars
    const std::string co = fresh(tused, c + "o"), ci = fresh(tused, c + "i"), wo = fresh(tused, w + "o"),
                      wi = fresh(tused, w + "i"), ho = fresh(tused, h + "o"), hi = fresh(tused, h + "i");
    tiling.vector_lanes = V;
    tiling.tile_w = WT;
    tiling.tile_rows = (int)RH;
    tiling.tile_channels = V;
    tiling.tasks = channel_tasks ? "channel_blocks" : "rows";
    st.comments.back() = str_cat("depthwise conv vectorized over channels: tiles of ", WT, " pixels x ", V,
                                 " channels, the taps unrolled around their ", WT, " accumulators; ",
                                 channel_tasks ? std::string("a task per channel block, its rows inside")
                                               : str_cat("tasks of ", RH, " rows"),
                                 ", the padded input stored channels innermost and computed a row at a time");
    if (cl) {
        st.comments.push_back(str_cat(T, ": stored channels innermost (every reader takes a pixel's channels together)"));
        st.add("reorder_storage", {c, w, h, n});
    }
    Args wsplit = {w, wo, wi, WT};
    if (guard) wsplit.push_back(ScheduleArg::tail("GuardWithIf"));
    if (RH > 1) st.add("split", {h, ho, hi, RH});
    st.add("split", {c, co, ci, V}).add("split", wsplit);
    Args ro = channel_tasks ? Args{ci, wi, wo, h, co} : Args{ci, wi, co, wo};
    if (RH > 1) ro.push_back(hi);
    if (!channel_tasks) ro.push_back(RH > 1 ? ho : h);
    ro.push_back(n);
    st.add("reorder", ro);
    std::string par = channel_tasks ? co : RH > 1 ? ho : h;
    if (e[0] > 1) {
        const std::string t = fresh(tused, "t");
        st.add("fuse", {par, n, t});
        par = t;
    }
    st.add("vectorize", {ci, V}).add("unroll", {wi}).add("parallel", {par});  // the last use of st
    ScheduleStatement &fs = add(F);
    note(fs, F);
    fs.add("compute_at", {T, channel_tasks ? wo : co}).add("reorder_storage", {c, w, h, n}).add("reorder", {c, w, h}).add("vectorize", {c, V})
        .add("unroll", {w});
    ScheduleStatement &u = add(F, 0);
    const auto &rv = lf(F).update_rvars[0];
    const auto &re = fi(F).rvar_extents[0];
    Args reorder = {c, w, h};
    for (const auto &x : rv) reorder.push_back(x);
    u.add("reorder", reorder).add("vectorize", {c, V}).add("unroll", {w});
    // The taps of a row unrolled, and a 3x3 kernel's rows too: a whole 5x5 kernel unrolled over the
    // tile costs JIT compile time and gains nothing
    // (bench/DECISIONS.md#d153-depthwise-convs-vectorized-over-channels).
    if (knobs.conv_unroll_taps && re.size() >= 2 && re[0] <= 5) u.add("unroll", {rv[0]});
    if (knobs.conv_unroll_taps && re.size() >= 2 && re[0] * re[1] <= 9) u.add("unroll", {rv[1]});
    std::set<std::string> placed;
    for (const auto &pr : lf(F).producers) {
        if (!lf(pr).padded_input) continue;
        const auto &pv = lf(pr).vars;
        ScheduleStatement &ps = add(pr);
        tiling.pad_per = "row";
        ps.comments.push_back(pr + ": padded input stored channels innermost per task of " + T +
                              ", computed a row at a time as the task's rows slide down it");
        ps.add("store_at", {T, par}).add("compute_at", {T, channel_tasks ? h : RH > 1 ? hi : par})
            .add("reorder_storage", {pv[1], pv[3], pv[2], pv[0]}).add("reorder", {pv[1], pv[3], pv[2], pv[0]})
            .add("vectorize", {pv[1], V});
        placed.insert(pr);
    }
    inline_members(placed);
}

// The padded inputs of conv \p F that the plan inlines into its kernel, computed at \p owner.\p var
// instead (a channel block's planes, in cache): inlined, every tap reads through the clamped index
// and the border select, a gather per lane in vector code
// (bench/DECISIONS.md#d35-depthwise-conv-under-epilogue). Returns the pads placed.
std::set<std::string> Ctx::place_member_pads(const std::string &F, const std::string &owner, const std::string &var) {
    std::set<std::string> placed;
    for (const auto &pr : lf(F).producers) {
        const FuncDecision *d = plan.decision(pr);
        if (!fi(pr).is_conv || fi(pr).has_update || !d || d->placement != Placement::Inline ||
            std::find(k.funcs.begin(), k.funcs.end(), pr) == k.funcs.end())
            continue;
        ScheduleStatement &ps = add(pr);
        tiling.pad_per = "channel block";
        ps.comments.push_back(pr + ": padded input computed per channel block of " + owner +
                              " (its border tested once per point, not once per tap)");
        ps.add("compute_at", {owner, var});
        if (int pl = row_lanes(pr)) ps.add("vectorize", {lf(pr).vars.back(), pl});
        placed.insert(pr);
    }
    return placed;
}

}  // namespace loom::autosched
