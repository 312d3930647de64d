/// \file
/// The GPU kernel plan: which Funcs are inlined, which reductions and producers are computed inside
/// another kernel (row kernels, GEMM and conv epilogues, Concat rows, short-row lane buffers), and
/// which are kernels of their own. No statement is written here; gpu_schedule.cpp emits from it.

#include <functional>

#include "autoschedule/gpu_schedule_internal.h"

namespace loom::gpu_autosched {

namespace {

// A 2-D convolution as lowered by ops/conv.cpp: rank 4 (n, c, h, w), one update over
// (r.x = kw, r.y = kh, r.z = input channel).
bool conv_like(const LoweredFunc &f) {
    return f.func.defined() && f.vars.size() == 4 && num_updates(f) == 1 && f.update_rvars.size() == 1 &&
           f.update_rvars[0].size() == 3;
}

// A pure kernel of rank >= 2 whose outer extents are the reduction's pure extents.
bool row_shaped(const LoweredPipeline &p, const std::string &cname, const LoweredFunc &r) {
    const LoweredFunc *c = p.find(cname);
    if (!c || c->is_extern || num_updates(*c) != 0 || c->vars.size() < 2) return false;
    std::vector<int64_t> outer(c->extents.begin(), c->extents.end() - 1);
    return squeeze_tail(outer) == squeeze_tail(r.extents) && c->extents.back() >= 2 * kVec;
}

// Builds a KernelPlan in the order its rules depend on one another (each step reads the ones before).
class Planner {
public:
    explicit Planner(const LoweredPipeline &p) : p_(p) {}

    KernelPlan run() {
        inline_pure_funcs();
        keep_gemm_operands();
        compute_concat_inputs_per_row();
        find_consumers_through_inlining();
        fuse_gemm_epilogues();
        fuse_conv_epilogues();
        fuse_row_reductions();
        buffer_short_row_values();
        find_channels_last();
        return std::move(plan_);
    }

private:
    const LoweredPipeline &p_;
    KernelPlan plan_;
    std::map<std::string, std::set<std::string>> eff_consumers_;  // consumers seen through inlined Funcs

    void inline_pure_funcs() {
        for (const auto &f : p_.funcs)
            if (num_updates(f) == 0 && !f.is_output && !f.vars.empty() && !f.feeds_extern && !f.is_extern)
                plan_.inlined.insert(f.name);
        bound_inlined_reads();
    }

    // An inlined Func is recomputed inside every kernel that reads it, with all the tensors its
    // inlined producers read. A chain of pure Adds (a pre-norm transformer's residual stream:
    // x + attn, then + mlp, layer after layer) would make every kernel of layer L read 2L GEMM
    // outputs; a Func whose inlined chain reads more than kMaxInlinedReads realized buffers is
    // therefore a kernel of its own, which the chain after it reads once
    // (bench/DECISIONS.md#d139-gpu-inlined-chains-bounded). Producers come first in p_.funcs.
    void bound_inlined_reads() {
        std::map<std::string, std::set<std::string>> reads;  // realized buffers an inlined Func reads
        for (const auto &f : p_.funcs) {
            if (!plan_.inlined.count(f.name)) continue;
            if (!f.func.defined()) continue;
            std::set<std::string> r;
            // Library stages count; reductions (a norm's statistics, a row each) do not.
            for (const auto &[pn, g] : Halide::Internal::find_direct_calls(f.func.function())) {
                if (pn == f.name || g.has_update_definition()) continue;
                auto it = reads.find(pn);
                if (plan_.inlined.count(pn) && it != reads.end()) r.insert(it->second.begin(), it->second.end());
                else r.insert(pn);
            }
            if (r.size() > kMaxInlinedReads) plan_.inlined.erase(f.name);
            else reads[f.name] = std::move(r);
        }
    }

    // A GEMM's operands are read N (or M) times each: a pure producer of one is computed once,
    // as its own kernel, instead of being recomputed inside the product's inner loop.
    void keep_gemm_operands() {
        for (const auto &f : p_.funcs)
            if (gemm_like(f))
                for (const auto &pn : f.producers) plan_.inlined.erase(pn);
    }

    // A Concat reads every input at every point (a select chain: Halide evaluates all branches),
    // so a costly inlined input (a normalisation, a transcendental) would be recomputed for the
    // whole row once per input: such inputs are computed per row of the concat instead, each
    // over its own slice only, and the select reads them back from shared memory.
    void compute_concat_inputs_per_row() {
        for (const auto &c : p_.funcs) {
            if (c.op != "Concat" || plan_.inlined.count(c.name) || c.vars.size() < 2 || num_updates(c) != 0) continue;
            for (const auto &pn : c.producers) {
                const LoweredFunc *in = p_.find(pn);
                if (!in || !plan_.inlined.count(pn) || in->consumers.size() != 1 || in->vars.size() != c.vars.size() ||
                    !costly_inline(*in) || in->extents.back() > 1024)
                    continue;
                std::vector<int64_t> a(in->extents.begin(), in->extents.end() - 1), b(c.extents.begin(), c.extents.end() - 1);
                if (a != b) continue;
                plan_.inlined.erase(pn);
                plan_.owner[pn] = c.name;
                plan_.branches[c.name].push_back(pn);
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
                if (plan_.inlined.count(pn) && walk(*q)) return true;
            }
            return false;
        };
        return walk(f) || flops >= 8;
    }

    void find_consumers_through_inlining() {
        std::function<void(const std::string &, std::set<std::string> &)> walk = [&](const std::string &n,
                                                                                     std::set<std::string> &out) {
            const LoweredFunc *f = p_.find(n);
            if (!f) return;
            for (const auto &c : f->consumers) {
                const LoweredFunc *cf = p_.find(c);
                if (cf && cf->is_extern) continue;  // a library call reads a realized buffer: no fusion across it
                if (plan_.inlined.count(c)) walk(c, out);
                else out.insert(c);
            }
        };
        for (const auto &f : p_.funcs)
            if (!plan_.inlined.count(f.name)) walk(f.name, eff_consumers_[f.name]);
    }

    // A GEMM whose only consumer is a same-shaped pointwise kernel (bias/ReLU epilogue) is
    // computed inside that kernel's threads: one kernel, the epilogue applied in registers.
    void fuse_gemm_epilogues() {
        for (const auto &f : p_.funcs) {
            if (!gemm_like(f) || f.is_output || eff_consumers_[f.name].size() != 1) continue;
            const LoweredFunc *c = p_.find(*eff_consumers_[f.name].begin());
            if (c && num_updates(*c) == 0 && c->extents == f.extents && !plan_.gemm_of.count(c->name)) {
                plan_.gemm_of[c->name] = f.name;
                plan_.owner[f.name] = c->name;
            }
        }
    }

    // Likewise a 2-D conv whose only consumer is a same-shaped pointwise epilogue (BN/ReLU):
    // computed per thread register tile of the epilogue.
    void fuse_conv_epilogues() {
        for (const auto &f : p_.funcs) {
            if (!conv_like(f) || f.is_output || eff_consumers_[f.name].size() != 1) continue;
            const LoweredFunc *c = p_.find(*eff_consumers_[f.name].begin());
            if (c && num_updates(*c) == 0 && c->extents == f.extents && !plan_.gemm_of.count(c->name) &&
                !plan_.conv_of.count(c->name)) {
                plan_.conv_of[c->name] = f.name;
                plan_.owner[f.name] = c->name;
            }
        }
    }

    // A reduction whose every consumer is (or lives in) one row-shaped kernel, or one kernel whose
    // rows it cuts into segments, is computed inside that kernel; consumers first, so that a
    // reduction read by a fused one follows it into the same kernel.
    void fuse_row_reductions() {
        for (auto it = p_.funcs.rbegin(); it != p_.funcs.rend(); ++it) {
            const LoweredFunc &r = *it;
            if (plan_.inlined.count(r.name) || r.is_output || rvar_extent(r) < 0) continue;
            std::string owner;
            bool ok = !eff_consumers_[r.name].empty();
            for (const auto &c : eff_consumers_[r.name]) {
                std::string o;
                if (plan_.owner.count(c)) o = plan_.owner[c];
                else if (row_shaped(p_, c, r) || !segment_var(p_, c, r).empty()) o = c;
                if (o.empty() || (!owner.empty() && o != owner)) ok = false;
                owner = o;
                if (!ok) break;
            }
            if (ok && !row_shaped(p_, owner, r)) {
                ok = !segment_var(p_, owner, r).empty();
                if (ok) plan_.segment.insert(r.name);
            }
            if (ok) plan_.owner[r.name] = owner;
        }
        for (const auto &f : p_.funcs)
            if (plan_.owner.count(f.name) && num_updates(f) > 0) plan_.rows[plan_.owner[f.name]].push_back(f.name);
        for (const auto &[c, br] : plan_.branches) plan_.rows[c];  // a concat with per-row inputs is a row kernel
    }

    // A rank-4 kernel reading NHWC data (a BF16 cuDNN stage's output, a channels-last copy) through
    // inlined Funcs is stored NHWC with its threads along the channels too, so that its reads and
    // the reads of its NHWC consumers stay coalesced; a pure kernel, or a reduction over a few taps
    // (a pool, a depthwise conv) that no other rule fused (bench/DECISIONS.md#d116-gpu-channels-last-kernels),
    // or a global pool over any number of taps (channels_last_pool splits its rows over threads).
    void find_channels_last() {
        std::map<std::string, bool> reads;
        std::function<bool(const Halide::Internal::Function &, int)> nhwc_input = [&](const Halide::Internal::Function &fn,
                                                                                    int depth) {
            if (fn.has_extern_definition())
                return fn.dimensions() == 4 && fn.schedule().storage_dims()[0].var == fn.args()[2];
            const LoweredFunc *lf = p_.find(fn.name());
            if (!lf) return false;
            // A channels-last copy, or a kernel this rule already stored NHWC (a depthwise conv
            // read through an inlined activation by a pool).
            if (lf->channels_last || plan_.channels_last.count(lf->name)) return true;
            if (!plan_.inlined.count(lf->name) || depth > 16) return false;
            if (auto it = reads.find(lf->name); it != reads.end()) return it->second;
            bool any = false;
            for (const auto &[name, g] : Halide::Internal::find_direct_calls(fn)) any = any || nhwc_input(g, depth + 1);
            return reads[lf->name] = any;
        };
        for (const auto &f : p_.funcs) {
            if (f.is_extern || !f.func.defined() || f.vars.size() != 4 || plan_.inlined.count(f.name) ||
                plan_.owner.count(f.name) || plan_.gemm_of.count(f.name) || plan_.rows.count(f.name))
                continue;
            if (f.channels_last) {
                plan_.channels_last.insert(f.name);
                continue;
            }
            // A graph output keeps the caller's layout; a library stage's operand the one it declares.
            if (f.is_output || f.feeds_extern || plan_.conv_of.count(f.name) || num_updates(f) > 1) continue;
            if (num_updates(f) == 1 && !channels_last_global_pool(f)) {  // a few taps, each a constant extent
                int64_t taps = 1;
                for (const auto &rv : f.func.function().update(0).schedule().rvars()) {
                    const int64_t *e = Halide::Internal::as_const_int(rv.extent);
                    taps = e ? taps * *e : kMaxChannelsLastTaps + 1;
                }
                if (taps > kMaxChannelsLastTaps) continue;
            }
            for (const auto &[name, g] : Halide::Internal::find_direct_calls(f.func.function()))
                if (name != f.name && nhwc_input(g, 0)) {
                    plan_.channels_last.insert(f.name);
                    break;
                }
        }
    }

    // In a kernel of short rows, a costly pointwise Func of the row's shape that a statistic and
    // the output both read (softmax's exponentials) is computed once per lane, in registers,
    // instead of inlined into both (bench/DECISIONS.md#d43-gpu-short-rows).
    void buffer_short_row_values() {
        for (const auto &[cn, stats] : plan_.rows) {
            const LoweredFunc &c = *p_.find(cn);
            WarpRows w = warp_rows(p_, plan_, c);
            if (w.rows == 0) continue;
            for (const auto &f : p_.funcs) {
                if (!plan_.inlined.count(f.name) || f.extents != c.extents || f.flops_per_point < kBufferMinFlops)
                    continue;
                bool by_stat = false, others = false;
                for (const auto &u : f.consumers) {
                    bool stat = std::find(stats.begin(), stats.end(), u) != stats.end();
                    by_stat |= stat;
                    others |= !stat && u != cn;
                }
                if (!by_stat || others) continue;
                plan_.inlined.erase(f.name);
                plan_.owner[f.name] = cn;
                plan_.buffered[cn].push_back(f.name);
            }
            // A wide row (several vectors a lane) also keeps the values that a statistic and the
            // Funcs kept above read, and nothing else does (softmax's scaled scores), however cheap:
            // the row is then loaded once, in 16-byte vectors, instead of once per reader
            // (bench/DECISIONS.md#d157-gpu-wide-softmax-rows-in-a-warp).
            if (w.groups == 1) continue;
            std::vector<std::string> &kept = plan_.buffered[cn];
            for (const auto &f : p_.funcs) {
                if (!plan_.inlined.count(f.name) || f.extents != c.extents) continue;
                bool by_stat = false, others = false;
                for (const auto &u : f.consumers) {
                    bool stat = std::find(stats.begin(), stats.end(), u) != stats.end();
                    by_stat |= stat;
                    others |= !stat && u != cn && std::find(kept.begin(), kept.end(), u) == kept.end();
                }
                if (!by_stat || others) continue;
                plan_.inlined.erase(f.name);
                plan_.owner[f.name] = cn;
                kept.push_back(f.name);
            }
        }
    }
};

}  // namespace

KernelPlan plan_kernels(const LoweredPipeline &p) { return Planner(p).run(); }

bool gemm_like(const LoweredFunc &f) {
    if (f.vars.size() != 2 || num_updates(f) != 1) return false;
    int64_t k = rvar_extent(f);
    return k >= 64 && k % kVec == 0 && f.extents[0] % kGemmTile == 0 && f.extents[1] % kGemmTile == 0;
}

std::string segment_var(const LoweredPipeline &p, const std::string &cname, const LoweredFunc &r) {
    const LoweredFunc *c = p.find(cname);
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

std::string keepdims_var(const LoweredFunc &r, const std::string &seg) {
    for (int d = (int)r.vars.size() - 1; d >= 0; d--)
        if (r.extents[d] == 1 && r.vars[d] != seg) return r.vars[d];
    return "";
}

// Every reduction fused into c is a statistic with a keepdims var of extent 1 over either one of S
// equal segments that tile c's rows, or c's whole row; segments or rows of 8 to 128 (2 to 32 lanes
// of four floats, a power of two), or whole rows of 512 or 1024 (32 lanes of 4 or 8 vectors). A
// block holds at least a warp and at most 1024 threads (segments: one row; short rows: as many rows
// as make 256 threads and divide the rows).
WarpRows warp_rows(const LoweredPipeline &p, const KernelPlan &plan, const LoweredFunc &c) {
    int64_t n = c.extents.back(), k = -1;
    const std::vector<std::string> &stats = plan.stats_of(c.name);
    if (!plan.branches_of(c.name).empty() || stats.empty()) return {};
    bool segments = plan.segment.count(stats[0]) > 0;
    int64_t rows = product(std::vector<int64_t>(c.extents.begin(), c.extents.end() - 1));
    for (const auto &rn : stats) {
        const LoweredFunc &r = *p.find(rn);
        if ((plan.segment.count(rn) > 0) != segments || (k >= 0 && rvar_extent(r) != k)) return {};
        k = rvar_extent(r);
        std::string v = segments ? segment_var(p, c.name, r) : "";
        if ((segments && v.empty()) || keepdims_var(r, v).empty()) return {};
        int64_t segs = product(r.extents) / rows;
        if (k * segs != n) return {};
    }
    // Four floats a lane: 16-byte loads. Wider pieces (a 512-wide segment, 32 lanes × 16)
    // compiled to 8-byte loads from lanes 64 bytes apart, and segments stay with the block
    // reduction. A whole row of 32 lanes × 4 or 8 vectors takes a warp too, each lane's vectors a
    // warp's width apart so that every load is coalesced: the block reduction of a 512-wide row
    // (attention's scores at S = 512) re-read the row per statistic between block barriers.
    const int64_t vec = kVec;
    int64_t lanes = k / vec, groups = 1;
    if (!segments && k % (32 * vec) == 0 && lanes >= 32 * kMinWarpGroups) groups = lanes / 32, lanes = 32;
    if (k % vec != 0 || lanes < 2 || lanes > 32 || lanes != pow2_floor(lanes) || groups > kMaxWarpGroups ||
        groups != pow2_floor(groups))
        return {};
    int64_t per_block = 0, threads = n / vec;
    if (!segments) {
        per_block = std::max<int64_t>(1, kRowThreads / lanes);
        while (per_block > 1 && rows % per_block != 0) per_block /= 2;
        threads = per_block * lanes;
    }
    // At least a warp per block: a block of a few threads leaves most of an SM's slots idle.
    if (threads > 1024 || threads < 32) return {};
    return {(int)lanes, (int)vec, (int)groups, per_block};
}

}  // namespace loom::gpu_autosched
