// The CPU cost model's attention kernel (autoschedule.h, schedule_attention_kernels): a
// FusedAttention's Funcs (ops/attention.cpp) as one flash-style loop nest. The output is split
// into query tiles, one parallel task per (batch dims, query tile); the tile's statistics per key
// tile (`_tile_stats`) and the merge (`_max`, `_rescale`, `_sum`, `_weight`) are computed at the
// query tile, and each key tile's scores, max and probabilities (`_qk`, `_tile_max`, `_prob`) at
// the key tile of the statistics, so a query tile × key tile block of scores is all that exists.
// The query tile is as tall as lets its statistics (nT key tiles × (dv + 2) floats a query) take a
// quarter of L2. The tile's keys and values are copied at the key tile (dense vector loads for
// both products, whatever layout kᵀ arrives in).
#include <algorithm>
#include <set>
#include <sstream>

#include "autoschedule/autoschedule.h"
#include "schedule/schedule_parser.h"

namespace loom {

namespace {

const char *const kHelpers[] = {"keys", "values", "qk", "tile_max", "prob", "tile_stats", "max", "rescale", "sum", "weight"};

struct AttentionFuncs {
    const LoweredFunc *out = nullptr;
    std::map<std::string, const LoweredFunc *> helper;  // by suffix
};

std::string join_reversed(const std::vector<std::string> &v, size_t from, size_t to) {
    std::string s;
    for (size_t k = to; k-- > from;) s += ", " + v[k];
    return s;
}

// The schedule text of one attention kernel.
std::string attention_text(const AttentionFuncs &a, const MachineModel &m) {
    const LoweredFunc &o = *a.out, &st = *a.helper.at("tile_stats");
    const int r = (int)o.vars.size(), nb = r - 2;
    const std::string &q = o.vars[nb], &col = o.vars[nb + 1];
    const int64_t nT = st.extents[nb + 1], cols = st.extents[nb + 2], Sq = o.extents[nb];
    int64_t tq = 1;
    while (tq < 32 && tq * 2 <= Sq && (tq * 2) * nT * cols * 4 <= m.l2_bytes / 4) tq *= 2;
    const int lanes = std::max(1, m.vector_bytes / 4);
    const std::string qo = q + "o", qi = q + "i", task = "task";
    // Buffers inside the kernel take Halide's default tails (it rounds their regions up); only the
    // output, whose buffer is the caller's, guards a ragged tail (a guarded vector loop ran at a
    // third of the speed).
    auto vec = [&](const std::string &var) { return ".vectorize(" + var + ", " + std::to_string(lanes) + ")"; };
    auto out_tail = [&](int64_t extent, int64_t factor) { return extent % factor ? ", GuardWithIf" : ""; };
    // Fuses the batch dims (outermost first in vars) and the query tiles into one parallel loop.
    std::string fuse;
    std::string inner = qo;
    for (int k = nb - 1; k >= 0; k--) {
        std::string to = k == 0 ? task : "task" + std::to_string(k);
        fuse += ".fuse(" + inner + ", " + o.vars[k] + ", " + to + ")";
        inner = to;
    }
    std::ostringstream s;
    const std::string split = ".split(" + q + ", " + qo + ", " + qi + ", " + std::to_string(tq) + out_tail(Sq, tq) + ")";
    const std::string out_vec = ".vectorize(" + col + ", " + std::to_string(lanes) + out_tail(o.extents[nb + 1], lanes) + ")";
    s << o.name << split << ".reorder(" << col << ", " << qi << ", " << qo << join_reversed(o.vars, 0, nb) << ")"
      << fuse << out_vec << ".parallel(" << task << ");\n";
    s << o.name << ".update(0)" << split << ".reorder(" << col << ", " << qi << ", t, " << qo
      << join_reversed(o.vars, 0, nb) << ")" << fuse << out_vec << ".parallel(" << task << ");\n";
    for (const char *h : {"weight", "sum", "rescale", "max", "tile_stats"})
        s << a.helper.at(h)->name << ".compute_at(" << o.name << ", " << task << ");\n";
    // Statistics: per key tile, per query, the tile's keys, the columns in vectors.
    const std::vector<std::string> &sv = st.vars;  // batch…, query, key tile, column
    s << st.name << vec(sv[nb + 2]) << ";\n";
    s << st.name << ".update(0).reorder(" << sv[nb + 2] << ", r, " << sv[nb] << ", " << sv[nb + 1]
      << join_reversed(sv, 0, nb) << ")" << vec(sv[nb + 2]) << ";\n";
    const LoweredFunc &prob = *a.helper.at("prob"), &tmax = *a.helper.at("tile_max"), &qk = *a.helper.at("qk");
    const std::string at_tile = ".compute_at(" + st.name + ", " + sv[nb + 1] + ")";
    s << prob.name << at_tile << vec(prob.vars[nb + 2]) << ";\n";
    s << tmax.name << at_tile << ";\n";
    s << tmax.name << ".update(0).reorder(r" << join_reversed(tmax.vars, 0, nb + 2) << ");\n";
    // Scores: per query, the dot products over d with the tile's keys in vectors.
    s << qk.name << at_tile << vec(qk.vars[nb + 2]) << ";\n";
    s << qk.name << ".update(0).reorder(" << qk.vars[nb + 2] << ", k" << join_reversed(qk.vars, 0, nb + 2) << ")"
      << vec(qk.vars[nb + 2]) << ";\n";
    // The tile's keys and values, copied once for every query of the query tile.
    const LoweredFunc &keys = *a.helper.at("keys"), &values = *a.helper.at("values");
    s << keys.name << at_tile << vec(keys.vars[nb + 2]) << ";\n";
    s << values.name << at_tile << vec(values.vars[nb + 2]) << ";\n";
    return s.str();
}

}  // namespace

void schedule_attention_kernels(const LoweredPipeline &p, const MachineModel &m, AutoScheduleResult &r) {
    std::map<std::string, AttentionFuncs> by_node;
    for (const auto &f : p.funcs) {
        if (f.op != "FusedAttention") continue;
        AttentionFuncs &a = by_node[f.node];
        bool helper = false;
        for (const char *h : kHelpers) {
            const std::string suffix = std::string("_") + h;
            if (f.name.size() > suffix.size() && f.name.compare(f.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                std::find(f.consumers.begin(), f.consumers.end(), f.name) == f.consumers.end() && !f.is_output) {
                // A helper is read by its own node's Funcs only; the output may carry any name.
                bool inner = !f.consumers.empty();
                for (const auto &c : f.consumers) inner &= p.find(c) && p.find(c)->node == f.node;
                if (inner) {
                    a.helper[h] = &f;
                    helper = true;
                }
                break;
            }
        }
        if (!helper) a.out = &f;
    }
    for (auto &[node, a] : by_node) {
        if (!a.out || a.helper.size() != std::size(kHelpers)) continue;
        std::set<std::string> mine = {a.out->name};
        for (auto &[h, f] : a.helper) mine.insert(f->name);
        // The planned kernels lose these Funcs; what they inlined into them stays inlined.
        Kernel k;
        k.name = "fused_attention";
        k.root = a.out->name;
        k.kind = KernelKind::Generic;
        k.nodes = {node};
        std::vector<std::string> inlined;
        std::vector<Kernel> kept;
        size_t at = std::string::npos;
        for (Kernel &pk : r.plan.kernels) {
            bool holds = std::any_of(pk.funcs.begin(), pk.funcs.end(), [&](const std::string &f) { return mine.count(f) > 0; });
            if (!holds) {
                kept.push_back(pk);
                continue;
            }
            if (at == std::string::npos) at = kept.size();
            for (const auto &f : pk.funcs) {
                if (mine.count(f)) continue;
                inlined.push_back(f);
                for (const auto &n : pk.nodes)
                    if (std::find(k.nodes.begin(), k.nodes.end(), n) == k.nodes.end()) k.nodes.push_back(n);
            }
            k.bytes_read += pk.bytes_read;
            k.flops += pk.flops;
            k.est_ms += pk.est_ms;
            if (pk.root == a.out->name) k.bytes_written = pk.bytes_written;
        }
        k.funcs = inlined;
        for (const auto &f : p.funcs)
            if (mine.count(f.name)) k.funcs.push_back(f.name);
        for (auto &d : r.plan.decisions) {
            if (mine.count(d.func) || std::find(inlined.begin(), inlined.end(), d.func) != inlined.end()) d.kernel = k.root;
            if (!mine.count(d.func)) continue;
            d.placement = d.func == k.root ? Placement::Root : Placement::Tile;
            d.why = d.func == k.root ? "attention: one task per query tile" : "attention: inside the query tile (flash)";
        }
        // Statements of the old kernels for these Funcs go; the inlined producers get compute_inline.
        auto &st = r.schedule.statements;
        st.erase(std::remove_if(st.begin(), st.end(),
                                [&](const ScheduleStatement &s) {
                                    if (mine.count(s.func)) return true;
                                    for (const auto &f : mine)  // rfactor / in() Funcs made for them
                                        if (s.func.rfind(f + "_", 0) == 0 && !p.find(s.func)) return true;
                                    return std::find(inlined.begin(), inlined.end(), s.func) != inlined.end();
                                }),
                 st.end());
        std::string text = attention_text(a, m);
        for (const auto &f : inlined) text += f + ".compute_inline();\n";
        Schedule parsed = parse_schedule(text, "<attention kernel>");
        if (!parsed.statements.empty())
            parsed.statements.front().comments.push_back("attention " + node +
                                                         ": flash-style, one query tile x key tile of scores at a time");
        st.insert(st.end(), parsed.statements.begin(), parsed.statements.end());
        kept.insert(kept.begin() + (long)std::min(at, kept.size()), k);
        r.plan.kernels = kept;
    }
}

}  // namespace loom
