#include "schedule/schedule_validate.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "graph/error.h"
#include "schedule/schedule_internal.h"
#include "schedule/schedule_parser.h"

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

static std::string join(const std::vector<std::string> &v, const std::string &sep = ", ") {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
    return s;
}

// Halide computes a pipeline's outputs at root; wrapping one (`f.in() as w`, Halide's idiom) makes
// the wrapper the output and f a Func that can be computed per tile of it.
static std::string output_at_root(const std::string &f) {
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
        StageModel pure;
        for (auto it = lf.vars.rbegin(); it != lf.vars.rend(); ++it)
            pure.dims.push_back({*it, *it, false, true, extent(*it)});
        fm.stages.push_back(pure);
        int nupd = lf.func.defined() ? lf.func.num_update_definitions() : (int)lf.update_rvars.size();
        for (int k = 0; k < nupd; k++) {
            StageModel st;
            std::map<std::string, std::string> sched_of;  // Halide rvar name → schedule name
            if (k < (int)lf.update_rvars.size())
                for (const auto &r : lf.update_rvars[k]) sched_of[rvar_halide_name(r)] = r;
            if (lf.func.defined()) {
                std::map<std::string, int64_t> rvar_extent;
                for (const auto &rv : lf.func.function().update(k).schedule().rvars())
                    if (const int64_t *e = Halide::Internal::as_const_int(rv.extent)) rvar_extent[rv.var] = *e;
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
        for (int d = (int)fm.vars.size() - 1; d >= 0; d--)
            pure.dims.push_back({fm.vars[d], fm.vars[d], false, true, p.input_shapes[k][d]});
        fm.stages.push_back(pure);
        if (!m.funcs.count(fm.name)) m.funcs[fm.name] = fm;
    }
    return m;
}

namespace {

bool has_gpu(const Halide::Target &t) { return t.has_gpu_feature(); }

// Checks one statement's calls, updating the model as Halide would.
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
            std::string form = check_call_form(c, st_.stage);
            if (!form.empty()) fail(c, form);
            if (f->is_extern)
                fail(c, f->name + " is an extern stage (a library call computed at root by lowering): it has no "
                            "loops to schedule; schedule its consumers, or compile with --no-cudnn to get a Halide conv");
            if (f->is_input && c.name != "in")
                fail(c, f->name + " is a graph input, not a Func: only `" + f->name +
                            ".in([consumer]) as <name>;` applies to it; schedule that wrapper instead");
            check_call(*m_.find(st_.func), c);
            note_stage_primitive(*m_.find(st_.func), c);
        }
    }

private:
    Model &m_;
    const ScheduleStatement &st_;
    const std::string &file_;

    [[noreturn]] void fail(const PrimitiveCall &c, const std::string &msg, const SourceLoc *at = nullptr) {
        throw UserError(where(at && at->line > 0 ? *at : c.loc.line > 0 ? c.loc : st_.loc, file_) +
                        st_.stage_name() + "." + c.str() + ": " + msg);
    }

    StageModel &stage(FuncModel &f) { return f.stages[st_.stage + 1]; }

    // Halide asserts when a stage marked unscheduled() is then scheduled: say so first, and where.
    void note_stage_primitive(FuncModel &f, const PrimitiveCall &c) {
        const PrimitiveInfo *info = find_primitive(c.name);
        if (c.name == "unscheduled" || f.is_input || !info || info->pure_only) return;
        StageModel &s = stage(f);
        if (s.unscheduled_loc.line > 0)
            fail(c, f.stage_label(st_.stage) + " was marked unscheduled() at line " +
                        std::to_string(s.unscheduled_loc.line) + "; drop that mark or this primitive");
        s.scheduled = true;
    }

    std::string ident(const PrimitiveCall &c, size_t i, const std::string &what) {
        const ScheduleArg &a = c.args[i];
        if (!a.is_ident())
            fail(c, "argument " + std::to_string(i + 1) + " (" + a.str() + ") must be " + what, &a.loc);
        return a.name;
    }
    int64_t positive(const PrimitiveCall &c, size_t i, const std::string &what) {
        const ScheduleArg &a = c.args[i];
        if (!a.is_int()) fail(c, what + " must be an integer, not '" + a.str() + "'", &a.loc);
        if (a.value <= 0) fail(c, what + " must be positive, not " + std::to_string(a.value), &a.loc);
        return a.value;
    }
    int64_t integer(const PrimitiveCall &c, size_t i, const std::string &what) {
        const ScheduleArg &a = c.args[i];
        if (!a.is_int()) fail(c, what + " must be an integer, not '" + a.str() + "'", &a.loc);
        return a.value;
    }
    void tail(const PrimitiveCall &c, size_t i) {
        const ScheduleArg &a = c.args[i];
        const auto &names = tail_strategy_names();
        bool ok = (a.kind == ScheduleArg::Kind::Tail || a.is_ident()) &&
                  std::find(names.begin(), names.end(), a.name) != names.end();
        if (!ok)
            fail(c, "'" + a.str() + "' is not a TailStrategy" + did_you_mean(a.name, names) +
                        " valid: " + join(names), &a.loc);
    }
    // A dim of the stage, by name; fails with the valid names.
    int dim(FuncModel &f, const PrimitiveCall &c, size_t i) {
        std::string n = ident(c, i, "a var of " + st_.stage_name());
        StageModel &s = stage(f);
        int d = s.find(n);
        if (d < 0) {
            auto names = s.names_outer_first();
            std::string hint = did_you_mean(n, names);
            std::string extra;
            if (st_.stage >= 0)
                for (const auto &p : f.vars)
                    if (p == n) extra = " (" + n + " is a var of " + f.name + " but not of this update stage)";
            fail(c, "unknown var '" + n + "'" + extra + (hint.empty() ? ";" : hint) + " vars of " +
                        st_.stage_name() + ": " + join(names), &c.args[i].loc);
        }
        return d;
    }
    // A name a primitive introduces; it must not name an existing dim (unless \p may_reuse).
    std::string fresh(FuncModel &f, const PrimitiveCall &c, size_t i, const std::set<std::string> &may_reuse = {}) {
        std::string n = ident(c, i, "a new var name");
        if (may_reuse.count(n)) return n;
        if (stage(f).find(n) >= 0 || std::find(f.vars.begin(), f.vars.end(), n) != f.vars.end())
            fail(c, "var '" + n + "' already exists in " + st_.stage_name() +
                        "; pick a new name (vars now: " + join(stage(f).names_outer_first()) + ")",
                 &c.args[i].loc);
        if (n.find('.') != std::string::npos)
            fail(c, "new var '" + n + "' may not contain '.'; dotted names are RDom dimensions", &c.args[i].loc);
        return n;
    }
    void race_check(FuncModel &f, const PrimitiveCall &c, int d) {
        StageModel &s = stage(f);
        const DimModel &dm = s.dims[d];
        if (dm.race_free) return;
        std::vector<std::string> pure;
        for (const auto &x : s.dims)
            if (!x.rvar) pure.push_back(x.name);
        if (s.atomic && s.associative) return;
        if (s.atomic)
            fail(c, dm.name + " is a reduction var and the update of " + f.name +
                        " is not associative, so atomic() cannot make " + c.name + " safe; valid: " +
                        c.name + " over a pure var (" + join(pure) + ")");
        fail(c, dm.name + " is a reduction var that " + st_.stage_name() +
                    " does not write by, so " + c.name + " would race; valid: " + c.name +
                    " over a pure var (" + join(pure) + "), rfactor(" + dm.name +
                    ", <new var>) first, or atomic() before it if the update is associative",
             &c.args[0].loc);
    }
    void split_dims(StageModel &s, int d, const std::string &outer, const std::string &inner) {
        DimModel old = s.dims[d];
        DimModel in = old, out = old;
        in.name = in.halide_name = inner;
        out.name = out.halide_name = outer;
        s.dims[d] = in;
        s.dims.insert(s.dims.begin() + d + 1, out);
    }
    void reorder_dims(StageModel &s, const std::vector<int> &idx) {
        std::vector<int> slots = idx;
        std::sort(slots.begin(), slots.end());
        std::vector<DimModel> moved;
        for (int i : idx) moved.push_back(s.dims[i]);
        auto dims = s.dims;
        for (size_t j = 0; j < slots.size(); j++) dims[slots[j]] = moved[j];
        s.dims = dims;
    }
    void gpu_check(const PrimitiveCall &c) {
        if (!has_gpu(m_.target))
            fail(c, "target " + m_.target.to_string() +
                        " has no GPU; GPU primitives need a GPU target (host-cuda-cuda_capability_80); "
                        "on a CPU use parallel/vectorize");
    }

    // The TailStrategy Halide uses for a split of \p dm: the one written, else what Auto picks.
    std::string effective_tail(const DimModel &dm, const ScheduleArg *written, std::string &why) const {
        why.clear();
        if (written && written->name != "Auto") return written->name;
        if (st_.stage < 0) {
            why = " (the default for a pure definition)";
            return "ShiftInwards";
        }
        if (dm.rvar) return "GuardWithIf";
        why = " (the default for a pure var of an update)";
        return "RoundUp";
    }
    // Warns when splitting \p dm by \p factor makes the loop cover points outside its extent: a
    // factor larger than the extent with ShiftInwards or RoundUp still runs `factor` points (a
    // schedule written for a larger model, run on a smaller one). Legal to Halide, but the Func
    // and what it reads are then accessed out of bounds, which fails at run time.
    void split_warning(const PrimitiveCall &c, const DimModel &dm, int64_t factor, size_t tail_index) {
        if (dm.extent <= 0 || factor <= dm.extent) return;
        if (st_.stage < 0 && constant_init(*m_.find(st_.func))) return;
        if (reads_ignore(*m_.find(st_.func), dm.halide_name)) return;
        if (rounds_rows_safely(*m_.find(st_.func), dm)) return;
        const ScheduleArg *written = tail_index < c.args.size() ? &c.args[tail_index] : nullptr;
        std::string why, tail = effective_tail(dm, written, why);
        if (tail != "ShiftInwards" && tail != "RoundUp") return;
        PrimitiveCall fixed = c;
        ScheduleArg guard = ScheduleArg::tail("GuardWithIf");
        if (written) fixed.args[tail_index] = guard;
        else fixed.args.push_back(guard);  // the tail is always the last argument
        std::string e = std::to_string(dm.extent), fs = std::to_string(factor);
        m_.warnings.push_back(where(c.loc.line > 0 ? c.loc : st_.loc, file_) + st_.stage_name() + "." + c.str() +
                              ": factor " + fs + " exceeds the extent " + e + " of " + dm.name +
                              "; with TailStrategy::" + tail + why + " the loop still runs " + fs +
                              " points, " + std::to_string(factor - dm.extent) + " outside " + dm.name +
                              ", so this Func and what it reads are accessed out of bounds; valid: " +
                              fixed.str() + " or a factor of at most " + e);
    }
    // A reduction's initial value (`f(…) = 0` before its updates) of a Func that is not an output:
    // running its loop past the extent only writes more of its own buffer, nothing is read.
    static bool constant_init(const FuncModel &f) {
        if (f.is_output || f.stages.size() < 2 || !f.func.defined()) return false;
        for (const auto &v : f.func.function().definition().values())
            if (!Halide::Internal::is_const(v)) return false;
        return true;
    }
    // A Func that is not an output, none of whose definitions reads anything by pure var \p var
    // (a keepdims axis of extent 1 rounded up to a warp's lanes): the points past the extent only
    // write more of its own buffer, which Halide sizes to the rounded loop, and read in bounds.
    static bool reads_ignore(const FuncModel &f, const std::string &var) {
        if (f.is_output || !f.func.defined()) return false;
        if (std::find(f.vars.begin(), f.vars.end(), var) == f.vars.end()) return false;
        struct CallArgs : Halide::Internal::IRVisitor {
            std::string self, var;
            bool uses = false;
            using IRVisitor::visit;
            void visit(const Halide::Internal::Call *op) override {
                if (op->name != self)
                    for (const auto &a : op->args) uses |= Halide::Internal::expr_uses_var(a, var);
                IRVisitor::visit(op);
            }
        } calls;
        calls.self = f.func.name();
        calls.var = var;
        const Halide::Internal::Function &fn = f.func.function();
        std::vector<Halide::Internal::Definition> defs = {fn.definition()};
        for (const auto &u : fn.updates()) defs.push_back(u);
        for (const auto &d : defs) {
            for (const auto &v : d.values()) v.accept(&calls);
            for (const auto &a : d.args()) a.accept(&calls);
        }
        return !calls.uses;
    }
    static int64_t ceil_div(int64_t e, int64_t f) { return e <= 0 ? -1 : (e + f - 1) / f; }
    // A Func that is not an output, split along its rows (the innermost var), whose reads past the
    // end of a row stay in bounds (LoweredPipeline::rows_extend_safely: a padded input clamps them
    // on every path): the points past the extent only fill its own buffer, which Halide sizes to
    // the rounded loop (a 14-wide depthwise row computed as one 16-lane vector).
    bool rounds_rows_safely(const FuncModel &f, const DimModel &dm) const {
        return !f.is_output && !f.vars.empty() && dm.halide_name == f.vars.back() && m_.pipeline &&
               m_.pipeline->find(f.name) && m_.pipeline->rows_extend_safely(f.name);
    }

    // Halide 14 can drop the guard of a GuardWithIf split of an RVar once the split's inner RVar
    // is rfactored (halide/Halide#8600, fixed upstream in 2025). Where a loop over the new var (or
    // a var split off it) is unrolled, the copies past the points the last round keeps may then run
    // unguarded, read past the reduction's end and give a wrong result: a classifier's softmax sum
    // over 1000 logits split by 64, 4 vectors unrolled, was NaN (reproduced in plain Halide 14, with
    // the buffers' extents known); its max, scheduled alike, kept the guard. A warning, not an
    // error: which stages lose it is not known in advance.
    void guard_lost_unroll_problem(const FuncModel &f, const PrimitiveCall &c, const DimModel &dm) {
        if (dm.guarded_keep <= 0 || dm.extent <= 0 || dm.guarded_keep >= dm.extent) return;
        m_.warnings.push_back(
            where(c.loc.line > 0 ? c.loc : st_.loc, file_) + st_.stage_name() + "." + c.str() +
            ": Halide 14 can lose the guard of the split " + dm.guarded_split + " once it is rfactored "
            "(halide/Halide#8600, fixed upstream); unrolled, the last " + std::to_string(dm.extent - dm.guarded_keep) +
            " of the " + std::to_string(dm.extent) + " copies of " + dm.name + " in " + f.name +
            " would then run past the reduction's end and give wrong results (NaN); check the result with "
            "`loom run --check`, or split the RVar by a factor that divides its extent, or vectorize " + dm.name +
            " without unrolling it");
    }

    void check_call(FuncModel &f, const PrimitiveCall &c) {
        const std::string &p = c.name;
        size_t n = c.args.size();
        StageModel &s = stage(f);
        if (p == "compute_inline") {
            if (f.stages.size() > 1)
                fail(c, f.name + " has update stages and cannot be inlined; valid: compute_root(), compute_at(…)");
            if (f.is_output) fail(c, f.name + " is an output and cannot be inlined; valid: compute_root()");
        } else if (p == "compute_at" || p == "store_at") {
            ident(c, 0, "a func");
            ident(c, 1, "a var");
            if (f.is_output) fail(c, output_at_root(f.name));
            if (!m_.find(c.args[0].name)) {
                std::string hint = did_you_mean(c.args[0].name, m_.names());
                fail(c, "unknown func '" + c.args[0].name + "'" + (hint.empty() ? "" : hint) +
                            (hint.empty() ? "; " : " ") + "legal: " + join(legal_locations(m_, f.name)),
                     &c.args[0].loc);
            }
        } else if (p == "split") {
            int d = dim(f, c, 0);
            std::string old = c.args[0].name;
            std::string outer = fresh(f, c, 1, {old}), inner = fresh(f, c, 2, {old});
            if (outer == inner) fail(c, "outer and inner must differ", &c.args[2].loc);
            int64_t factor = positive(c, 3, "split factor");
            if (n > 4) tail(c, 4);
            split_warning(c, s.dims[d], factor, 4);
            int64_t e = s.dims[d].extent;
            const int64_t keep = s.dims[d].guarded_keep;
            std::string why, t = effective_tail(s.dims[d], n > 4 ? &c.args[4] : nullptr, why);
            split_dims(s, d, outer, inner);
            s.dims[d].extent = factor;
            s.dims[d + 1].extent = ceil_div(e, factor);
            s.dims[d].guarded_keep = s.dims[d + 1].guarded_keep = 0;
            s.dims[d].rvar_guard_keep = s.dims[d + 1].rvar_guard_keep = 0;
            if (keep > 0) {
                // A split of a var that keeps `keep` points in the last round: the outer var's
                // last round keeps ceil(keep / factor) iterations.
                s.dims[d + 1].guarded_keep = ceil_div(keep, factor);
            } else if (s.dims[d].rvar && t == "GuardWithIf" && e > factor && e % factor != 0) {
                s.dims[d].rvar_guard_keep = e % factor;
                s.dims[d].guarded_split = c.args[0].name + ": " + std::to_string(e) + " = " + std::to_string(e / factor) +
                                          " x " + std::to_string(factor) + " + " + std::to_string(e % factor);
            }
        } else if (p == "fuse") {
            int di = dim(f, c, 0), dout = dim(f, c, 1);
            if (di == dout) fail(c, "fuse needs two different vars");
            std::string fused = fresh(f, c, 2, {c.args[0].name, c.args[1].name});
            DimModel fd = s.dims[di];
            fd.rvar = s.dims[di].rvar || s.dims[dout].rvar;
            fd.race_free = s.dims[di].race_free && s.dims[dout].race_free;
            fd.name = fd.halide_name = fused;
            fd.extent = s.dims[di].extent > 0 && s.dims[dout].extent > 0 ? s.dims[di].extent * s.dims[dout].extent : -1;
            s.dims[di] = fd;
            s.dims.erase(s.dims.begin() + dout);
        } else if (p == "reorder") {
            std::vector<int> idx;
            std::set<std::string> seen;
            for (size_t i = 0; i < n; i++) {
                idx.push_back(dim(f, c, i));
                if (!seen.insert(c.args[i].name).second)
                    fail(c, "'" + c.args[i].name + "' appears twice; list each var once", &c.args[i].loc);
            }
            reorder_dims(s, idx);
        } else if (p == "tile") {
            bool has_tail = !c.args.back().is_int();
            size_t core = n - (has_tail ? 1 : 0);
            if (core != 6 && core != 8)
                fail(c, "expected " + std::string(find_primitive("tile")->signature));
            int dx = dim(f, c, 0), dy = dim(f, c, 1);
            (void)dx, (void)dy;
            std::string x = c.args[0].name, y = c.args[1].name;
            std::string xo = x, yo = y, xi, yi;
            size_t k = 2;
            if (core == 8) xo = fresh(f, c, 2, {x}), yo = fresh(f, c, 3, {y}), k = 4;
            xi = fresh(f, c, k, {x});
            yi = fresh(f, c, k + 1, {y});
            std::set<std::string> names = {xo, yo, xi, yi};
            if (names.size() != 4) fail(c, "the new vars must all differ");
            int64_t fx = positive(c, k + 2, "x factor");
            int64_t fy = positive(c, k + 3, "y factor");
            if (has_tail) tail(c, n - 1);
            split_warning(c, s.dims[s.find(x)], fx, k + 4);
            split_warning(c, s.dims[s.find(y)], fy, k + 4);
            for (auto [v, o, i, fac] : {std::make_tuple(x, xo, xi, fx), std::make_tuple(y, yo, yi, fy)}) {
                int d = s.find(v);
                int64_t e = s.dims[d].extent;
                split_dims(s, d, o, i);
                s.dims[d].extent = fac;
                s.dims[d + 1].extent = ceil_div(e, fac);
            }
            reorder_dims(s, {s.find(xi), s.find(yi), s.find(xo), s.find(yo)});
        } else if (p == "vectorize" || p == "unroll" || p == "parallel") {
            int d = dim(f, c, 0);
            if (p == "unroll" && n == 1) guard_lost_unroll_problem(f, c, s.dims[d]);
            if (n > 1) {
                // Halide splits off an inner loop of this size (the var stays as the outer loop).
                int64_t factor = positive(c, 1, p == "parallel" ? "task size" : p + " factor");
                if (n > 2) tail(c, 2);
                split_warning(c, s.dims[d], factor, 2);
                s.dims[d].extent = ceil_div(s.dims[d].extent, factor);
            }
            if (p != "unroll") {
                race_check(f, c, d);
                if (!s.cpu_parallel) {
                    s.cpu_parallel = true;
                    s.cpu_parallel_loc = c.loc;
                    s.cpu_parallel_call = c.str();
                }
            }
        } else if (p == "gpu_tile") {
            gpu_check(c);
            bool has_tail = !c.args.back().is_int();
            size_t core = n - (has_tail ? 1 : 0);
            size_t ints = 0;
            while (ints < core && c.args[core - 1 - ints].is_int()) ints++;
            size_t names = core - ints;
            if (ints < 1 || ints > 3 || (names != 3 * ints && names != 2 * ints))
                fail(c, "expected " + std::string(find_primitive("gpu_tile")->signature));
            std::vector<std::string> vars, outer, inner;
            for (size_t i = 0; i < ints; i++) {
                int d = dim(f, c, i);
                race_check(f, c, d);
                vars.push_back(c.args[i].name);
            }
            std::set<std::string> fresh_names;
            for (size_t i = ints; i < names; i++) {
                std::string v = fresh(f, c, i, {vars[(i - ints) % ints]});
                if (!fresh_names.insert(v).second) fail(c, "new var '" + v + "' appears twice", &c.args[i].loc);
            }
            for (size_t i = names; i < core; i++) positive(c, i, "gpu_tile size");
            if (has_tail) tail(c, n - 1);
            for (size_t i = 0; i < ints; i++) {
                std::string o = names == 3 * ints ? c.args[ints + i].name : vars[i];
                std::string in = c.args[names - ints + i].name;
                split_dims(s, s.find(vars[i]), o, in);
            }
            s.gpu_mapped = true;
        } else if (p == "gpu_blocks" || p == "gpu_threads" || p == "gpu_lanes") {
            gpu_check(c);
            for (size_t i = 0; i < n; i++) race_check(f, c, dim(f, c, i));
            s.gpu_mapped = true;
        } else if (p == "gpu_single_thread") {
            gpu_check(c);
            s.gpu_mapped = true;
        } else if (p == "stream_stores") {
            if (has_gpu(m_.target) || m_.target.arch != Halide::Target::X86)
                fail(c, "stream_stores makes x86 non-temporal vector stores (movntps); target " + m_.target.to_string() +
                            " is not an x86 CPU target: leave it out there");
            if (f.stages.size() > 1)
                fail(c, f.name + " has update stages, which read back what it stores, and a streamed store leaves "
                                 "the cache, so every such read would go to memory; stream a Func with a pure "
                                 "definition only (the pointwise Func that reads this one, or a copy made with in())");
        } else if (p == "gpu_max_registers") {
            gpu_check(c);
            integer(c, 0, "registers per thread");
            if (c.args[0].value < 16 || c.args[0].value > 255)
                fail(c, "registers per thread must be in 16..255 (ptxas's range; 32 lets 2048 threads share "
                        "an SM's 64K registers), got " + std::to_string(c.args[0].value), &c.args[0].loc);
        } else if (p == "rfactor") {
            std::vector<std::string> rv, newv;
            std::vector<std::string> rnames;
            for (const auto &d : s.dims)
                if (d.rvar) rnames.push_back(d.name);
            for (size_t i = 0; i < n; i += 2) {
                int d = dim(f, c, i);
                if (!s.dims[d].rvar)
                    fail(c, c.args[i].name + " is a pure var; rfactor takes reduction vars of " +
                                st_.stage_name() + ": " + join(rnames), &c.args[i].loc);
                rv.push_back(c.args[i].name);
                newv.push_back(fresh(f, c, i + 1));
            }
            if (!s.associative)
                fail(c, "the update of " + f.name + " is not associative, so it cannot be factored; "
                        "valid: schedule it serially or parallelize over pure vars");
            if (m_.find(c.as_name))
                fail(c, "a Func named '" + c.as_name + "' already exists; name the new Func differently");
            // The intermediate: pure vars of f plus the new vars; its update reduces over the
            // RVars not preserved; f's update keeps the preserved ones (Halide's rfactor).
            FuncModel in;
            in.name = c.as_name;
            in.created = true;
            in.vars = f.vars;
            for (const auto &v : newv) in.vars.push_back(v);
            StageModel pure;
            for (auto it = in.vars.rbegin(); it != in.vars.rend(); ++it) pure.dims.push_back({*it, *it, false, true});
            StageModel upd;
            for (size_t i = 0; i < newv.size(); i++) {
                // The new var spans the RVar it replaces, and inherits a dropped guard's risk.
                const DimModel &from = s.dims[s.find(rv[i])];
                DimModel nv{newv[i], newv[i], false, true, from.extent};
                nv.guarded_keep = from.rvar_guard_keep;
                nv.guarded_split = from.guarded_split;
                upd.dims.push_back(nv);
                for (auto &d : pure.dims)
                    if (d.name == newv[i]) d.extent = from.extent;
            }
            StageModel kept;
            for (const auto &d : s.dims) {
                bool preserved = std::find(rv.begin(), rv.end(), d.name) != rv.end();
                if (d.rvar && !preserved) upd.dims.push_back(d);
                if (!d.rvar) upd.dims.push_back(d);
                if (!d.rvar || preserved) kept.dims.push_back(d);
            }
            kept.associative = s.associative;
            s = kept;
            in.stages = {pure, upd};
            in.consumers = {f.name};
            in.rfactor_of = f.name;
            // An earlier intermediate of f's update is read by this one now (a tree of rfactors).
            for (auto &[name, g] : m_.funcs)
                if (g.rfactor_of == f.name && g.consumers == std::vector<std::string>{f.name}) {
                    g.consumers = {in.name};
                    g.rfactor_of = in.name;
                }
            m_.funcs[in.name] = in;
            m_.order.push_back(in.name);
        } else if (p == "unscheduled") {
            if (st_.stage < 0)
                fail(c, "unscheduled() marks an update stage left at Halide's default loops: `" + f.name +
                            ".update(k).unscheduled()`; a pure stage needs no mark");
            if (stage(f).scheduled)
                fail(c, "unscheduled() says the stage has no schedule; it cannot share `" + f.name +
                            ".update(" + std::to_string(st_.stage) + ")` with other primitives (drop one)");
            stage(f).unscheduled_loc = c.loc.line > 0 ? c.loc : st_.loc;
        } else if (p == "atomic") {
            if (st_.stage < 0) fail(c, "atomic applies to update stages: `" + f.name + ".update(k).atomic()`");
            if (n == 1 && !(c.args[0].is_int() && (c.args[0].value == 0 || c.args[0].value == 1)))
                fail(c, "the argument is override_associativity_test: 0 or 1");
            s.atomic = true;
            if (n == 1 && c.args[0].value == 1) s.associative = true;
        } else if (p == "bound" || p == "align_bounds") {
            std::string v = ident(c, 0, "a pure var of " + f.name);
            if (std::find(f.vars.begin(), f.vars.end(), v) == f.vars.end())
                fail(c, "'" + v + "' is not a pure var of " + f.name + did_you_mean(v, f.vars) +
                            " valid: " + join(f.vars), &c.args[0].loc);
            if (p == "bound") {
                integer(c, 1, "min");
                positive(c, 2, "extent");
            } else {
                positive(c, 1, "modulus");
                if (n > 2) integer(c, 2, "remainder");
            }
        } else if (p == "reorder_storage") {
            std::set<std::string> seen;
            for (size_t i = 0; i < n; i++) {
                std::string v = ident(c, i, "a pure var of " + f.name);
                if (std::find(f.vars.begin(), f.vars.end(), v) == f.vars.end())
                    fail(c, "'" + v + "' is not a pure var of " + f.name + did_you_mean(v, f.vars) +
                                " valid: " + join(f.vars), &c.args[i].loc);
                if (!seen.insert(v).second) fail(c, "'" + v + "' appears twice", &c.args[i].loc);
            }
        } else if (p == "store_in") {
            const ScheduleArg &a = c.args[0];
            const auto &names = memory_type_names();
            bool ok = (a.kind == ScheduleArg::Kind::Memory || a.is_ident()) &&
                      std::find(names.begin(), names.end(), a.name) != names.end();
            if (!ok)
                fail(c, "'" + a.str() + "' is not a MemoryType" + did_you_mean(a.name, names) +
                            " valid: " + join(names), &a.loc);
            if ((a.name == "GPUShared" || a.name == "GPUTexture") && !has_gpu(m_.target)) gpu_check(c);
        } else if (p == "compute_with") {
            std::string g = ident(c, 0, "a func");
            ident(c, 1, "a var");
            if (!m_.find(g)) fail(c, "unknown func '" + g + "'" + did_you_mean(g, m_.names()), &c.args[0].loc);
            if (g == f.name) fail(c, "a Func cannot be computed with itself", &c.args[0].loc);
        } else if (p == "prefetch") {
            std::string src = ident(c, 0, "a func or input");
            if (!m_.find(src) && std::find(m_.inputs.begin(), m_.inputs.end(), src) == m_.inputs.end()) {
                auto all = m_.names();
                all.insert(all.end(), m_.inputs.begin(), m_.inputs.end());
                fail(c, "unknown func or input '" + src + "'" + did_you_mean(src, all), &c.args[0].loc);
            }
            dim(f, c, 1);
            dim(f, c, 2);
            if (n > 3) integer(c, 3, "offset");
            if (n > 4) {
                static const std::vector<std::string> strategies = {"Clamp", "GuardWithIf", "NonFaulting"};
                const ScheduleArg &a = c.args[4];
                if (!a.is_ident() || std::find(strategies.begin(), strategies.end(), a.name) == strategies.end())
                    fail(c, "'" + a.str() + "' is not a PrefetchBoundStrategy; valid: " + join(strategies), &a.loc);
            }
        } else if (p == "in") {
            if (m_.find(c.as_name))
                fail(c, "a Func named '" + c.as_name + "' already exists; name the wrapper differently");
            FuncModel w;
            w.name = c.as_name;
            w.created = true;
            w.vars = f.vars;
            StageModel pure;
            for (auto it = w.vars.rbegin(); it != w.vars.rend(); ++it) pure.dims.push_back({*it, *it, false, true});
            w.stages = {pure};
            if (n == 1) {
                std::string g = ident(c, 0, "a consumer of " + f.name);
                auto &cons = f.consumers;
                auto it = std::find(cons.begin(), cons.end(), g);
                if (it == cons.end())
                    fail(c, g + " does not consume " + f.name + "; valid: " + join(cons), &c.args[0].loc);
                *it = w.name;
                w.consumers = {g};
            } else {
                w.consumers = f.consumers;
                f.consumers = {w.name};
                // An output's wrapper is realized in its place (LoweredPipeline::output_wrappers):
                // the output becomes a Func that can be computed per tile of the wrapper.
                w.is_output = f.is_output;
                f.is_output = false;
            }
            m_.funcs[w.name] = w;
            m_.order.push_back(w.name);
        }
        // compute_root, store_root, compute_at details: placement checks run in finish_checks.
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

std::vector<std::string> all_dims(const FuncModel &f) { return stage_loops(f); }

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
            auto fail = [&](const std::string &msg) {
                throw UserError(where(c.loc.line > 0 ? c.loc : st.loc, s.file) + st.stage_name() + "." +
                                c.str() + ": " + msg);
            };
            if (c.name == "compute_at" || c.name == "store_at") {
                std::string why = compute_at_problem(m, st.func, c.args[0].name, c.args[1].name);
                if (!why.empty()) fail(why);
            } else if (c.name == "stream_stores") {
                const FuncModel &f = *m.find(st.func);
                if (!f.is_output && f.place.kind != Placement::Root)
                    fail(st.func + (f.place.kind == Placement::At ? " is computed at " + f.place.func + "." + f.place.var
                                                                 : std::string(" is inlined")) +
                         ": only a Func with a buffer of its own at root has stores to stream, and one that a "
                         "consumer re-reads from cache should not be streamed; compute_root() it first, or stream "
                         "the output that reads it");
            } else if (c.name == "compute_with") {
                auto dims = all_dims(*m.find(c.args[0].name));
                if (std::find(dims.begin(), dims.end(), c.args[1].name) == dims.end())
                    fail(c.args[0].name + " has no var '" + c.args[1].name + "'" +
                         did_you_mean(c.args[1].name, dims) + "; vars: " + join(dims));
            }
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
