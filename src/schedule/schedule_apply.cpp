#include "schedule/schedule_apply.h"

#include <algorithm>
#include <regex>
#include <set>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"
#include "schedule/schedule_internal.h"
#include "schedule/schedule_validate.h"
#include "schedule/size_specialization.h"
#include "support/error.h"

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

// Applies each call with its primitive's apply function (the table in schedule.cpp), after
// checking it against the model, which then names the vars the call made.
class Applier {
public:
    Applier(Model &m, const Model &final_model, const LoweredPipeline &p, AppliedSchedule &out,
            std::map<std::pair<std::string, int>, SizeSpecialization> specializations)
        : m_(m), final_(final_model), p_(p), out_(out), plan_(std::move(specializations)) {}

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
                const PrimitiveActions *actions = find_primitive_actions(c.name);
                if (!actions || !actions->apply)
                    throw InternalError("schedule apply: primitive " + c.name + " has no Halide action");
                CallApply call(m_, final_, p_, out_, st, c, before);
                auto plan = plan_.find({st.func, st.stage});
                if (plan != plan_.end() && plan->second.always && changes_stage_loops(c.name)) {
                    // True at every size a run can have: the tails as written, nothing guarded.
                    call.specialized = true;
                    call.whole_loops = plan->second.whole_loops;
                    call.guard_round_ups = plan->second.guard_round_ups;
                    if (noted_.insert({st.func, st.stage}).second)
                        out_.specialized[plan->second.text].push_back(st.stage_name());
                    actions->apply(call);
                    continue;
                }
                std::vector<Halide::Stage> *special = specialized_stages(st, c, call);
                actions->apply(call);
                for (size_t k = 0; special && k < special->size(); k++) {  // the same loops, tails as written
                    CallApply twin(m_, final_, p_, out_, st, c, before);
                    twin.stage = (*special)[k];
                    twin.specialized = true;
                    const SizeSpecialization &sp = plan_.at({st.func, st.stage});
                    twin.whole_loops = sp.whole_loops;
                    const int more = sp.written_copy ? (int)k - 1 : (int)k;  // index in sp.more
                    if (more >= 0 && more < (int)sp.more_factors.size()) twin.split_factors = &sp.more_factors[more];
                    if (more >= 0 && more == sp.narrow) twin.narrow_loops = &sp.narrow_loops;
                    auto lanes = sp.narrow_vector_lanes.find(more);
                    if (more >= 0 && lanes != sp.narrow_vector_lanes.end()) {
                        twin.narrow_loops = &sp.narrow_loops;
                        twin.vector_loops = &sp.vector_loops;
                        twin.vector_lanes = lanes->second;
                        twin.guard_round_ups = true;  // no size is known to divide by the narrower factors
                    }
                    actions->apply(twin);
                }
            } catch (const Halide::Error &e) {
                throw UserError(where(c.loc.line > 0 ? c.loc : st.loc, file) + st.stage_name() + "." + c.str() +
                                ": Halide rejected this: " + halide_error_text(e));
            }
        }
    }

private:
    /// The specializations of the stage \p st schedules (size_specialization.h), in order, made
    /// before its first loop call so that they start from the same loops; nullptr when it has none
    /// or \p c is not a loop call.
    std::vector<Halide::Stage> *specialized_stages(const ScheduleStatement &st, const PrimitiveCall &c,
                                                   const CallApply &call) {
        auto key = std::make_pair(st.func, st.stage);
        auto plan = plan_.find(key);
        if (plan == plan_.end() || plan->second.always || !changes_stage_loops(c.name)) return nullptr;
        auto it = made_.find(key);
        if (it == made_.end()) {
            Halide::Func f = call.f;
            std::vector<std::pair<Halide::Expr, std::string>> conds;
            if (plan->second.written_copy) conds.push_back({plan->second.condition, plan->second.text});
            conds.insert(conds.end(), plan->second.more.begin(), plan->second.more.end());
            std::vector<Halide::Stage> stages;
            for (const auto &[cond, text] : conds) {
                stages.push_back(st.stage < 0 ? f.specialize(cond) : f.update(st.stage).specialize(cond));
                out_.specialized[text].push_back(st.stage_name());
            }
            it = made_.emplace(key, stages).first;
        }
        return &it->second;
    }

    Model &m_;
    const Model &final_;
    const LoweredPipeline &p_;
    AppliedSchedule &out_;
    std::map<std::pair<std::string, int>, SizeSpecialization> plan_;
    std::map<std::pair<std::string, int>, std::vector<Halide::Stage>> made_;
    std::set<std::pair<std::string, int>> noted_;  // stages listed under their `always` plan
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

AppliedSchedule apply_schedule(const Schedule &s, const LoweredPipeline &p, const Halide::Target &target,
                               bool assume_long_enough) {
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
    Applier ap(m, final_model, p, out,
               sched_internal::plan_size_specializations(s, p, target, final_model, nullptr, assume_long_enough));
    for (const auto &st : s.statements) ap.statement(st, s.file);
    return out;
}

std::string AppliedSchedule::specializations_text(const std::string &indent) const {
    std::string t;
    for (const auto &[when, stages] : specialized) {
        if (when.rfind("every size", 0) == 0) t += indent + "tails as written at " + when + ", nothing guarded:";
        else if (when.find(kNarrowCopyNote) != std::string::npos) t += indent + "narrow copy at " + when + ":";
        else if (size_t at = when.find(kNarrowVectorsNote); at != std::string::npos) {
            std::string lanes = when.substr(at + std::string(kNarrowVectorsNote).size());
            if (!lanes.empty() && lanes.back() == ')') lanes.pop_back();
            t += indent + "narrow copy in vectors of " + lanes + " at " + when.substr(0, at) + ":";
        }
        else if (when.find(kWholeRowsNote) != std::string::npos)
            t += indent + "one tile of the whole rows at " + when.substr(0, when.find(kWholeRowsNote)) + ":";
        else t += indent + "specialized when " + when + " (tails as written; the guarded loops otherwise):";
        for (const auto &sp : stages) t += " " + sp;
        t += "\n";
    }
    return t;
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
