// Candidate schedules around the cost model's choice, and the finer estimate that ranks them.
#include "autoschedule/candidates.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autoschedule/autoschedule_internal.h"
#include "schedule/schedule_printer.h"

namespace loom {

namespace {

using autosched::FuncInfo;
using autosched::GemmTile;

// L2-resident bandwidth of all cores (~32 B/cycle/core at 2.5 GHz), as the fusion plan assumes.
double l2_bytes_per_s(const MachineModel &m) { return std::max(m.bytes_per_s(), 32.0 * 2.5e9 * m.cores); }

double peak_flops(const MachineModel &m) {
    return m.gflops > 0 ? m.gflops * 1e9 : 2.0 * 2 * m.lanes(DType::F32) * 2.5e9 * m.cores;
}

// Fraction of the FMA peak a micro-kernel of MR rows x nrv vectors reaches: per k step it issues
// MR*nrv FMAs (2 ports) and MR + nrv loads (2 ports), and needs >= 8 independent accumulators to
// hide the FMA latency (4 cycles x 2 ports). Each k step reloads a B strip from L1 for only MR
// rows (the 0.5/MR term); past 8 rows nothing is gained and registers run short. The 0.6 covers
// loop and cache overhead (after linear_relu / combined, 2-core AVX-512).
double micro_efficiency(const GemmTile &t, const MachineModel &m, int esize) {
    int nrv = std::max(1, t.NR / std::max(1, t.V));
    double acc = (double)t.MR * nrv;
    double cycles = std::max({acc / 2, (t.MR + nrv) / 2.0, 4.0});
    double e = (acc / 2) / cycles;
    e *= 1 - 0.5 / std::min(t.MR, 8);
    if (t.MR > 8) e *= 0.99;
    // Accumulators reloaded once per k chunk; a B strip past L1 streams from L2.
    e *= 1 / (1 + 4.0 / (double)std::max<int64_t>(1, std::min(t.KC, t.K)));
    if ((double)std::min(t.KC, t.K) * t.NR * esize > (double)m.l1_bytes) e *= 0.8;
    return 0.6 * e;
}

// Per-task overhead of Halide's thread pool and the expected tail (half a task per core).
double parallel_overhead(double t, double tasks, const MachineModel &m) {
    tasks = std::max(1.0, tasks);
    return t / tasks * 0.5 + tasks * 2e-6 / m.cores;
}

// Whether \p s streams the stores of Func \p f.
bool streamed(const Schedule &s, const std::string &f) {
    for (const auto &st : s.statements)
        if (st.func == f)
            for (const auto &c : st.calls)
                if (c.name == "stream_stores") return true;
    return false;
}

// Statements alone (no comments, no header): what makes two candidates the same schedule.
std::string statements_key(const Schedule &s) {
    Schedule bare;
    for (ScheduleStatement st : s.statements) {
        st.comments.clear();
        bare.statements.push_back(st);
    }
    return print_schedule(bare);
}

}  // namespace

double estimate_ms(const LoweredPipeline &p, const AutoScheduleResult &r, const MachineModel &m,
                   const ScheduleKnobs &knobs) {
    auto info = autosched::analyze(p);
    double total = 0;
    for (const Kernel &k : r.plan.kernels) {
        double t_mem = (k.bytes_read + k.bytes_written) / m.bytes_per_s();
        const FuncInfo &root = info.at(k.root);
        if (k.kind == KernelKind::Gemm) {
            std::string F;
            for (const auto &f : k.funcs)
                if (info.at(f).is_matmul && F.empty()) F = f;
            if (!F.empty()) {
                const FuncInfo &g = info.at(F);
                bool epilogue = F != k.root;
                GemmTile t = autosched::gemm_tile(g, epilogue, m, knobs);
                if (t.ok) {
                    double batch = 1;
                    const auto &e = g.lf->extents;
                    for (size_t d = 0; d + 2 < e.size(); d++) batch *= (double)e[d];
                    double tasks = epilogue ? batch * std::ceil((double)t.M / t.MC) * std::ceil((double)t.N / t.NCt)
                                            : batch * std::ceil((double)t.M / t.MR);
                    double t_flop = k.flops / (peak_flops(m) * micro_efficiency(t, m, g.esize));
                    double b_reload = epilogue ? tasks * t.K * t.NCt * g.esize / l2_bytes_per_s(m) : 0;
                    double tk = std::max(t_mem, t_flop) + b_reload;
                    total += tk + parallel_overhead(tk, tasks, m);
                    continue;
                }
            }
        }
        double tk = k.est_ms / 1e3;
        if (k.kind == KernelKind::Pointwise || k.kind == KernelKind::Rows) {
            double task = knobs.task_elems > 0 ? knobs.task_elems : (double)autosched::kTaskElems;
            double rows = root.lf->extents.empty() ? 1 : (double)root.lf->extents[0];
            double tasks = std::min(rows, std::max(root.points / task, 8.0 * m.cores));
            tk += parallel_overhead(tk, tasks, m);
        }
        total += tk;
    }
    return total * 1e3;
}

std::vector<ScheduleCandidate> schedule_candidates(const LoweredPipeline &p, const Halide::Target &target,
                                                   const MachineModel &m, size_t max_candidates) {
    std::vector<ScheduleCandidate> out;
    std::set<std::string> seen;
    AutoScheduleResult base = auto_schedule_with_plan(p, target, m, {});
    // What the model's streamed outputs would cost with normal stores: each output line is read
    // before it is written (the read for ownership).
    double rfo_ms = 0;
    for (const Kernel &k : base.plan.kernels)
        if (streamed(base.schedule, k.root)) rfo_ms += k.bytes_written / m.bytes_per_s() * 1e3;
    auto add = [&](const ScheduleKnobs &k, AutoScheduleResult r) {
        if (!seen.insert(statements_key(r.schedule)).second) return;
        ScheduleCandidate c;
        c.knobs = k;
        c.label = k.describe();
        c.est_ms = estimate_ms(p, r, m, k) + (k.streaming_stores ? 0 : rfo_ms);
        c.schedule = std::move(r.schedule);
        out.push_back(std::move(c));
    };
    // Which knobs can matter here, read off the model's own plan.
    bool gemm = false, pointwise = false, block = false, rows = false, conv = false;
    for (const Kernel &k : base.plan.kernels) {
        gemm |= k.kind == KernelKind::Gemm;
        conv |= k.kind == KernelKind::Conv;
        pointwise |= k.kind == KernelKind::Pointwise || k.kind == KernelKind::Rows;
    }
    for (const auto &d : base.plan.decisions) {
        block |= d.placement == Placement::Block;
        rows |= d.placement == Placement::Row;
    }
    std::vector<ScheduleKnobs> sets;
    if (gemm) {
        const std::pair<int, int> shapes[] = {{0, 0}, {4, 2}, {6, 2}, {12, 2}, {8, 1}, {4, 4}, {6, 4}};
        for (auto [mr, nrv] : shapes)
            for (int tiles : {0, 4, 16})
                for (int kc : {0, 128, 512}) {
                    ScheduleKnobs k;
                    k.gemm_mr = mr, k.gemm_nr_vectors = nrv, k.gemm_tile_kernels = tiles, k.gemm_kc = kc;
                    sets.push_back(k);
                }
    }
    if (block) {
        ScheduleKnobs k;
        k.gemm_prologue = false;
        sets.push_back(k);
    }
    if (rows) {
        ScheduleKnobs k;
        k.row_stats = false;
        sets.push_back(k);
    }
    if (pointwise)
        for (int t : {32768, 1 << 20}) {  // an eighth (the old default) and four times kTaskElems
            ScheduleKnobs k;
            k.task_elems = t;
            sets.push_back(k);
        }
    if (rfo_ms > 0) {  // normal stores, charged their read for ownership
        ScheduleKnobs k;
        k.streaming_stores = false;
        sets.push_back(k);
    }
    if (conv) {  // looped taps: the same estimate, half the compile; the timing decides
        ScheduleKnobs k;
        k.conv_unroll_taps = false;
        sets.push_back(k);
        ScheduleKnobs nchw;  // conv inputs read as their producers store them
        nchw.stage_conv_inputs = false;
        sets.push_back(nchw);
    }
    for (double us : {2.0, 200.0}) {  // the serial-kernel threshold (kMinParallelMicros) both ways
        ScheduleKnobs k;
        k.min_parallel_us = us;
        sets.push_back(k);
    }
    add({}, std::move(base));
    for (const auto &k : sets) {
        if (k == ScheduleKnobs{}) continue;
        add(k, auto_schedule_with_plan(p, target, m, k));
    }
    std::stable_sort(out.begin() + 1, out.end(),
                     [](const ScheduleCandidate &a, const ScheduleCandidate &b) { return a.est_ms < b.est_ms; });
    if (max_candidates > 0 && out.size() > max_candidates) out.resize(max_candidates);
    return out;
}

}  // namespace loom
