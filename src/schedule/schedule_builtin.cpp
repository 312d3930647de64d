#include "schedule/schedule_builtin.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "schedule/schedule_header.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_validate.h"
#include "support/cores.h"
#include "support/error.h"

namespace loom {

namespace {

int64_t extent_of(const LoweredFunc &f, const std::string &v) {
    for (size_t i = 0; i < f.vars.size(); i++)
        if (f.vars[i] == v && i < f.extents.size()) return f.extents[i];
    return -1;  // unknown: treat as large
}

std::string fresh_name(const LoweredFunc &f, const std::string &want) {
    std::string n = want;
    while (std::find(f.vars.begin(), f.vars.end(), n) != f.vars.end()) n += "_";
    return n;
}

// Pure vars and RVars (schedule names) of update k, innermost first, from the Halide definition.
void update_dims(const LoweredFunc &f, int k, std::vector<std::string> &pure, std::vector<std::string> &rvars) {
    std::map<std::string, std::string> sched_of;
    if (k < (int)f.update_rvars.size())
        for (const auto &r : f.update_rvars[k]) {
            size_t dot = r.find('.');
            sched_of[dot == std::string::npos ? r + "$x" : r.substr(0, dot) + "$" + r.substr(dot + 1)] = r;
        }
    for (const auto &d : f.func.function().update(k).schedule().dims()) {
        if (d.var == Halide::Var::outermost().name()) continue;
        if (d.is_rvar()) {
            auto it = sched_of.find(d.var);
            std::string n = d.var;
            std::replace(n.begin(), n.end(), '$', '.');
            rvars.push_back(it != sched_of.end() ? it->second : n);
        } else {
            pure.push_back(d.var);
        }
    }
}

// CPU parallel + vectorize over \p pure (innermost first) of one stage.
void cpu_stage(ScheduleStatement &st, const LoweredFunc &f, const std::vector<std::string> &pure,
               const std::vector<std::string> &rvars, const Halide::Target &t) {
    if (pure.empty()) return;
    int w = t.natural_vector_size(halide_type(f.dtype));
    int cores = usable_cores();
    std::string inner = pure.front();
    int64_t ext_in = extent_of(f, inner);
    bool vec = w > 1 && (ext_in < 0 || ext_in >= w);
    bool multiple = ext_in >= 0 && ext_in % w == 0;
    if (vec && !rvars.empty() && pure.size() == 1) {
        // A 1-D reduction (a row sum): vector accumulators need the pure var inside the reduction,
        // which would leave the reduction as the outermost, serial loop around the thread pool.
        // Split it: vectors inside, the blocks of vectors outside and parallel.
        std::string io = fresh_name(f, inner + "o"), ii = fresh_name(f, inner + "i");
        if (multiple) st.add("split", {inner, io, ii, w});
        else st.add("split", {inner, io, ii, w, ScheduleArg::tail("GuardWithIf")});
        std::vector<ScheduleArg> order = {ii};
        for (const auto &r : rvars) order.push_back(r);
        order.push_back(io);
        st.add("reorder", order);
        st.add("vectorize", {ii});
        st.add("parallel", {io});
        return;
    }
    if (vec && !rvars.empty()) {
        // The vectorized pure var goes inside the reduction loops: vector accumulators.
        std::vector<ScheduleArg> order = {inner};
        for (const auto &r : rvars) order.push_back(r);
        for (size_t i = 1; i < pure.size(); i++) order.push_back(pure[i]);
        st.add("reorder", order);
    }
    if (vec) {
        // An explicit tail: Halide's default for an intermediate rounds the loop up and reads past
        // the end of the inputs (constant weights have no slack). ShiftInwards recomputes a few
        // points of a pure stage; an update cannot be recomputed, so it guards its tail.
        if (multiple) st.add("vectorize", {inner, w});
        else st.add("vectorize", {inner, w, ScheduleArg::tail(rvars.empty() && st.stage < 0 ? "ShiftInwards" : "GuardWithIf")});
    }
    std::string outer = pure.back();
    if (pure.size() >= 3) {
        int64_t e = extent_of(f, outer);
        if (e >= 0 && e < 2 * cores) {
            std::string next = pure[pure.size() - 2];
            std::string fused = fresh_name(f, outer + "_" + next);
            st.add("fuse", {next, outer, fused});
            outer = fused;
        }
    }
    st.add("parallel", {outer});
}

// A tile size no larger than the var's extent (a power of two): the default ShiftInwards tail of a
// pure definition then stays inside [0, extent), which matters when the Func is bound to its shape
// (an extern's operand).
int tile_for(const LoweredFunc &f, const std::string &v, int want) {
    int64_t e = extent_of(f, v);
    if (e < 0) return want;
    int t = 1;
    while (t * 2 <= want && t * 2 <= e) t *= 2;
    return t;
}

// An update stage's tiles: Halide's Auto tail is RoundUp for an update's pure vars, which computes
// past the extent (a bound Func then fails at run time: ResNet-18's 56-wide max pool in 32-wide
// tiles, read by a cuDNN call). True where a tile does not divide its extent: GuardWithIf then.
bool update_needs_guard(const LoweredFunc &f, const std::vector<std::pair<std::string, int>> &tiles) {
    for (const auto &[v, t] : tiles) {
        int64_t e = extent_of(f, v);
        if (e < 0 || e % t != 0) return true;
    }
    return false;
}

void gpu_stage(ScheduleStatement &st, const LoweredFunc &f, const std::vector<std::string> &pure, bool update) {
    if (pure.empty()) {
        st.add("gpu_single_thread");
    } else if (pure.size() == 1) {
        const std::string &x = pure[0];
        int tx = tile_for(f, x, 256);
        std::vector<ScheduleArg> args = {x, fresh_name(f, x + "o"), fresh_name(f, x + "i"), tx};
        if (update && update_needs_guard(f, {{x, tx}})) args.push_back(ScheduleArg::tail("GuardWithIf"));
        st.add("gpu_tile", args);
    } else {
        const std::string &x = pure[0], &y = pure[1];
        int tx = tile_for(f, x, 32), ty = tile_for(f, y, 8);
        const std::string xo = fresh_name(f, x + "o"), yo = fresh_name(f, y + "o"), xi = fresh_name(f, x + "i"),
                          yi = fresh_name(f, y + "i");
        const bool guard = update && update_needs_guard(f, {{x, tx}, {y, ty}});
        // gridDim.z stops at 65535 (a global pool over [32, 2048, H, W] fuses to 65536): past it the
        // outer vars are blockIdx.x, the tile's blocks y and z.
        int64_t outer_extent = 1;
        for (size_t k = 2; k < pure.size(); k++) outer_extent *= std::max<int64_t>(1, extent_of(f, pure[k]));
        if (pure.size() > 2 && outer_extent > 65535) {
            for (auto [v, o, i, t] : {std::tuple{x, xo, xi, tx}, std::tuple{y, yo, yi, ty}}) {
                std::vector<ScheduleArg> split = {v, o, i, t};
                if (guard) split.push_back(ScheduleArg::tail("GuardWithIf"));
                st.add("split", split);
            }
            std::string outer = pure[2];
            for (size_t k = 3; k < pure.size(); k++) {
                std::string fused = fresh_name(f, outer + "_" + pure[k]);
                st.add("fuse", {outer, pure[k], fused});
                outer = fused;
            }
            st.add("reorder", {xi, yi, outer, xo, yo});
            st.add("gpu_threads", {xi, yi}).add("gpu_blocks", {outer, xo, yo});
            return;
        }
        std::vector<ScheduleArg> args = {x, y, xo, yo, xi, yi, tx, ty};
        if (guard) args.push_back(ScheduleArg::tail("GuardWithIf"));
        st.add("gpu_tile", args);
        // The outer vars (an NCHW pool's c and n) become the grid's z: left as host loops around
        // the kernel, they launched it once per channel (ResNet-18: ~1100 launches a run).
        if (pure.size() > 2) {
            std::string outer = pure[2];
            for (size_t k = 3; k < pure.size(); k++) {
                std::string fused = fresh_name(f, outer + "_" + pure[k]);
                st.add("fuse", {outer, pure[k], fused});
                outer = fused;
            }
            st.add("gpu_blocks", {outer});
        }
    }
}

std::vector<std::string> pure_inner_first(const LoweredFunc &f) {
    return std::vector<std::string>(f.vars.rbegin(), f.vars.rend());
}

int num_updates(const LoweredFunc &f) {
    return f.func.defined() ? f.func.num_update_definitions() : (int)f.update_rvars.size();
}

// Long sums: one serial accumulator over more than kLongSum terms loses accuracy (mse's mean over
// 2^24 floats: rel error 1.9e-4 against the reference, over the 1e-5 bound; 50000 terms on a GPU
// thread: 5.9e-6) and runs on one core or one thread.
// A one-RVar reduction of a Reduce* op (sum, mean, max, min…: associative, so rfactor applies) that
// long is, on the CPU, summed in chunks of kChunk terms, the chunks in parallel, then the partials
// added: what an eager framework's cascade sum does.
constexpr int64_t kLongSum = 16384, kChunk = 4096;

bool long_sum(const LoweredFunc &f, int k, const std::vector<std::string> &rvars) {
    return f.op.rfind("Reduce", 0) == 0 && rvars.size() == 1 && f.single_rvar_extent(k) > kLongSum;
}

bool few_outputs(const LoweredFunc &f) {
    int64_t points = 1;
    for (int64_t e : f.extents) points *= std::max<int64_t>(e, 1);
    return points <= 16;
}

// On a GPU, where the default for a reduction is otherwise one thread (mse over 2^26: one thread
// adding 67M floats): kGpuPartials accumulators or more, interleaved so that neighbouring threads
// read neighbouring elements (r = rxo * T + rxi, one thread per rxi), at most kChunk terms each,
// added into the output by float atomics.
constexpr int64_t kGpuPartials = 16384;

std::vector<ScheduleStatement> long_sum_statements(const LoweredFunc &f, int k, const std::string &rv, bool gpu) {
    int64_t n = f.single_rvar_extent(k);
    int64_t factor = kChunk;  // CPU: chunks of kChunk terms, one partial per chunk
    if (gpu) factor = (std::max(kGpuPartials, (n + kChunk - 1) / kChunk) + 255) / 256 * 256;  // GPU: partials
    std::string part = f.name + "_part", p = fresh_name(f, "p");
    std::string ro = fresh_name(f, "rxo"), ri = fresh_name(f, "rxi");
    ScheduleStatement up(f.name, k);
    up.comments.push_back("default: a sum of " + std::to_string(n) + " terms" +
                          (gpu ? " into " + std::to_string(factor) + " per-thread partials (accuracy, coalesced), added by atomics"
                               : " in chunks of " + std::to_string(kChunk) + " (accuracy), the chunks in parallel"));
    std::vector<ScheduleArg> split = {rv, ro, ri, factor};
    if (n % factor != 0) split.push_back(ScheduleArg::tail("GuardWithIf"));
    up.add("split", split).add("rfactor", {gpu ? ri : ro, p}, part);
    ScheduleStatement ps(part), pu(part, 0);
    ps.add("compute_root");
    if (!gpu) {
        pu.add("parallel", {p});
        return {up, ps, pu};
    }
    ScheduleStatement combine(f.name, k);
    combine.add("atomic").add("gpu_tile", {ri, fresh_name(f, "rxio"), fresh_name(f, "rxii"), 256});
    ps.add("gpu_tile", {p, fresh_name(f, "po"), fresh_name(f, "pi"), 256});
    // The serial loop over a thread's terms inside the thread loop.
    pu.add("reorder", {ro, p}).add("gpu_tile", {p, fresh_name(f, "po"), fresh_name(f, "pi"), 256});
    return {up, combine, ps, pu};
}

}  // namespace

std::vector<ScheduleStatement> default_statements(const LoweredFunc &f, const Halide::Target &target) {
    if (f.is_extern) return {};  // computed at root by lowering: nothing to schedule
    if (f.inline_by_default && !f.is_output) return {ScheduleStatement(f.name).add("compute_inline")};
    std::vector<ScheduleStatement> r;
    bool gpu = target.has_gpu_feature();
    ScheduleStatement pure(f.name);
    pure.add("compute_root");
    if (gpu) gpu_stage(pure, f, pure_inner_first(f), false);
    else cpu_stage(pure, f, pure_inner_first(f), {}, target);
    r.push_back(pure);
    for (int k = 0; k < num_updates(f); k++) {
        std::vector<std::string> pv, rv;
        update_dims(f, k, pv, rv);
        // On a GPU only for a few outputs: each output's partials are a kernel of their own (its pure
        // vars stay host loops), where the usual default gives every output a thread.
        if (long_sum(f, k, rv) && (!gpu || few_outputs(f))) {
            for (auto &st : long_sum_statements(f, k, rv[0], gpu)) r.push_back(st);
            continue;
        }
        ScheduleStatement up(f.name, k);
        if (gpu) gpu_stage(up, f, pv, true);
        else cpu_stage(up, f, pv, rv, target);
        if (!up.calls.empty()) r.push_back(up);
    }
    return r;
}

Schedule eager_schedule(const LoweredPipeline &p, const Halide::Target &target) {
    Schedule s;
    s.target = target.to_string();
    s.header_comments.push_back("eager: every Func computed at root with the default schedule (op-internal helpers inlined)");
    for (const auto &f : p.funcs)
        for (auto &st : default_statements(f, target)) s.statements.push_back(st);
    return s;
}

Schedule inline_schedule(const LoweredPipeline &p, const Halide::Target &target) {
    Schedule s;
    s.target = target.to_string();
    s.header_comments.push_back("inline: pointwise Funcs inlined, the default for the rest");
    for (const auto &f : p.funcs) {
        if (f.is_pointwise && !f.is_output && num_updates(f) == 0) {
            s.statements.push_back(ScheduleStatement(f.name).add("compute_inline"));
        } else {
            for (auto &st : default_statements(f, target)) s.statements.push_back(st);
        }
    }
    return s;
}

void fill_defaults(Schedule &s, const LoweredPipeline &p, const Halide::Target &target) {
    std::set<std::string> mentioned;
    for (const auto &st : s.statements) mentioned.insert(st.func);
    std::vector<ScheduleStatement> extra;
    for (const auto &f : p.funcs) {
        if (mentioned.count(f.name)) continue;
        auto d = default_statements(f, target);
        if (d.empty()) continue;
        d.front().comments.push_back("default: " + f.name + " is not in the schedule");
        extra.insert(extra.end(), d.begin(), d.end());
    }
    if (target.has_gpu_feature()) {
        // A root Func of the file without any GPU mapping would run on the host: give each such
        // stage the default mapping, unless the file changed its loops (then the vars differ).
        static const std::set<std::string> loop_changes = {"split", "fuse", "tile", "reorder", "gpu_tile",
                                                           "gpu_blocks", "gpu_threads", "gpu_single_thread",
                                                           "parallel", "vectorize", "rfactor"};
        for (const auto &f : p.funcs) {
            if (!mentioned.count(f.name)) continue;
            bool root = false;
            std::map<int, bool> touched;
            for (const auto &st : s.statements) {
                if (st.func != f.name) continue;
                for (const auto &c : st.calls) {
                    if (c.name == "compute_root") root = true;
                    if (c.name == "compute_inline" || c.name == "compute_at") root = false;
                    if (loop_changes.count(c.name)) touched[st.stage] = true;
                }
            }
            if (!root) continue;
            bool rfactored = false;  // a default long sum made a partial Func: it needs its own statements
            for (const auto &d : default_statements(f, target)) {
                if (d.func != f.name) {
                    if (rfactored) extra.push_back(d);
                    continue;
                }
                if (touched[d.stage]) continue;
                for (const auto &c : d.calls) rfactored |= c.name == "rfactor";
                ScheduleStatement st = d;
                st.calls.erase(std::remove_if(st.calls.begin(), st.calls.end(),
                                              [](const PrimitiveCall &c) { return c.name == "compute_root"; }),
                               st.calls.end());
                if (st.calls.empty()) continue;
                st.comments = {"default GPU mapping: " + st.stage_name() + " has none in the schedule"};
                extra.push_back(st);
            }
        }
    }
    s.statements.insert(s.statements.end(), extra.begin(), extra.end());
}

LowerOptions lowering_for_schedule(LowerOptions lo, const std::string &spec) {
    if (spec.empty() || spec == "eager" || spec == "inline")
        lo.block_conv_weights = lo.block_matmul_weights = lo.channels_last_depthwise_filters = false;
    return lo;
}

Schedule resolve_schedule(const LoweredPipeline &p, const Halide::Target &target, const std::string &spec,
                          const AutoscheduleFn &autoschedule, std::vector<std::string> *warnings,
                          const std::string &model_sha256) {
    if (spec.empty() || spec == "eager") return eager_schedule(p, target);
    if (spec == "inline") return inline_schedule(p, target);
    Schedule s;
    if (spec == "auto") {
        user_check(bool(autoschedule), "schedule 'auto' needs the auto-scheduler, which this build does not "
                                       "provide here; valid: eager, inline or a schedule file");
        s = autoschedule(p, target);
    } else {
        std::ifstream probe(spec);
        user_check(bool(probe), "cannot read schedule file '", spec,
                   "'; valid schedules: eager, inline, auto or the path of a .sched file");
        s = read_schedule_file(spec);
        auto w = check_schedule_header(s, target, model_sha256);
        if (warnings) warnings->insert(warnings->end(), w.begin(), w.end());
    }
    fill_defaults(s, p, target);
    return s;
}

}  // namespace loom
