#include "schedule/schedule_validate.h"

#include <algorithm>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"
#include "schedule/schedule_internal.h"
#include "schedule/schedule_parser.h"
#include "support/error.h"

namespace loom {
namespace sched_internal {

std::string where(const SourceLoc &loc, const std::string &file) {
    if (loc.line > 0) return (loc.file.empty() ? file : loc.file) + ":" + std::to_string(loc.line) + ":" +
                             std::to_string(loc.col) + ": ";
    return (file.empty() ? std::string("<schedule>") : file) + ": ";
}

std::string rvar_halide_name(const std::string &n) {
    size_t dot = n.find('.');
    if (dot == std::string::npos) return n + "$x";
    return n.substr(0, dot) + "$" + n.substr(dot + 1);
}

int StageModel::find(const std::string &n) const {
    for (size_t i = 0; i < dims.size(); i++)
        if (dims[i].name == n) return (int)i;
    return -1;
}

std::vector<std::string> StageModel::names_outer_first() const {
    std::vector<std::string> r;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) r.push_back(it->name);
    return r;
}

std::string FuncModel::stage_label(int stage) const {
    return stage < 0 ? name : name + ".update(" + std::to_string(stage) + ")";
}

FuncModel *Model::find(const std::string &n) {
    auto it = funcs.find(n);
    return it == funcs.end() ? nullptr : &it->second;
}

std::string join(const std::vector<std::string> &v, const std::string &sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
    return s;
}

// Halide computes a pipeline's outputs at root; wrapping one (`f.in() as w`, Halide's idiom) makes
// the wrapper the output and f a Func that can be computed per tile of it.
std::string output_at_root(const std::string &f) {
    return f + " is an output; it can only be computed at root. To compute it per tile (a reduction's "
               "initial value and updates in one loop nest), wrap it first: " + f + ".in() as " + f +
           "_out; then " + f + ".compute_at(" + f + "_out, <a var of " + f + "_out>)";
}

static bool update_is_associative(const Halide::Func &f, int k) {
    try {
        const auto &def = f.function().update(k);
        return Halide::Internal::prove_associativity(f.name(), def.args(), def.values()).associative();
    } catch (Halide::Error &) {
        return false;
    }
}

Model build_model(const LoweredPipeline &p, const Halide::Target &t) {
    Model m;
    m.target = t;
    m.pipeline = &p;
    for (const auto &in : p.inputs) m.inputs.push_back(in.name());
    for (const auto &lf : p.funcs) {
        FuncModel fm;
        fm.name = lf.name;
        fm.func = lf.func;
        fm.vars = lf.vars;
        fm.consumers = lf.consumers;
        fm.is_extern = lf.is_extern;
        if (lf.inline_by_default) fm.place.kind = Placement::Inline;  // what fill_defaults gives it
        fm.is_output = lf.is_output ||
                       std::find(p.output_funcs.begin(), p.output_funcs.end(), lf.name) != p.output_funcs.end();
        std::map<std::string, int64_t> extent_of;  // pure var -> extent, where known
        for (size_t i = 0; i < lf.vars.size() && i < lf.extents.size(); i++)
            if (lf.extents[i] > 0) extent_of[lf.vars[i]] = lf.extents[i];
        auto extent = [&](const std::string &v) {
            auto it = extent_of.find(v);
            return it == extent_of.end() ? int64_t(-1) : it->second;
        };
        std::set<std::string> moving;  // pure vars whose extents move with the input sizes
        for (size_t i = 0; i < lf.vars.size() && i < lf.dynamic_vars.size(); i++)
            if (lf.dynamic_vars[i]) moving.insert(lf.vars[i]);
        StageModel pure;
        for (auto it = lf.vars.rbegin(); it != lf.vars.rend(); ++it) {
            pure.dims.push_back({*it, *it, false, true, extent(*it)});
            pure.dims.back().moves = moving.count(*it) > 0;
        }
        fm.stages.push_back(pure);
        int nupd = lf.func.defined() ? lf.func.num_update_definitions() : (int)lf.update_rvars.size();
        for (int k = 0; k < nupd; k++) {
            StageModel st;
            std::map<std::string, std::string> sched_of;  // Halide rvar name → schedule name
            if (k < (int)lf.update_rvars.size())
                for (const auto &r : lf.update_rvars[k]) sched_of[rvar_halide_name(r)] = r;
            if (lf.func.defined()) {
                std::map<std::string, int64_t> rvar_extent;
                std::set<std::string> rvar_moves;
                for (const auto &rv : lf.func.function().update(k).schedule().rvars()) {
                    if (int64_t e = representative_extent(rv.extent); e >= 0) rvar_extent[rv.var] = e;
                    if (!Halide::Internal::is_const(rv.extent)) rvar_moves.insert(rv.var);
                }
                for (const auto &d : lf.func.function().update(k).schedule().dims()) {
                    if (d.var == Halide::Var::outermost().name()) continue;
                    DimModel dm;
                    dm.halide_name = d.var;
                    dm.rvar = d.is_rvar();
                    dm.race_free = d.is_pure();
                    auto it = sched_of.find(d.var);
                    dm.name = it != sched_of.end() ? it->second : d.var;
                    if (dm.rvar && it == sched_of.end()) {
                        // Not listed by lowering: "r$x" → "r.x".
                        std::string n = d.var;
                        std::replace(n.begin(), n.end(), '$', '.');
                        dm.name = n;
                    }
                    auto re = rvar_extent.find(d.var);
                    dm.extent = dm.rvar ? (re == rvar_extent.end() ? -1 : re->second) : extent(d.var);
                    dm.moves = dm.rvar ? rvar_moves.count(d.var) > 0 : moving.count(d.var) > 0;
                    st.dims.push_back(dm);
                }
                st.associative = update_is_associative(lf.func, k);
            }
            fm.stages.push_back(st);
        }
        m.order.push_back(fm.name);
        m.funcs[fm.name] = fm;
    }
    // Graph inputs, by their schedule names (not in `order`: they are not Funcs to list or
    // default), so that `x.in(consumer) as x_tile` can wrap one.
    for (size_t k = 0; k < p.inputs.size() && k < p.input_shapes.size(); k++) {
        FuncModel fm;
        fm.name = p.inputs[k].name();
        if (k < p.input_funcs.size()) fm.func = p.input_funcs[k];
        fm.vars = var_names_for_rank((int)p.input_shapes[k].size());
        fm.is_input = true;
        for (const auto &lf : p.funcs)
            if (std::find(lf.input_reads.begin(), lf.input_reads.end(), p.input_names[k]) != lf.input_reads.end())
                fm.consumers.push_back(lf.name);
        StageModel pure;
        for (int d = (int)fm.vars.size() - 1; d >= 0; d--) {
            pure.dims.push_back({fm.vars[d], fm.vars[d], false, true, p.input_shapes[k][d]});
            pure.dims.back().moves = k < p.input_syms.size() && !p.input_syms[k].empty() && !p.input_syms[k][d].is_static();
        }
        fm.stages.push_back(pure);
        if (!m.funcs.count(fm.name)) m.funcs[fm.name] = fm;
    }
    return m;
}

namespace {

bool has_gpu(const Halide::Target &t) { return t.has_gpu_feature(); }

// Checks one statement's calls, each with its primitive's validate function (the table in
// schedule.cpp), updating the model as Halide would.
class StatementChecker {
public:
    StatementChecker(Model &m, const ScheduleStatement &st, const std::string &file)
        : m_(m), st_(st), file_(file) {}

    // A schedule written for a lowering without library calls names the Funcs that those calls
    // replace: say which calls, and the flags that make the two lowerings agree.
    std::string library_hint() const {
        std::vector<std::string> ext;
        for (const auto &[name, fm] : m_.funcs)
            if (fm.is_extern) ext.push_back(name);
        if (ext.empty()) return "";
        return ". Here some nodes are library calls (" + join(ext) +
               "), which replace their Halide Funcs: if the schedule was written for Halide's GEMMs/convs, "
               "compile with --no-cublas / --no-cudnn, or regenerate it with `loom autoschedule --target cuda` "
               "(same flags as the compile)";
    }

    void run() {
        FuncModel *f = m_.find(st_.func);
        if (!f) {
            std::string hint = did_you_mean(st_.func, m_.names());
            throw UserError(where(st_.loc, file_) + "unknown func '" + st_.func + "'" +
                            (hint.empty() ? "; funcs are: " + join(m_.names()) : hint) + library_hint());
        }
        int nupd = (int)f->stages.size() - 1;
        if (st_.stage >= nupd || st_.stage < -1)
            throw UserError(where(st_.loc, file_) + st_.stage_name() + ": " + f->name +
                            (nupd == 0 ? " has no update stages; schedule its pure definition `" + f->name + ".…`"
                                       : " has update stages 0.." + std::to_string(nupd - 1)));
        for (const auto &c : st_.calls) {
            CallCheck k(m_, st_, file_, *m_.find(st_.func), c);
            std::string form = check_call_form(c, st_.stage);
            if (!form.empty()) k.fail(form);
            if (f->is_extern)
                k.fail(f->name + " is an extern stage (a library call computed at root by lowering): it has no "
                                 "loops to schedule; schedule its consumers, or compile with --no-cudnn to get a Halide conv");
            if (f->is_input && c.name != "in")
                k.fail(f->name + " is a graph input, not a Func: only `" + f->name +
                       ".in([consumer]) as <name>;` applies to it; schedule that wrapper instead");
            const PrimitiveInfo *info = find_primitive(c.name);  // known: check_call_form passed
            const PrimitiveActions *actions = find_primitive_actions(c.name);
            if (!actions) throw InternalError("schedule validate: primitive " + c.name + " has no actions");
            if (actions->validate) actions->validate(k);
            note_stage_primitive(k, *info);
        }
    }

private:
    Model &m_;
    const ScheduleStatement &st_;
    const std::string &file_;

    // Halide asserts when a stage marked unscheduled() is then scheduled: say so first, and where.
    void note_stage_primitive(const CallCheck &k, const PrimitiveInfo &info) {
        if (k.c.name == "unscheduled" || k.f.is_input || info.pure_only) return;
        StageModel &s = k.stage();
        if (s.unscheduled_loc.line > 0)
            k.fail(k.f.stage_label(st_.stage) + " was marked unscheduled() at line " +
                   std::to_string(s.unscheduled_loc.line) + "; drop that mark or this primitive");
        s.scheduled = true;
    }
};

// Whether \p g runs inside the loops of \p c under the placements of \p m.
// True if every use of Func \p g happens inside the loops of \p c. \p path holds the Funcs on the
// current walk (a cycle of placements is not "inside"); a Func reached twice through a diamond of
// inlined Funcs (GELU's x·(1+erf(x)) reads x twice) is simply checked again.
bool inside(Model &m, const std::string &g, const std::string &c, std::set<std::string> &path) {
    if (g == c) return true;
    if (!path.insert(g).second) return false;
    FuncModel *f = m.find(g);
    bool result = false;
    if (f && f->place.kind == Placement::Inline) {
        result = !f->consumers.empty();
        for (const auto &u : f->consumers) result = result && inside(m, u, c, path);
    } else if (f && f->place.kind == Placement::At) {
        result = inside(m, f->place.func, c, path);
    }
    path.erase(g);
    return result;
}

// The loop names of \p f's stages \p stages (all of them when empty), each once.
std::vector<std::string> stage_loops(const FuncModel &f, const std::vector<int> &stages = {}) {
    std::vector<std::string> r;
    for (int k = 0; k < (int)f.stages.size(); k++) {
        if (!stages.empty() && std::find(stages.begin(), stages.end(), k) == stages.end()) continue;
        for (const auto &n : f.stages[k].names_outer_first())
            if (std::find(r.begin(), r.end(), n) == r.end()) r.push_back(n);
    }
    return r;
}


// The stages of \p c that read \p producer: an rfactor intermediate is read by its Func's updates;
// a pipeline Func, by the definitions whose values or args call it. Empty when that cannot be told
// (a Func the schedule creates, a producer read only through an inlined Func): then any stage may.
std::vector<int> reading_stages(const FuncModel &c, const FuncModel &producer) {
    std::vector<int> r;
    if (producer.rfactor_of == c.name) {
        for (int k = 1; k < (int)c.stages.size(); k++) r.push_back(k);
        return r;
    }
    if (!c.func.defined() || !producer.func.defined()) return r;
    struct Calls : Halide::Internal::IRVisitor {
        std::string name;
        bool found = false;
        using IRVisitor::visit;
        void visit(const Halide::Internal::Call *op) override {
            found |= op->name == name;
            IRVisitor::visit(op);
        }
    };
    const Halide::Internal::Function &fn = c.func.function();
    std::vector<Halide::Internal::Definition> defs = {fn.definition()};
    for (const auto &u : fn.updates()) defs.push_back(u);
    for (int k = 0; k < (int)defs.size() && k < (int)c.stages.size(); k++) {
        Calls calls;
        calls.name = producer.func.name();
        for (const auto &v : defs[k].values()) v.accept(&calls);
        for (const auto &a : defs[k].args()) a.accept(&calls);
        if (calls.found) r.push_back(k);
    }
    return r;
}

// The loops of \p c that may hold \p producer: those of the stages that read it where that is
// known (reading_stages), else all of c's.
std::vector<std::string> loops_around(const FuncModel &c, const FuncModel &producer) {
    return stage_loops(c, reading_stages(c, producer));
}

}  // namespace

std::vector<std::string> all_dims(const FuncModel &f) { return stage_loops(f); }

void record_placements(Model &m, const Schedule &s) {
    for (const auto &st : s.statements) {
        FuncModel *f = m.find(st.func);
        for (const auto &c : st.calls) {
            if (!f) break;
            if (c.name == "compute_inline") f->place = {Placement::Inline, "", "", c.loc};
            else if (c.name == "compute_root") f->place = {Placement::Root, "", "", c.loc};
            else if (c.name == "compute_at" && c.args.size() == 2)
                f->place = {Placement::At, c.args[0].name, c.args[1].name, c.loc};
        }
    }
}

std::vector<std::string> legal_locations(Model &m, const std::string &producer) {
    std::vector<std::string> r;
    FuncModel *f = m.find(producer);
    if (f && !f->is_output && !f->consumers.empty()) {
        for (const auto &cn : m.order) {
            if (cn == producer) continue;
            FuncModel *c = m.find(cn);
            if (c->place.kind == Placement::Inline) continue;
            bool all_in = true;
            for (const auto &u : f->consumers) {
                std::set<std::string> seen;
                if (!inside(m, u, cn, seen)) all_in = false;
            }
            std::set<std::string> seen;
            if (all_in && !inside(m, cn, producer, seen)) r.push_back(cn + ".{" + join(loops_around(*c, *f)) + "}");
        }
    }
    r.push_back("root");
    return r;
}

std::string compute_at_problem(Model &m, const std::string &producer, const std::string &consumer,
                               const std::string &var) {
    FuncModel *f = m.find(producer);
    if (!f) return "unknown func '" + producer + "'" + did_you_mean(producer, m.names());
    FuncModel *c = m.find(consumer);
    auto legal = [&] { return "; legal: " + join(legal_locations(m, producer)); };
    auto hint_legal = [&](const std::string &hint) {
        return hint.empty() ? legal() : hint + " legal: " + join(legal_locations(m, producer));
    };
    if (!c) return "unknown func '" + consumer + "'" + hint_legal(did_you_mean(consumer, m.names()));
    if (f->is_output) return output_at_root(producer);
    if (consumer == producer) return "a Func cannot be computed at itself" + legal();
    if (c->place.kind == Placement::Inline && c->place.loc.line == 0)  // LoweredFunc::inline_by_default
        return consumer + " is a helper of its op, inlined unless the file places it, and has no loops; place it "
                          "first (e.g. " + consumer + ".compute_root())" + legal();
    if (c->place.kind == Placement::Inline) return consumer + " is compute_inline and has no loops" + legal();
    std::set<std::string> seen;
    if (inside(m, consumer, producer, seen))
        return "cycle: " + consumer + " is itself computed inside " + producer + legal();
    bool consumes = std::find(f->consumers.begin(), f->consumers.end(), consumer) != f->consumers.end();
    for (const auto &u : f->consumers) {
        std::set<std::string> s2;
        if (!inside(m, u, consumer, s2)) {
            if (!consumes && u == f->consumers.front())
                return consumer + " does not consume " + producer + legal();
            return producer + " is also used by " + u + ", which is not inside " + consumer +
                   "'s loops" + legal();
        }
    }
    auto dims = all_dims(*c);
    if (std::find(dims.begin(), dims.end(), var) == dims.end())
        return consumer + " has no var '" + var + "'" + hint_legal(did_you_mean(var, dims));
    // The var must be a loop of a stage that reads the producer: a split of the pure stage does
    // not exist around the update that does (Halide would reject it with its own list).
    std::vector<int> readers = reading_stages(*c, *f);
    if (!readers.empty()) {
        std::vector<std::string> ok = loops_around(*c, *f), labels;
        for (int k : readers) labels.push_back(c->stage_label(k - 1));
        if (std::find(ok.begin(), ok.end(), var) == ok.end())
            return "'" + var + "' is not a loop of " + join(labels) + ", the stage(s) of " + consumer + " that read " +
                   producer + "; its loops there: " + consumer + ".{" + join(ok) + "}";
    }
    return "";
}

void check_statement(Model &m, const ScheduleStatement &st, const std::string &file) {
    StatementChecker(m, st, file).run();
}

void finish_checks(Model &m, const Schedule &s) {
    for (const auto &st : s.statements) {
        for (const auto &c : st.calls) {
            const PrimitiveActions *actions = find_primitive_actions(c.name);
            if (!actions || !actions->finish) continue;
            CallCheck k(m, st, s.file, *m.find(st.func), c);
            actions->finish(k);
        }
    }
    // On a GPU target, a Func at root runs on the host unless a stage maps loops to the GPU; CPU
    // parallelism there is a schedule written for the wrong target (no mapping at all gets the
    // default, see schedule_builtin.h).
    if (has_gpu(m.target)) {
        for (const auto &name : m.order) {
            FuncModel &f = m.funcs[name];
            if (f.place.kind != Placement::Root) continue;
            for (size_t k = 0; k < f.stages.size(); k++) {
                const StageModel &sm = f.stages[k];
                if (sm.cpu_parallel && !sm.gpu_mapped)
                    throw UserError(where(sm.cpu_parallel_loc, s.file) + f.stage_label((int)k - 1) + "." +
                                    sm.cpu_parallel_call + ": on GPU target " + m.target.to_string() +
                                    " this Func is computed at root without a GPU mapping, so this "
                                    "would run on the host CPU; valid: gpu_tile(…), gpu_blocks(…)/"
                                    "gpu_threads(…), or compute it inside a GPU kernel with compute_at");
            }
        }
    }
}

}  // namespace sched_internal

using namespace sched_internal;

// `f.bound(v, min, extent)` fixes v's extent wherever it is written in the file.
static void record_bounds(Model &m, const Schedule &s) {
    for (const auto &st : s.statements)
        for (const auto &c : st.calls) {
            FuncModel *f = m.find(st.func);
            if (!f || c.name != "bound" || c.args.size() != 3 || !c.args[0].is_ident() || !c.args[2].is_int() ||
                c.args[2].value <= 0)
                continue;
            for (auto &stage : f->stages)
                for (auto &d : stage.dims)
                    if (d.name == c.args[0].name && !d.rvar) d.extent = c.args[2].value;
        }
}

void validate_schedule(const Schedule &s, const LoweredPipeline &p, const Halide::Target &target,
                       std::vector<std::string> *warnings) {
    Model m = build_model(p, target);
    record_bounds(m, s);
    // Placements first: compute_at legality depends on where every other Func goes.
    Model pre = m;
    for (const auto &st : s.statements) check_statement(pre, st, s.file);
    record_placements(pre, s);
    finish_checks(pre, s);
    if (warnings) warnings->insert(warnings->end(), pre.warnings.begin(), pre.warnings.end());
}

static Model context_model(const LoweredPipeline &p, const Schedule *context) {
    Model m = build_model(p, Halide::get_host_target());
    if (context) {
        for (const auto &st : context->statements) {
            try {
                check_statement(m, st, context->file);
            } catch (UserError &) {
                // A context that is itself being built may be incomplete; keep what is legal.
            }
        }
        record_placements(m, *context);
    }
    return m;
}

bool can_compute_at(const LoweredPipeline &p, const std::string &producer, const std::string &consumer,
                    const std::string &var, const Schedule *context, std::string *why) {
    Model m = context_model(p, context);
    std::string w = compute_at_problem(m, producer, consumer, var);
    if (why) *why = w;
    return w.empty();
}

std::vector<std::string> legal_compute_at_locations(const LoweredPipeline &p, const std::string &producer,
                                                    const Schedule *context) {
    Model m = context_model(p, context);
    return legal_locations(m, producer);
}

}  // namespace loom
