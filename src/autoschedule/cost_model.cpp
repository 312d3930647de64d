// Fusion grouping: which Funcs are inlined, which are computed inside another Func's loop nest,
// and which own a kernel — each decision scored by the time it saves on the machine model.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "autoschedule/autoschedule_internal.h"
#include "schedule/schedule_validate.h"
#include "support/error.h"

namespace loom {

using autosched::FuncInfo;

const FuncDecision *FusionPlan::decision(const std::string &func) const {
    for (const auto &d : decisions)
        if (d.func == func) return &d;
    return nullptr;
}

namespace {

std::string fmt(double v, int prec = 2) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}

std::string human_bytes(double b) {
    if (b >= 1e9) return fmt(b / 1e9) + " GB";
    if (b >= 1e6) return fmt(b / 1e6) + " MB";
    if (b >= 1e3) return fmt(b / 1e3) + " KB";
    return fmt(b, 0) + " B";
}

// Bytes/s for traffic over a buffer of \p bytes: L2 bandwidth when it fits in the L2 of the cores,
// DRAM (copy) bandwidth otherwise.
double bandwidth(const MachineModel &m, double bytes) {
    double dram = m.bytes_per_s();
    if (bytes <= (double)m.l2_bytes) return std::max(dram, 32.0 * 2.5e9 * m.cores);  // ~32 B/cycle/core
    return dram;
}

// Inductor-style op name for kernel names.
std::string short_op(const std::string &op) {
    static const std::map<std::string, std::string> names = {
        {"ReduceSum", "sum"},       {"ReduceMean", "mean"},          {"ReduceMax", "amax"},
        {"ReduceMin", "amin"},      {"ReduceProd", "prod"},          {"ReduceL2", "norm"},
        {"MatMul", "mm"},           {"Gemm", "addmm"},               {"Conv", "convolution"},
        {"LayerNormalization", "layer_norm"}, {"BatchNormalization", "batch_norm"},
        {"InstanceNormalization", "instance_norm"}, {"GroupNormalization", "group_norm"},
        {"Softmax", "softmax"},     {"LogSoftmax", "log_softmax"},   {"Output", "copy"},
        {"ConvTranspose", "conv_transpose"}, {"MaxPool", "max_pool"}, {"AveragePool", "avg_pool"},
        {"GlobalAveragePool", "mean"}, {"GlobalMaxPool", "amax"},
    };
    auto it = names.find(op);
    if (it != names.end()) return it->second;
    std::string s;
    for (char c : op) {
        if (std::isupper((unsigned char)c) && !s.empty() && !std::isupper((unsigned char)s.back()))
            s += '_';
        s += (char)std::tolower((unsigned char)c);
    }
    return s;
}

struct Planner {
    const LoweredPipeline &p;
    const MachineModel &m;
    const ScheduleKnobs &knobs;
    std::map<std::string, FuncInfo> info;
    std::map<std::string, FuncDecision> dec;
    std::map<std::string, double> evals;  // pure-stage evaluations of each Func in the plan
    // Reshapes of whole rows inlined as a GEMM's operand: the micro-kernel reads the source's rows in
    // place, its index math per row, not per multiply-add (lower/flat_row_index folds a merged
    // reshape's divide and modulo), so they add no FLOPs to their kernel.
    std::set<std::string> operand_row_views;
    // Funcs decide_inlining would inline but would rather buffer per row: their evaluations and
    // the inline decision's reason, for when no row holds them.
    std::map<std::string, std::pair<double, std::string>> row_buffer_candidates;

    Planner(const LoweredPipeline &p_, const MachineModel &m_, const ScheduleKnobs &k_)
        : p(p_), m(m_), knobs(k_), info(autosched::analyze(p_)) {}

    const FuncInfo &fi(const std::string &n) const { return info.at(n); }

    // Reads of \p f by consumer \p c given how c is placed (c inlined: per evaluation of c).
    double reads(const std::string &c, const std::string &f) const {
        const FuncInfo &ci = fi(c);
        double r = 0;
        for (size_t s = 0; s < ci.calls.size(); s++) {
            auto it = ci.calls[s].find(f);
            if (it == ci.calls[s].end()) continue;
            double n = s == 0 ? evals.at(c) : ci.update_iters[s - 1];
            r += it->second * n;
        }
        return r;
    }

    // Bytes per point of the large sources \p f reads (small ones stay in cache).
    double source_bytes_pp(const std::string &f) const {
        const LoweredFunc &lf = *fi(f).lf;
        double b = 0;
        for (const auto &pr : lf.producers) {
            const FuncInfo &pi = fi(pr);
            if (pi.points * pi.esize > (double)m.l2_bytes) b += pi.esize;
        }
        for (const auto &in : lf.input_reads) {
            for (size_t k = 0; k < p.input_names.size(); k++)
                if (p.input_names[k] == in &&
                    (double)shape_numel(p.input_shapes[k]) * dtype_size(p.input_dtypes[k]) > (double)m.l2_bytes)
                    b += dtype_size(p.input_dtypes[k]);
        }
        return b;
    }

    // Whether \p lf concatenates Funcs along its innermost dim, at least a vector wide.
    bool inner_concat(const LoweredFunc &lf) const {
        if (lf.op != "Concat" || lf.extents.empty() || lf.producers.empty() || !lf.input_reads.empty() ||
            lf.extents.back() < m.lanes(lf.dtype))
            return false;
        bool split_inner = false;
        for (const auto &pr : lf.producers) {
            const auto &pe = fi(pr).lf->extents;
            if (pe.size() != lf.extents.size()) return false;
            for (size_t d = 0; d + 1 < pe.size(); d++)
                if (pe[d] != lf.extents[d]) return false;
            split_inner |= pe.back() < lf.extents.back();
        }
        return split_inner;
    }

    // Whether \p lf is a Reshape of one Func or input that keeps the innermost dim (equal
    // extents): only its outer dims merge or split.
    bool reshape_of_rows(const LoweredFunc &lf) const {
        if (lf.op != "Reshape" || lf.extents.empty() || lf.producers.size() + lf.input_reads.size() != 1) return false;
        const std::vector<int64_t> *src = nullptr;
        if (!lf.producers.empty()) {
            const LoweredFunc *q = p.find(lf.producers.front());
            if (q) src = &q->extents;
        } else {
            for (size_t k = 0; k < p.input_names.size() && k < p.input_shapes.size(); k++)
                if (p.input_names[k] == lf.input_reads.front()) src = &p.input_shapes[k];
        }
        return src && !src->empty() && src->size() != lf.extents.size() && src->back() == lf.extents.back();
    }

    // Whether \p lf, read \p total times (8 or more a point, as a GEMM reads its B), is a transpose
    // whose vectors are gathers of a pure, computed Func that nothing else reads: storing lf in
    // place of that source moves as many bytes.
    bool transposed_copy_of_b(const LoweredFunc &lf, double total) const {
        const FuncInfo &f = fi(lf.name);
        if (f.transposed_from.empty() || total < 8 * f.points) return false;
        const LoweredFunc *src = p.find(f.transposed_from);
        return src && !src->is_output && src->consumers.size() == 1 && src->consumers.front() == lf.name &&
               !fi(src->name).has_update;
    }

    // Decides inline-or-not for every pure non-output Func, consumers first.
    void decide_inlining() {
        for (auto it = p.funcs.rbegin(); it != p.funcs.rend(); ++it) {
            const LoweredFunc &lf = *it;
            const FuncInfo &f = fi(lf.name);
            FuncDecision d;
            d.func = lf.name;
            evals[lf.name] = f.points;
            if (lf.is_output || f.has_update || lf.consumers.empty()) {
                d.placement = Placement::Root;
                d.why = lf.is_output ? "graph output" : f.has_update ? "has a reduction (cannot inline)" : "no consumers";
                dec[lf.name] = d;
                continue;
            }
            double total = 0;
            std::set<std::string> cs(lf.consumers.begin(), lf.consumers.end());
            for (const auto &c : cs) total += reads(c, lf.name);
            double extra = std::max(0.0, total - f.points);
            double bytes = f.points * f.esize;
            double saved = bytes * (1 + (double)cs.size()) / bandwidth(m, bytes);
            double cost = extra * lf.flops_per_point / m.pointwise_flops_per_s() +
                          extra * source_bytes_pp(lf.name) / m.bytes_per_s();
            double score_ms = (saved - cost) * 1e3;
            bool inl = score_ms >= 0;
            d.placement = inl ? Placement::Inline : Placement::Root;
            d.why = str_cat(inl ? "inline" : "materialize", ": ", cs.size(), " consumer(s), ",
                            fmt(total / std::max(1.0, f.points)), "x evaluations; saves ", fmt(saved * 1e3, 3),
                            " ms of traffic vs ", fmt(cost * 1e3, 3), " ms recompute");
            // A third way for a costly body read more than once: a buffer per row of the consumers'
            // kernel, in cache, written once and read by each consumer (Softmax's exponentials: read
            // by the sum and by the output). Worth it when the arithmetic recomputed costs more than
            // the buffer's stores and loads, each counted as one pointwise operation. group() makes
            // it Row where the consumers share a row kernel, else inlines it after all.
            // A 2-D transpose of a graph input (a training step's weight) read as a GEMM's B: inlined,
            // every vector of B the micro-kernel loads is a gather; materialized once, B is read
            // along its rows (bench/DECISIONS.md#d90-transposed-gemm-operand-materialized).
            // A transpose read as a GEMM's A operand is inlined: the micro-kernel broadcasts each
            // element of A once per column tile, MR of them from one row of the source, so the
            // reads above are counted per column and per cache miss where they are neither; a
            // buffer per row block (D3) gathered every vector instead.
            if (!inl && !f.transposed_from.empty() && lf.flops_per_point <= 1 && cs.size() == 1 &&
                fi(*cs.begin()).is_matmul && fi(*cs.begin()).matmul_a == lf.name) {
                inl = true;
                d.placement = Placement::Inline;
                d.why = str_cat("inline: the A operand of ", *cs.begin(), ", a transpose: its micro-kernel broadcasts ",
                                "rows of the source from cache (", fmt(total / std::max(1.0, f.points)), "x evaluations)");
            }
            if (inl && !f.transposed_from.empty() && !p.find(f.transposed_from) && lf.extents.size() == 2 &&
                total >= 8 * f.points)
                for (const auto &c : cs)
                    if (fi(c).is_matmul && fi(c).matmul_a != lf.name) {
                        inl = false;
                        d.placement = Placement::Root;
                        d.why = str_cat("materialize: the B operand of ", c, ", a transpose of an input: inlined, ",
                                        "its vectors would be gathers (", fmt(total / std::max(1.0, f.points)),
                                        "x evaluations)");
                        break;
                    }
            // Likewise a transpose of a Func that only this transpose reads (attention's Kᵀ and, in
            // a training step's backward, Vᵀ: a head split of a projection, stored as a copy for
            // the GEMM): stored in the transposed layout instead, its source inlined into it, the
            // step keeps its number of passes and the micro-kernel loads B's rows
            // (bench/DECISIONS.md#d165-attention-b-operands-stored-transposed).
            if (inl && transposed_copy_of_b(lf, total))
                for (const auto &c : cs)
                    if (fi(c).is_matmul && fi(c).matmul_a != lf.name) {
                        inl = false;
                        d.placement = Placement::Root;
                        d.why = str_cat("materialize: the B operand of ", c, ", a transpose of ", f.transposed_from,
                                        " (read only here): inlined, its vectors would be gathers (",
                                        fmt(total / std::max(1.0, f.points)), "x evaluations)");
                        break;
                    }
            // A Reshape that keeps its source's rows (only outer dims merge or split, so its index
            // math is per row and its inner dim is read in place) and is read only as a GEMM's
            // operand, as B or through an inlined transpose as A: inlined, the micro-kernel reads
            // the source's rows where they are; stored, it is a copy of the operand (a training
            // step's weight gradient over [batch, seq] rows as one product:
            // bench/DECISIONS.md#d141-row-reshapes-of-gemm-operands-inlined).
            if (!inl && reshape_of_rows(lf) && cs.size() == 1) {
                const std::string &c = *cs.begin();
                bool operand = fi(c).is_matmul;
                const LoweredFunc *t = p.find(c);
                auto dc = dec.find(c);
                if (!operand && t && t->op == "Transpose" && dc != dec.end() && dc->second.placement == Placement::Inline &&
                    t->consumers.size() == 1) {
                    const std::string &g = t->consumers.front();
                    operand = fi(g).is_matmul && fi(g).matmul_a == c;
                }
                if (operand) {
                    inl = true;
                    operand_row_views.insert(lf.name);
                    d.placement = Placement::Inline;
                    d.why = str_cat("inline: a reshape of whole rows read as an operand of a GEMM (", c,
                                    "): its micro-kernel reads the source's rows in place");
                }
            }
            // A Concat along the innermost dim reads each input through a clamped index (Halide
            // evaluates every branch of its select chain): inlined into a consumer vectorized along
            // that dim, every vector is a select over one gather per input. Materialized, its own
            // kernel copies each input with plain vectors (Ctx::concat_piece)
            // (bench/DECISIONS.md#d94-inner-concat-materialized).
            if (inl && inner_concat(lf)) {
                inl = false;
                d.placement = Placement::Root;
                d.why = str_cat("materialize: a concat along its inner dim; inlined, its ", cs.size(),
                                " consumer(s) would gather every vector from each input");
            }
            double recompute = extra * lf.flops_per_point / m.pointwise_flops_per_s();
            double buffered = f.points * (1.0 + (double)cs.size()) / m.pointwise_flops_per_s();
            // Only where the extra evaluations are the readers' own (each reads each point once), not
            // a window's overlap (a conv reading its inlined input 9 times).
            bool point_readers = cs.size() >= 2 && total <= (double)cs.size() * f.points;
            if (inl && point_readers && recompute > buffered) {
                d.placement = Placement::Root;
                row_buffer_candidates[lf.name] = {total, d.why};
                d.why = str_cat("per-row buffer if its consumers share a row kernel: ", cs.size(), " consumer(s), ",
                                fmt(total / std::max(1.0, f.points)), "x evaluations inlined, ",
                                fmt(recompute * 1e3, 3), " ms of arithmetic recomputed vs ", fmt(buffered * 1e3, 3),
                                " ms through a cached buffer");
            }
            if (d.placement == Placement::Inline) evals[lf.name] = total;
            dec[lf.name] = d;
        }
    }

    // The non-inlined Funcs reading \p f directly or through inlined Funcs.
    std::set<std::string> effective_consumers(const std::string &f) const {
        std::set<std::string> out;
        for (const auto &c : fi(f).lf->consumers) {
            if (dec.at(c).placement == Placement::Inline) {
                auto sub = effective_consumers(c);
                out.insert(sub.begin(), sub.end());
            } else {
                out.insert(c);
            }
        }
        return out;
    }

    bool same_extents(const std::string &a, const std::string &b) const {
        return fi(a).lf->extents == fi(b).lf->extents;
    }

    // Depth of a statistic \p s (reduced dims of extent 1) under a root \p r of the same rank: the
    // number of leading dims they share, when every later dim of s is 1; 0 when it does not fit.
    // A statistic reduced over a middle dim (a Softmax over axis 1 of [B, S, D]: [B, 1, D]) keeps
    // its later dims: depth 1, each block of the root (S x D) holding the statistic's row.
    int row_depth(const std::string &s, const std::string &r) const {
        const auto &es = fi(s).lf->extents, &er = fi(r).lf->extents;
        if (es.size() != er.size() || er.size() < 2) return 0;
        int d = 0;
        while (d < (int)er.size() && es[d] == er[d]) d++;
        if (d == 0 || d >= (int)er.size()) return 0;
        for (size_t k = d; k < es.size(); k++)
            if (es[k] != 1 && es[k] != er[k]) return 0;
        // One row block must stay in cache between the passes.
        return row_fits(r, d) ? d : 0;
    }

    // Whether one row of \p r (its dims from \p depth in) fits in half of L2, as a row block read
    // twice or a row buffer must.
    bool row_fits(const std::string &r, size_t depth = 1) const {
        const auto &e = fi(r).lf->extents;
        double row_bytes = fi(r).esize;
        for (size_t k = depth; k < e.size(); k++) row_bytes *= (double)e[k];
        return row_bytes <= (double)m.l2_bytes / 2;
    }

    std::string kernel_of(const std::string &f) const { return dec.at(f).kernel; }

    // The placements decided so far, as the schedule validator reads them.
    Schedule context;
    bool context_ready = false;

    // Asks the schedule validator (checks before actions) whether \p f may be computed inside
    // \p root; on no, \p why gets its reason.
    bool legal_at(const std::string &f, const std::string &root, std::string &why) {
        if (!context_ready) {
            for (const auto &lf : p.funcs)
                if (dec.at(lf.name).placement == Placement::Inline) {
                    ScheduleStatement st(lf.name);
                    st.add("compute_inline");
                    context.statements.push_back(st);
                }
            context_ready = true;
        }
        const auto &vars = fi(root).lf->vars;
        if (vars.empty()) return false;
        if (!can_compute_at(p, f, root, vars[0], &context, &why)) return false;
        ScheduleStatement st(f);
        st.add("compute_at", {root, vars[0]});
        context.statements.push_back(st);
        return true;
    }

    // The matmul computed per tile of epilogue \p root when its epilogue tiles are whole row
    // blocks (rank 2, j not split, at least two blocks, the A block in L2), else "".
    std::string gemm_block_of(const std::string &root) const {
        for (const auto &[name, d] : dec) {
            if (d.placement != Placement::Tile || d.kernel != root || !fi(name).is_matmul) continue;
            const FuncInfo &g = fi(name);
            if (g.lf->extents.size() != 2 || g.matmul_a.empty()) return "";
            autosched::GemmTile t = autosched::gemm_tile(g, true, m, knobs);
            if (!t.ok || t.NCt < t.N || t.MC >= t.M) return "";
            if ((double)t.MC * t.K * g.esize > (double)m.l2_bytes / 4) return "";
            return name;
        }
        return "";
    }

    // Whether \p n reads a matmul or conv directly or through inlined Funcs (an epilogue: its
    // GEMM is better fused into it than recomputed per block of another GEMM).
    bool reads_gemm(const std::string &n) const {
        for (const auto &pr : fi(n).lf->producers) {
            if (fi(pr).is_matmul || fi(pr).is_conv) return true;
            if (dec.at(pr).placement == Placement::Inline && reads_gemm(pr)) return true;
        }
        return false;
    }

    // Whether every reader of \p n (through inlined Funcs too) has M rows and reads a row of n
    // for a row of its own: then a block of the GEMM's rows needs only that block of n.
    bool rows_follow(const std::string &n, int64_t M) const {
        for (const auto &c : fi(n).lf->consumers) {
            const FuncInfo &ci = fi(c);
            auto it = ci.reads_rows.find(n);
            if (it == ci.reads_rows.end() || !it->second || ci.lf->extents.empty() || ci.lf->extents[0] != M)
                return false;
            if (dec.at(c).placement == Placement::Inline && !rows_follow(c, M)) return false;
        }
        return true;
    }

    // Whether \p n (consumed by \p cons, all in kernel \p root) belongs in the row blocks of
    // root's GEMM: the GEMM's A operand itself, or a Func all of whose consumers are already there,
    // when both index rows by their first var (so a block of rows needs a block of rows).
    bool block_ok(const std::string &n, const std::set<std::string> &cons, const std::string &root) const {
        if (!knobs.gemm_prologue) return false;
        std::string g = gemm_block_of(root);
        if (g.empty()) return false;
        const FuncInfo &f = fi(n);
        if (f.is_matmul || f.is_conv || f.lf->is_output || f.lf->extents.empty()) return false;
        if (f.has_update && !f.pure_lhs) return false;
        int64_t M = fi(g).lf->extents[0];
        if (f.lf->extents[0] != M || !rows_follow(n, M)) return false;
        if (n == fi(g).matmul_a)
            return !f.has_update && cons.size() == 1 && *cons.begin() == g && !reads_gemm(n);
        for (const auto &c : cons)
            if (dec.at(c).placement != Placement::Block || fi(c).lf->extents[0] != M) return false;
        return true;
    }

    // Attaches materialized Funcs to the kernel of their consumers where that pays; a row-buffer
    // candidate left at root is inlined after all.
    void group() {
        for (auto it = p.funcs.rbegin(); it != p.funcs.rend(); ++it) {
            place_in_consumer_kernel(*it);
            if (row_buffer_candidates.count(it->name) && dec[it->name].placement == Placement::Root)
                inline_after_all(it->name, "no row kernel holds all its consumers");
        }
    }

    // Places d's Func inside kernel \p root as \p pl, explained by \p why, when the validator
    // allows it; else notes the validator's reason and leaves it at root.
    bool place_inside(FuncDecision &d, const std::string &root, Placement pl, const std::string &why) {
        std::string reason;
        if (!legal_at(d.func, root, reason)) {
            d.why += "; root: the validator rejects a placement inside " + root + ": " + reason;
            return false;
        }
        d.placement = pl;
        d.kernel = root;
        d.why = why;
        return true;
    }

    void place_in_consumer_kernel(const LoweredFunc &lf) {
        const std::string &n = lf.name;
        FuncDecision &d = dec[n];
        if (d.placement == Placement::Inline) return;
        d.kernel = n;
        const FuncInfo &f = fi(n);
        if (lf.is_output) return;
        auto cons = effective_consumers(n);
        if (cons.empty()) return;
        std::set<std::string> kernels;
        for (const auto &c : cons) kernels.insert(kernel_of(c));
        if (kernels.size() != 1) {
            d.why += "; root: consumers in " + std::to_string(kernels.size()) + " kernels";
            return;
        }
        const std::string root = *kernels.begin();
        const FuncInfo &r = fi(root);
        bool root_pure = !r.has_update;
        if (block_ok(n, cons, root)) {
            place_inside(d, root, Placement::Block,
                         str_cat("computed per row block of ", root, ", where its GEMM reads it: saves ",
                                 human_bytes((f.has_update ? 1 : 2) * f.points * f.esize), " of traffic"));
            return;
        }
        bool feeds_block = false;  // a row block holds its consumer: no row loop to join
        for (const auto &c : cons) feeds_block |= dec.at(c).placement == Placement::Block;
        if (feeds_block) return;
        if (f.has_update && !f.is_matmul && !f.is_conv && root_pure && knobs.row_stats) {
            int depth = row_depth(n, root);
            if (depth > 0) {
                d.row_depth = depth;
                if (place_inside(d, root, Placement::Row,
                                 str_cat("computed per row of ", root, " (depth ", depth,
                                         "): the row is read from cache, saves ",
                                         human_bytes(2 * f.points * f.esize), " of traffic")))
                    return;
                d.row_depth = 0;
            }
            // A window's reduction read point for point (an AveragePool's sums, divided by the
            // output): computed per row of its reader, in L1, instead of its initial values, its
            // sums and the reader's pass each going through memory
            // (bench/DECISIONS.md#d4-window-sums-per-row-of-reader).
            const size_t rank = f.lf->extents.size();
            if (depth == 0 && rank >= 2 && f.pure_lhs && same_extents(n, root) && cons.size() == 1 &&
                *cons.begin() == root && fi(root).lf->is_pointwise && row_fits(root, rank - 1) &&
                place_inside(d, root, Placement::Row,
                             str_cat("computed per row of ", root, ", which reads it point for point: saves ",
                                     human_bytes(3 * f.points * f.esize), " of traffic")))
                return;
        }
        if ((f.is_matmul || f.is_conv) && root_pure && cons.size() == 1 && *cons.begin() == root &&
            same_extents(n, root) && fi(root).lf->is_pointwise && (int)f.lf->extents.size() >= 2) {
            place_inside(d, root, Placement::Tile,
                         str_cat("computed per output tile of its epilogue ", root, ": saves ",
                                 human_bytes(2 * f.points * f.esize), " of traffic"));
            return;
        }
        // A row buffer lives in the kernel's row: as deep as its statistics' rows (a Softmax over
        // the last of [8, 12, 128, 128]: one 512-byte row, not the 786 KB block under the outer
        // dim), so it stays in L1 (bench/DECISIONS.md#d2-row-buffer-for-costly-pointwise).
        auto buffer_fits = [&] {
            size_t depth = 0;
            for (const auto &c : cons)
                if (c != root && dec.at(c).placement == Placement::Row && fi(c).has_update) {
                    size_t dd = (size_t)row_depth(c, root);
                    if (dd > 0) depth = depth == 0 ? dd : std::min(depth, dd);
                }
            return row_fits(root, std::max<size_t>(1, depth));
        };
        if (!f.has_update && root_pure && (same_extents(n, root) || row_depth(n, root) > 0) &&
            r.lf->extents.size() >= 2 && (!row_buffer_candidates.count(n) || buffer_fits())) {
            bool all_pointwise = true;
            for (const auto &c : cons) all_pointwise &= fi(c).lf->is_pointwise || fi(c).has_update;
            bool rows_ok = true;
            for (const auto &c : cons)
                if (c != root && dec.at(c).placement != Placement::Row) rows_ok = false;
            std::string why;
            if (all_pointwise && rows_ok && legal_at(n, root, why)) {
                d.placement = Placement::Row;
                d.kernel = root;
                d.why += str_cat("; computed per row of ", root, " (its only consumer kernel)");
                return;
            }
        }
    }

    // A row-buffer candidate that found no row to live in: inlined, as decide_inlining's score said.
    void inline_after_all(const std::string &n, const std::string &reason) {
        FuncDecision &d = dec[n];
        d.placement = Placement::Inline;
        d.kernel.clear();
        d.why = str_cat(row_buffer_candidates.at(n).second, "; not buffered per row: ", reason);
        evals[n] = row_buffer_candidates.at(n).first;
        if (context_ready) context.statements.push_back(ScheduleStatement(n).add("compute_inline"));
    }

    FusionPlan finish() {
        FusionPlan plan;
        // Inlined Funcs belong to the kernel of (one of) their consumers: the first in order.
        for (auto it = p.funcs.rbegin(); it != p.funcs.rend(); ++it) {
            FuncDecision &d = dec[it->name];
            if (d.placement != Placement::Inline) continue;
            auto cons = effective_consumers(it->name);
            d.kernel = cons.empty() ? it->name : kernel_of(*cons.begin());
        }
        std::map<std::string, size_t> index;
        for (const auto &lf : p.funcs) {
            plan.decisions.push_back(dec[lf.name]);
            const FuncDecision &d = dec[lf.name];
            if (d.placement == Placement::Root) {
                index[lf.name] = plan.kernels.size();
                Kernel k;
                k.root = lf.name;
                plan.kernels.push_back(k);
            }
        }
        for (const auto &lf : p.funcs) {
            const FuncDecision &d = dec[lf.name];
            auto it = index.find(d.kernel);
            internal_check(it != index.end(), "autoschedule: kernel '", d.kernel, "' of '", lf.name, "' has no root");
            Kernel &k = plan.kernels[it->second];
            k.funcs.push_back(lf.name);
            if (std::find(k.nodes.begin(), k.nodes.end(), lf.node) == k.nodes.end()) k.nodes.push_back(lf.node);
        }
        // Kernels run in the order of their roots; with compute_at, the members come first.
        for (Kernel &k : plan.kernels) {
            const FuncInfo &r = fi(k.root);
            std::vector<std::string> ops;
            std::set<std::string> inside(k.funcs.begin(), k.funcs.end());
            bool has_red = false, has_mm = false, has_conv = false, rows = false;
            std::map<std::string, double> constants;  // read once per kernel, whoever reads them
            for (const auto &f : k.funcs) {
                for (const auto &[name, bytes] : fi(f).constant_bytes) constants[name] = bytes;
                std::string o = short_op(fi(f).lf->op);
                if (std::find(ops.begin(), ops.end(), o) == ops.end()) ops.push_back(o);
                has_red |= fi(f).has_update;
                has_mm |= fi(f).is_matmul;
                has_conv |= fi(f).is_conv;
                rows |= dec[f].placement == Placement::Row;
                const FuncDecision &d = dec[f];
                // Traffic: what members read from outside the kernel, what the root writes.
                double ev = d.placement == Placement::Inline ? evals[f] : fi(f).points;
                if (!(d.placement == Placement::Inline && operand_row_views.count(f)))
                    k.flops += ev * fi(f).lf->flops_per_point;
                for (const auto &pr : fi(f).lf->producers)
                    if (!inside.count(pr)) k.bytes_read += fi(pr).points * fi(pr).esize;
                for (const auto &in : fi(f).lf->input_reads)
                    for (size_t q = 0; q < p.input_names.size(); q++)
                        if (p.input_names[q] == in)
                            k.bytes_read += (double)shape_numel(p.input_shapes[q]) * dtype_size(p.input_dtypes[q]);
            }
            for (const auto &c : constants) k.bytes_read += c.second;
            k.bytes_written = r.points * r.esize;
            k.kind = has_mm ? KernelKind::Gemm : has_conv ? KernelKind::Conv : rows ? KernelKind::Rows
                   : r.has_update ? KernelKind::Reduction : r.lf->is_pointwise ? KernelKind::Pointwise
                   : KernelKind::Generic;
            k.name = k.funcs.size() > 1 ? "fused" : "";
            for (const auto &o : ops) k.name += (k.name.empty() ? "" : "_") + o;
            double t_mem = (k.bytes_read + k.bytes_written) / m.bytes_per_s();
            double t_flop = k.flops / (has_mm || has_conv ? m.gflops * 1e9 * 0.5 : m.pointwise_flops_per_s());
            k.est_ms = std::max(t_mem, t_flop) * 1e3;
        }
        // Unique kernel names (two softmaxes → softmax, softmax_2).
        std::map<std::string, int> seen;
        for (Kernel &k : plan.kernels) {
            int n = ++seen[k.name];
            if (n > 1) k.name += "_" + std::to_string(n);
        }
        return plan;
    }
};

}  // namespace

FusionPlan plan_fusion(const LoweredPipeline &p, const MachineModel &m, const ScheduleKnobs &knobs) {
    Planner pl(p, m, knobs);
    pl.decide_inlining();
    pl.group();
    return pl.finish();
}


}  // namespace loom
