#include "cli/save_or_recompute.h"

#include <iomanip>
#include <map>
#include <sstream>

namespace loom::cli {

SaveOrRecompute save_or_recompute(const LoweredPipeline &p, const AutoScheduleResult &r,
                                  const std::set<std::string> &forward_nodes) {
    std::map<std::string, const LoweredFunc *> by_name;
    for (const auto &f : p.funcs) by_name[f.name] = &f;
    SaveOrRecompute s;
    std::ostringstream t;
    t << "save or recompute: forward activations the backward reads (the cost model's inline-or-store choice)\n";
    for (const auto &f : p.funcs) {
        if (!forward_nodes.count(f.node)) continue;
        int backward_readers = 0;
        for (const auto &c : f.consumers) {
            auto it = by_name.find(c);
            if (it != by_name.end() && !forward_nodes.count(it->second->node)) backward_readers++;
        }
        if (!backward_readers) continue;
        double points = 1;
        for (auto e : f.extents) points *= (double)e;
        const FuncDecision *d = r.plan.decision(f.name);
        bool inlined = d && d->placement == Placement::Inline;
        t << "  " << std::left << std::setw(34) << f.name << std::setw(20) << f.op;
        if (inlined) {
            double flops = points * f.flops_per_point * (double)f.consumers.size();
            s.recomputed++;
            s.recompute_flops += flops;
            t << "recompute  ~" << std::fixed << std::setprecision(1) << flops / 1e3 << " KFLOP in " << f.consumers.size()
              << " reader(s)";
        } else if (d && d->placement != Placement::Root) {
            t << "fused      computed inside kernel " << d->kernel << ", where its readers are";
        } else {
            double bytes = points * 4;
            s.saved++;
            s.saved_bytes += bytes;
            t << "save       " << std::fixed << std::setprecision(1) << bytes / 1024 << " KiB, read by " << backward_readers
              << " backward Func(s)";
        }
        if (d && !d->why.empty()) t << "  (" << d->why << ")";
        t << "\n";
    }
    t << "  " << s.saved << " saved (" << std::fixed << std::setprecision(1) << s.saved_bytes / 1024 << " KiB), "
      << s.recomputed << " recomputed (~" << s.recompute_flops / 1e3 << " KFLOP)\n";
    s.table = t.str();
    return s;
}

}  // namespace loom::cli
