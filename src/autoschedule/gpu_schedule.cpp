#include "autoschedule/gpu_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "graph/error.h"
#include "schedule/schedule_builtin.h"

namespace loom {

namespace {

constexpr int kVec = 4;            // floats per thread access: 16-byte loads
constexpr int kPointThreads = 128; // threads per block of a pointwise kernel
constexpr int kRowThreads = 256;   // threads per row in a row kernel / block reduction
// Floats per thread access in a plain row kernel (softmax, LayerNorm): 8 bytes. Halide's PTX backend
// caps store alignment at 8 bytes, so a 16-byte vector store becomes two 8-byte stores of packed
// halves; 8-byte vectors store directly (`st.global.v2.f32`; the buffers are declared 16-byte
// aligned, LowerOptions::buffer_alignment; bench/DECISIONS.md#d37-gpu-row-kernel).
constexpr int kRowVec = 2;
constexpr int kGemmTile = 64;   // GEMM output tile per block (both dims)
// Elements per block of a split (few-output) reduction: eight float4 loads per thread, one unrolled
// group (bench/DECISIONS.md#d40-gpu-split-reduction-one-kernel).
constexpr int kSplitChunk = kVec * kRowThreads * 8;
// Fewest flops per point of a pointwise Func that a short-row kernel keeps per lane rather than
// inlining into its two readers (softmax's exp(x - max) counts 11).
constexpr double kBufferMinFlops = 8;

// How a block reduction loads and combines (block_partials).
struct BlockCombine {
    int width = kVec;        ///< floats per vector load of the partials
    /// Each level summed in one thread's registers and stored once, through a block-level
    /// wrapper (`in()`) that the next level reads. A Func computed at the block lives in shared
    /// memory, where LLVM cannot keep an accumulator in a register: each step is a shared store,
    /// the next load waits behind it (32 dependent round trips for the last level), and the
    /// partials' init is a stage of its own with a barrier
    /// (bench/DECISIONS.md#d39-gpu-statistics-in-registers).
    bool registers = false;
};

int num_updates(const LoweredFunc &f) { return f.func.defined() ? f.func.num_update_definitions() : (int)f.update_rvars.size(); }

int64_t product(const std::vector<int64_t> &v) {
    int64_t p = 1;
    for (auto e : v) p *= std::max<int64_t>(e, 1);
    return p;
}

int pow2_floor(int64_t v) {
    int p = 1;
    while ((int64_t)p * 2 <= v) p *= 2;
    return p;
}

// Extent of the single RVar of update 0, or -1.
int64_t rvar_extent(const LoweredFunc &f) {
    if (num_updates(f) != 1 || f.update_rvars.empty() || f.update_rvars[0].size() != 1) return -1;
    return f.single_rvar_extent(0);
}

// A var name for a schedule: "r.x" → "r_x"; made unique against the Func's pure vars.
std::string ident(const LoweredFunc &f, std::string want) {
    std::replace(want.begin(), want.end(), '.', '_');
    while (std::find(f.vars.begin(), f.vars.end(), want) != f.vars.end()) want += "_";
    return want;
}

// The leading extents with trailing 1s dropped (keepdims reductions: 64x1 ~ 64).
std::vector<int64_t> squeeze_tail(std::vector<int64_t> v) {
    while (!v.empty() && v.back() == 1) v.pop_back();
    return v;
}

// Tail of a split of a pure var: RoundUp when it divides (no guards), else GuardWithIf.
ScheduleArg tail(bool exact) { return ScheduleArg::tail(exact ? "RoundUp" : "GuardWithIf"); }
// Tail of a split of an RVar (Halide allows only Auto, GuardWithIf or Predicate there).
ScheduleArg rtail(bool exact) { return ScheduleArg::tail(exact ? "Auto" : "GuardWithIf"); }

class GpuScheduler {
public:
    GpuScheduler(const LoweredPipeline &p, const Halide::Target &t) : p_(p), t_(t) {}

    Schedule run() {
        Schedule s;
        s.target = t_.to_string();
        s.header_comments.push_back("gpu_auto_schedule: one kernel per fusion group; pointwise chains inlined;");
        s.header_comments.push_back("row reductions one block per row (8-byte vectors, statistics combined in registers;");
        s.header_comments.push_back("short rows and short segments of a row reduced within a warp by register shuffles);");
        s.header_comments.push_back("elsewhere 4-wide vector accesses per thread");
        classify();
        for (const auto &f : p_.funcs) {
            if (f.is_extern) continue;  // a library call, computed at root by lowering
            if (inlined_.count(f.name)) {
                ScheduleStatement st(f.name);
                st.comments.push_back("pointwise: fused into its consumers");
                st.add("compute_inline");
                s.statements.push_back(st);
            }
        }
        for (const auto &f : p_.funcs) {
            if (f.is_extern || inlined_.count(f.name) || owner_.count(f.name)) continue;
            if (num_updates(f) == 0) {
                if (gemm_of_.count(f.name)) gemm_kernel(s, f, *p_.find(gemm_of_[f.name]));
                else if (conv_of_.count(f.name)) conv_kernel(s, f, *p_.find(conv_of_[f.name]));
                else if (rows_.count(f.name)) row_kernel(s, f);
                else pointwise_kernel(s, f);
            } else {
                reduction_kernel(s, f);
            }
        }
        return s;
    }

private:
    const LoweredPipeline &p_;
    const Halide::Target &t_;
    std::set<std::string> inlined_;
    std::map<std::string, std::string> owner_;   // fused reduction → row kernel it lives in
    std::map<std::string, std::vector<std::string>> rows_;  // row kernel → its reductions (pipeline order)
    std::map<std::string, std::set<std::string>> eff_consumers_;
    std::map<std::string, std::string> gemm_of_;  // pointwise epilogue kernel → the GEMM computed inside it
    std::map<std::string, std::string> conv_of_;  // pointwise epilogue kernel → the 2-D conv computed inside it
    std::set<std::string> segment_;  // fused reductions with several outputs per row of their kernel
    std::map<std::string, std::vector<std::string>> branches_;  // concat kernel → costly inputs computed per row
    std::map<std::string, std::vector<std::string>> buffered_;  // short-row kernel → pointwise Funcs kept per lane

    // A 2-D convolution as lowered by ops/conv.cpp: rank 4 (n, c, h, w), one update over
    // (r.x = kw, r.y = kh, r.z = input channel).
    bool conv_like(const LoweredFunc &f) {
        return f.func.defined() && f.vars.size() == 4 && num_updates(f) == 1 && f.update_rvars.size() == 1 &&
               f.update_rvars[0].size() == 3;
    }

    // A matrix product with a register-tiled schedule: rank 2, one rvar of extent K (K % 4 == 0),
    // M and N multiples of the block tile.
    bool gemm_like(const LoweredFunc &f) {
        if (f.vars.size() != 2 || num_updates(f) != 1) return false;
        int64_t k = rvar_extent(f);
        return k >= 64 && k % kVec == 0 && f.extents[0] % kGemmTile == 0 && f.extents[1] % kGemmTile == 0;
    }

    void classify() {
        for (const auto &f : p_.funcs)
            if (num_updates(f) == 0 && !f.is_output && !f.vars.empty() && !f.feeds_extern && !f.is_extern)
                inlined_.insert(f.name);
        // A GEMM's operands are read N (or M) times each: a pure producer of one is computed once,
        // as its own kernel, instead of being recomputed inside the product's inner loop.
        for (const auto &f : p_.funcs)
            if (gemm_like(f))
                for (const auto &pn : f.producers) inlined_.erase(pn);
        // A Concat reads every input at every point (a select chain: Halide evaluates all branches),
        // so a costly inlined input (a normalisation, a transcendental) would be recomputed for the
        // whole row once per input: such inputs are computed per row of the concat instead, each
        // over its own slice only, and the select reads them back from shared memory.
        for (const auto &c : p_.funcs) {
            if (c.op != "Concat" || inlined_.count(c.name) || c.vars.size() < 2 || num_updates(c) != 0) continue;
            for (const auto &pn : c.producers) {
                const LoweredFunc *in = p_.find(pn);
                if (!in || !inlined_.count(pn) || in->consumers.size() != 1 || in->vars.size() != c.vars.size() ||
                    !costly_inline(*in) || in->extents.back() > 1024)
                    continue;
                std::vector<int64_t> a(in->extents.begin(), in->extents.end() - 1), b(c.extents.begin(), c.extents.end() - 1);
                if (a != b) continue;
                inlined_.erase(pn);
                owner_[pn] = c.name;
                branches_[c.name].push_back(pn);
            }
        }
        // Consumers seen through inlined Funcs.
        std::function<void(const std::string &, std::set<std::string> &)> walk = [&](const std::string &n,
                                                                                     std::set<std::string> &out) {
            const LoweredFunc *f = p_.find(n);
            if (!f) return;
            for (const auto &c : f->consumers) {
                const LoweredFunc *cf = p_.find(c);
                if (cf && cf->is_extern) continue;  // a library call reads a realized buffer: no fusion across it
                if (inlined_.count(c)) walk(c, out);
                else out.insert(c);
            }
        };
        for (const auto &f : p_.funcs)
            if (!inlined_.count(f.name)) walk(f.name, eff_consumers_[f.name]);
        // A GEMM whose only consumer is a same-shaped pointwise kernel (bias/ReLU epilogue) is
        // computed inside that kernel's threads: one kernel, the epilogue applied in registers.
        for (const auto &f : p_.funcs) {
            if (!gemm_like(f) || f.is_output || eff_consumers_[f.name].size() != 1) continue;
            const LoweredFunc *c = p_.find(*eff_consumers_[f.name].begin());
            if (c && num_updates(*c) == 0 && c->extents == f.extents && !gemm_of_.count(c->name)) {
                gemm_of_[c->name] = f.name;
                owner_[f.name] = c->name;
            }
        }
        // Likewise a 2-D conv whose only consumer is a same-shaped pointwise epilogue (BN/ReLU):
        // computed per thread register tile of the epilogue.
        for (const auto &f : p_.funcs) {
            if (!conv_like(f) || f.is_output || eff_consumers_[f.name].size() != 1) continue;
            const LoweredFunc *c = p_.find(*eff_consumers_[f.name].begin());
            if (c && num_updates(*c) == 0 && c->extents == f.extents && !gemm_of_.count(c->name) &&
                !conv_of_.count(c->name)) {
                conv_of_[c->name] = f.name;
                owner_[f.name] = c->name;
            }
        }
        // Row fusion, consumers first.
        for (auto it = p_.funcs.rbegin(); it != p_.funcs.rend(); ++it) {
            const LoweredFunc &r = *it;
            if (inlined_.count(r.name) || r.is_output || rvar_extent(r) < 0) continue;
            std::string owner;
            bool ok = !eff_consumers_[r.name].empty();
            for (const auto &c : eff_consumers_[r.name]) {
                std::string o;
                if (owner_.count(c)) o = owner_[c];
                else if (row_shaped(c, r) || !segment_var(c, r).empty()) o = c;
                if (o.empty() || (!owner.empty() && o != owner)) ok = false;
                owner = o;
                if (!ok) break;
            }
            if (ok && !row_shaped(owner, r)) {
                ok = !segment_var(owner, r).empty();
                if (ok) segment_.insert(r.name);
            }
            if (ok) owner_[r.name] = owner;
        }
        for (const auto &f : p_.funcs)
            if (owner_.count(f.name) && num_updates(f) > 0) rows_[owner_[f.name]].push_back(f.name);
        for (const auto &[c, br] : branches_) rows_[c];  // a concat with per-row inputs is a row kernel
        // In a kernel of short rows, a costly pointwise Func of the row's shape that a statistic and
        // the output both read (softmax's exponentials) is computed once per lane, in registers,
        // instead of inlined into both (bench/DECISIONS.md#d43-gpu-short-rows).
        for (const auto &[cn, stats] : rows_) {
            const LoweredFunc &c = *p_.find(cn);
            if (warp_rows(c).rows == 0) continue;
            for (const auto &f : p_.funcs) {
                if (!inlined_.count(f.name) || f.extents != c.extents || f.flops_per_point < kBufferMinFlops) continue;
                bool by_stat = false, others = false;
                for (const auto &u : f.consumers) {
                    bool stat = std::find(stats.begin(), stats.end(), u) != stats.end();
                    by_stat |= stat;
                    others |= !stat && u != cn;
                }
                if (!by_stat || others) continue;
                inlined_.erase(f.name);
                owner_[f.name] = cn;
                buffered_[cn].push_back(f.name);
            }
        }
    }

    // Whether inlining \p f would recompute real work: it (or a pure producer inlined into it)
    // reads a reduction, or the inlined chain costs several operations per point.
    bool costly_inline(const LoweredFunc &f) {
        double flops = 0;
        std::set<std::string> seen;
        std::function<bool(const LoweredFunc &)> walk = [&](const LoweredFunc &g) {
            if (!seen.insert(g.name).second) return false;
            flops += g.flops_per_point;
            for (const auto &pn : g.producers) {
                const LoweredFunc *q = p_.find(pn);
                if (!q) continue;
                if (num_updates(*q) > 0) return true;
                if (inlined_.count(pn) && walk(*q)) return true;
            }
            return false;
        };
        return walk(f) || flops >= 8;
    }

    // A reduction with several outputs per row of kernel \p cname (LayerNorm over [B, 16, 64]
    // feeding a [B, 1024] kernel): the var of \p r that runs over the row's segments, or "" when
    // r's outputs are not the kernel's rows times S segments (S ≤ 1024 dividing the row).
    std::string segment_var(const std::string &cname, const LoweredFunc &r) {
        const LoweredFunc *c = p_.find(cname);
        if (!c || c->is_extern || num_updates(*c) != 0 || c->vars.size() < 2 || rvar_extent(r) < 2) return "";
        int64_t rows = product(std::vector<int64_t>(c->extents.begin(), c->extents.end() - 1));
        int64_t outs = product(r.extents);
        if (outs % rows != 0) return "";
        int64_t segs = outs / rows;
        if (segs < 2 || segs > 1024 || c->extents.back() % segs != 0) return "";
        for (int d = (int)r.vars.size() - 1; d >= 0; d--)
            if (r.extents[d] > 1) return r.extents[d] == segs ? r.vars[d] : "";
        return "";
    }

    // A pure kernel of rank >= 2 whose outer extents are the reduction's pure extents.
    bool row_shaped(const std::string &cname, const LoweredFunc &r) {
        const LoweredFunc *c = p_.find(cname);
        if (!c || c->is_extern || num_updates(*c) != 0 || c->vars.size() < 2) return false;
        std::vector<int64_t> outer(c->extents.begin(), c->extents.end() - 1);
        return squeeze_tail(outer) == squeeze_tail(r.extents) && c->extents.back() >= 2 * kVec;
    }

    void pointwise_kernel(Schedule &s, const LoweredFunc &f) {
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
        if (rank >= 3) blocks.push_back(fuse_outer(st, f, rank - 2));
        st.add("gpu_blocks", blocks);
        s.statements.push_back(st);
    }

    // Fuses vars [0, n) of f (outermost first) into one; returns its name (the var itself if n == 1).
    std::string fuse_outer(ScheduleStatement &st, const LoweredFunc &f, int n) {
        std::string fused = f.vars[n - 1];
        for (int k = n - 2; k >= 0; k--) {
            std::string nn = ident(f, f.vars[k] + "_" + fused);
            st.add("fuse", {fused, f.vars[k], nn});
            fused = nn;
        }
        return fused;
    }

    // A row kernel whose statistics each sum a warp's lanes (warp_segment_kernel): segments of a
    // row, or whole short rows, `rows` of them per block (0: one row per block, cut into segments).
    struct WarpRows {
        int lanes = 0, vec = 0;
        int64_t rows = 0;
    };

    // The warp mapping of row kernel c, or lanes 0 when it has none. Every reduction fused into c
    // is a statistic with a keepdims var of extent 1 over either one of S equal segments that tile
    // c's rows, or c's whole row; segments or rows of 8 to 128 (2 to 32 lanes of four floats, a
    // power of two). A block holds at least a warp and at most 1024 threads (segments: one row;
    // short rows: as many rows as make 256 threads and divide the rows).
    WarpRows warp_rows(const LoweredFunc &c) {
        int64_t n = c.extents.back(), k = -1;
        if (!branches_[c.name].empty() || rows_[c.name].empty()) return {};
        bool segments = segment_.count(rows_[c.name][0]) > 0;
        int64_t rows = product(std::vector<int64_t>(c.extents.begin(), c.extents.end() - 1));
        for (const auto &rn : rows_[c.name]) {
            const LoweredFunc &r = *p_.find(rn);
            if ((segment_.count(rn) > 0) != segments || (k >= 0 && rvar_extent(r) != k)) return {};
            k = rvar_extent(r);
            std::string v = segments ? segment_var(c.name, r) : "";
            if ((segments && v.empty()) || keepdims_var(r, v).empty()) return {};
            int64_t segs = product(r.extents) / rows;
            if (k * segs != n) return {};
        }
        // Four floats a lane: 16-byte loads. Wider pieces (a 512-wide segment, 32 lanes × 16)
        // compiled to 8-byte loads from lanes 64 bytes apart, and stay with the block reduction.
        const int64_t vec = kVec, lanes = k / vec;
        if (k % vec != 0 || lanes < 2 || lanes > 32 || lanes != pow2_floor(lanes)) return {};
        int64_t per_block = 0, threads = n / vec;
        if (!segments) {
            per_block = std::max<int64_t>(1, kRowThreads / lanes);
            while (per_block > 1 && rows % per_block != 0) per_block /= 2;
            threads = per_block * lanes;
        }
        // At least a warp per block: a block of a few threads leaves most of an SM's slots idle.
        if (threads > 1024 || threads < 32) return {};
        return {(int)lanes, (int)vec, per_block};
    }

    // A pure var of the statistic \p r of extent 1 other than its segment var \p seg (ReduceMean's
    // keepdims axis), innermost first; "" if none.
    static std::string keepdims_var(const LoweredFunc &r, const std::string &seg) {
        for (int d = (int)r.vars.size() - 1; d >= 0; d--)
            if (r.extents[d] == 1 && r.vars[d] != seg) return r.vars[d];
        return "";
    }

    // Rows cut into short segments (LayerNorm over [B, 16, 64] feeding a [B, 1024] kernel), or
    // short rows themselves (w.rows per block): one warp's w.lanes lanes per segment or row,
    // w.vec floats each; each statistic a tree of rfactor'ed lane Funcs halving the lanes at
    // every level, so that it is summed by log2(lanes) register shuffles with no block barrier and
    // no shared memory. The statistic itself is computed per lane over its keepdims var rounded up
    // to the lanes (Halide 14 cannot store a per-warp scalar outside a lane loop), and consumers
    // read lane 0. It replaces a block reduction with four barriers
    // (bench/DECISIONS.md#d42-gpu-warp-segments).
    void warp_segment_kernel(Schedule &s, const LoweredFunc &c, const WarpRows &w) {
        const int lanes = w.lanes, vec = w.vec;
        int rank = (int)c.vars.size();
        std::string j = c.vars.back();
        const LoweredFunc &r0 = *p_.find(rows_[c.name][0]);
        int64_t k = rvar_extent(r0), n = c.extents.back();
        ScheduleStatement st(c.name);
        std::string jl = ident(c, j + "l"), jv = ident(c, j + "v"), at;  // at: the warp's var
        st.add("compute_root");
        if (w.rows == 0) {
            st.comments.push_back("row kernel of segments: one block per row, one warp's " + std::to_string(lanes) +
                                  " lanes × " + std::to_string(vec) + " floats per " + std::to_string(k) +
                                  "-wide segment (" + std::to_string(n / k) + " segments); fuses " +
                                  join(rows_[c.name]));
            std::string jj = ident(c, j + "j");
            at = ident(c, j + "s");
            st.add("split", {j, at, jj, k, tail(true)}).add("split", {jj, jl, jv, vec, tail(true)});
            std::string row = fuse_outer(st, c, rank - 1);
            st.add("reorder", {jv, jl, at, row}).add("vectorize", {jv});
            st.add("gpu_lanes", {jl}).add("gpu_threads", {at}).add("gpu_blocks", {row});
        } else {
            st.comments.push_back("row kernel of short rows: " + std::to_string(w.rows) + " rows per block, one warp's " +
                                  std::to_string(lanes) + " lanes × " + std::to_string(vec) + " floats per " +
                                  std::to_string(n) + "-wide row; fuses " + join(rows_[c.name]));
            st.add("split", {j, jl, jv, vec, tail(true)});
            std::string row = fuse_outer(st, c, rank - 1), rb = ident(c, row + "b");
            at = ident(c, row + "r");
            st.add("split", {row, rb, at, w.rows, tail(true)});
            st.add("reorder", {jv, jl, at, rb}).add("vectorize", {jv});
            st.add("gpu_lanes", {jl}).add("gpu_threads", {at}).add("gpu_blocks", {rb});
        }
        s.statements.push_back(st);
        for (const auto &bn : buffered_[c.name]) {
            const LoweredFunc &b = *p_.find(bn);
            std::string bj = b.vars.back(), bl = ident(b, bj + "l"), bv = ident(b, bj + "v");
            ScheduleStatement bs(bn);
            bs.comments.push_back("read by a statistic and by " + c.name + ": computed once per lane, in registers");
            bs.add("compute_at", {c.name, at}).add("split", {bj, bl, bv, vec, tail(true)});
            bs.add("vectorize", {bv}).add("gpu_lanes", {bl});
            s.statements.push_back(bs);
        }
        for (const auto &rn : rows_[c.name]) {
            const LoweredFunc &r = *p_.find(rn);
            std::string kd = keepdims_var(r, w.rows == 0 ? segment_var(c.name, r) : ""), rv = r.update_rvars[0][0];
            std::string kdo = ident(r, kd + "o"), kdl = ident(r, kd + "l");
            ScheduleStatement rs(rn);
            rs.comments.push_back(std::string(w.rows == 0 ? "segment" : "row") + " statistic: " + std::to_string(lanes) +
                                  " lanes per " + (w.rows == 0 ? "segment" : "row") + ", summed by a tree of " +
                                  "register shuffles; every lane holds it, consumers read lane 0");
            rs.add("compute_at", {c.name, at}).add("split", {kd, kdo, kdl, lanes, tail(true)}).add("gpu_lanes", {kdl});
            s.statements.push_back(rs);
            // Level `lanes`: each lane sums its vec consecutive elements.
            std::string prev = ident(r, "rl"), rvv = ident(r, "rv");
            std::string u = ident(r, "u" + std::to_string(lanes));
            ScheduleStatement up(rn, 0);
            up.add("split", {rv, prev, rvv, vec, rtail(true)}).add("rfactor", {prev, u}, rn + "_l" + std::to_string(lanes));
            s.statements.push_back(up);
            lane_level(s, rn + "_l" + std::to_string(lanes), c.name, at, rvv, u);
            // Each further level adds lane l + w to lane l (a shuffle down), w = lanes/2 … 2.
            for (int w = lanes / 2; w >= 2; w /= 2) {
                std::string ws = std::to_string(w), ro = ident(r, "ro" + ws), ur = ident(r, "u" + ws + "r"),
                            uw = ident(r, "u" + ws);
                ScheduleStatement lv(rn, 0);
                lv.add("split", {prev, ro, ur, w, rtail(true)}).add("rfactor", {ur, uw}, rn + "_l" + ws);
                s.statements.push_back(lv);
                lane_level(s, rn + "_l" + ws, c.name, at, ro, uw);
                prev = ur;
            }
            ScheduleStatement fin(rn, 0);
            fin.add("split", {kd, kdo, kdl, lanes, tail(true)}).add("unroll", {prev}).add("gpu_lanes", {kdl});
            s.statements.push_back(fin);
        }
    }

    // One level \p f of a warp tree: computed at \p at.\p var, its lanes \p lane, its two (or vec)
    // terms \p terms unrolled in each lane.
    static void lane_level(Schedule &s, const std::string &f, const std::string &at, const std::string &var,
                           const std::string &terms, const std::string &lane) {
        ScheduleStatement pure(f);
        pure.add("compute_at", {at, var}).add("gpu_lanes", {lane});
        s.statements.push_back(pure);
        ScheduleStatement up(f, 0);
        up.add("reorder", {terms, lane}).add("unroll", {terms}).add("gpu_lanes", {lane});
        s.statements.push_back(up);
    }

    // One block per row of c; c's row split over T threads × vectors; c's reductions computed per block.
    void row_kernel(Schedule &s, const LoweredFunc &c) {
        if (WarpRows w = warp_rows(c); w.lanes > 0) return warp_segment_kernel(s, c, w);
        int rank = (int)c.vars.size();
        std::string j = c.vars.back();
        int64_t n = c.extents.back();
        // Rows cut into segments (several statistics per row): one vector per thread, so that the
        // 4-element pieces of every segment have a thread.
        bool segmented = false;
        for (const auto &rn : rows_[c.name]) segmented |= segment_.count(rn) > 0;
        // A plain row (whole-row statistics, no Concat inputs): 8-byte vectors, 8 to 16 elements per
        // thread, up to 512 threads, statistics combined in registers (BlockCombine;
        // bench/DECISIONS.md#d37-gpu-row-kernel).
        bool plain = !segmented && branches_[c.name].empty();
        int width = plain ? kRowVec : kVec;
        int v = n % width == 0 ? width : 1;
        // Otherwise 16 elements (four 16-byte vectors) per thread: 256 threads for rows of 4096, 512
        // for 8192. Concat inputs keep it: more threads a row leave each with too little of the
        // row (bench/DECISIONS.md#d41-gpu-segments-and-concat).
        int threads = (int)std::max<int64_t>(32, std::min<int64_t>(2 * kRowThreads, pow2_floor(n / (plain ? 8 : 16))));
        // A segmented row is short and latency-bound (two barriers per statistic for a few KB): each
        // thread takes a piece of two vectors when every segment splits evenly, so that half as many
        // threads per row let twice as many rows share an SM
        // (bench/DECISIONS.md#d41-gpu-segments-and-concat).
        int piece = v;
        if (segmented && v == kVec && n % (2 * kVec) == 0) {
            piece = 2 * kVec;
            for (const auto &rn : rows_[c.name])
                if (segment_.count(rn) && rvar_extent(*p_.find(rn)) % piece != 0) piece = v;
        }
        if (segmented && n / piece <= 1024) threads = (int)std::max<int64_t>(32, pow2_floor(n / piece));
        ScheduleStatement st(c.name);
        st.comments.push_back("row kernel: one block per row, " + std::to_string(threads) + " threads × " +
                              std::to_string(v) + "-wide vectors; fuses " + join(rows_[c.name]));
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
        if (!segmented && threads >= 256) st.add("gpu_max_registers", {(int64_t)(threads >= 512 ? 32 : 40)});
        s.statements.push_back(st);
        for (const auto &bn : branches_[c.name]) {
            const LoweredFunc &b = *p_.find(bn);
            ScheduleStatement bs(bn);
            bs.comments.push_back("concat input: computed per row of " + c.name + " over its own slice only");
            bs.add("compute_at", {c.name, row}).add("gpu_threads", {b.vars.back()});
            s.statements.push_back(bs);
        }
        for (const auto &rn : rows_[c.name]) {
            const LoweredFunc &r = *p_.find(rn);
            if (segment_.count(rn)) segment_reduction(s, r, c.name, row, threads, piece);
            else block_reduction(s, r, c.name, row, threads, true, plain ? BlockCombine{kRowVec, true} : BlockCombine{});
        }
    }

    // Segment statistic \p r computed per block (row) of \p at. When each segment splits into
    // \p piece-element pieces that the block's threads cover, the pieces are summed by one thread
    // each (consecutive elements: 16-byte loads), then one thread per segment adds its segment's
    // pieces; otherwise one thread per segment reduces it serially.
    void segment_reduction(Schedule &s, const LoweredFunc &r, const std::string &at, const std::string &row,
                           int threads, int piece) {
        std::string v = segment_var(at, r), rv = r.update_rvars[0][0];
        int64_t k = rvar_extent(r), segs = 1;
        for (size_t d = 0; d < r.vars.size(); d++)
            if (r.vars[d] == v) segs = r.extents[d];
        bool pieces = k % piece == 0 && (k / piece) * segs <= threads;
        // One thread per segment sums it in registers and stores it once (BlockCombine::registers).
        // It halves the barriers (bench/DECISIONS.md#d39-gpu-statistics-in-registers).
        size_t w = in_registers(s, r.name, at, row, v);
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
        size_t pw = in_registers(s, part, at, row, uv);
        s.statements[pw].add("reorder", order).add("fuse", {"u", v, uv}).add("gpu_threads", {uv});
        ScheduleStatement pu(part, 0);
        std::vector<ScheduleArg> uorder = {ri};
        uorder.insert(uorder.end(), order.begin(), order.end());
        pu.add("reorder", uorder).add("unroll", {ri});
        s.statements.push_back(pu);
    }

    // Places \p f through a wrapper `<f>_w` computed at \p at.\p var, which the block reads, with
    // \p f itself computed at the wrapper's \p inner_var: inside a thread, in its registers.
    // Returns the index of the wrapper's statement; \p f's statement follows it.
    size_t in_registers(Schedule &s, const std::string &f, const std::string &at, const std::string &var,
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

    // A reduction's value at a block, summed by one thread: in_registers with the wrapper's
    // one-element loop (\p inner_var) a thread loop too, so that \p f's init, update and the
    // store run in that thread with no block barrier between them.
    void total_in_registers(Schedule &s, const std::string &f, const std::string &at, const std::string &var,
                            const std::string &inner_var) {
        size_t w = in_registers(s, f, at, var, inner_var);
        s.statements[w].add("gpu_threads", {inner_var});
        s.statements[w + 1].add("store_in", {ScheduleArg::memory("Register")});
    }

    // Reduction \p r computed at \p at.\p var (a block), its rvar split over \p threads threads.
    void block_reduction(Schedule &s, const LoweredFunc &r, const std::string &at, const std::string &var,
                         int threads, bool place, BlockCombine how = {}) {
        int64_t k = rvar_extent(r);
        threads = (int)std::min<int64_t>(threads, std::max<int64_t>(1, pow2_floor(k)));
        if (place) {
            std::string comment = "computed per block of " + at + "; " + std::to_string(threads) +
                                  " threads accumulate partials, one combines them" +
                                  (how.registers ? " in registers" : "");
            size_t first = s.statements.size();
            if (how.registers && !r.vars.empty()) {
                total_in_registers(s, r.name, at, var, r.vars.back());
            } else {
                ScheduleStatement pure(r.name);
                pure.add("compute_at", {at, var});
                s.statements.push_back(pure);
            }
            s.statements[first].comments.push_back(comment);
        }
        block_partials(s, r, r.name, r.update_rvars[0][0], k, threads, at, var, r.name + "_part", r.name + "_part2",
                       {}, how);
    }

    // Update 0 of \p f reduces over RVar \p rv (extent \p k): \p threads threads of the block
    // \p at.\p var accumulate coalesced partials into \p part (rfactor), which one thread combines.
    // Over 32 threads, two levels, so that no thread combines more than threads/32 + 32 partials
    // serially: \p part2(w, u) (threads × coalesced, unrolled loads) → part(u) (32 threads) → f.
    // When k is a multiple of kVec × threads, each thread's loads are kVec-wide vectors: part2 sums
    // a per-thread register vector part3(v) (rfactor over the vector lane), so that a thread issues
    // a quarter of the load instructions and a vectorised body (sin, exp) runs on kVec lanes.
    // \p after_rfactor: statements of f that must follow its rfactor. Var names derive from \p r.
    void block_partials(Schedule &s, const LoweredFunc &r, const std::string &f, const std::string &rv, int64_t k,
                        int threads, const std::string &at, const std::string &var, const std::string &part,
                        const std::string &part2, const std::vector<ScheduleStatement> &after_rfactor = {},
                        BlockCombine how = {}) {
        std::string ro = ident(r, rv + "o"), ri = ident(r, rv + "i");
        std::string rw = ident(r, rv + "w"), ru = ident(r, rv + "u");
        bool two_levels = threads > 32;
        bool vec = two_levels && k % (how.width * threads) == 0;
        std::string rq = ident(r, rv + "q"), rvv = ident(r, rv + "v");
        ScheduleStatement up(f, 0);
        if (vec) up.add("split", {rv, rq, rvv, how.width, rtail(true)});
        up.add("split", {vec ? rq : rv, ro, ri, threads, rtail(k % threads == 0)});
        if (two_levels) up.add("split", {ri, rw, ru, 32, rtail(true)});
        up.add("rfactor", {two_levels ? ru : ri, "u"}, part);
        s.statements.push_back(up);
        s.statements.insert(s.statements.end(), after_rfactor.begin(), after_rfactor.end());
        if (how.registers) {
            s.statements[in_registers(s, part, at, var, "u")].add("gpu_threads", {"u"});
        } else {
            ScheduleStatement ps(part);
            ps.add("compute_at", {at, var}).add("gpu_threads", {"u"});
            s.statements.push_back(ps);
        }
        if (two_levels) {
            ScheduleStatement pu(part, 0);
            pu.add("rfactor", {rw, "w"}, part2);
            s.statements.push_back(pu);
        }
        // rfactor leaves the new thread var where the RVar was, innermost: a serial loop around a
        // thread loop, which Halide synchronises with a block barrier per iteration. Threads outermost.
        ScheduleStatement pu2(part, 0);
        pu2.add("reorder", {two_levels ? rw : ro, "u"});
        // (In registers, the stage runs inside the wrapper's thread loop.)
        auto threads_over = [&](ScheduleStatement &st, const char *tv) {
            if (!how.registers) st.add("gpu_threads", {tv});
        };
        threads_over(pu2, "u");
        s.statements.push_back(pu2);
        if (!two_levels) return;
        // (u, w) fused into one thread dim: the kernel's block stays 1-D (threads ≤ 1024), u innermost.
        if (how.registers) {
            size_t w = in_registers(s, part2, at, var, "uw");
            s.statements[w].add("fuse", {"u", "w", "uw"}).add("gpu_threads", {"uw"});
            s.statements[w + 1].add("fuse", {"u", "w", "uw"});
        } else {
            ScheduleStatement qs(part2);
            qs.add("compute_at", {at, var}).add("fuse", {"u", "w", "uw"}).add("gpu_threads", {"uw"});
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
            qu.add("rfactor", {rvv, "v"}, part3);
            s.statements.push_back(qu);
            ScheduleStatement qu2(part2, 0);
            qu2.add("fuse", {"u", "w", "uw"}).add("reorder", {rvv, "uw"}).add("unroll", {rvv});
            threads_over(qu2, "uw");
            s.statements.push_back(qu2);
            ScheduleStatement vs(part3);
            vs.add("compute_at", {part2, "uw"}).add("vectorize", {"v"});
            s.statements.push_back(vs);
            ScheduleStatement vu(part3, 0);
            vu.add("reorder", {"v", ro, "u", "w"}).add("vectorize", {"v"});
            unroll_loads(vu);
            s.statements.push_back(vu);
            return;
        }
        unroll_loads(qu);
        order.push_back("uw");
        qu.add("fuse", {"u", "w", "uw"}).add("reorder", order);
        threads_over(qu, "uw");
        s.statements.push_back(qu);
    }

    // Register-tiled GEMM: kernel \p c (the GEMM itself, or its pointwise epilogue) is tiled into
    // kGemmTile × kGemmTile blocks; each thread computes a ti × tj register tile. The reduction k
    // is split by 4 and rfactor'ed into a 4-wide vector lane, so that every operand load is a
    // 16-byte float4 (A(i, k..k+3), B(j, k..k+3) when k is innermost in memory), and the per-thread
    // partials (ti × tj × 4 floats) stay in registers; a last unrolled step adds the 4 lanes.
    // No shared-memory staging: the schedule language cannot wrap graph inputs or constant
    // weights with in(), so operand reuse across threads comes from L1.
    void gemm_kernel(Schedule &s, const LoweredFunc &c, const LoweredFunc &g) {
        int ti = 4, tj = 4;  // 8x4 ran far slower (bench/DECISIONS.md#d44-gpu-gemm-and-conv-in-halide)
        if (const char *e = std::getenv("LOOM_GPU_GEMM_TILE")) {  // bench variants: "<ti>x<tj>"
            int a = 0, b = 0;
            if (std::sscanf(e, "%dx%d", &a, &b) == 2 && a > 0 && b > 0 && kGemmTile % a == 0 && kGemmTile % b == 0)
                ti = a, tj = b;
        }
        bool self = &c == &g;
        std::string i = c.vars[0], j = c.vars[1];
        std::string io = ident(c, i + "o"), ii = ident(c, i + "i"), it = ident(c, i + "t"), ir = ident(c, i + "r");
        std::string jo = ident(c, j + "o"), ji = ident(c, j + "i"), jt = ident(c, j + "t"), jr = ident(c, j + "r");
        int64_t k = rvar_extent(g);
        ScheduleStatement st(c.name);
        st.comments.push_back("GEMM" + std::string(self ? "" : " " + g.name + " with its epilogue") + ": " +
                              std::to_string(kGemmTile) + "×" + std::to_string(kGemmTile) + " tiles per block, " +
                              std::to_string(ti) + "×" + std::to_string(tj) + " per thread (" +
                              std::to_string((kGemmTile / ti) * (kGemmTile / tj)) + " threads), k in float4 lanes");
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
            // The GEMM is its own kernel: its update runs in the same thread tiles as its init.
            up2.add("split", {gj, jo, ji, kGemmTile, tail(true)}).add("split", {gi, io, ii, kGemmTile, tail(true)});
            up2.add("split", {ji, jt, jr, tj, tail(true)}).add("split", {ii, it, ir, ti, tail(true)});
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

    // Largest of \p cands (descending) that divides \p n (1 if none).
    static int pick_div(int64_t n, std::initializer_list<int> cands) {
        for (int c : cands)
            if (c >= 1 && n % c == 0) return c;
        return 1;
    }

    // Conv + pointwise epilogue \p c (vars n, c, h, w): each block an output tile of
    // (tx·rw) w × th h × (tc·cr) c, each thread a cr (channels) × rw (w) register tile; the conv is
    // computed at the epilogue's innermost thread var with its reduction (r.z, r.y, r.x) outside the
    // unrolled register tile, the padded input inlined; the epilogue writes from registers. All
    // splits exact (tile sizes are picked to divide the extents), so no producer reads past its input.
    void conv_kernel(Schedule &s, const LoweredFunc &c, const LoweredFunc &g) {
        int64_t C = c.extents[1], H = c.extents[2], W = c.extents[3];
        int cr = 4, rw = 4;  // the fastest tile tried (bench/DECISIONS.md#d44-gpu-gemm-and-conv-in-halide)
        if (const char *e = std::getenv("LOOM_GPU_CONV_TILE")) {  // bench variants: "<cr>x<rw>"
            int a = 0, b = 0;
            if (std::sscanf(e, "%dx%d", &a, &b) == 2 && a > 0 && b > 0) cr = a, rw = b;
        }
        cr = pick_div(C, {cr, 4, 2, 1});
        rw = pick_div(W, {rw, 4, 2, 1});
        int tx = pick_div(W / rw, {8, 4, 2, 1});
        int tc = pick_div(C / cr, {4, 2, 1});
        int th = 1;
        for (int t : {16, 8, 4, 2, 1})
            if (H % t == 0 && tx * tc * t <= 128) { th = t; break; }
        std::string n = c.vars[0], ch = c.vars[1], h = c.vars[2], w = c.vars[3];
        std::string wo = ident(c, w + "o"), wi = ident(c, w + "i"), wt = ident(c, w + "t"), wr = ident(c, w + "r");
        std::string ho = ident(c, h + "o"), ht = ident(c, h + "t");
        std::string co = ident(c, ch + "o"), ci = ident(c, ch + "i"), ct = ident(c, ch + "t"), crr = ident(c, ch + "r");
        std::string con = ident(c, ch + "_" + n);
        ScheduleStatement st(c.name);
        st.comments.push_back("conv " + g.name + " with its epilogue: block tile " + std::to_string(tx * rw) + " w × " +
                              std::to_string(th) + " h × " + std::to_string(tc * cr) + " c (" +
                              std::to_string(tx * th * tc) + " threads), " + std::to_string(cr) + " c × " +
                              std::to_string(rw) + " w per thread in registers");
        st.add("compute_root");
        st.add("split", {w, wo, wi, (int64_t)(tx * rw), tail(true)}).add("split", {wi, wt, wr, (int64_t)rw, tail(true)});
        st.add("split", {h, ho, ht, (int64_t)th, tail(true)});
        st.add("split", {ch, co, ci, (int64_t)(tc * cr), tail(true)}).add("split", {ci, ct, crr, (int64_t)cr, tail(true)});
        st.add("reorder", {wr, crr, wt, ht, ct, wo, ho, co, n});
        st.add("fuse", {co, n, con});
        st.add("unroll", {wr}).add("unroll", {crr});
        st.add("gpu_threads", {wt, ht, ct}).add("gpu_blocks", {wo, ho, con});
        s.statements.push_back(st);
        ScheduleStatement gp(g.name);
        gp.add("compute_at", {c.name, wt}).add("reorder", {g.vars[3], g.vars[1], g.vars[2], g.vars[0]});
        gp.add("unroll", {g.vars[3]}).add("unroll", {g.vars[1]});
        s.statements.push_back(gp);
        const auto &rv = g.update_rvars[0];  // r.x (kw), r.y (kh), r.z (input channel)
        ScheduleStatement up(g.name, 0);
        up.add("reorder", {g.vars[3], g.vars[1], rv[0], rv[1], rv[2], g.vars[2], g.vars[0]});
        up.add("unroll", {g.vars[3]}).add("unroll", {g.vars[1]}).add("unroll", {rv[0]});
        s.statements.push_back(up);
    }

    void reduction_kernel(Schedule &s, const LoweredFunc &r) {
        if (gemm_like(r)) return gemm_kernel(s, r, r);
        int64_t k = rvar_extent(r);
        int64_t outs = product(r.extents);
        auto defaults = default_statements(r, t_);
        if (k < 256) {
            if (k < 0 || r.vars.empty()) {
                for (auto &d : defaults) s.statements.push_back(d);
                return;
            }
            // Short reductions (small GEMMs, pools): one output per thread, the reduction serial
            // inside; guarded tails so that small extents never read outside the inputs.
            pointwise_kernel(s, r);
            ScheduleStatement up(r.name, 0);
            std::string x = r.vars.back(), xo = ident(r, x + "o"), xt = ident(r, x + "t");
            int64_t nx = r.extents.back();
            int tx = (int)std::min<int64_t>(kPointThreads, pow2_floor(nx));
            up.add("split", {x, xo, xt, tx, tail(nx % tx == 0)});
            std::vector<ScheduleArg> order = {r.update_rvars[0][0], xt};
            std::vector<ScheduleArg> threads = {xt}, blocks = {xo};
            if (r.vars.size() >= 2) {
                std::string y = r.vars[r.vars.size() - 2], yo = ident(r, y + "o"), yt = ident(r, y + "t");
                int64_t ny = r.extents[r.vars.size() - 2];
                int ty = (int)std::max<int64_t>(1, std::min<int64_t>(kPointThreads / tx, pow2_floor(ny)));
                up.add("split", {y, yo, yt, ty, tail(ny % ty == 0)});
                order.push_back(yt);
                threads.push_back(yt);
                blocks.push_back(yo);
            }
            for (auto &b : blocks) order.push_back(b);
            if (r.vars.size() >= 3) {
                blocks.push_back(fuse_outer(up, r, (int)r.vars.size() - 2));
                order.push_back(blocks.back());
            }
            up.add("reorder", order).add("gpu_threads", threads).add("gpu_blocks", blocks);
            s.statements.push_back(up);
            return;
        }
        if (outs >= 2 * 132 || k < 16384) {
            // One block per output: the pure stage (the init) is mapped like a pointwise kernel.
            pointwise_kernel(s, r);
            block_reduction(s, r, r.name, pure_block_var(r), kRowThreads, false);
            ScheduleStatement up(r.name, 0);
            add_blocks(up, r);
            s.statements.push_back(up);
            return;
        }
        // Few outputs: chunks of kSplitChunk elements, one block each. The block's partial is
        // computed inside the same kernel, at the block var of the output's update, which adds it
        // atomically: one kernel (plus the init), not a partials kernel and a combining kernel
        // (bench/DECISIONS.md#d40-gpu-split-reduction-one-kernel).
        int64_t chunk = std::min<int64_t>(kSplitChunk, (k + kRowThreads - 1) / kRowThreads * kRowThreads);
        std::string rv = r.update_rvars[0][0];
        std::string rb = ident(r, rv + "b"), rc = ident(r, rv + "c"), blk = r.name + "_blk";
        int64_t nb = (k + chunk - 1) / chunk;
        ScheduleStatement pure_st(r.name);
        pure_st.comments.push_back("split reduction: " + std::to_string(nb) + " blocks of " + std::to_string(chunk) +
                                   " elements, each adding its partial atomically");
        pure_st.add("compute_root").add("gpu_single_thread");  // the init
        s.statements.push_back(pure_st);
        ScheduleStatement up(r.name, 0);
        up.add("split", {rv, rb, rc, (int64_t)chunk, rtail(k % chunk == 0)});
        up.add("rfactor", {rb, "b"}, blk);
        s.statements.push_back(up);
        ScheduleStatement up2(r.name, 0);
        up2.add("atomic");
        add_blocks(up2, r, {rb});
        s.statements.push_back(up2);
        // The block's partial summed in the registers of the thread that combines it (BlockCombine).
        total_in_registers(s, blk, r.name, rb, "b");
        // Each block: kRowThreads threads accumulate coalesced partials, in two levels as above.
        block_partials(s, r, blk, rc, chunk, kRowThreads, r.name, rb, r.name + "_thr", r.name + "_thr2", {},
                       BlockCombine{kVec, true});
    }

    // The block var of a reduction's update at which its partials are computed: the innermost
    // block var (add_blocks maps up to three innermost pure vars onto blocks).
    std::string pure_block_var(const LoweredFunc &r) { return r.vars.empty() ? "" : r.vars.back(); }

    // gpu_blocks over \p first (innermost) and then r's innermost pure vars, three dims at most.
    void add_blocks(ScheduleStatement &up, const LoweredFunc &r, std::vector<ScheduleArg> first = {}) {
        std::vector<ScheduleArg> b = std::move(first);
        for (auto it = r.vars.rbegin(); it != r.vars.rend() && b.size() < 3; ++it) b.push_back(*it);
        up.add("gpu_blocks", b);
    }

    static std::string join(const std::vector<std::string> &v) {
        std::string r;
        for (const auto &x : v) r += (r.empty() ? "" : ", ") + x;
        return r;
    }
};

}  // namespace

Schedule gpu_auto_schedule(const LoweredPipeline &p, const Halide::Target &target) {
    user_check(target.has_gpu_feature(), "gpu_auto_schedule: target ", target.to_string(), " has no GPU feature");
    return GpuScheduler(p, target).run();
}

}  // namespace loom
