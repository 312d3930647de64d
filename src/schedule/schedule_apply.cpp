#include "schedule/schedule_apply.h"

#include <algorithm>
#include <regex>

#include "graph/error.h"
#include "schedule/schedule_internal.h"
#include "schedule/schedule_validate.h"

namespace Halide::Internal {
// Exported by libHalide 14 but not declared in Halide.h: the text Pipeline::print_loop_nest prints.
std::string print_loop_nest(const std::vector<Function> &outputs);
}  // namespace Halide::Internal

namespace loom {

using namespace sched_internal;

std::string halide_error_text(const std::exception &e) {
    std::string s = e.what();
    if (s.rfind("Error: ", 0) == 0) s = s.substr(7);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

namespace {

using Halide::VarOrRVar;

const DimModel *find_dim(const StageModel &s, const std::string &n) {
    int d = s.find(n);
    return d < 0 ? nullptr : &s.dims[d];
}

VarOrRVar as_var(const DimModel &d) {
    return d.rvar ? VarOrRVar(Halide::RVar(d.halide_name)) : VarOrRVar(Halide::Var(d.halide_name));
}

Halide::TailStrategy tail_of(const ScheduleArg &a) {
    static const std::map<std::string, Halide::TailStrategy> m = {
        {"RoundUp", Halide::TailStrategy::RoundUp},
        {"GuardWithIf", Halide::TailStrategy::GuardWithIf},
        {"Predicate", Halide::TailStrategy::Predicate},
        {"PredicateLoads", Halide::TailStrategy::PredicateLoads},
        {"PredicateStores", Halide::TailStrategy::PredicateStores},
        {"ShiftInwards", Halide::TailStrategy::ShiftInwards},
        {"Auto", Halide::TailStrategy::Auto}};
    return m.at(a.name);
}

Halide::MemoryType memory_of(const ScheduleArg &a) {
    static const std::map<std::string, Halide::MemoryType> m = {
        {"Auto", Halide::MemoryType::Auto},         {"Heap", Halide::MemoryType::Heap},
        {"Stack", Halide::MemoryType::Stack},       {"Register", Halide::MemoryType::Register},
        {"GPUShared", Halide::MemoryType::GPUShared}, {"GPUTexture", Halide::MemoryType::GPUTexture},
        {"LockedCache", Halide::MemoryType::LockedCache}, {"VTCM", Halide::MemoryType::VTCM},
        {"AMXTile", Halide::MemoryType::AMXTile}};
    return m.at(a.name);
}

// An output wrapper's buffer is the caller's: it takes the output's declared bounds, strides and
// alignment (lowering made them constants that Halide specialises the code on).
void copy_buffer_constraints(const Halide::OutputImageParam &from, Halide::OutputImageParam to) {
    const Halide::Internal::Parameter &a = from.parameter();
    Halide::Internal::Parameter b = to.parameter();
    for (int d = 0; d < from.dimensions(); d++) {
        b.set_min_constraint(d, a.min_constraint(d));
        b.set_extent_constraint(d, a.extent_constraint(d));
        b.set_stride_constraint(d, a.stride_constraint(d));
        b.set_min_constraint_estimate(d, a.min_constraint_estimate(d));
        b.set_extent_constraint_estimate(d, a.extent_constraint_estimate(d));
    }
    b.set_host_alignment(a.host_alignment());
}

class Applier {
public:
    Applier(Model &m, const Model &final_model, const LoweredPipeline &p, AppliedSchedule &out)
        : m_(m), final_(final_model), p_(p), out_(out) {}

    void statement(const ScheduleStatement &st, const std::string &file) {
        for (const auto &c : st.calls) {
            // The model before and after this call: existing names resolve in `before`, new ones
            // (outputs of split/fuse/tile) in the model after it.
            FuncModel before = *m_.find(st.func);
            ScheduleStatement one(st.func, st.stage);
            one.loc = st.loc;
            one.calls = {c};
            check_statement(m_, one, file);
            try {
                call(st, c, before);
            } catch (const Halide::Error &e) {
                throw UserError(where(c.loc.line > 0 ? c.loc : st.loc, file) + st.stage_name() + "." + c.str() +
                                ": Halide rejected this: " + halide_error_text(e));
            }
        }
    }

private:
    Model &m_;
    const Model &final_;
    const LoweredPipeline &p_;
    AppliedSchedule &out_;

    Halide::Func func(const std::string &n) {
        auto it = out_.funcs.find(n);
        if (it != out_.funcs.end()) return it->second;
        for (size_t k = 0; k < p_.inputs.size() && k < p_.input_funcs.size(); k++)  // `x.in(...)` on an input
            if (p_.inputs[k].name() == n) return p_.input_funcs[k];
        throw InternalError("schedule apply: no func " + n);
    }

    VarOrRVar v(const ScheduleStatement &st, const FuncModel &before, const ScheduleArg &a) {
        const StageModel &now = m_.find(st.func)->stages[st.stage + 1];
        if (const DimModel *d = find_dim(now, a.name)) return as_var(*d);
        if (const DimModel *d = find_dim(before.stages[st.stage + 1], a.name)) return as_var(*d);
        throw InternalError("schedule apply: no var " + a.name + " in " + st.stage_name());
    }
    // A var of \p g for a LoopLevel: any stage of g in the final model.
    Halide::LoopLevel level(const std::string &g, const std::string &var) {
        auto it = final_.funcs.find(g);
        internal_check(it != final_.funcs.end(), "schedule apply: no func ", g);
        for (const auto &s : it->second.stages)
            if (const DimModel *d = find_dim(s, var)) return Halide::LoopLevel(func(g), as_var(*d));
        throw InternalError("schedule apply: no var " + var + " in " + g);
    }

    void call(const ScheduleStatement &st, const PrimitiveCall &c, const FuncModel &before) {
        Halide::Func f = func(st.func);
        Halide::Stage S = st.stage < 0 ? Halide::Stage(f) : f.update(st.stage);
        const auto &a = c.args;
        size_t n = a.size();
        auto V = [&](size_t i) { return v(st, before, a[i]); };
        auto T = [&](size_t i) { return i < n ? tail_of(a[i]) : Halide::TailStrategy::Auto; };
        auto I = [&](size_t i) { return Halide::Expr((int)a[i].value); };
        const std::string &p = c.name;
        if (p == "compute_root") f.compute_root();
        else if (p == "compute_inline") f.compute_inline();
        else if (p == "store_root") f.store_root();
        else if (p == "compute_at") f.compute_at(level(a[0].name, a[1].name));
        else if (p == "store_at") f.store_at(level(a[0].name, a[1].name));
        else if (p == "split") S.split(V(0), V(1), V(2), I(3), T(4));
        else if (p == "fuse") S.fuse(V(0), V(1), V(2));
        else if (p == "reorder") {
            std::vector<VarOrRVar> vs;
            for (size_t i = 0; i < n; i++) vs.push_back(V(i));
            S.reorder(vs);
        } else if (p == "tile") {
            bool tail = !a.back().is_int();
            size_t core = n - (tail ? 1 : 0);
            if (core == 8) S.tile(V(0), V(1), V(2), V(3), V(4), V(5), I(6), I(7), T(8));
            else S.tile(V(0), V(1), V(2), V(3), I(4), I(5), T(6));
        } else if (p == "vectorize") {
            if (n == 1) S.vectorize(V(0));
            else S.vectorize(V(0), I(1), T(2));
        } else if (p == "unroll") {
            if (n == 1) S.unroll(V(0));
            else S.unroll(V(0), I(1), T(2));
        } else if (p == "parallel") {
            if (n == 1) S.parallel(V(0));
            else S.parallel(V(0), I(1), T(2));
        } else if (p == "gpu_tile") {
            bool tail = !a.back().is_int();
            size_t core = n - (tail ? 1 : 0);
            size_t ints = 0;
            while (ints < core && a[core - 1 - ints].is_int()) ints++;
            bool full = core - ints == 3 * ints;
            Halide::TailStrategy t = T(core);
            if (ints == 1) {
                if (full) S.gpu_tile(V(0), V(1), V(2), I(3), t);
                else S.gpu_tile(V(0), V(1), I(2), t);
            } else if (ints == 2) {
                if (full) S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), I(6), I(7), t);
                else S.gpu_tile(V(0), V(1), V(2), V(3), I(4), I(5), t);
            } else {
                if (full) S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), V(6), V(7), V(8), I(9), I(10), I(11), t);
                else S.gpu_tile(V(0), V(1), V(2), V(3), V(4), V(5), I(6), I(7), I(8), t);
            }
        } else if (p == "gpu_blocks") {
            if (n == 1) S.gpu_blocks(V(0));
            else if (n == 2) S.gpu_blocks(V(0), V(1));
            else S.gpu_blocks(V(0), V(1), V(2));
        } else if (p == "gpu_threads") {
            if (n == 1) S.gpu_threads(V(0));
            else if (n == 2) S.gpu_threads(V(0), V(1));
            else S.gpu_threads(V(0), V(1), V(2));
        } else if (p == "gpu_lanes") S.gpu_lanes(V(0));
        else if (p == "gpu_single_thread") S.gpu_single_thread();
        else if (p == "gpu_max_registers") out_.max_registers[f.name()] = (int)a[0].value;  // for code generation
        else if (p == "stream_stores") {
            p_.streaming_stores->insert(f.name());  // for code generation
            // A vector store is streamed only where Halide can prove it aligned: declare the output's
            // host pointer aligned to a vector (Loom's Tensors are 64-byte aligned; a caller's
            // misaligned buffer fails Halide's check with a message instead).
            if (before.is_output)
                f.output_buffer().set_host_alignment(
                    std::max(f.output_buffer().host_alignment(), m_.target.natural_vector_size(Halide::Float(32)) * 4));
        }
        else if (p == "rfactor") {
            std::vector<std::pair<Halide::RVar, Halide::Var>> pairs;
            for (size_t i = 0; i < n; i += 2) {
                const DimModel *d = find_dim(before.stages[st.stage + 1], a[i].name);
                pairs.emplace_back(Halide::RVar(d->halide_name), Halide::Var(a[i + 1].name));
            }
            Halide::Func intm = S.rfactor(pairs);
            out_.funcs[c.as_name] = intm;
            m_.find(c.as_name)->func = intm;
        } else if (p == "atomic") S.atomic(n == 1 && a[0].value == 1);
        else if (p == "unscheduled") S.unscheduled();
        else if (p == "bound") f.bound(Halide::Var(a[0].name), I(1), I(2));
        else if (p == "align_bounds") f.align_bounds(Halide::Var(a[0].name), I(1), n > 2 ? I(2) : Halide::Expr(0));
        else if (p == "reorder_storage") {
            std::vector<Halide::Var> vs;
            for (const auto &x : a) vs.emplace_back(x.name);
            f.reorder_storage(vs);
        } else if (p == "store_in") f.store_in(memory_of(a[0]));
        else if (p == "compute_with") {
            const DimModel *d = nullptr;
            for (const auto &s : final_.funcs.at(a[0].name).stages)
                if (!d) d = find_dim(s, a[1].name);
            S.compute_with(Halide::Stage(func(a[0].name)), as_var(*d));
        } else if (p == "prefetch") {
            Halide::Expr offset = n > 3 ? I(3) : Halide::Expr(1);
            Halide::PrefetchBoundStrategy strat = Halide::PrefetchBoundStrategy::GuardWithIf;
            if (n > 4)
                strat = a[4].name == "Clamp"         ? Halide::PrefetchBoundStrategy::Clamp
                        : a[4].name == "NonFaulting" ? Halide::PrefetchBoundStrategy::NonFaulting
                                                     : Halide::PrefetchBoundStrategy::GuardWithIf;
            auto it = out_.funcs.find(a[0].name);
            if (it != out_.funcs.end()) {
                S.prefetch(it->second, V(1), V(2), offset, strat);
            } else {
                for (const auto &in : p_.inputs)
                    if (in.name() == a[0].name) S.prefetch(in, V(1), V(2), offset, strat);
            }
        } else if (p == "in") {
            Halide::Func w = n == 1 ? f.in(func(a[0].name)) : f.in();
            out_.funcs[c.as_name] = w;
            m_.find(c.as_name)->func = w;
            if (n == 0 && before.is_output) {  // the wrapper is realized in the output's place
                (*p_.output_wrappers)[st.func] = w;
                copy_buffer_constraints(f.output_buffer(), w.output_buffer());
            }
        } else {
            throw InternalError("schedule apply: primitive " + p + " has no Halide action");
        }
    }
};

bool word_in(const std::string &text, const std::string &w) {
    if (w.empty()) return false;
    size_t pos = 0;
    auto ident = [](char ch) { return std::isalnum((unsigned char)ch) || ch == '_'; };
    while ((pos = text.find(w, pos)) != std::string::npos) {
        bool left = pos == 0 || !ident(text[pos - 1]);
        bool right = pos + w.size() >= text.size() || !ident(text[pos + w.size()]);
        if (left && right) return true;
        pos += w.size();
    }
    return false;
}

}  // namespace

AppliedSchedule apply_schedule(const Schedule &s, const LoweredPipeline &p, const Halide::Target &target) {
    validate_schedule(s, p, target);
    // The final model names the loop levels compute_at may point to before their vars exist.
    Model final_model = build_model(p, target);
    for (const auto &st : s.statements) check_statement(final_model, st, s.file);
    AppliedSchedule out;
    out.schedule = s;
    for (const auto &lf : p.funcs) out.funcs[lf.name] = lf.func;
    Model m = build_model(p, target);
    p.streaming_stores->clear();
    p.output_wrappers->clear();
    Applier ap(m, final_model, p, out);
    for (const auto &st : s.statements) ap.statement(st, s.file);
    return out;
}

const ScheduleStatement *AppliedSchedule::culprit(const std::string &msg) const {
    const ScheduleStatement *best = nullptr;
    int best_score = 0;
    for (const auto &st : schedule.statements) {
        int score = 0;
        auto it = funcs.find(st.func);
        std::string hname = it != funcs.end() && it->second.defined() ? it->second.name() : st.func;
        if (word_in(msg, st.func) || word_in(msg, hname)) score += 10;
        for (const auto &c : st.calls) {
            if (!c.as_name.empty()) {
                auto ci = funcs.find(c.as_name);
                if (word_in(msg, c.as_name) || (ci != funcs.end() && word_in(msg, ci->second.name()))) score += 5;
            }
            for (const auto &a : c.args)
                if (a.is_ident() && (word_in(msg, a.name) || word_in(msg, rvar_halide_name(a.name)))) score += 1;
            if (word_in(msg, c.name)) score += 2;
        }
        if (score >= 10 && score >= best_score) best = &st, best_score = score;
    }
    return best;
}

std::string AppliedSchedule::explain(const std::string &msg) const {
    const ScheduleStatement *st = culprit(msg);
    if (!st) return where({}, schedule.file) + "Halide rejected the schedule: " + msg;
    std::string head = st->stage_name();
    for (const auto &c : st->calls) head += "." + c.str();
    return where(st->loc, schedule.file) + head + ": Halide rejected the schedule: " + msg;
}

std::string loop_nest(const LoweredPipeline &p, const Halide::Target &target) {
    std::vector<Halide::Internal::Function> outs;
    for (size_t k = 0; k < p.output_funcs.size(); k++) outs.push_back(p.realized_output(k).function());
    if (outs.empty())
        for (const auto &lf : p.funcs)
            if (lf.is_output) outs.push_back(lf.func.function());
    internal_check(!outs.empty(), "loop_nest: pipeline has no outputs");
    return Halide::Internal::print_loop_nest(outs);
}

}  // namespace loom
