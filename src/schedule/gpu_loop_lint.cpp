#include "schedule/gpu_loop_lint.h"

#include "schedule/schedule_internal.h"

namespace loom {

namespace {

using Halide::Internal::Dim;
using Halide::Internal::ForType;

bool is_thread(const Dim &d) { return d.for_type == ForType::GPUThread || d.for_type == ForType::GPULane; }

// A Halide loop name as a schedule writes it: the last split component ("r$x.r_xo.r_xoo" →
// "r_xoo", "u.uw" → "uw"), an RVar's own name with a dot ("r$x" → "r.x").
std::string schedule_name(const std::string &v) {
    std::string s = v.substr(v.rfind('.') + 1);
    for (auto &c : s)
        if (c == '$') c = '.';
    return s;
}

// "file:line:col: " of the statement that schedules \p func's stage \p stage, or of the file.
std::string place(const Schedule &s, const std::string &func, int stage) {
    for (const auto &st : s.statements)
        if (st.func == func && st.stage == stage) return sched_internal::where(st.loc, s.file);
    return s.file.empty() ? "" : s.file + ": ";
}

}  // namespace

std::vector<std::string> lint_gpu_loops(const AppliedSchedule &applied, const LoweredPipeline &p) {
    std::vector<std::string> out;
    for (const auto &[name, f] : applied.funcs) {
        // (Inlined Funcs have no thread loops; the compute level itself cannot be read before
        // lowering locks it.)
        if (!f.defined()) continue;
        const LoweredFunc *lf = p.find(name);
        if (lf && lf->is_extern) continue;
        for (int stage = -1; stage < f.num_update_definitions(); stage++) {
            const auto &dims = stage < 0 ? f.function().definition().schedule().dims()
                                         : f.function().update(stage).schedule().dims();
            int outer_thread = -1;  // dims are innermost first
            for (int i = 0; i < (int)dims.size(); i++)
                if (is_thread(dims[i])) outer_thread = i;
            if (outer_thread < 0) continue;
            for (int i = outer_thread + 1; i < (int)dims.size(); i++) {
                const Dim &d = dims[i];
                // Reduction loops only: an outer pure var of a Func computed per block often has one
                // iteration there (the row a block reduces), which the schedule alone cannot tell.
                if (d.for_type != ForType::Serial || !d.is_rvar()) continue;
                bool block_outside = false;
                for (int j = i + 1; j < (int)dims.size(); j++) block_outside |= dims[j].for_type == ForType::GPUBlock;
                std::string label = stage < 0 ? name : name + ".update(" + std::to_string(stage) + ")";
                std::string what = block_outside ? "between the block and thread loops: unless Halide can swap the "
                                                   "two (not across an unrolled body), each iteration runs the thread "
                                                   "loop again, with a block barrier after it"
                                                 : "outside the GPU thread loops: unless Halide can swap them (not "
                                                   "across an unrolled body), each iteration runs the thread loops "
                                                   "again, with a block barrier, or launches the kernel again";
                std::string loop = schedule_name(d.var), thread = schedule_name(dims[outer_thread].var);
                out.push_back(place(applied.schedule, name, stage) + label + ": the serial loop over " + loop +
                              " runs " + what + "; move it inside the thread vars (reorder(" + loop + ", " + thread +
                              ")) or map it to the grid (gpu_blocks)");
                break;  // one warning per stage
            }
        }
    }
    return out;
}

}  // namespace loom
