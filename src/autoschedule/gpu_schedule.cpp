/// \file
/// gpu_auto_schedule: plans where every Func goes (gpu_kernel_plan.cpp), writes the inlined Funcs'
/// statements, then hands each kernel to the emitter of its kind (gpu_schedule_internal.h).

#include "autoschedule/gpu_schedule.h"

#include "autoschedule/gpu_schedule_internal.h"
#include "support/error.h"

namespace loom {

using namespace gpu_autosched;

Schedule gpu_auto_schedule(const LoweredPipeline &p, const Halide::Target &target) {
    user_check(target.has_gpu_feature(), "gpu_auto_schedule: target ", target.to_string(), " has no GPU feature");
    Schedule s;
    s.target = target.to_string();
    s.header_comments.push_back("gpu_auto_schedule: one kernel per fusion group; pointwise chains inlined;");
    s.header_comments.push_back("row reductions one block per row (8-byte vectors, statistics combined in registers;");
    s.header_comments.push_back("short rows and short segments of a row reduced within a warp by register shuffles);");
    s.header_comments.push_back("elsewhere 4-wide vector accesses per thread");
    const KernelPlan plan = plan_kernels(p);
    for (const auto &f : p.funcs) {
        if (f.is_extern) continue;  // a library call, computed at root by lowering
        if (plan.inlined.count(f.name)) {
            ScheduleStatement st(f.name);
            st.comments.push_back("pointwise: fused into its consumers");
            st.add("compute_inline");
            s.statements.push_back(st);
        }
    }
    GpuCtx ctx{p, target, plan, s};
    for (const auto &f : p.funcs) {
        if (f.is_extern || plan.inlined.count(f.name) || plan.owner.count(f.name)) continue;
        if (num_updates(f) > 0) ctx.reduction_kernel(f);
        else if (auto g = plan.gemm_of.find(f.name); g != plan.gemm_of.end()) ctx.gemm_kernel(f, *p.find(g->second));
        else if (auto c = plan.conv_of.find(f.name); c != plan.conv_of.end()) ctx.conv_kernel(f, *p.find(c->second));
        else if (plan.rows.count(f.name)) ctx.row_kernel(f);
        else ctx.pointwise_kernel(f);
    }
    return s;
}

}  // namespace loom
