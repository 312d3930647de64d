// Per-kernel schedule emitters: the loop nest of a kernel's root (parallel outer work, vectorised
// inner var, GEMM micro-kernel, conv rows) and the placement of its members. Every split is either
// exact, ShiftInwards on a pure stage (factor <= extent), or GuardWithIf, so any size is correct.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "autoschedule/autoschedule_internal.h"
#include "graph/error.h"

namespace loom::autosched {

namespace {

using Args = std::vector<ScheduleArg>;

// The most values one accumulator of a split (few-output) reduction adds serially.
constexpr int64_t kMaxSerialTerms = 4096;

double prod(const std::vector<int64_t> &e, size_t from, size_t to) {
    double p = 1;
    for (size_t k = from; k < to && k < e.size(); k++) p *= (double)e[k];
    return p;
}

// Largest power-of-two lane count <= V that \p extent can hold (0 when under 4 lanes).
int fit_lanes(int V, int64_t extent) {
    int l = V;
    while (l > 1 && l > extent) l /= 2;
    return l >= 4 || (l >= 2 && V <= 4) ? l : 0;
}

// Fewest flops per point of a row-buffered pointwise Func for Ctx::prefetch_next_row (Softmax's
// exp(x - max) counts 11; LayerNorm's output pass, 4, gained nothing from it).
constexpr double kPrefetchMinFlops = 8;

// k steps a GEMM micro-kernel unrolls (its update's innermost reduction loop).
constexpr int kGemmKUnroll = 4;

// Fewest reduction terms (input channels x taps) per output for Ctx::channel_tile: ResNet-18's
// 1x1 shortcut with 64 input channels gains (0.14 -> 0.08 ms), a 3-channel 3x3 stem ran 10x slower.
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
    // dominant: the cnn fixture's 3->16 stem took 0.17 ms tiled over channels, 0.05 along rows.
    return reduction_terms(f) >= kMinChannelTileTerms;
}

// A channel-tiled conv whose weights fit in half of L2 runs its channel blocks inside row blocks,
// with the padded input computed per row block (in cache); bigger weights are reused across row
// blocks instead (row blocks inside channel blocks, the padded input whole). conv_bn_relu (4x64x56x56,
// 147 KB of weights): 3.69 -> 2.71 ms; 512 channels at 7x7 (9.4 MB) keep channels outer.
bool channel_tile_rows_outer(const FuncInfo &f, const MachineModel &m) {
    return (double)f.lf->extents[1] * (double)reduction_terms(f) * f.esize <= (double)m.l2_bytes / 2;
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
        if (channel_tiled(c, m))  // channel_tile: under an epilogue, or through a wrapper (not an output)
            return channel_tile_rows_outer(c, m) && (epilogue || (k.root == conv && !c.lf->is_output)) ? conv : "";
        const int V = m.lanes(c.lf->dtype);  // conv()'s row blocks: only under an epilogue
        return epilogue && c.lf->extents[3] >= V && V >= 4 ? conv : "";
    }
    return "";
}

// Whether computing \p f past the end of its rows stays inside every buffer it reads: each path of
// producers from \p f ends at a padded input (the pointwise `<node>_pad` Func of a Conv or pool,
// which clamps its reads) before it reaches a graph input. A 1x1 conv reads its input directly,
// and a row rounded up to a vector read past the input (the inverted_residual fixture's 14-wide rows).
bool rows_extend_safely(const std::map<std::string, FuncInfo> &info, const std::string &f,
                        std::map<std::string, bool> &memo) {
    auto known = memo.find(f);
    if (known != memo.end()) return known->second;
    memo[f] = false;  // a DAG, but stay finite whatever it is
    const FuncInfo &fi = info.at(f);
    bool padded = fi.lf->is_pointwise && (fi.is_conv || fi.lf->op == "MaxPool" || fi.lf->op == "AveragePool");
    bool safe = padded || fi.lf->input_reads.empty();
    if (!padded)
        for (const auto &pr : fi.lf->producers) safe = safe && info.count(pr) && rows_extend_safely(info, pr, memo);
    return memo[f] = safe;
}

struct Ctx {
    const LoweredPipeline &p;
    const std::map<std::string, FuncInfo> &info;
    const FusionPlan &plan;
    const Kernel &k;
    const Halide::Target &target;
    const MachineModel &m;
    const ScheduleKnobs &knobs;
    std::vector<ScheduleStatement> &out;
    std::vector<std::string> &func_names;

    const FuncInfo &fi(const std::string &n) const { return info.at(n); }
    const LoweredFunc &lf(const std::string &n) const { return *fi(n).lf; }
    int lanes(const std::string &n) const { return m.lanes(lf(n).dtype); }

    std::vector<std::string> names_of(const std::string &n) const {
        std::vector<std::string> v = lf(n).vars;
        for (const auto &u : lf(n).update_rvars) v.insert(v.end(), u.begin(), u.end());
        return v;
    }

    ScheduleStatement &add(const std::string &f, int stage = -1) {
        out.emplace_back(f, stage);
        return out.back();
    }

    void note(ScheduleStatement &st, const std::string &f) {
        if (const FuncDecision *d = plan.decision(f)) st.comments.push_back(f + ": " + d->why);
    }

    // compute_inline for the kernel's inlined members.
    void inline_members() {
        for (const auto &f : k.funcs) {
            const FuncDecision *d = plan.decision(f);
            if (d && d->placement == Placement::Inline) {
                ScheduleStatement &st = add(f);
                note(st, f);
                st.add("compute_inline");
            }
        }
    }

    // A row reduction \p s vectorised with rfactor, its partial Func computed at \p at_func.at_var.
    // Returns false when the reduction does not fit (not contiguous, size not a multiple of V).
    bool rfactor_rows(const std::string &s, const std::string &at_func, const std::string &at_var) {
        const FuncInfo &f = fi(s);
        if (!f.has_update || !f.inner_rvar_contiguous || f.rvar_extents[0].empty()) return false;
        int V = lanes(s);
        int64_t ext = f.rvar_extents[0][0];
        // The widest partial (1-4 vectors) that still takes four steps, else two: the partials'
        // horizontal combine costs about as much as the steps. split_stack's 64-wide LayerNorm
        // segments: 16 lanes x 4 steps 4.15 ms, 32 lanes x 2 steps 4.50.
        int U = 0;
        for (int steps : {4, 2}) {
            for (int mult : {4, 2, 1})
                if (ext >= (int64_t)V * mult * steps && ext % ((int64_t)V * mult) == 0) {
                    U = V * mult;
                    break;
                }
            if (U) break;
        }
        if (U == 0 || V < 2) return false;
        std::vector<std::string> used = names_of(s);
        std::string rx = lf(s).update_rvars[0][0];
        std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi"), u = fresh(used, "u");
        std::string part = fresh(func_names, s + "_rf");
        ScheduleStatement &st = add(s, 0);
        st.comments.push_back(str_cat(s, ": ", U, " partial sums in vector lanes (rfactor), ", ext / U,
                                      " steps each"));
        st.add("split", {rx, rxo, rxi, U}).add("rfactor", {rxi, u}, part);
        std::vector<std::string> pused = lf(s).vars;
        pused.push_back(u);
        std::string uo = fresh(pused, "uo"), ui = fresh(pused, "ui");
        ScheduleStatement &ps = add(part);
        ps.add("compute_at", {at_func, at_var}).add("vectorize", {u, V});
        ScheduleStatement &pu = add(part, 0);
        pu.add("split", {u, uo, ui, V}).add("reorder", {ui, uo, rxo}).add("vectorize", {ui});
        if (U > V) pu.add("unroll", {uo});
        return true;
    }

    // Halide hands out parallel iterations one at a time: give each task enough rows of
    // \p row_elems elements to amortise that (>= 32K elements) while leaving >= 8 tasks per core.
    int64_t rows_per_task(double rows, double row_elems) const {
        double task = knobs.task_elems > 0 ? (double)knobs.task_elems : 32768.0;
        return (int64_t)std::min(std::floor(rows / (m.cores * 8.0)), std::ceil(task / std::max(1.0, row_elems)));
    }

    // Pure-stage loops of a root: returns the row var (parallel), fusing outer vars up to \p depth
    // (0 = choose), and vectorises the innermost var.
    std::string pure_loops(ScheduleStatement &st, const std::string &f, int depth) {
        const auto &v = lf(f).vars;
        const auto &e = lf(f).extents;
        int r = (int)v.size();
        int V = lanes(f);
        std::vector<std::string> used = names_of(f);
        if (r == 0) return "";
        if (r == 1) {
            int64_t n = e[0];
            int lanes1 = fit_lanes(V, n);
            if (n >= (int64_t)V * m.cores * 8) {
                // Two vectors per iteration: independent work to overlap (the latency of sin/cos
                // polynomials, of loads from three streams). 2-core AVX-512, 2^24 elements:
                // sin²+cos² 5.44 -> 4.75 ms, sigmoid(x*w+b) 8.37 -> 7.79 ms (bench/RESULTS.md).
                int W = 2 * V;
                int64_t chunk = (n + m.cores * 8 - 1) / (m.cores * 8);
                chunk = std::max<int64_t>(W * 2, (chunk + W - 1) / W * W);
                std::string io = fresh(used, "io"), ii = fresh(used, "ii");
                st.add("split", {v[0], io, ii, chunk}).add("vectorize", {ii, W}).add("parallel", {io});
                return io;
            }
            if (lanes1) st.add("vectorize", {v[0], lanes1});
            return "";
        }
        if (depth <= 0) {
            depth = 1;
            while (depth < r - 1 && prod(e, 0, depth) < m.cores * 4) depth++;
        }
        std::string row = v[0];
        for (int d = 1; d < depth; d++) {
            std::string fused = fresh(used, row + v[d]);
            st.add("fuse", {v[d], row, fused});
            row = fused;
        }
        int lv = fit_lanes(V, e[r - 1]);
        int64_t piece = lv ? concat_piece(f) : 0;
        if (piece > 0) {
            // A concat along the inner var: one unrolled copy per input, each a plain vector
            // copy (the select chain folds away); vectorised over all, it costs a select per input.
            std::string jo = fresh(used, v[r - 1] + "o"), ji = fresh(used, v[r - 1] + "i");
            st.add("split", {v[r - 1], jo, ji, piece}).add("unroll", {jo}).add("vectorize", {ji, lv});
        } else if (lv) {
            st.add("vectorize", {v[r - 1], lv});
        }
        double rows = prod(e, 0, depth), row_elems = prod(e, depth, e.size());
        if (rows < 2) return row;
        int64_t per = rows_per_task(rows, row_elems);
        if (per >= 2) {
            std::string ro = fresh(used, row + "o"), ri = fresh(used, row + "i");
            st.add("split", {row, ro, ri, per}).add("parallel", {ro});
            return ri;
        }
        st.add("parallel", {row});
        return row;
    }

    // Width of each input of a concat along \p f's innermost var when all are equal Funcs, a
    // multiple of the vector width and at most 32 of them; else 0.
    int64_t concat_piece(const std::string &f) const {
        const LoweredFunc &c = lf(f);
        if (c.op != "Concat" || !c.input_reads.empty() || c.producers.empty() || c.producers.size() > 32)
            return 0;
        int64_t w = -1;
        for (const auto &pr : c.producers) {
            const auto &pe = lf(pr).extents;
            if (pe.size() != c.extents.size()) return 0;
            for (size_t d = 0; d + 1 < pe.size(); d++)
                if (pe[d] != c.extents[d]) return 0;
            if (w >= 0 && pe.back() != w) return 0;
            w = pe.back();
        }
        if (w <= 0 || w * (int64_t)c.producers.size() != c.extents.back() || w % lanes(f) != 0) return 0;
        return w;
    }

    void comment_kernel(ScheduleStatement &st) {
        char buf[256];
        std::vector<std::string> others;
        for (const auto &f : k.funcs)
            if (f != k.root) others.push_back(f);
        std::string joined;
        for (const auto &o : others) joined += (joined.empty() ? "" : ", ") + o;
        st.comments.push_back(str_cat("kernel ", k.name, " (", k.kind, "): ",
                                      others.empty() ? std::string("no fusion") : "fuses " + joined + " into " + k.root));
        std::snprintf(buf, sizeof buf, "est. %.3f MB read, %.3f MB written, %.3f MFLOP, %.3f ms",
                      k.bytes_read / 1e6, k.bytes_written / 1e6, k.flops / 1e6, k.est_ms);
        st.comments.push_back(buf);
    }

    // --- kernels -------------------------------------------------------------------------------

    void rows_or_pointwise() {
        const std::string &R = k.root;
        int r = (int)lf(R).vars.size();
        int depth = 0;
        for (const auto &f : k.funcs) {
            const FuncDecision *d = plan.decision(f);
            if (d->placement != Placement::Row) continue;
            const auto &es = lf(f).extents, &er = lf(R).extents;
            if (es == er) continue;
            int dd = 0;
            while (dd < r && es[dd] == er[dd]) dd++;
            depth = depth == 0 ? dd : std::min(depth, dd);
        }
        ScheduleStatement &st = add(R);
        comment_kernel(st);
        st.add("compute_root");
        std::string row = pure_loops(st, R, depth);
        for (const auto &f : k.funcs) {
            const FuncDecision *d = plan.decision(f);
            if (d->placement != Placement::Row) continue;
            if (row.empty()) {  // no row loop (rank 1/0): own loop nest
                generic_func(f, false);
                continue;
            }
            ScheduleStatement &ms = add(f);
            note(ms, f);
            ms.add("compute_at", {R, row});
            if (!fi(f).has_update) {
                int lv = fit_lanes(lanes(f), lf(f).extents.back());
                if (lv) {
                    ms.add("vectorize", {lf(f).vars.back(), lv});
                    prefetch_next_row(ms, f, lv);
                }
            } else {
                rfactor_rows(f, R, row);
            }
        }
        inline_members();
    }

    // A costly pointwise Func buffered per row (Softmax's exponentials) computes from L1 while this
    // core's memory traffic idles: prefetch the same columns of the next row of each input it reads
    // (through inlined producers), one vector step ahead per step, so the next row's first pass finds
    // it in cache. NonFaulting: past the last row the hint reads nothing. softmax_rows 2048x4096 on a
    // 2-core EPYC, paired: 2.09 -> 1.69 ms; a cheap pass (LayerNorm's output) gained nothing.
    void prefetch_next_row(ScheduleStatement &st, const std::string &f, int lv) {
        const LoweredFunc &L = lf(f);
        if (L.flops_per_point < kPrefetchMinFlops || L.vars.size() < 2) return;
        const int64_t row = L.extents.back();
        const int64_t steps = (row + lv - 1) / lv, numel = (int64_t)prod(L.extents, 0, L.extents.size());
        std::set<std::string> inputs;
        collect_inlined_inputs(f, inputs);
        for (size_t q = 0; q < p.input_names.size(); q++)
            // Only an input read point for point (not a broadcast row or a weight).
            if (inputs.count(p.input_names[q]) && shape_numel(p.input_shapes[q]) == numel) {
                const std::string &v = L.vars.back();
                st.comments.push_back(str_cat(f, ": prefetches the next row of ", p.inputs[q].name(),
                                              " while it computes (", L.flops_per_point, " flops a point)"));
                st.add("prefetch", {p.inputs[q].name(), v, v, steps, "NonFaulting"});
            }
    }

    // Graph inputs that \p f reads directly or through producers inlined into it.
    void collect_inlined_inputs(const std::string &f, std::set<std::string> &inputs) const {
        for (const auto &in : lf(f).input_reads) inputs.insert(in);
        for (const auto &pr : lf(f).producers) {
            const FuncDecision *d = plan.decision(pr);
            if (d && d->placement == Placement::Inline && info.count(pr)) collect_inlined_inputs(pr, inputs);
        }
    }

    void reduction() {
        const std::string &F = k.root;
        const FuncInfo &f = fi(F);
        const auto &v = lf(F).vars;
        const auto &e = lf(F).extents;
        int r = (int)v.size();
        int V = lanes(F);
        std::vector<std::string> used = names_of(F);
        ScheduleStatement &st = add(F);
        comment_kernel(st);
        st.add("compute_root");
        if (f.points >= m.cores * 4) {
            pure_loops(st, F, 1);
            const std::string &inner = v[r - 1];
            // The update's rows go to the threads in tasks of several rows, as pure_loops sizes them
            // (sum_prologue, a task per row of 4096 terms: 2.14-2.24 -> 1.99-2.01 ms).
            double terms = prod(e, 1, e.size());
            for (int64_t x : f.rvar_extents[0]) terms *= (double)x;
            int64_t per = e[0] >= 2 ? rows_per_task((double)e[0], terms) : 1;
            // Names of their own: the pure stage has split v[0] into its own io/ii.
            std::string ro = per >= 2 ? fresh(used, v[0] + "_task") : "", ri = per >= 2 ? fresh(used, v[0] + "_row") : "";
            if (rfactor_rows(F, F, per >= 2 && r == 1 ? ri : inner)) {
                if (per >= 2) {
                    Args split = {v[0], ro, ri, per};
                    if (e[0] % per) split.push_back(ScheduleArg::tail("GuardWithIf"));
                    add(F, 0).add("split", split).add("parallel", {ro});
                } else if (e[0] >= 2) {
                    add(F, 0).add("parallel", {v[0]});
                }
            } else if (f.inner_var_contiguous && e[r - 1] >= V) {
                std::string vo = fresh(used, inner + "o"), vi = fresh(used, inner + "i");
                ScheduleStatement &u = add(F, 0);
                Args split = {inner, vo, vi, V};
                if (e[r - 1] % V) split.push_back(ScheduleArg::tail("GuardWithIf"));
                Args reorder = {vi};
                for (const auto &rv : lf(F).update_rvars[0]) reorder.push_back(rv);
                reorder.push_back(vo);
                u.add("split", split).add("reorder", reorder).add("vectorize", {vi});
                u.add("parallel", {r >= 2 ? v[0] : vo});
            } else if (e[0] >= 2) {
                add(F, 0).add("parallel", {v[0]});
            }
            inline_members();
            return;
        }
        // Too few outputs to fill the cores: split the reduction into parallel partial results.
        const auto &rv = lf(F).update_rvars[0];
        const auto &rx = f.rvar_extents[0];
        std::string part = fresh(func_names, F + "_part");
        std::string pv = fresh(used, "p"), u = fresh(used, "u");
        Args rf;
        std::vector<std::string> remaining;
        ScheduleStatement st2(F, 0);
        bool vec = false;
        if (rv.size() >= 2) {
            std::string outer = rv.back();
            if (rx.back() < 2) {
                inline_members();
                return;
            }
            rf = {outer, pv};
            if (f.inner_rvar_contiguous && rx[0] % V == 0 && rx[0] >= 2 * V) {
                std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi");
                st2.add("split", {rv[0], rxo, rxi, V});
                rf.push_back(rxi);
                rf.push_back(u);
                vec = true;
                remaining.push_back(rxo);
            } else {
                remaining.push_back(rv[0]);
            }
            for (size_t q = 1; q + 1 < rv.size(); q++) remaining.push_back(rv[q]);
        } else {
            int64_t n = rx[0];
            int64_t cnt = 0;
            int64_t min_inner = f.inner_rvar_contiguous ? 2 * V : 2;
            for (int64_t c = (int64_t)m.cores * 8; c >= (int64_t)m.cores && c >= 2; c--)
                if (n % c == 0 && n / c >= min_inner) {
                    cnt = c;
                    break;
                }
            // Accuracy: each accumulator (chunk × vector lane) adds at most kMaxSerialTerms values,
            // so the float error of a long sum stays near that of a cascade sum. mse over 2^24
            // with 16 chunks: 65536 terms per lane, rel error 8.8e-6 against the 1e-5 bound.
            int64_t lanes = f.inner_rvar_contiguous ? V : 1;
            int64_t need = (n + lanes * kMaxSerialTerms - 1) / (lanes * kMaxSerialTerms);
            if (cnt > 0 && cnt < need) {
                for (int64_t c = need; c <= std::min<int64_t>(n / min_inner, 64 * need); c++)
                    if (n % c == 0) {
                        cnt = c;
                        break;
                    }
            }
            if (cnt == 0) {
                st.comments.push_back(str_cat(F, ": reduction of ", n, " has no even split; left serial"));
                inline_members();
                return;
            }
            std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi");
            st2.add("split", {rv[0], rxo, rxi, n / cnt});
            rf = {rxo, pv};
            if (f.inner_rvar_contiguous && (n / cnt) % V == 0) {
                std::string rxm = fresh(used, "rxm"), rxv = fresh(used, "rxv");
                st2.add("split", {rxi, rxm, rxv, V});
                rf.push_back(rxv);
                rf.push_back(u);
                vec = true;
                remaining.push_back(rxm);
            } else {
                remaining.push_back(rxi);
            }
        }
        st2.comments.push_back(str_cat(F, ": ", f.points, " output(s) cannot fill ", m.cores,
                                       " cores: partial results over a parallel var (rfactor)"));
        st2.add("rfactor", rf, part);
        out.push_back(st2);
        ScheduleStatement &ps = add(part);
        ps.add("compute_root");
        if (vec) ps.add("vectorize", {u});
        ScheduleStatement &pu = add(part, 0);
        Args reorder;
        if (vec) reorder.push_back(u);
        for (const auto &x : remaining) reorder.push_back(x);
        reorder.push_back(pv);
        pu.add("reorder", reorder).add("parallel", {pv});
        if (vec) pu.add("vectorize", {u});
        inline_members();
    }

    std::string member_with(Placement pl) const {
        for (const auto &f : k.funcs)
            if (plan.decision(f)->placement == pl) return f;
        return "";
    }

    // The GEMM's prologue (Placement::Block) computed per row block \p par of the epilogue: a
    // pure Func vectorised along its inner var, a row reduction vectorised by rfactor.
    void block_members(const std::string &par) {
        if (par.empty()) return;
        for (const auto &f : k.funcs) {
            if (plan.decision(f)->placement != Placement::Block) continue;
            ScheduleStatement &ms = add(f);
            note(ms, f);
            ms.add("compute_at", {k.root, par});
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

    void gemm() {
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
        std::vector<std::string> rused = names_of(R);
        std::vector<std::string> fused_ = names_of(F);
        // j in vector lanes, i unrolled, k outermost in the tile: the accumulators stay in
        // registers. When B is stored [N, K] (a Linear layer) the B loads are gathers; a
        // dot-product form (k in lanes, rfactor) measured 15-30x slower here, so it is not used.
        GemmTile gt = gemm_tile(f, epilogue, m, knobs);
        if (gt.ok) {
            int NR = gt.NR, MR = gt.MR;
            int64_t NC = gt.NC;
            bool block = NC < N;
            bool exact = M % MR == 0 && N % NR == 0 && (!block || N % NC == 0);
            std::string jb = fresh(rused, "jb"), jr = fresh(rused, "jr"), jo = fresh(rused, "jo"),
                        ji = fresh(rused, "ji"), io = fresh(rused, "io"), ii = fresh(rused, "ii");
            auto tiles = [&](ScheduleStatement &s, bool guard) {
                auto sp = [&](const std::string &a, const std::string &o, const std::string &in_, int64_t fct) {
                    Args x = {a, o, in_, fct};
                    if (guard) x.push_back(ScheduleArg::tail("GuardWithIf"));
                    s.add("split", x);
                };
                if (block) sp(j, jb, jr, NC);
                sp(block ? jr : j, jo, ji, NR);
                sp(i, io, ii, MR);
            };
            ScheduleStatement &st = add(R);
            comment_kernel(st);
            st.comments.push_back(str_cat("micro-kernel ", MR, "x", NR, " (", MR * NR / V,
                                          " vector accumulators), column panels of ", block ? NC : N, " (B panel ",
                                          (block ? NC : N) * K * f.esize / 1024, " KiB in L2)"));
            st.add("compute_root");
            if (epilogue) {
                // Cache blocking (after BLIS/GotoBLAS): the epilogue's tile MC x NC holds the
                // GEMM's results; within it k runs in chunks of KC so that a B strip (KC x NR)
                // stays in L1 while the micro-kernel walks the MC rows, and A's block (MC x KC)
                // and B's (KC x NC) stay in L2. Measured on linear_relu (512x1024x1024, 2 cores
                // AVX-512): ~10 ms vs ~25 ms for the unblocked micro-kernel (k whole per tile).
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
                block_members(par);
                ScheduleStatement &fs = add(F);
                note(fs, F);
                std::string at = par;  // the loop just outside the tile (all outer loops fused)
                if (at.empty()) fs.add("compute_root");  // one tile: the whole result
                else fs.add("compute_at", {R, at});
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
                // amortised): linear_relu 512x1024x1024 4.38 -> 3.94 ms; 2 or 8 steps no better.
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
                if (!exact) {
                    // Ragged edges: one guarded vector of j per step, no nested splits.
                    u.add("split", {j, jo, ji, V, ScheduleArg::tail("GuardWithIf")})
                        .add("split", {i, io, ii, MR, ScheduleArg::tail("GuardWithIf")})
                        .add("reorder", {ji, ii, kv, jo, io}).add("vectorize", {ji})
                        .add("parallel", {io});
                    inline_members();
                    return;
                }
                tiles(u, false);
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
                u.add("parallel", {io});
            }
            inline_members();
            return;
        }
        generic();
    }

    // The padded input of conv \p F that conv_of_pad leaves to conv(), computed at \p owner.\p var
    // (a task's rows, in cache) and vectorized along its rows; \p per says per what, in the comment.
    void place_pads(const std::string &F, const std::string &owner, const std::string &var, const std::string &per) {
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
    // pixels x one block of channels is 14 vector accumulators (AVX-512); each reduction step loads
    // the block's weight vectors (dense, one stream across steps) and broadcasts NP*NH inputs. The
    // conv is computed per tile of its epilogue, or of a wrapper `<conv>_out` when it has none
    // (a graph output with no epilogue keeps the row tiles: Halide computes outputs at root),
    // stored channels innermost so that its accumulators are whole vectors; the epilogue or the
    // wrapper writes them to NCHW. Tasks are blocks of rows with every channel block inside when
    // the weights fit in half of L2 (channel_tile_rows_outer; the padded input is then computed
    // per task), else (n, channel block, row block) with the row blocks innermost, so consecutive
    // tasks reuse a channel block's weights from L2. Measured (2 cores, AVX-512, 3x3 convs,
    // standalone, GFLOP/s, against the rows-vectorized tiles): 512 ch 7x7 245 vs 81, 256 ch 14x14
    // 318 vs 147, 128 ch 28x28 306 vs 235, 64 ch 56x56 254 vs 247.
    bool channel_tile(const std::string &R, const std::string &F) {
        const LoweredFunc &L = lf(F);
        if (!channel_tiled(fi(F), m) || (R == F && L.is_output))  // an output is computed at root, not per tile
            return false;
        const int B = L.conv_weight_block, V = lanes(F);
        const auto &v = L.vars;
        const auto &e = L.extents;
        const int64_t W = e[3], H = e[2];
        const int cvec = B / V;
        // Pixels per tile: 14 accumulators, two rows of 7 (conv_bn_relu, 56x56: 3.66 ms, against
        // 3.94 for one row of 14, 5.40 for 4 rows of 7; 7x7x512: 245 GFLOP/s, 4x4 pixels 63). Rows
        // a divisor of W wide when one is near (no tail), else ShiftInwards tails.
        const int budget = std::max(1, std::min(14, m.vector_registers - 4) / cvec);
        const int row = std::max(1, budget / 2);
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
        // Rows outer: tasks of up to 4 tile rows, at least 4 tasks per core where the image has them.
        const int64_t tile_rows = (H + NH - 1) / NH;
        const int RT = rows_outer ? (int)std::clamp<int64_t>(e[0] * tile_rows / (4 * std::max(1, m.cores)), 1, 4) : 1;
        ScheduleStatement &st = add(T);
        if (R != F) comment_kernel(st);
        st.comments.push_back(str_cat("conv channel tile ", NP, " (w) x ", NH, " (rows) x ", B, " (channels): ",
                                      NP * NH * cvec, " vector accumulators over blocked weights; ",
                                      rows_outer ? str_cat("parallel over (n, ", RT * NH, " rows), the channel blocks inside "
                                                           "(the weights stay in L2)")
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
        std::string par = rows_outer ? hoo : fresh(tused, "t");
        if (!rows_outer) st.add("fuse", {hv, co, par});
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
        // The taps of a 3x3 (or smaller) kernel unrolled: 134-139 vs 121-128 GFLOP/s looped.
        const auto &re = fi(F).rvar_extents[0];
        if (re.size() >= 3 && re[0] * re[1] <= 9) u.add("unroll", {rv[0]}).add("unroll", {rv[1]});
        inline_members();
        return true;
    }

    // Direct convolution, NCHW: an output tile of WT (w, 1-2 vectors) x CB output channels is a
    // block of vector accumulators; the reduction (input channel, taps) runs outside it, so every
    // step loads WT/V input vectors and broadcasts CB weights into CB*WT/V FMAs. Work over
    // (n, channel block, rows) is parallel. Measured on conv_bn_relu (2 cores, AVX-512): 7 ms vs
    // 130 ms for the per-row schedule it replaces and 17 ms for Adams2019.
    void conv() {
        const std::string &R = k.root;
        std::string F = fi(R).is_conv ? R : member_with(Placement::Tile);
        if (F.empty() || lf(F).vars.size() < 3 || fi(F).rvar_extents.empty()) return generic();
        if (channel_tile(R, F)) return;
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
        std::vector<std::string> rused = names_of(R);
        std::vector<std::string> fused_ = names_of(F);
        const auto &rv = lf(F).update_rvars[0];
        ScheduleStatement &st = add(R);
        comment_kernel(st);
        st.comments.push_back(str_cat("conv tile ", WT, " (w) x ", CB, " (channels): ", nvec * CB,
                                      " vector accumulators; reduction over ", rv.size(), " dims outside it"));
        st.add("compute_root");
        if (R != F && r == 4 && vl == V && W >= V) {
            // Row blocks (after Adams2019's schedule, then measured): a tile of one vector (w) x
            // HT rows x CB channels, HT*CB = 8 accumulators, so each weight broadcast serves HT
            // vectors and each input vector CB FMAs. Work is parallel over (n, row block) with
            // the channel blocks inside, so the padded input's rows for a block are computed
            // there once (in L1/L2) rather than materialised in a kernel of their own. Measured
            // on conv_bn_relu (4x64x56x56, 3x3, 2 cores AVX-512): 3.3 ms vs 4.8 ms for 32x8
            // tiles parallel over (n, c block, h) with a root pad, vs 3.8-7.9 ms for Adams2019.
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
            place_pads(F, R, par, "row block of " + R + " (the block's rows stay in cache)");
            ScheduleStatement &fs = add(F);
            note(fs, F);
            fs.add("compute_at", {R, wsplit ? wo : (CB2 > 1 ? co : c)});
            fs.add("vectorize", {w, V});
            if (CB2 > 1) fs.add("unroll", {c});
            if (HT > 1) fs.add("unroll", {v[2]});
            ScheduleStatement &u = add(F, 0);
            Args reorder = {w, v[2], c};
            for (const auto &x : rv) reorder.push_back(x);
            u.add("reorder", reorder).add("vectorize", {w});
            if (HT > 1) u.add("unroll", {v[2]});
            if (CB2 > 1) u.add("unroll", {c});
        } else if (R != F) {
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
            fs.add("compute_at", {R, wsplit ? wo : par});  // the row var may be fused into par
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
            // (GuardWithIf), the tail columns ran as scalar code. ResNet-18 on 2 cores, its 7- and
            // 14-wide rows: 70.6 -> 33-41 ms. Wider rows keep the guard: rounding their 28-, 56- and
            // 112-wide rows up as well took it to 53-114 ms. Only where every read past the row stays
            // in bounds (rows_extend_safely).
            std::map<std::string, bool> memo;
            const bool round_up =
                !lf(F).is_output && vl && W < V && W % WT != 0 && rows_extend_safely(info, F, memo);
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
        }
        inline_members();
    }

    // compute_root with parallel outer work and a vectorised inner var, on every stage; update
    // stages vectorise only a var their reads keep contiguous, with GuardWithIf on a ragged tail.
    void generic_func(const std::string &f, bool kernel_comment) {
        const FuncInfo &fo = fi(f);
        const auto &v = lf(f).vars;
        const auto &e = lf(f).extents;
        int r = (int)v.size();
        int V = lanes(f);
        ScheduleStatement &st = add(f);
        if (kernel_comment) comment_kernel(st);
        else note(st, f);
        st.add("compute_root");
        pure_loops(st, f, 0);
        if (!fo.pure_lhs || r == 0) return;
        for (size_t u = 0; u < lf(f).update_rvars.size(); u++) {
            ScheduleStatement us(f, (int)u);
            std::vector<std::string> used = names_of(f);
            bool vec = u == 0 && fo.inner_var_contiguous && e[r - 1] >= V && V >= 4;
            std::string vo;
            if (vec) {
                vo = fresh(used, v[r - 1] + "o");
                std::string vi = fresh(used, v[r - 1] + "i");
                Args split = {v[r - 1], vo, vi, V};
                if (e[r - 1] % V) split.push_back(ScheduleArg::tail("GuardWithIf"));
                Args reorder = {vi};
                for (const auto &rv : lf(f).update_rvars[u]) reorder.push_back(rv);
                reorder.push_back(vo);
                us.add("split", split).add("reorder", reorder).add("vectorize", {vi});
            }
            if (r >= 2 && e[0] >= 2) us.add("parallel", {v[0]});
            else if (r == 1 && vec && e[0] >= 2 * V) us.add("parallel", {vo});
            if (!us.calls.empty()) out.push_back(us);
        }
    }

    void generic() {
        for (const auto &f : k.funcs) {
            const FuncDecision *d = plan.decision(f);
            if (d->placement == Placement::Inline) continue;
            generic_func(f, f == k.root);
        }
        inline_members();
    }
};

}  // namespace

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
    t.KC = 1;
    if (knobs.gemm_kc > 0) t.KC = knobs.gemm_kc;
    else
        while (t.KC * 2 * t.NR * f.esize <= m.l1_bytes * 3 / 4) t.KC *= 2;
    int tiles = knobs.gemm_tile_kernels > 0 ? knobs.gemm_tile_kernels : 8;
    t.MC = std::min<int64_t>(t.M, (int64_t)tiles * t.MR);
    t.NCt = std::min<int64_t>(t.N, (int64_t)tiles * t.NR);
    return t;
}

void emit_kernel(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                 const FusionPlan &plan, const Kernel &k, const Halide::Target &target,
                 const MachineModel &m, const ScheduleKnobs &knobs, std::vector<ScheduleStatement> &out,
                 std::vector<std::string> &func_names) {
    Ctx c{p, info, plan, k, target, m, knobs, out, func_names};
    if (k.funcs.size() == 1 && !conv_of_pad(p, info, plan, m, k.root).empty()) return;  // conv() places it
    const size_t first = out.size();
    if (k.kind == "gemm") c.gemm();
    else if (k.kind == "conv") c.conv();
    else if (k.kind == "reduction") c.reduction();
    else if (k.kind == "rows" || k.kind == "pointwise") c.rows_or_pointwise();
    else c.generic();
    // A kernel with less work than waking the thread pool costs runs on one core. The tiny
    // transformer fixture (13 kernels of 1-6 us each, 2 cores): 0.070 ms parallel, 0.029 serial.
    const double serial_us = k.est_ms * 1e3 * std::max(1, m.cores);
    const double min_us = knobs.min_parallel_us > 0 ? knobs.min_parallel_us : kMinParallelMicros;
    if (m.cores <= 1 || serial_us >= min_us || first == out.size()) return;
    for (size_t q = first; q < out.size();) {
        auto &calls = out[q].calls;
        size_t before = calls.size();
        calls.erase(std::remove_if(calls.begin(), calls.end(), [](const PrimitiveCall &pc) { return pc.name == "parallel"; }),
                    calls.end());
        if (calls.empty() && before > 0 && q > first) {  // it only made a loop parallel: drop it
            out.erase(out.begin() + (long)q);
            continue;
        }
        q++;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "serial: about %.1f us of work on one core, less than %.0f us is not worth waking the "
                  "thread pool", serial_us, min_us);
    out[first].comments.push_back(buf);
}

}  // namespace loom::autosched
