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

// The loop named \p var (as a schedule writes it) of any stage of \p f, or nullptr.
const Dim *find_loop(const Halide::Func &f, const std::string &var) {
    for (int stage = -1; stage < f.num_update_definitions(); stage++) {
        const auto &dims = stage < 0 ? f.function().definition().schedule().dims()
                                     : f.function().update(stage).schedule().dims();
        for (const auto &d : dims)
            if (schedule_name(d.var) == var) return &d;
    }
    return nullptr;
}

// A reduction computed at a GPU block (compute_at a gpu_blocks loop of its consumer) lives in
// shared memory. When one of its updates runs a serial reduction loop with no thread loop around
// it, one thread does the whole loop there: every step stores the accumulator to shared memory and
// the next load waits behind the store, and the init is a block stage of its own, with a barrier
// (bench/DECISIONS.md#d39-gpu-statistics-in-registers).
void lint_block_accumulators(const AppliedSchedule &applied, std::vector<std::string> &out) {
    const Schedule &s = applied.schedule;
    for (const auto &st : s.statements) {
        if (st.stage != -1) continue;
        const PrimitiveCall *at = nullptr;
        bool in_registers = false;
        for (const auto &c : st.calls) {
            if (c.name == "compute_at" && c.args.size() == 2) at = &c;
            if (c.name == "store_in" && !c.args.empty() && c.args[0].name == "Register") in_registers = true;
        }
        auto f = applied.funcs.find(st.func);
        if (!at || in_registers || f == applied.funcs.end() || !f->second.defined()) continue;
        auto consumer = applied.funcs.find(at->args[0].name);
        if (consumer == applied.funcs.end() || !consumer->second.defined()) continue;
        const Dim *level = find_loop(consumer->second, at->args[1].name);
        if (!level || level->for_type != ForType::GPUBlock) continue;
        for (int stage = 0; stage < f->second.num_update_definitions(); stage++) {
            const auto &dims = f->second.function().update(stage).schedule().dims();
            bool threads = false;
            const Dim *serial = nullptr;
            for (const auto &d : dims) {
                threads |= is_thread(d);
                if (!serial && d.is_rvar() && d.for_type == ForType::Serial) serial = &d;
            }
            if (threads || !serial) continue;
            const std::string &name = st.func, &var = at->args[1].name, &cons = at->args[0].name;
            std::string what = place(s, name, -1) + name + ": computed at the block loop " + var + " of " + cons +
                               ", it lives in shared memory, and update(" + std::to_string(stage) +
                               ") runs its loop over " + schedule_name(serial->var) +
                               " in one thread: each step stores the accumulator to shared memory and reloads it. ";
            if (f->second.args().empty()) {  // no pure var for a wrapper's thread loop
                out.push_back(what + "It has no pure var to place it in one thread's registers at: compute it at "
                                     "root (" + name + ".compute_root()), or keep the reduced dims (keepdims=1)");
                break;
            }
            std::string inner = schedule_name(f->second.function().definition().schedule().dims().front().var);
            out.push_back(what + "Sum it in registers and store it once through a wrapper the block reads: " + name +
                          ".in() as " + name + "_w; " + name + "_w.compute_at(" + cons + ", " + var +
                          ").gpu_threads(" + inner + "); " + name + ".compute_at(" + name + "_w, " + inner +
                          ").store_in(MemoryType::Register);");
            break;
        }
    }
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
    lint_block_accumulators(applied, out);
    return out;
}

}  // namespace loom
