#include "autoschedule/autoschedule.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "autoschedule/autoschedule_internal.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom {

std::string ScheduleKnobs::describe() const {
    std::vector<std::string> parts;
    if (gemm_mr > 0 || gemm_nr_vectors > 0)
        parts.push_back(str_cat("gemm ", gemm_mr > 0 ? std::to_string(gemm_mr) : std::string("auto"), "x",
                                gemm_nr_vectors > 0 ? std::to_string(gemm_nr_vectors) + "v" : std::string("auto")));
    if (gemm_tile_kernels > 0) parts.push_back(str_cat("tile ", gemm_tile_kernels, " kernels"));
    if (gemm_kc > 0) parts.push_back(str_cat("kc ", gemm_kc));
    if (!gemm_prologue) parts.push_back("no prologue fusion");
    if (!row_stats) parts.push_back("row stats at root");
    if (task_elems > 0) parts.push_back(str_cat("task ", task_elems, " elems"));
    if (min_parallel_us > 0) parts.push_back(str_cat("parallel from ", min_parallel_us, " us"));
    if (!conv_unroll_taps) parts.push_back("conv taps looped");
    if (!streaming_stores) parts.push_back("no streaming stores");
    if (!tile_wrappers) parts.push_back("no tile wrappers");
    if (!stage_conv_inputs) parts.push_back("1x1 conv inputs unstaged");
    std::string out;
    for (const auto &x : parts) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? "model's choice" : out;
}

bool ScheduleKnobs::operator==(const ScheduleKnobs &o) const {
    return gemm_mr == o.gemm_mr && gemm_nr_vectors == o.gemm_nr_vectors &&
           gemm_tile_kernels == o.gemm_tile_kernels && gemm_kc == o.gemm_kc &&
           gemm_prologue == o.gemm_prologue && row_stats == o.row_stats && task_elems == o.task_elems &&
           min_parallel_us == o.min_parallel_us && conv_unroll_taps == o.conv_unroll_taps &&
           streaming_stores == o.streaming_stores && tile_wrappers == o.tile_wrappers &&
           stage_conv_inputs == o.stage_conv_inputs;
}

AutoScheduleResult auto_schedule_with_plan(const LoweredPipeline &p, const Halide::Target &target,
                                           const MachineModel &m, const ScheduleKnobs &knobs) {
    AutoScheduleResult r;
    r.plan = plan_fusion(p, m, knobs);
    auto info = autosched::analyze(p);
    std::vector<std::string> func_names = p.func_names();
    for (const auto &in : p.inputs) func_names.push_back(in.name());
    Schedule &s = r.schedule;
    s.target = target.to_string();
    s.header_comments.push_back("auto-scheduled by loom's cost model for " + m.describe());
    s.header_comments.push_back(str_cat(r.plan.kernels.size(), " kernels for ", p.funcs.size(), " Funcs"));
    for (const Kernel &k : r.plan.kernels) {
        KernelTiling t;
        autosched::emit_kernel(p, info, r.plan, k, target, m, knobs, s.statements, func_names, t);
        if (t.path.empty()) t.path = kernel_kind_name(k.kind);
        r.tiling[k.root] = t;
    }
    return r;
}

KernelTiling AutoScheduleResult::tiling_of(const std::string &root) const {
    auto it = tiling.find(root);
    return it == tiling.end() ? KernelTiling{} : it->second;
}

Schedule auto_schedule(const LoweredPipeline &p, const Halide::Target &target, const MachineModel &m) {
    return auto_schedule_with_plan(p, target, m).schedule;
}

Schedule auto_schedule(const LoweredPipeline &p, const Halide::Target &target) {
    return auto_schedule(p, target, detect_machine(target));
}

const char *kernel_kind_name(KernelKind kind) {
    switch (kind) {
    case KernelKind::Pointwise: return "pointwise";
    case KernelKind::Rows: return "rows";
    case KernelKind::Reduction: return "reduction";
    case KernelKind::Gemm: return "gemm";
    case KernelKind::Conv: return "conv";
    case KernelKind::Generic: return "generic";
    }
    return "?";
}

namespace {
const char *placement_name(Placement pl) {
    switch (pl) {
    case Placement::Root: return "root";
    case Placement::Inline: return "inline";
    case Placement::Row: return "per row";
    case Placement::Tile: return "per tile";
    case Placement::Block: return "per row block";
    }
    return "?";
}
}  // namespace

std::string format_report(const LoweredPipeline &p, const AutoScheduleResult &r, const MachineModel &m,
                          const std::map<std::string, double> *measured) {
    std::ostringstream os;
    char buf[256];
    os << "machine: " << m.describe() << "\n";
    os << r.plan.kernels.size() << " kernels for " << p.funcs.size() << " Funcs\n";
    double tb = 0, tf = 0, tt = 0, tm = 0;
    // Kernels with a measurable time whose estimate is within 2x of it, and their share of the time.
    int sized = 0, close = 0;
    double close_ms = 0;
    for (size_t q = 0; q < r.plan.kernels.size(); q++) {
        const Kernel &k = r.plan.kernels[q];
        std::snprintf(buf, sizeof buf, "\nkernel %zu: %s  (%s, loop nest of %s)\n", q, k.name.c_str(),
                      kernel_kind_name(k.kind), k.root.c_str());
        os << buf << "  nodes:";
        for (const auto &n : k.nodes) os << " " << n;
        os << "\n";
        for (const auto &f : k.funcs) {
            const FuncDecision *d = r.plan.decision(f);
            const LoweredFunc *lf = p.find(f);
            os << "  " << f << " [" << (lf ? lf->op : "?") << "] " << placement_name(d->placement) << ": "
               << d->why << "\n";
        }
        std::snprintf(buf, sizeof buf, "  est: %.3f MB read, %.3f MB written, %.3f MFLOP, %.3f ms\n",
                      k.bytes_read / 1e6, k.bytes_written / 1e6, k.flops / 1e6, k.est_ms);
        os << buf;
        if (measured) {
            double ms = 0;
            for (const auto &f : k.funcs)
                if (auto it = measured->find(f); it != measured->end()) ms += it->second;
            tm += ms;
            if (ms > 0 && k.est_ms > 0) {
                std::snprintf(buf, sizeof buf, "  measured: %.3f ms (estimate / measured %.2f)\n", ms, k.est_ms / ms);
                sized++;
                if (k.est_ms / ms >= 0.5 && k.est_ms / ms <= 2) close++, close_ms += ms;
            } else if (ms > 0) {
                std::snprintf(buf, sizeof buf, "  measured: %.3f ms (no estimate)\n", ms);
            } else {
                std::snprintf(buf, sizeof buf, "  measured: %.3f ms (too short for the profiler's samples)\n", ms);
            }
            os << buf;
        }
        os << "  schedule:\n";
        std::set<std::string> mine(k.funcs.begin(), k.funcs.end());
        for (const auto &st : r.schedule.statements) {
            bool ours = mine.count(st.func) > 0;
            for (const auto &f : k.funcs) ours |= st.func.rfind(f + "_", 0) == 0 && !p.find(st.func);
            if (!ours) continue;
            ScheduleStatement bare = st;
            bare.comments.clear();
            std::istringstream lines(print_statement(bare));
            for (std::string line; std::getline(lines, line);) os << "    " << line << "\n";
        }
        tb += k.bytes_read + k.bytes_written;
        tf += k.flops;
        tt += k.est_ms;
    }
    std::snprintf(buf, sizeof buf, "\ntotal: %.3f MB moved, %.3f MFLOP, est %.3f ms\n", tb / 1e6, tf / 1e6, tt);
    os << buf;
    if (measured && tm > 0) {
        std::snprintf(buf, sizeof buf,
                      "measured %.3f ms (Halide's sampling profiler); %d of %d sampled kernels estimated within 2x, "
                      "%.0f%% of the measured time\n",
                      tm, close, sized, 100 * close_ms / tm);
        os << buf;
    }
    return os.str();
}

std::string fusion_dot(const LoweredPipeline &p, const FusionPlan &plan, bool after) {
    std::ostringstream os;
    os << "digraph " << (after ? "after_fusion" : "before_fusion") << " {\n  rankdir=TB;\n"
       << "  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
    std::set<std::string> inputs(p.input_names.begin(), p.input_names.end());
    for (const auto &in : p.input_names) os << "  \"in:" << in << "\" [label=\"" << in << "\", shape=ellipse];\n";
    auto node = [&](const LoweredFunc &f, const std::string &indent) {
        const FuncDecision *d = plan.decision(f.name);
        std::string style = f.is_output ? ", style=bold" : "";
        if (after && d && d->placement == Placement::Inline) style = ", style=dashed";
        os << indent << "\"" << f.name << "\" [label=\"" << f.name << "\\n" << f.op << " " ;
        for (size_t k = 0; k < f.extents.size(); k++) os << (k ? "x" : "") << f.extents[k];
        if (after && d) os << "\\n" << placement_name(d->placement);
        os << "\"" << style << "];\n";
    };
    if (after) {
        for (size_t q = 0; q < plan.kernels.size(); q++) {
            const Kernel &k = plan.kernels[q];
            os << "  subgraph cluster_" << q << " {\n    label=\"" << k.name << "\";\n    style=rounded;\n";
            for (const auto &f : k.funcs)
                if (const LoweredFunc *lf = p.find(f)) node(*lf, "    ");
            os << "  }\n";
        }
    } else {
        for (const auto &f : p.funcs) node(f, "  ");
    }
    for (const auto &f : p.funcs) {
        for (const auto &in : f.input_reads) os << "  \"in:" << in << "\" -> \"" << f.name << "\";\n";
        for (const auto &pr : f.producers) os << "  \"" << pr << "\" -> \"" << f.name << "\";\n";
    }
    os << "}\n";
    return os.str();
}

}  // namespace loom
