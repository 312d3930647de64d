// Per-kernel schedule emitters: the loop nest of a kernel's root (parallel outer work, vectorised
// inner var, GEMM micro-kernel, conv rows) and the placement of its members. Every split is either
// exact, ShiftInwards on a pure stage (factor <= extent), or GuardWithIf, so any size is correct.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "autoschedule/tiling_internal.h"
#include "support/error.h"

namespace loom::autosched {

namespace {

// The most values one accumulator of a split (few-output) reduction adds serially.
constexpr int64_t kMaxSerialTerms = 4096;

double prod(const std::vector<int64_t> &e, size_t from, size_t to) {
    double p = 1;
    for (size_t k = from; k < to && k < e.size(); k++) p *= (double)e[k];
    return p;
}

// Fewest flops per point of a row-buffered pointwise Func for Ctx::prefetch_next_row (Softmax's
// exp(x - max) counts 11; LayerNorm's output pass, 4, gained nothing from it).
constexpr double kPrefetchMinFlops = 8;
// Most reduction steps per output that a vectorized update unrolls (vectorize_update).
constexpr double kMaxUnrolledTaps = 16;
// Values of the transposed var in one tile of a transposing kernel (Ctx::transposed_tile).
constexpr int64_t kTransposeRows = 128;
// Shortest producer row, in bytes, that a transposing kernel stages by tiles (transposed_tile).
constexpr int64_t kTransposeMinRowBytes = 256;
// Shortest row, in bytes, that a row kernel prefetches the next of (prefetch_next_row,
// prefetches_next_tile).
constexpr int64_t kMinPrefetchRowBytes = 1024;

}  // namespace

std::vector<std::string> Ctx::names_of(const std::string &n) const {
    std::vector<std::string> v = lf(n).vars;
    for (const auto &u : lf(n).update_rvars) v.insert(v.end(), u.begin(), u.end());
    return v;
}

ScheduleStatement &Ctx::add(const std::string &f, int stage) {
    out.emplace_back(f, stage);
    return out.back();
}

void Ctx::note(ScheduleStatement &st, const std::string &f) {
    if (const FuncDecision *d = plan.decision(f)) st.comments.push_back(f + ": " + d->why);
}

// compute_inline for the kernel's inlined members.
void Ctx::inline_members(const std::set<std::string> &placed) {
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (d && d->placement == Placement::Inline && !placed.count(f)) {
            ScheduleStatement &st = add(f);
            note(st, f);
            st.add("compute_inline");
        }
    }
}

// A row reduction \p s vectorised with rfactor, its partial Func computed at \p at_func.at_var.
// Returns false when the reduction does not fit (not contiguous, size not a multiple of V).
bool Ctx::rfactor_rows(const std::string &s, const std::string &at_func, const std::string &at_var,
                       bool row_tile) {
    const FuncInfo &f = fi(s);
    if (!f.has_update || !f.inner_rvar_contiguous || f.rvar_extents[0].empty()) return false;
    // A row whose length moves (a softmax over the sequence, compiled for every size): split by
    // the partials' width chosen at the planned length, every length the width does not divide
    // runs a guarded last step in both reductions, and a shorter one runs only that; left whole,
    // the one compile ran faster at every length measured, the planned one included
    // (bench/DECISIONS.md#d226-dynamic-shapes-moving-rows-not-rfactored).
    if (f.inner_rvar_moves) return false;
    int V = lanes(s);
    int64_t ext = f.rvar_extents[0][0];
    // The widest partial (1-4 vectors) that still takes four steps, else two: the partials'
    // horizontal combine costs about as much as the steps
    // (bench/DECISIONS.md#d13-row-statistics-rfactor-steps).
    int U = 0;
    for (int steps : {4, 2}) {
        for (int mult : {4, 2, 1})
            if (ext >= (int64_t)V * mult * steps && ext % ((int64_t)V * mult) == 0) {
                U = V * mult;
                break;
            }
        if (U) break;
    }
    // A reduction kernel's rows that no vector divides (an ArgMax over 1000 logits) take one vector
    // of partials and a guarded last step; left alone, its max was a scalar loop. Not the
    // statistics of a row kernel (at_func another Func): LLVM vectorizes their loops over a row in
    // L1 itself, faster (bench/DECISIONS.md#d21-ragged-row-reduction-one-guarded-vector).
    const bool ragged = U == 0 && at_func == s && ext >= (int64_t)V * 4;
    if (ragged) U = V;
    if (U == 0 || V < 2) return false;
    std::vector<std::string> used = names_of(s);
    std::string rx = lf(s).update_rvars[0][0];
    std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi"), u = fresh(used, "u");
    std::string part = fresh(func_names, s + "_rf");
    ScheduleStatement &st = add(s, 0);
    tiling.partial_sums[s] = {U, (ext + U - 1) / U};
    st.comments.push_back(str_cat(s, ": ", U, " partial sums in vector lanes (rfactor), ", (ext + U - 1) / U,
                                  " steps each", ragged ? ", the last guarded" : ""));
    Args split = {rx, rxo, rxi, U};
    if (ragged) split.push_back(ScheduleArg::tail("GuardWithIf"));
    st.add("split", split).add("rfactor", {rxi, u}, part);
    std::vector<std::string> pused = lf(s).vars;
    pused.push_back(u);
    std::string uo = fresh(pused, "uo"), ui = fresh(pused, "ui");
    ScheduleStatement &ps = add(part);
    ps.add("compute_at", {at_func, at_var}).add("vectorize", {u, V});
    if (row_tile) {
        // Halide stores the first pure var innermost: with several rows that interleaves them,
        // and every vector of partials becomes a strided gather
        // (bench/DECISIONS.md#d12-row-tiles-for-row-broadcast-reads).
        Args order = {u};
        for (const auto &v : lf(s).vars) order.push_back(v);
        ps.add("reorder_storage", order);
    }
    ScheduleStatement &pu = add(part, 0);
    pu.add("split", {u, uo, ui, V}).add("reorder", {ui, uo, rxo}).add("vectorize", {ui});
    if (U > V) pu.add("unroll", {uo});
    return true;
}

// A reduction over several whole inner dims (a global average pool's H x W, 196 values an output):
// rfactor_rows needs one RVar a multiple of the vector, and left alone each output adds its values
// one by one, a chain of dependent scalar adds. Fused, the RVars are one dense run; split by the
// vector width (a guarded tail where it does not divide) and rfactored, each output sums one vector
// of partials and combines it once (bench/DECISIONS.md#d17-fused-rvars-rfactor).
bool Ctx::rfactor_block(const std::string &s, const std::string &at_var) {
    const FuncInfo &f = fi(s);
    if (!f.has_update || !f.rvars_fuse_contiguous || !f.pure_lhs || f.rvar_extents.empty()) return false;
    const int V = lanes(s);
    int64_t n = 1;
    for (int64_t x : f.rvar_extents[0]) n *= x;
    const auto &rv = lf(s).update_rvars[0];
    if (V < 2 || n < 2 * V || rv.size() < 2) return false;
    std::vector<std::string> used = names_of(s);
    // A row that is no whole number of vectors, of a Func the pipeline computes: its rows may be
    // stored rounded up to whole vectors (a conv's RoundUp tail), and fused RVars then index it by
    // row and column of every lane, a gather. Vectors of a divisor of the row stay in one row
    // (bench/DECISIONS.md#d103-row-chunks-of-padded-rows).
    const int64_t row = f.rvar_extents[0][0];
    bool reads_computed_rows = false;
    for (const auto &pr : lf(s).producers) reads_computed_rows |= !lf(pr).extents.empty() && lf(pr).extents.back() == row;
    int U = 0;
    if (row % V != 0 && reads_computed_rows)
        for (int l = V; l >= 4 && !U; l--)
            if (row % l == 0) U = l;
    if (U) {
        std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi"), u = fresh(used, "u");
        std::string part = fresh(func_names, s + "_rf");
        tiling.partial_sums[s] = {U, 0};
        ScheduleStatement &st = add(s, 0);
        st.comments.push_back(str_cat(s, ": ", U, " partial sums in vector lanes (rfactor), ", row / U,
                                      " vectors a row of ", row, " (rows of a computed Func may be stored rounded up)"));
        st.add("split", {rv[0], rxo, rxi, U}).add("rfactor", {rxi, u}, part);
        add(part).add("compute_at", {s, at_var}).add("vectorize", {u, U});
        Args order = {u, rxo};
        for (size_t q = 1; q < rv.size(); q++) order.push_back(rv[q]);
        add(part, 0).add("reorder", order).add("vectorize", {u});
        return true;
    }
    std::string fused = rv[0];
    ScheduleStatement &st = add(s, 0);
    for (size_t q = 1; q < rv.size(); q++) {
        std::string next = fresh(used, "rfused");
        st.add("fuse", {fused, rv[q], next});
        fused = next;
    }
    std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi"), u = fresh(used, "u");
    Args split = {fused, rxo, rxi, V};
    if (n % V) split.push_back(ScheduleArg::tail("GuardWithIf"));
    std::string part = fresh(func_names, s + "_rf");
    tiling.partial_sums[s] = {V, 0};
    st.comments.push_back(str_cat(s, ": its ", rv.size(), " reduction vars fused (", n, " values in a row), ", V,
                                  " partial sums in vector lanes (rfactor)"));
    st.add("split", split).add("rfactor", {rxi, u}, part);
    add(part).add("compute_at", {s, at_var}).add("vectorize", {u, V});
    add(part, 0).add("reorder", {u, rxo}).add("vectorize", {u});
    return true;
}

// Halide hands out parallel iterations one at a time: give each task enough rows of
// \p row_elems elements (kTaskElems) while leaving >= 8 tasks per core.
int64_t Ctx::rows_per_task(double rows, double row_elems) const {
    double task = knobs.task_elems > 0 ? (double)knobs.task_elems : (double)kTaskElems;
    return (int64_t)std::min(std::floor(rows / (m.cores * 8.0)), std::ceil(task / std::max(1.0, row_elems)));
}

int Ctx::row_lanes(const std::string &f) const {
    const LoweredFunc &L = lf(f);
    if (L.extents.empty()) return 0;
    const int V = lanes(f);
    // Scalar copies beat those gathers (bench/DECISIONS.md#d120-narrow-padded-rows-scalar).
    if (L.padded_input && L.extents.back() < 4 * (int64_t)V) return 0;
    return fit_lanes(V, L.extents.back());
}

// Pure-stage loops of a root: returns the row var (parallel), fusing outer vars up to \p depth
// (0 = choose), and vectorises the innermost var.
std::string Ctx::pure_loops(ScheduleStatement &st, const std::string &f, int depth) {
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
            // polynomials, of loads from three streams). They need twice the registers: with
            // AVX2's 16 the polynomials spill, and one vector is faster
            // (bench/DECISIONS.md#d9-two-vectors-per-iteration).
            int W = m.vector_registers >= 32 ? 2 * V : V;
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
    int lv = row_lanes(f);
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
int64_t Ctx::concat_piece(const std::string &f) const {
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

void Ctx::comment_kernel(ScheduleStatement &st) {
    char buf[256];
    std::vector<std::string> others;
    for (const auto &f : k.funcs)
        if (f != k.root) others.push_back(f);
    std::string joined;
    for (const auto &o : others) joined += (joined.empty() ? "" : ", ") + o;
    st.comments.push_back(str_cat("kernel ", k.name, " (", kernel_kind_name(k.kind), "): ",
                                  others.empty() ? std::string("no fusion") : "fuses " + joined + " into " + k.root));
    std::snprintf(buf, sizeof buf, "est. %.3f MB read, %.3f MB written, %.3f MFLOP, %.3f ms",
                  k.bytes_read / 1e6, k.bytes_written / 1e6, k.flops / 1e6, k.est_ms);
    st.comments.push_back(buf);
}

// --- kernels -------------------------------------------------------------------------------

// A pointwise kernel that reads its producer transposed (a Transpose: out(j, i) = x(i, j)) and
// vectorizes its output's inner var gathers every vector from 16 rows of x, one element a row, and
// a whole output row walks 4096 pages of x: each element a TLB miss. Instead tiles of kTransposeRows
// values of the transposed var by one vector of the inner var, the producer's tile copied first
// (`x.in(out)`, computed at the tile, vectorized along x's rows: dense loads) and gathered from L1.
// Only where the producer's rows are 256 bytes or more and the kernel moves more than a quarter of
// the LLC: with shorter rows each tile is too small to pay for its copy, and a transpose that stays
// in cache gathers cheaply anyway (bench/DECISIONS.md#d11-staged-transpose).
bool Ctx::transposed_tile() {
    const std::string &R = k.root;
    const FuncInfo &f = fi(R);
    const LoweredFunc &L = lf(R);
    const int r = (int)L.vars.size();
    const int V = lanes(R);
    // A graph input transposed for a GEMM's B (bench/DECISIONS.md#d90-transposed-gemm-operand-materialized)
    // is staged at any size: gathered straight from its rows it took ~3 ns an element in L2.
    bool gemm_operand = !f.transposed_from.empty() && !p.find(f.transposed_from) && L.extents.size() == 2;
    if (gemm_operand) {
        gemm_operand = false;
        for (const auto &c : L.consumers) gemm_operand |= fi(c).is_matmul;
    }
    if (k.kind != KernelKind::Pointwise || f.transposed_from.empty() || f.transposed_row_bytes < kTransposeMinRowBytes ||
        (k.bytes_read + k.bytes_written <= (double)m.llc_bytes / 4 && !gemm_operand) ||
        r < 2 || V < 2 || !L.update_rvars.empty() ||
        L.extents.back() < V || concat_piece(R) > 0)
        return false;
    // Halide's vars are innermost first; LoweredFunc's outermost first.
    const std::string j = L.vars.back(), t = f.transposed_var;
    auto tpos = std::find(L.vars.begin(), L.vars.end(), t);
    if (tpos == L.vars.end() || t == j) return false;
    const int64_t text = L.extents[(size_t)(tpos - L.vars.begin())];
    const int64_t T = std::min<int64_t>(kTransposeRows, text);
    std::vector<std::string> used = names_of(R);
    std::string to = fresh(used, t + "o"), ti = fresh(used, t + "i"), jo = fresh(used, j + "o"), ji = fresh(used, j + "i");
    ScheduleStatement &st = add(R);
    comment_kernel(st);
    st.comments.push_back(str_cat(R, ": reads ", f.transposed_from, " transposed: tiles of ", T, " x ", V,
                                  ", the tile of ", f.transposed_from, " copied first with dense loads"));
    Args tsplit = {t, to, ti, T}, jsplit = {j, jo, ji, V};
    if (text % T) tsplit.push_back(ScheduleArg::tail("GuardWithIf"));
    if (L.extents.back() % V) jsplit.push_back(ScheduleArg::tail("GuardWithIf"));
    st.add("compute_root").add("split", tsplit).add("split", jsplit).add("reorder", {ji, ti, jo, to}).add("vectorize", {ji});
    // The parallel loop: the outermost whose iterations fill the cores (the tiles' outer var
    // stands for the transposed one).
    std::string par;
    for (int d = 0; d < r && par.empty(); d++) {
        if (L.vars[d] == j) continue;
        int64_t n = L.vars[d] == t ? (text + T - 1) / T : L.extents[d];
        if (n >= 2 * std::max(1, m.cores)) par = L.vars[d] == t ? to : L.vars[d];
    }
    if (!par.empty()) st.add("parallel", {par});
    std::string tile = fresh(func_names, f.transposed_from + "_tile");
    add(f.transposed_from).add("in", {R}, tile);
    add(tile).add("compute_at", {R, jo}).add("vectorize", {f.transposed_inner_var, V});
    inline_members();
    return true;
}

// A rank-2 pointwise kernel with an inlined member that reads its producer transposed, below
// transposed_tile's bound (in cache): out(j, i) gathers each vector of j from V rows of the
// producer, one element a row. Walking j along a whole output row, each gather touches V cache
// lines and the next V other lines, so a line is fetched again for each of the V values of i it
// holds. Tiles of V x V instead, the V values of i unrolled inside each vector step of j: the V
// gathers of a tile share the same V lines (a training step's weight-as-A products, D150, read
// so by their ReLU and GELU; bench/DECISIONS.md#d214-in-cache-transposed-reads-in-square-tiles).
bool Ctx::transposed_member_tiles() {
    const std::string &R = k.root;
    const LoweredFunc &L = lf(R);
    const int V = lanes(R);
    if (k.kind != KernelKind::Pointwise || L.vars.size() != 2 || V < 2 || !L.update_rvars.empty() ||
        !fi(R).transposed_from.empty() || concat_piece(R) > 0)
        return false;
    std::string t;
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (f == R || !d || d->placement != Placement::Inline || fi(f).transposed_from.empty()) continue;
        const LoweredFunc &M = lf(f);
        if (M.extents != L.extents || M.vars.size() != 2) continue;
        auto pos = std::find(M.vars.begin(), M.vars.end(), fi(f).transposed_var);
        if (pos == M.vars.end() || pos - M.vars.begin() != 0) continue;
        t = L.vars[0];
        break;
    }
    const std::string j = L.vars[1];
    if (t.empty() || L.extents[0] % V || L.extents[1] % V) return false;
    std::vector<std::string> used = names_of(R);
    std::string to = fresh(used, t + "o"), ti = fresh(used, t + "i"), jo = fresh(used, j + "o"), ji = fresh(used, j + "i");
    ScheduleStatement &st = add(R);
    comment_kernel(st);
    st.comments.push_back(str_cat(R, ": gathers its vectors from a product read transposed: tiles of ", V, " x ", V,
                                  ", whose gathers share their cache lines"));
    st.add("compute_root").add("split", {t, to, ti, V}).add("split", {j, jo, ji, V}).add("reorder", {ji, ti, jo, to});
    st.add("vectorize", {ji}).add("unroll", {ti});
    if (L.extents[0] / V >= 2 * std::max(1, m.cores)) st.add("parallel", {to});
    else if (L.extents[1] / V >= 2 * std::max(1, m.cores)) st.add("parallel", {jo});
    inline_members();
    return true;
}

bool Ctx::pointwise_over_channels() {
    const std::string &R = k.root;
    if (k.kind != KernelKind::Pointwise || !pointwise_channels_innermost(R)) return false;
    const auto &v = lf(R).vars;
    ScheduleStatement &st = add(R);
    comment_kernel(st);
    st.comments.push_back(str_cat(R, ": stored channels innermost (every reader takes a pixel's channels together)"));
    st.add("compute_root").add("reorder_storage", {v[1], v[3], v[2], v[0]}).add("reorder", {v[1], v[3], v[2], v[0]})
        .add("vectorize", {v[1], lanes(R)});
    if (lf(R).extents[2] >= 2 * std::max(1, m.cores)) st.add("parallel", {v[2]});
    inline_members();
    return true;
}

void Ctx::rows_or_pointwise() {
    const std::string &R = k.root;
    if (transposed_tile() || transposed_member_tiles() || pointwise_over_channels()) return;
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
    // A tile of T rows: the members are computed for T rows at once, and the output's vector loop
    // runs the T rows innermost, so a row-broadcast read (scale, shift) is loaded once per T rows.
    int64_t per = 0;  // rows per parallel task, when pure_loops split the row var into tasks
    std::vector<std::string> used = names_of(R);
    for (const auto &c : st.calls) {
        for (const auto &a : c.args)
            if (a.is_ident()) used.push_back(a.name);
        if (c.name == "split" && c.args.size() == 4 && c.args[2].name == row) per = c.args[3].value;
    }
    int64_t T = row.empty() ? 1 : row_tile(depth, per);
    if (T > 1) {
        std::string rt = fresh(used, row + "_tile"), rr = fresh(used, row + "_r");
        st.comments.push_back(str_cat(R, ": tiles of ", T, " rows, so that its reads of a row-broadcast ",
                                      "vector (a scale, a shift) load it once per tile"));
        st.add("split", {row, rt, rr, T}).add("reorder", {rr, lf(R).vars.back()}).add("unroll", {rr});
        row = rt;
    }
    if (!row.empty() && prefetches_next_tile()) {
        int lv = 0;
        for (const auto &c : st.calls)
            if (c.name == "vectorize" && c.args.size() == 2 && c.args[0].name == lf(R).vars.back()) lv = (int)c.args[1].value;
        prefetch_rows_ahead(st, R, lv, T,
                            T > 1 ? str_cat("the next tile of ", T, " rows while it normalizes this one from cache")
                                  : std::string("the next row while it normalizes this one from cache"));
    }
    // A member's update vectorized along its kept inner dim (vectorize_update), where it is computed.
    auto vectorize_member = [&](ScheduleStatement &ms, const std::string &f) {
        if (int lv = fit_lanes(lanes(f), lf(f).extents.back()); lv && lf(f).extents.back() > 1)
            ms.add("vectorize", {lf(f).vars.back(), lv});
        ScheduleStatement u(f, 0);
        std::vector<std::string> names = names_of(f);
        vectorize_update(u, f, names);
        if (!u.calls.empty()) out.push_back(u);  // ms may move: not used after this
    };
    // The innermost loop outside the vector loop, where pure_loops kept it (not fused into the row).
    std::string inner_row = row;
    if (r >= 3) {
        inner_row = lf(R).vars[r - 2];
        for (const auto &c : st.calls)
            if (c.name == "fuse" && (c.args[0].name == inner_row || c.args[1].name == inner_row)) inner_row = row;
    }
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (d->placement != Placement::Row) continue;
        if (row.empty()) {  // no row loop (rank 1/0): own loop nest
            generic_func(f, false);
            continue;
        }
        ScheduleStatement &ms = add(f);
        note(ms, f);
        // A window's reduction with the reader's extents (an AveragePool's sums): per innermost row.
        const bool window = fi(f).has_update && lf(f).extents == lf(R).extents;
        ms.add("compute_at", {R, window ? inner_row : row});
        if (window) {
            vectorize_member(ms, f);
        } else if (!fi(f).has_update) {
            int lv = fit_lanes(lanes(f), lf(f).extents.back());
            if (lv) {
                ms.add("vectorize", {lf(f).vars.back(), lv});
                prefetch_next_row(ms, f, lv);
            }
        } else {
            // Several whole inner dims (an InstanceNorm's H x W): fused and rfactored, per output;
            // a reduction down a middle dim (a Softmax over axis 1): vectorized along the kept dim.
            if (!rfactor_rows(f, R, row, T > 1) && !rfactor_block(f, lf(f).vars.back())) vectorize_member(ms, f);
        }
    }
    inline_members();
}

// Rows per tile of a row kernel whose output reads row-broadcast vectors (a LayerNorm's scale and
// shift, through inlined members too): with one row at a time its output loop loads x, scale and
// shift for every vector it stores, three loads a store, and where a core issues one 64-byte load
// a cycle that competes with the row's own memory time. T rows a tile (innermost under each vector
// step) take 1 + 2/T loads a store; the statistics are computed for the tile, which stays in L2
// (T x row <= L2/8; bench/DECISIONS.md#d12-row-tiles-for-row-broadcast-reads). Rows under 1024
// elements are left alone (not measured).
int64_t Ctx::row_tile(int depth, int64_t per) const {
    const std::string &R = k.root;
    const auto &e = lf(R).extents;
    const int r = (int)e.size();
    if (depth != r - 1 || r < 2 || concat_piece(R) > 0) return 1;
    int reads = fi(R).row_broadcast_reads;
    bool has_stats = false;
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (f == R || !d) continue;
        if (d->placement == Placement::Inline && lf(f).extents == e) reads += fi(f).row_broadcast_reads;
        has_stats |= d->placement == Placement::Row && fi(f).has_update;
    }
    const int64_t row = e.back(), rows = (int64_t)prod(e, 0, depth);
    // With 16 vector registers the tile's per-row statistics and the unrolled rows spill, and
    // one row is faster.
    if (reads == 0 || !has_stats || row < 1024 || m.vector_registers < 32) return 1;
    // A kernel that prefetches its next tile (prefetches_next_tile) takes at most 4 rows: 8 rows
    // of prefetch pass through a 48 KiB L1 ahead of the tile they would follow
    // (bench/DECISIONS.md#d14-prefetch-next-row).
    const int64_t most = prefetches_next_tile() ? 4 : 8;
    for (int64_t T : {8, 4, 2})
        if (T <= most && (per == 0 || per % T == 0) && rows % T == 0 &&
            T * row * fi(R).esize <= m.l2_bytes / 8)
            return T;
    return 1;
}

// The output pass of a row kernel whose statistics are computed per row (a LayerNorm: mean and
// variance at the output's row, the row then read from cache) reads nothing from memory, and the
// core's memory reads idle until the next row's first statistic misses on it: prefetch the next row
// (tile) in that pass (bench/DECISIONS.md#d14-prefetch-next-row). Only where the kernel's bytes
// come from past the L2s, rows are whole (depth r - 1, so that the next row is the next in memory)
// and at least 1 KiB, and the output reads a graph input point for point (Softmax's reads its
// exponentials; prefetch_next_row there).
bool Ctx::prefetches_next_tile() const {
    const std::string &R = k.root;
    const LoweredFunc &L = lf(R);
    const int r = (int)L.vars.size();
    if (r < 2 || k.kind != KernelKind::Rows || target.has_gpu_feature() || !L.update_rvars.empty() ||
        L.extents.back() * fi(R).esize < kMinPrefetchRowBytes ||
        k.bytes_read + k.bytes_written <= (double)m.l2_bytes * std::max(1, m.cores))
        return false;
    bool stats = false;
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (f == R || !d || d->placement != Placement::Row || !fi(f).has_update) continue;
        // A statistic per whole row: all but the last dim equal to the output's.
        const auto &es = lf(f).extents;
        if (es.size() != L.extents.size() || !std::equal(es.begin(), es.end() - 1, L.extents.begin())) return false;
        stats = true;
    }
    return stats && !point_read_inputs(R).empty();  // what prefetch_rows_ahead would fetch
}

// A graph output is written with non-temporal stores (codegen/streaming_stores.h) when the
// kernel moves more bytes than the last-level cache holds: by the time it finishes, its first rows
// are out of cache anyway, so a normal store's read of each line before writing it (a read for
// ownership) is pure extra traffic. Only a pure Func (an update re-reads what it stores), vectorized,
// whose rows are whole vectors (so that every vector store is aligned), on x86; and only a row or
// pointwise kernel, which writes each row front to back so that consecutive stores fill whole lines
// (a GEMM's tile writes a short piece of each row at a time, and an AVX2 vector is half a line: a
// partly written line leaves the write-combining buffer as a slow partial write;
// bench/DECISIONS.md#d15-streaming-stores).
bool Ctx::streams_output() const {
    const std::string &R = k.root;
    return knobs.streaming_stores && (k.kind == KernelKind::Rows || k.kind == KernelKind::Pointwise) &&
           target.arch == Halide::Target::X86 && !target.has_gpu_feature() && lf(R).is_output &&
           lf(R).update_rvars.empty() && !lf(R).vars.empty() &&
           k.bytes_read + k.bytes_written > (double)m.llc_bytes && lf(R).extents.back() % lanes(R) == 0;
}

void Ctx::stream_output(size_t first) {
    const std::string &R = k.root;
    if (!streams_output()) return;
    for (size_t q = first; q < out.size(); q++) {
        ScheduleStatement &st = out[q];
        if (st.func != R || st.stage != -1) continue;
        bool vectorized = false;
        for (const auto &c : st.calls) vectorized |= c.name == "vectorize";
        if (!vectorized) return;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f MB", (k.bytes_read + k.bytes_written) / 1e6);
        std::string llc = m.llc_bytes >= (1 << 20) ? str_cat(m.llc_bytes >> 20, " MiB") : str_cat(m.llc_bytes >> 10, " KiB");
        st.comments.push_back(str_cat(R, ": streaming stores: the kernel moves ", buf, ", more than the ", llc,
                                      " last-level cache, so its output is not in cache for a reader anyway; "
                                      "non-temporal stores skip reading each line before writing it"));
        st.add("stream_stores");
        return;
    }
}

// A costly pointwise Func buffered per row (Softmax's exponentials) computes from L1 while this
// core's memory traffic idles: prefetch the same columns of the next row of each input it reads
// (through inlined producers), one vector step ahead per step, so the next row's first pass finds
// it in cache. NonFaulting: past the last row the hint reads nothing. Only for a costly pass: a
// cheap one (LayerNorm's output) gained nothing (bench/DECISIONS.md#d14-prefetch-next-row).
void Ctx::prefetch_next_row(ScheduleStatement &st, const std::string &f, int lv) {
    const LoweredFunc &L = lf(f);
    // Not for short rows: a 512-byte row ahead is inside what the hardware prefetcher fetches
    // anyway, and the hint only costs.
    if (L.flops_per_point < kPrefetchMinFlops || L.extents.empty() || L.extents.back() * fi(f).esize < kMinPrefetchRowBytes)
        return;
    prefetch_rows_ahead(st, f, lv, 1, str_cat("the next row while it computes (", L.flops_per_point, " flops a point)"));
}

// The prefetched address is the vector step's own plus `rows` rows of steps: past the end of this
// row, the same columns of a later row in a dense row-major input.
void Ctx::prefetch_rows_ahead(ScheduleStatement &st, const std::string &f, int lv, int64_t rows,
                              const std::string &why) {
    const LoweredFunc &L = lf(f);
    if (lv <= 0 || L.vars.size() < 2) return;
    const int64_t row = L.extents.back();
    const int64_t steps = (row + lv - 1) / lv;
    for (const std::string &in : point_read_inputs(f)) {
        const std::string &v = L.vars.back();
        st.comments.push_back(str_cat(f, ": prefetches ", in, ", ", why));
        st.add("prefetch", {in, v, v, rows * steps, "NonFaulting"});
    }
}

// Only inputs read point for point: not a broadcast row or a weight.
std::vector<std::string> Ctx::point_read_inputs(const std::string &f) const {
    std::set<std::string> inputs;
    collect_inlined_inputs(f, inputs);
    std::vector<std::string> r;
    for (size_t q = 0; q < p.input_names.size(); q++)
        if (inputs.count(p.input_names[q]) && shape_numel(p.input_shapes[q]) == (int64_t)fi(f).points)
            r.push_back(p.inputs[q].name());
    return r;
}

// Graph inputs that \p f reads directly or through producers inlined into it.
void Ctx::collect_inlined_inputs(const std::string &f, std::set<std::string> &inputs) const {
    for (const auto &in : lf(f).input_reads) inputs.insert(in);
    for (const auto &pr : lf(f).producers) {
        const FuncDecision *d = plan.decision(pr);
        if (d && d->placement == Placement::Inline && info.count(pr)) collect_inlined_inputs(pr, inputs);
    }
}

void Ctx::reduction() {
    const std::string &F = k.root;
    ScheduleStatement &st = add(F);
    const size_t root_at = out.size() - 1;
    comment_kernel(st);
    st.add("compute_root");
    if (fi(F).points >= m.cores * 4) {
        tiling.path = "reduction.per_output";
        reduction_per_output(root_at);
    } else {
        SplitReductionPlan sp = choose_split_reduction();
        tiling.path = "reduction.split";
        tiling.split_serial = sp.serial;
        tiling.partial_chunk = sp.over_outer_rvar ? 0 : sp.chunk;
        tiling.partials_vectorized = sp.vec;
        tiling.vector_lanes = sp.vec ? lanes(F) : 0;
        emit_split_reduction(root_at, sp);
    }
    inline_members();
}

// Outputs enough for the cores: the pure stage's loops (pure_loops), the update's rows vectorised
// by rfactor where they allow it, else along the innermost pure var (vectorize_update), with
// tasks of several rows; a large graph output computed per row of a wrapper.
void Ctx::reduction_per_output(size_t root_at) {
    const std::string &F = k.root;
    const FuncInfo &f = fi(F);
    const auto &v = lf(F).vars;
    const auto &e = lf(F).extents;
    int r = (int)v.size();
    int V = lanes(F);
    std::vector<std::string> used = names_of(F);
    const std::string row = pure_loops(out[root_at], F, 1);
    const std::string &inner = v[r - 1];
    // The update's rows go to the threads in tasks of several rows, as pure_loops sizes them:
    // a task per row costs more than the row (bench/DECISIONS.md#d7-task-size).
    double terms = prod(e, 1, e.size());
    for (int64_t x : f.rvar_extents[0]) terms *= (double)x;
    int64_t per = e[0] >= 2 ? rows_per_task((double)e[0], terms) : 1;
    // Names of their own: the pure stage has split v[0] into its own io/ii.
    std::string ro = per >= 2 ? fresh(used, v[0] + "_task") : "", ri = per >= 2 ? fresh(used, v[0] + "_row") : "";
    const std::string at = per >= 2 && r == 1 ? ri : inner;
    if (rfactor_rows(F, F, at) || rfactor_block(F, at)) {
        if (per >= 2) {
            Args split = {v[0], ro, ri, per};
            if (e[0] % per) split.push_back(ScheduleArg::tail("GuardWithIf"));
            add(F, 0).add("split", split).add("parallel", {ro});
        } else if (e[0] >= 2) {
            add(F, 0).add("parallel", {v[0]});
        }
    } else {
        ScheduleStatement u(F, 0);
        std::string vo = vectorize_update(u, F, used);
        // A graph output larger than L2 (a pool's window over a big tensor) is computed per
        // row of its wrapper (realized in its place): the initial value and the window's
        // taps in the row, in L1, and one store, where at root the initial value was a pass
        // of its own over the output and the update read it back
        // (bench/DECISIONS.md#d22-output-reduction-per-tile-of-a-wrapper).
        const bool wrap = knobs.tile_wrappers && lf(F).is_output && !vo.empty() && r >= 2 &&
                          f.points * f.esize > (double)m.l2_bytes;
        if (wrap) {
            const std::string T = fresh(func_names, F + "_out");
            ScheduleStatement ws(F);
            ws.comments = std::move(out[root_at].comments);
            ws.comments.push_back(str_cat(T, ": the output, stored per row"));
            ws.add("in", {}, T);
            out[root_at].func = T;
            out[root_at].comments.clear();
            out.insert(out.begin() + (long)root_at, ws);
            ScheduleStatement &fs = add(F);
            note(fs, F);
            fs.add("compute_at", {T, r >= 3 ? v[r - 2] : row});
            if (int lv = fit_lanes(V, e[r - 1])) fs.add("vectorize", {v[r - 1], lv});
        } else if (!vo.empty()) {
            // The outermost var with work for every core; past dims of extent 1 (a keepdims
            // [1, N] column sum, a batch-1 pool), the next, or the strips: a unit dim as the
            // parallel loop runs the kernel on one core
            // (bench/DECISIONS.md#d8-parallel-loop-skips-unit-dims).
            std::string par = vo;
            for (int d = 0; d + 1 < r; d++) {
                if (e[d] >= 2 * std::max(1, m.cores)) {
                    par = v[d];
                    break;
                }
                if (e[d] > 1) {
                    par = v[0];  // some work outside: keep the outermost loop
                    break;
                }
            }
            u.add("parallel", {par});
        } else if (e[0] >= 2) {
            u.add("parallel", {v[0]});
        }
        if (!u.calls.empty()) out.push_back(u);
    }
}

SplitReductionPlan Ctx::choose_split_reduction() const {
    SplitReductionPlan sp;
    const FuncInfo &f = fi(k.root);
    const int V = lanes(k.root);
    const auto &rx = f.rvar_extents[0];
    sp.n = rx[0];
    if (lf(k.root).update_rvars[0].size() >= 2) {
        // The outermost RVar is the parallel var; the innermost, vectorised where it is dense.
        sp.over_outer_rvar = true;
        sp.serial = rx.back() < 2;
        sp.vec = f.inner_rvar_contiguous && rx[0] % V == 0 && rx[0] >= 2 * V;
        return sp;
    }
    const int64_t n = rx[0];
    int64_t cnt = 0;
    int64_t min_inner = f.inner_rvar_contiguous ? 2 * V : 2;
    for (int64_t c = (int64_t)m.cores * 8; c >= (int64_t)m.cores && c >= 2; c--)
        if (n % c == 0 && n / c >= min_inner) {
            cnt = c;
            break;
        }
    // Accuracy: each accumulator (chunk × vector lane) adds at most kMaxSerialTerms values,
    // so the float error of a long sum stays near that of a cascade sum
    // (bench/DECISIONS.md#d16-split-reduction-accumulator-bound).
    int64_t lanes = f.inner_rvar_contiguous ? V : 1;
    int64_t need = (n + lanes * kMaxSerialTerms - 1) / (lanes * kMaxSerialTerms);
    if (cnt > 0 && cnt < need) {
        for (int64_t c = need; c <= std::min<int64_t>(n / min_inner, 64 * need); c++)
            if (n % c == 0) {
                cnt = c;
                break;
            }
    }
    sp.serial = cnt == 0;
    if (sp.serial) return sp;
    sp.chunk = n / cnt;
    sp.vec = f.inner_rvar_contiguous && sp.chunk % V == 0;
    return sp;
}

std::string Ctx::explain_split_reduction(const SplitReductionPlan &sp) const {
    const std::string &F = k.root;
    if (sp.serial) return sp.over_outer_rvar ? "" : str_cat(F, ": reduction of ", sp.n, " has no even split; left serial");
    return str_cat(F, ": ", fi(F).points, " output(s) cannot fill ", m.cores,
                   " cores: partial results over a parallel var (rfactor)");
}

// Too few outputs to fill the cores: the reduction split into partial results over a parallel var
// (rfactor into `<f>_part`), the partials vectorised where the plan says.
void Ctx::emit_split_reduction(size_t root_at, const SplitReductionPlan &sp) {
    const std::string &F = k.root;
    const int V = lanes(F);
    const auto &rv = lf(F).update_rvars[0];
    std::vector<std::string> used = names_of(F);
    std::string part = fresh(func_names, F + "_part");
    std::string pv = fresh(used, "p"), u = fresh(used, "u");
    const std::string why = explain_split_reduction(sp);
    if (sp.serial) {
        if (!why.empty()) out[root_at].comments.push_back(why);
        return;
    }
    Args rf;
    std::vector<std::string> remaining;
    ScheduleStatement st2(F, 0);
    if (sp.over_outer_rvar) {
        rf = {rv.back(), pv};
        if (sp.vec) {
            std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi");
            st2.add("split", {rv[0], rxo, rxi, V});
            rf.push_back(rxi);
            rf.push_back(u);
            remaining.push_back(rxo);
        } else {
            remaining.push_back(rv[0]);
        }
        for (size_t q = 1; q + 1 < rv.size(); q++) remaining.push_back(rv[q]);
    } else {
        std::string rxo = fresh(used, "rxo"), rxi = fresh(used, "rxi");
        st2.add("split", {rv[0], rxo, rxi, sp.chunk});
        rf = {rxo, pv};
        if (sp.vec) {
            std::string rxm = fresh(used, "rxm"), rxv = fresh(used, "rxv");
            st2.add("split", {rxi, rxm, rxv, V});
            rf.push_back(rxv);
            rf.push_back(u);
            remaining.push_back(rxm);
        } else {
            remaining.push_back(rxi);
        }
    }
    st2.comments.push_back(why);
    st2.add("rfactor", rf, part);
    out.push_back(st2);
    ScheduleStatement &ps = add(part);
    ps.add("compute_root");
    if (sp.vec) ps.add("vectorize", {u});
    ScheduleStatement &pu = add(part, 0);
    Args reorder;
    if (sp.vec) reorder.push_back(u);
    for (const auto &x : remaining) reorder.push_back(x);
    reorder.push_back(pv);
    pu.add("reorder", reorder).add("parallel", {pv});
    if (sp.vec) pu.add("vectorize", {u});
}

// compute_root with parallel outer work and a vectorised inner var, on every stage; update
// stages vectorise only a var their reads keep contiguous, with GuardWithIf on a ragged tail.
void Ctx::generic_func(const std::string &f, bool kernel_comment) {
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
        std::string vo = u == 0 ? vectorize_update(us, f, used) : "";
        if (r >= 2 && e[0] >= 2) us.add("parallel", {v[0]});
        else if (r == 1 && !vo.empty() && e[0] >= 2 * fit_lanes(V, e[0])) us.add("parallel", {vo});
        if (!us.calls.empty()) out.push_back(us);
    }
}

std::string Ctx::vectorize_update(ScheduleStatement &u, const std::string &f, std::vector<std::string> &used) {
    const auto &v = lf(f).vars;
    const auto &e = lf(f).extents;
    int lv = v.empty() ? 0 : fit_lanes(lanes(f), e.back());
    if (lv < 4 || !fi(f).inner_var_contiguous) return "";
    // Reductions down the outer dims (a max over the rows of a matrix, per column): a strip of one
    // vector walks thousands of rows a line and a page apart. A strip of several vectors, one
    // register accumulator each (half the registers), reads a longer run of every row, still with
    // at least two strips a core (bench/DECISIONS.md#d19-column-reduction-strips). The same down
    // the middle dim of a block in cache (a Softmax over axis 1;
    // bench/DECISIONS.md#d18-middle-dim-statistic); not a small window (a pool's taps).
    const auto &rx = fi(f).rvar_extents[u.stage];
    double taps = 1;
    for (int64_t x : rx) taps *= (double)std::max<int64_t>(1, x);
    int64_t U = 1;
    if (!fi(f).inner_rvar_contiguous && (lf(f).vars.size() <= 2 || taps > kMaxUnrolledTaps))
        for (int64_t w = std::max(1, m.vector_registers / 2); w > 1 && U == 1; w /= 2)
            if (e.back() / (w * lv) >= 2 * std::max(1, m.cores)) U = w;
    std::string vo = fresh(used, v.back() + "o"), vi = fresh(used, v.back() + "i");
    Args split = {v.back(), vo, vi, U * lv};
    if (e.back() % (U * lv)) split.push_back(ScheduleArg::tail("GuardWithIf"));
    u.add("split", split);
    std::string vu, vv = vi;
    if (U > 1) {
        vu = fresh(used, v.back() + "u");
        vv = fresh(used, v.back() + "v");
        u.add("split", {vi, vu, vv, lv});
    }
    Args reorder = {vv};
    if (U > 1) reorder.push_back(vu);
    for (const auto &rv : lf(f).update_rvars[u.stage]) reorder.push_back(rv);
    reorder.push_back(vo);
    u.add("reorder", reorder).add("vectorize", {vv});
    if (U > 1) u.add("unroll", {vu});
    // A small window (a pool's 3x3 taps) unrolled: the accumulator stays in a register and the
    // taps' loads overlap, instead of a loop of 3 around a loop of 3 per vector
    // (bench/DECISIONS.md#d20-small-window-unroll).
    if (!rx.empty() && taps <= kMaxUnrolledTaps && U == 1)
        for (const auto &rv : lf(f).update_rvars[u.stage]) u.add("unroll", {rv});
    return vo;
}

void Ctx::generic() {
    for (const auto &f : k.funcs) {
        const FuncDecision *d = plan.decision(f);
        if (d->placement == Placement::Inline) continue;
        generic_func(f, f == k.root);
    }
    inline_members();
}

void emit_kernel(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                 const FusionPlan &plan, const Kernel &k, const Halide::Target &target,
                 const MachineModel &m, const ScheduleKnobs &knobs, std::vector<ScheduleStatement> &out,
                 std::vector<std::string> &func_names, KernelTiling &tiling) {
    Ctx c{p, info, plan, k, target, m, knobs, out, func_names, tiling};
    if (std::string conv = conv_of_pad(p, info, plan, m, k.root); !conv.empty()) {  // conv() places it
        const size_t inlined = out.size();
        c.inline_members();
        if (out.size() > inlined)
            out[inlined].comments.insert(out[inlined].comments.begin(),
                                         str_cat("inlined into ", k.root, ", which ", conv, " computes per task"));
        return;
    }
    const size_t first = out.size();
    switch (k.kind) {
    case KernelKind::Gemm: c.gemm(); break;
    case KernelKind::Conv: c.conv(); break;
    case KernelKind::Reduction: c.reduction(); break;
    case KernelKind::Rows:
    case KernelKind::Pointwise: c.rows_or_pointwise(); break;
    case KernelKind::Generic: c.generic(); break;
    }
    c.stream_output(first);
    // A kernel with less work than waking the thread pool costs runs on one core
    // (bench/DECISIONS.md#d6-tiny-kernels-serial); waking and joining more threads costs more
    // (bench/DECISIONS.md#d60-serial-threshold-per-thread).
    const double serial_us = k.est_ms * 1e3 * std::max(1, m.cores);
    const double min_us = knobs.min_parallel_us > 0 ? knobs.min_parallel_us
                                                    : kMinParallelMicros * std::max(1.0, m.cores / 2.0);
    if (m.cores <= 1 || serial_us >= min_us || first == out.size()) return;
    for (size_t q = first; q < out.size();) {
        auto &calls = out[q].calls;
        size_t before = calls.size();
        calls.erase(std::remove_if(calls.begin(), calls.end(), [](const PrimitiveCall &pc) { return pc.name == "parallel"; }),
                    calls.end());
        if (calls.empty() && before > 0 && q > first) {  // it only made a loop parallel
            // An update stage says so, or Halide warns that it was forgotten beside its
            // scheduled pure stage; any other statement goes.
            bool scheduled_elsewhere = false;
            for (size_t o = first; o < out.size(); o++)
                scheduled_elsewhere |= o != q && out[o].func == out[q].func && out[o].stage == out[q].stage &&
                                       !out[o].calls.empty();
            if (out[q].stage >= 0 && !scheduled_elsewhere) {
                out[q].add("unscheduled");
                q++;
                continue;
            }
            out.erase(out.begin() + (long)q);
            continue;
        }
        q++;
    }
    tiling.serial_kernel = true;
    char buf[160];
    std::snprintf(buf, sizeof buf, "serial: about %.1f us of work on one core, less than %.0f us is not worth waking the "
                  "thread pool", serial_us, min_us);
    out[first].comments.push_back(buf);
}

}  // namespace loom::autosched
