#include "codegen/jit_segments.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <queue>
#include <set>
#include <thread>

#include "lower/flat_row_index.h"
#include "lower/loop_scratch.h"
#include "support/cores.h"
#include "support/error.h"
#include "support/debug_output.h"

namespace loom {

namespace {

using Halide::Internal::Function;

/// The scheduled Func graph as root groups: who owns each Func, which roots read which, and which
/// roots must stay in one segment.
struct RootGraph {
    std::map<std::string, Function> env;       ///< every Func the outputs reach
    std::map<std::string, std::string> owner;  ///< Func → root whose loops compute it ("" inlined)
    std::vector<std::string> roots;            ///< in execution order
    std::map<std::string, int> position;       ///< root → index in roots
    std::map<std::string, int> weight;         ///< root → Funcs in its group
    std::set<std::pair<std::string, std::string>> reads;  ///< (root, root it reads)
    std::vector<std::pair<std::string, std::string>> ties;  ///< roots that must share a segment
    std::set<std::string> whole_buffer;        ///< roots another segment may read as a buffer
    /// A global wrapper's name (`f.in()`, `f`'s only wrapper: every reader but the wrapper reads
    /// it) → the graph Func `f` it wraps, whose shape the wrapper has.
    std::map<std::string, std::string> wrapped_by;
};

std::string owner_of(RootGraph &g, const std::string &name) {
    auto it = g.owner.find(name);
    if (it != g.owner.end()) return it->second;
    auto f = g.env.find(name);
    if (f == g.env.end()) return "";  // a Func outside the graph (cannot happen after locking)
    const Halide::LoopLevel &level = f->second.schedule().compute_level();
    std::string o;
    if (level.is_root()) o = name;
    else if (level.is_inlined()) o = "";
    else o = owner_of(g, level.func());
    return g.owner[name] = o;
}

/// The Funcs \p f calls. An extern stage reads only its Func arguments' buffers; Halide's
/// find_direct_calls also lists what those arguments read (it visits their definitions), which
/// would tie a library stage to the loops of its input's producer.
std::map<std::string, Function> direct_reads(const Function &f) {
    if (!f.has_extern_definition()) return Halide::Internal::find_direct_calls(f);
    std::map<std::string, Function> out;
    for (const auto &arg : f.extern_arguments())
        if (arg.is_func()) {
            Function a(arg.func);
            out.emplace(a.name(), a);
        }
    return out;
}

/// The wrapper that \p callee has for consumer \p f (`callee.in(f)`, or a global `callee.in()`
/// unless \p f is that wrapper: lowering makes \p f read it instead), or \p callee itself (also
/// where \p f is \p callee: an update reads its own Func, never a wrapper of it).
Function read_through_wrapper(const Function &callee, const Function &f) {
    if (callee.same_as(f)) return callee;
    const auto &w = callee.schedule().wrappers();
    auto it = w.find(f.name());
    if (it == w.end()) it = w.find("");
    if (it == w.end()) return callee;
    Function wrapper(it->second);
    return wrapper.same_as(f) ? callee : wrapper;
}

/// The LoweredFunc whose shape Func \p name has: its own, or for a global wrapper the wrapped one's.
const LoweredFunc *shape_source(const LoweredPipeline &p, const std::map<std::string, std::string> &wrapped_by,
                                const std::string &name) {
    if (const LoweredFunc *lf = p.find_realized(name)) return lf;
    auto w = wrapped_by.find(name);
    return w == wrapped_by.end() ? nullptr : p.find_realized(w->second);
}

/// Whether every wrapper of \p f is one consumer's copy computed at root (a schedule's staging of
/// a buffer in another layout): \p f is then still whole where the copies read it.
bool only_root_consumer_wrappers(const Function &f) {
    for (const auto &[consumer, ptr] : f.schedule().wrappers())
        if (consumer.empty() || !Function(ptr).schedule().compute_level().is_root()) return false;
    return true;
}

/// The Funcs with storage that \p f reads, as (their root, the Func), looking through inlined Funcs
/// (their code is part of \p f's) and reading a callee's wrapper for \p f where it has one.
void stored_reads(RootGraph &g, const Function &f, std::set<std::pair<std::string, std::string>> &out,
                  std::set<std::string> &seen) {
    for (const auto &read : direct_reads(f)) {
        const Function callee = read_through_wrapper(read.second, f);
        const std::string name = callee.name();
        if (!seen.insert(name).second) continue;
        std::string o = owner_of(g, name);
        if (o.empty()) stored_reads(g, callee, out, seen);
        else out.emplace(o, name);
    }
}

/// Extents of Func \p name in Halide order (innermost first): a LoweredFunc's (a global wrapper's:
/// the wrapped one's, \p wrapped_by), or an extern stage's
/// (LoweredPipeline::extern_shapes); empty when the graph does not know them.
std::vector<int> halide_extents(const LoweredPipeline &p, const std::map<std::string, std::string> &wrapped_by,
                                const std::string &name) {
    const Shape *shape = nullptr;
    if (const LoweredFunc *lf = shape_source(p, wrapped_by, name)) shape = &lf->extents;
    else if (auto it = p.extern_shapes.find(name); it != p.extern_shapes.end()) shape = &it->second;
    std::vector<int> e;
    if (shape)
        for (auto it = shape->rbegin(); it != shape->rend(); ++it) e.push_back((int)*it);
    return e;
}

/// A crossing buffer starts at 0, has the Func's extents and is dense in its storage order:
/// constants that Halide specialises the code on, as it does for the buffers inside one pipeline
/// (left symbolic, the cut model ran far slower; bench/DECISIONS.md#d51-jit-segments).
/// A moving shape's extents and strides are Exprs over the size Params: Halide then knows how
/// the buffer relates to the sizes its specializations test, as inside one pipeline.
void constrain_dense(Halide::OutputImageParam p, const SegmentBoundary &b, const LoweredPipeline &lp) {
    if (b.sym_extents.empty()) {
        for (size_t d = 0; d < b.extents.size(); d++) p.dim((int)d).set_bounds(0, b.extents[d]).set_stride(b.strides[d]);
        return;
    }
    std::vector<Halide::Expr> extent, stride(b.extents.size());
    for (const auto &e : b.sym_extents) extent.push_back(lp.size_expr(e));
    Halide::Expr s = 1;
    for (int d : b.storage_order) {
        stride[d] = s;
        s = Halide::Internal::simplify(s * extent[d]);
    }
    for (size_t d = 0; d < extent.size(); d++) p.dim((int)d).set_bounds(0, extent[d]).set_stride(stride[d]);
}

/// Whether the shape lowering gives a Func (\p lf) is exact at every size: fixed, or the symbolic
/// shape of the graph value it computes (a helper's moving extents are only guessed).
bool exact_shape_at_every_size(const LoweredPipeline &p, const LoweredFunc *lf) {
    if (!p.dynamic.active()) return true;
    return lf && (!lf->sym_extents.empty() || lf->dynamic_vars.empty());
}

/// \p f's dimensions from the innermost in memory outwards (its reorder_storage), and whether its
/// storage is plain (no fold, bound or alignment that would make the buffer differ from dense).
std::vector<int> storage_order(const Function &f, bool &plain) {
    std::vector<int> order;
    plain = true;
    const auto &args = f.args();
    for (const auto &sd : f.schedule().storage_dims()) {
        plain = plain && !sd.fold_factor.defined() && !sd.bound.defined() && !sd.alignment.defined();
        for (size_t d = 0; d < args.size(); d++)
            if (args[d] == sd.var) order.push_back((int)d);
    }
    if (order.size() != args.size()) {
        order.clear();
        for (size_t d = 0; d < args.size(); d++) order.push_back((int)d);
    }
    return order;
}

/// Whether a stage of \p f computes past the Func's extents (\p lf's; unknown without it): a split
/// of a pure var whose tail rounds the loop up (RoundUp, a predicated tail, or Auto on an update's
/// pure var) by a factor that does not divide what it splits. Such a Func reads its inputs, and
/// fills its own buffer, past their extents; in one pipeline Halide grows those realizations, but
/// a buffer that crosses a cut has the Func's exact shape.
bool computes_past_extents(const Function &f, const LoweredFunc *lf) {
    std::map<std::string, int64_t> extent;  // pure vars and what splits make of them; -1: unknown
    const auto &args = f.args();             // Halide order, innermost first
    for (size_t d = 0; d < args.size(); d++)
        extent[args[d]] = lf && lf->extents.size() == args.size() ? lf->extents[args.size() - 1 - d] : -1;
    // Each stage with its specializations (dynamic shapes: the branch that keeps the written tails).
    std::vector<std::pair<const Halide::Internal::Definition *, bool>> defs{{&f.definition(), false}};
    for (const auto &u : f.updates()) defs.push_back({&u, true});
    for (size_t k = 0; k < defs.size(); k++)
        for (const auto &sp : defs[k].first->specializations()) defs.push_back({&sp.definition, defs[k].second});
    for (size_t k = 0; k < defs.size(); k++) {
        const bool update = defs[k].second;
        if (!defs[k].first->defined()) continue;
        std::map<std::string, int64_t> ext = extent;
        for (const auto &sp : defs[k].first->schedule().splits()) {
            auto it = ext.find(sp.old_var);
            if (sp.is_rename()) {
                if (it != ext.end()) ext[sp.outer] = it->second;
            } else if (sp.is_fuse()) {
                auto a = ext.find(sp.outer), b = ext.find(sp.inner);
                if (a != ext.end() && b != ext.end())
                    ext[sp.old_var] = a->second < 0 || b->second < 0 ? -1 : a->second * b->second;
            } else if (sp.is_split() && it != ext.end()) {  // a pure var's split (RVars are not in ext)
                const int64_t *factor = Halide::Internal::as_const_int(sp.factor);
                const int64_t e = it->second;
                using TS = Halide::TailStrategy;
                bool rounds = sp.tail == TS::RoundUp || sp.tail == TS::PredicateLoads ||
                              sp.tail == TS::PredicateStores || (sp.tail == TS::Auto && update);
                if (rounds && (!factor || e < 0 || e % *factor != 0)) return true;
                ext[sp.outer] = factor && e >= 0 ? (e + *factor - 1) / *factor : -1;
                ext[sp.inner] = factor ? *factor : -1;
            }
        }
    }
    return false;
}

RootGraph analyze(const LoweredPipeline &p) {
    RootGraph g;
    std::vector<Function> outs;
    for (size_t k = 0; k < p.output_funcs.size(); k++) outs.push_back(p.realized_output(k).function());
    g.env = Halide::Internal::build_environment(outs);
    // `in()` wrappers are called only once lowering rewires their consumers: add them, and what
    // they reach, by hand.
    for (bool grew = true; grew;) {
        grew = false;
        auto known = g.env;
        for (const auto &[name, f] : known)
            for (const auto &[consumer, ptr] : f.schedule().wrappers()) {
                Function w(ptr);
                if (g.env.count(w.name())) continue;
                for (const auto &[n, wf] : Halide::Internal::find_transitive_calls(w)) g.env.emplace(n, wf);
                grew = true;
            }
    }
    // LoopLevel::func() needs locked levels; lowering locks them too, so this changes nothing.
    for (auto &[name, f] : g.env) f.lock_loop_levels();
    for (const auto &[name, f] : g.env) owner_of(g, name);

    // A Func computed inside its global wrapper is read through the wrapper, a root of its shape
    // (bench/DECISIONS.md#d126-jit-segments-cut-at-wrappers-costliest-first).
    for (const auto &[name, f] : g.env) {
        const auto &w = f.schedule().wrappers();
        if (w.size() != 1 || !w.begin()->first.empty()) continue;
        if (p.find_realized(name)) g.wrapped_by[Function(w.begin()->second).name()] = name;
    }

    // Which roots may be read across a cut: Funcs the graph made (known extents) or their global
    // wrappers, computed at root (a library stage's whole output too), one value per point, and
    // wrapped by nobody.
    for (const auto &[name, f] : g.env) {
        if (g.owner[name] != name) continue;
        bool plain = true;
        storage_order(f, plain);
        const LoweredFunc *lf = shape_source(p, g.wrapped_by, name);
        if ((lf || p.extern_shapes.count(name)) && f.outputs() == 1 && only_root_consumer_wrappers(f) && plain &&
            exact_shape_at_every_size(p, lf))
            g.whole_buffer.insert(name);
    }

    std::map<std::string, std::set<std::string>> deps;  // root → roots it reads
    for (const auto &[name, f] : g.env) {
        const std::string &o = g.owner[name];
        if (o.empty()) continue;
        deps[o];
        g.weight[o]++;
        std::set<std::pair<std::string, std::string>> read;
        std::set<std::string> seen;
        stored_reads(g, f, read, seen);
        for (const auto &[root, func] : read) {
            if (root == o) continue;
            deps[o].insert(root);
            // A Func computed inside another root's loops and read from here: Halide decides
            // whether that is legal; no cut may separate the two.
            if (func != root) g.ties.emplace_back(o, root);
        }
        // Stored or fused inside another root's loops, or wrapped by Funcs computed elsewhere.
        const Halide::LoopLevel &store = f.schedule().store_level();
        if (store.defined() && !store.is_root() && !store.is_inlined())
            g.ties.emplace_back(o, owner_of(g, store.func()));
        std::vector<Halide::Internal::Definition> defs{f.definition()};
        for (const auto &u : f.updates()) defs.push_back(u);
        for (const auto &d : defs) {
            if (!d.defined()) continue;
            const Halide::LoopLevel &fuse = d.schedule().fuse_level().level;
            if (fuse.defined() && !fuse.is_root() && !fuse.is_inlined())
                g.ties.emplace_back(o, owner_of(g, fuse.func()));
        }
        for (const auto &[consumer, wrapper] : f.schedule().wrappers()) {
            Function w(wrapper);
            const Halide::LoopLevel &wl = w.schedule().compute_level();
            if (!wl.is_root() && !wl.is_inlined()) g.ties.emplace_back(o, owner_of(g, wl.func()));
            // A root copy for one consumer is a root of its own that the consumer reads (stored_reads).
            if (!consumer.empty() && !wl.is_root()) g.ties.emplace_back(o, owner_of(g, consumer));
        }
    }

    // A root read by a group that computes past its extents, or one that does so itself, needs a
    // larger realization than its own shape: it cannot be a crossing buffer (a cut model then read
    // past it: the JIT fell back to one pipeline, an artifact would fail at run time).
    // A conv's in() wrapper (no LoweredFunc of its own) is read with the conv's extents.
    std::map<std::string, const LoweredFunc *> wrapped;
    for (const auto &[name, f] : g.env)
        for (const auto &[consumer, w] : f.schedule().wrappers())
            if (const LoweredFunc *lf = p.find(name)) wrapped[Function(w).name()] = lf;
    for (const auto &[name, f] : g.env) {
        const std::string &o = g.owner[name];
        const LoweredFunc *lf = p.find_realized(name);
        if (!lf)
            if (auto w = wrapped.find(name); w != wrapped.end()) lf = w->second;
        if (o.empty() || !computes_past_extents(f, lf)) continue;
        g.whole_buffer.erase(o);
        for (const auto &read : deps[o]) g.whole_buffer.erase(read);
    }

    // Execution order: producers first; among ready roots, the one the graph lists first (Funcs a
    // schedule made, such as a root rfactor, take the place of their earliest reader).
    std::map<std::string, int> priority;
    for (size_t k = 0; k < p.funcs.size(); k++) {
        const std::string &n = p.funcs[k].name;
        if (deps.count(n)) priority[n] = (int)k;
        // A wrapped output is computed inside its wrapper, which takes the output's place.
        auto w = p.output_wrappers->find(n);
        if (w != p.output_wrappers->end() && deps.count(w->second.name())) priority[w->second.name()] = (int)k;
    }
    std::map<std::string, std::set<std::string>> readers;
    for (const auto &[r, ds] : deps)
        for (const auto &d : ds) readers[d].insert(r);
    std::function<int(const std::string &)> prio = [&](const std::string &r) -> int {
        auto it = priority.find(r);
        if (it != priority.end()) return it->second;
        priority[r] = INT_MAX;  // cycle guard
        int best = INT_MAX;
        for (const auto &rd : readers[r]) best = std::min(best, prio(rd));
        return priority[r] = best;
    };
    std::map<std::string, int> pending;
    using Item = std::pair<int, std::string>;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (const auto &[r, ds] : deps) {
        pending[r] = (int)ds.size();
        if (ds.empty()) ready.emplace(prio(r), r);
    }
    while (!ready.empty()) {
        std::string r = ready.top().second;
        ready.pop();
        g.position[r] = (int)g.roots.size();
        g.roots.push_back(r);
        for (const auto &rd : readers[r])
            if (--pending[rd] == 0) ready.emplace(prio(rd), rd);
    }
    internal_check(g.roots.size() == deps.size(), "pipeline segments: the root Funcs form a cycle");
    for (const auto &[r, ds] : deps)
        for (const auto &d : ds) g.reads.emplace(r, d);
    return g;
}

std::vector<bool> legal_positions(const RootGraph &g) {
    size_t n = g.roots.size();
    std::vector<bool> legal(n, n > 1);
    if (n > 0) legal[0] = false;
    for (const auto &[reader, read] : g.reads) {
        int a = g.position.at(read), b = g.position.at(reader);
        if (g.whole_buffer.count(read)) continue;
        for (int k = a + 1; k <= b; k++) legal[k] = false;
    }
    for (const auto &[x, y] : g.ties) {
        if (!g.position.count(x) || !g.position.count(y)) continue;
        int a = std::min(g.position.at(x), g.position.at(y)), b = std::max(g.position.at(x), g.position.at(y));
        for (int k = a + 1; k <= b; k++) legal[k] = false;
    }
    return legal;
}

CutPlan plan_of(const RootGraph &g, int max_segments, int min_weight) {
    CutPlan plan;
    plan.roots = g.roots;
    for (const auto &r : g.roots) plan.weight.push_back(g.weight.at(r));
    plan.legal_before = legal_positions(g);

    int total = 0;
    for (int w : plan.weight) total += w;
    int segments = std::min(max_segments, total / std::max(1, min_weight));
    if (segments <= 1) return plan;
    // prefix[k]: weight of roots before position k. For each ideal boundary j·total/segments, the
    // legal position closest to it, after the previous cut.
    std::vector<int> prefix(plan.roots.size() + 1, 0);
    for (size_t k = 0; k < plan.roots.size(); k++) prefix[k + 1] = prefix[k] + plan.weight[k];
    int last = 0;
    for (int j = 1; j < segments; j++) {
        double ideal = (double)total * j / segments;
        int best = -1;
        for (int k = last + 1; k < (int)plan.roots.size(); k++) {
            if (!plan.legal_before[k]) continue;
            if (best < 0 || std::abs(prefix[k] - ideal) < std::abs(prefix[best] - ideal)) best = k;
        }
        if (best < 0) break;
        // Not a segment lighter than a quarter of the ideal one.
        if (prefix[best] - prefix[last] < total / segments / 4) continue;
        plan.cuts.push_back(best);
        last = best;
    }
    if (!plan.cuts.empty() && total - prefix[plan.cuts.back()] < total / segments / 4) plan.cuts.pop_back();
    return plan;
}

SegmentedPipeline uncut(const LoweredPipeline &p) {
    SegmentedPipeline sp;
    PipelineSegment s;
    s.pipeline = p.pipeline();
    for (size_t k = 0; k < p.output_funcs.size(); k++) {
        s.outputs.push_back(p.realized_output_name(k));
        s.boundary_of_output.push_back(-1);
        s.graph_output_of_output.push_back((int)k);
    }
    s.funcs = (int)p.funcs.size();
    sp.segments.push_back(std::move(s));
    return sp;
}

SegmentedPipeline cut_of(const RootGraph &g, const LoweredPipeline &p, const CutPlan &plan) {
    if (plan.cuts.empty()) return uncut(p);
    SegmentedPipeline sp;
    std::map<std::string, int> seg_of_root;
    for (size_t k = 0, s = 0; k < plan.roots.size(); k++) {
        while (s < plan.cuts.size() && (int)k >= plan.cuts[s]) s++;
        seg_of_root[plan.roots[k]] = (int)s;
    }
    int nseg = (int)plan.cuts.size() + 1;
    sp.segments.resize(nseg);

    std::vector<std::string> realized;  // the Func each graph output is realized by
    for (size_t k = 0; k < p.output_funcs.size(); k++) realized.push_back(p.realized_output_name(k));

    // Boundaries: roots read by a later segment.
    std::map<std::string, int> boundary_index;
    for (const auto &[reader, read] : g.reads) {
        int a = seg_of_root.at(read), b = seg_of_root.at(reader);
        if (a == b) continue;
        internal_check(a < b && g.whole_buffer.count(read), "pipeline segments: illegal cut before '", reader, "'");
        auto [it, fresh] = boundary_index.emplace(read, (int)sp.boundaries.size());
        if (fresh) {
            const Function &f = g.env.at(read);
            SegmentBoundary bd;
            bd.func = read;
            bd.producer = a;
            for (size_t o = 0; o < realized.size(); o++)
                if (realized[o] == read) bd.graph_output = (int)o;
            bd.type = f.output_types()[0];
            // An artifact's argument name: a wrapper's '$' is no C identifier character.
            std::string param_name = read + "_from_segment_" + std::to_string(a);
            std::replace(param_name.begin(), param_name.end(), '$', '_');
            bd.param = Halide::ImageParam(bd.type, f.dimensions(), param_name);
            bd.extents = halide_extents(p, g.wrapped_by, read);
            bool plain = true;
            bd.storage_order = storage_order(f, plain);
            if (bd.graph_output >= 0)  // the caller's buffer: dense in Halide order
                for (size_t d = 0; d < bd.storage_order.size(); d++) bd.storage_order[d] = (int)d;
            bd.strides.assign(bd.extents.size(), 0);
            int stride = 1;
            for (int d : bd.storage_order) {
                bd.strides[d] = stride;
                stride *= bd.extents[d];
            }
            if (const LoweredFunc *lf = shape_source(p, g.wrapped_by, read); lf && !lf->sym_extents.empty())
                bd.sym_extents.assign(lf->sym_extents.rbegin(), lf->sym_extents.rend());
            constrain_dense(bd.param, bd, p);
            sp.boundaries.push_back(bd);
        }
        auto &rd = sp.segments[b].reads;
        if (std::find(rd.begin(), rd.end(), it->second) == rd.end()) rd.push_back(it->second);
    }
    for (auto &s : sp.segments) std::sort(s.reads.begin(), s.reads.end());

    std::vector<Function> all_outs;
    for (const auto &[name, f] : g.env) all_outs.push_back(f);
    for (int s = 0; s < nseg; s++) {
        PipelineSegment &seg = sp.segments[s];
        for (size_t k = 0; k < realized.size(); k++) {
            const std::string &o = realized[k];
            if (seg_of_root.at(g.owner.at(o)) != s) continue;
            auto b = boundary_index.find(o);
            seg.outputs.push_back(o);
            seg.boundary_of_output.push_back(b == boundary_index.end() ? -1 : b->second);
            seg.graph_output_of_output.push_back((int)k);
        }
        for (size_t b = 0; b < sp.boundaries.size(); b++) {
            const std::string &name = sp.boundaries[b].func;
            if (sp.boundaries[b].producer != s ||
                std::find(seg.outputs.begin(), seg.outputs.end(), name) != seg.outputs.end())
                continue;
            seg.outputs.push_back(name);
            seg.boundary_of_output.push_back((int)b);
            seg.graph_output_of_output.push_back(-1);
        }
        for (const auto &[name, o] : g.owner)
            if (!o.empty() && seg_of_root.at(o) == s) seg.funcs++;

        // A private copy of the whole Func graph (segments compile on several threads, and each
        // rewires its own calls), its calls to earlier segments' roots replaced by their params.
        auto [copies, copied_env] = Halide::Internal::deep_copy(all_outs, g.env);
        for (int b : seg.reads) {
            const SegmentBoundary &bd = sp.boundaries[b];
            Halide::Func stub(bd.func + "_read_in_segment_" + std::to_string(s));
            std::vector<Halide::Var> vars(bd.extents.size());
            std::vector<Halide::Expr> args(vars.begin(), vars.end());
            stub(vars) = bd.param(args);
            // Readers of a global wrapper call the Func it wraps (lowering rewires the calls).
            auto wrapped = g.wrapped_by.find(bd.func);
            const std::string called = wrapped == g.wrapped_by.end() ? bd.func : wrapped->second;
            const Function &orig = copied_env.at(called);
            // A consumer's own root copy of the boundary (`in(consumer)`) stays in the consumer's
            // segment: the consumer calls the copy by name, and the copy reads the param.
            for (const auto &[consumer, ptr] : orig.schedule().wrappers()) {
                auto c = copied_env.find(consumer);
                if (c != copied_env.end()) c->second.substitute_calls(orig, Function(ptr));
            }
            for (auto &[name, f] : copied_env) {
                if (name == bd.func || name == called) continue;
                f.substitute_calls(orig, stub.function());
                // A library stage takes its inputs as buffers, not calls: give it the param's.
                if (f.has_extern_definition())
                    for (auto &arg : f.extern_arguments())
                        if (arg.is_func() && Function(arg.func).same_as(orig))
                            arg = Halide::ExternFuncArgument(bd.param.parameter());
            }
        }
        std::vector<Halide::Func> outs;
        for (size_t k = 0; k < seg.outputs.size(); k++) {
            outs.emplace_back(copied_env.at(seg.outputs[k]));
            // Its readers are compiled for a dense buffer of the Func's own shape: so is its writer.
            if (seg.boundary_of_output[k] >= 0 && seg.graph_output_of_output[k] < 0)
                constrain_dense(outs.back().output_buffer(), sp.boundaries[seg.boundary_of_output[k]], p);
        }
        seg.pipeline = Halide::Pipeline(outs);
        if (p.dynamic.active()) keep_loop_scratch_on_pseudostack(seg.pipeline);
        fold_flat_row_indices(seg.pipeline);
    }
    return sp;
}

}  // namespace

void SegmentBoundary::shape_at(const std::map<std::string, int64_t> &sizes, std::vector<int> &extents_at,
                               std::vector<int> &strides_at) const {
    if (sym_extents.empty()) {
        extents_at = extents;
        strides_at = strides;
        return;
    }
    extents_at.clear();
    for (const auto &e : sym_extents) extents_at.push_back((int)e.eval(sizes));
    strides_at.assign(extents_at.size(), 0);
    int64_t stride = 1;
    for (int d : storage_order) {
        strides_at[d] = (int)stride;
        stride *= extents_at[d];
    }
}

std::string describe_cuts(const CutPlan &plan) {
    std::vector<size_t> starts{0};
    for (int c : plan.cuts) starts.push_back((size_t)c);
    starts.push_back(plan.roots.size());
    std::string out;
    for (size_t s = 0; s + 1 < starts.size(); s++) {
        int funcs = 0;
        std::string names;
        for (size_t k = starts[s]; k < starts[s + 1]; k++) {
            funcs += plan.weight[k];
            names += (k > starts[s] ? ", " : "") + plan.roots[k];
        }
        out += str_cat("pipeline ", s + 1, " of ", starts.size() - 1, " (", funcs, " computed Funcs): ", names, "\n");
    }
    return out;
}

std::map<std::string, std::string> kernel_roots(const LoweredPipeline &p) { return analyze(p).owner; }

CutPlan plan_cuts(const LoweredPipeline &p, int max_segments, int min_weight) {
    return plan_of(analyze(p), max_segments, min_weight);
}

SegmentedPipeline cut_pipeline(const LoweredPipeline &p, const CutPlan &plan) {
    return plan.cuts.empty() ? uncut(p) : cut_of(analyze(p), p, plan);
}

SegmentedPipeline segment_pipeline(const LoweredPipeline &p, const Halide::Target &target, int max_segments,
                                   SegmentRunner runner) {
    SegmentLimits lim = default_segment_limits(p, target, runner);
    if (max_segments > 0 && lim.max_segments > 1) lim = SegmentLimits{max_segments, 1};
    if (lim.max_segments <= 1) return uncut(p);
    RootGraph g = analyze(p);
    CutPlan plan = plan_of(g, lim.max_segments, lim.min_funcs);
    if (debug_output() && !plan.cuts.empty())
        std::cerr << "loom: compiled as\n" << describe_cuts(plan);
    return cut_of(g, p, plan);
}

void run_in_parallel(size_t n, const std::function<void(size_t)> &work, const std::vector<int> &cost) {
    std::vector<size_t> order(n);
    for (size_t k = 0; k < n; k++) order[k] = k;
    if (cost.size() == n)
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
    std::vector<std::exception_ptr> failed(n);
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i; (i = next++) < n;) {
            const size_t k = order[i];
            try {
                work(k);
            } catch (...) {
                failed[k] = std::current_exception();
            }
        }
    };
    size_t threads = std::min<size_t>(n, (size_t)usable_cores());
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; t++) pool.emplace_back(worker);
    worker();
    for (auto &t : pool) t.join();
    for (auto &e : failed)
        if (e) std::rethrow_exception(e);
}

std::vector<int> segment_costs(const SegmentedPipeline &segs) {
    std::vector<int> cost;
    for (const auto &s : segs.segments) cost.push_back(s.funcs);
    return cost;
}

SegmentLimits default_segment_limits(const LoweredPipeline &p, const Halide::Target &target, SegmentRunner runner) {
    SegmentLimits lim;
    long forced = 0;
    if (const char *e = std::getenv("LOOM_PIPELINES")) {
        char *end = nullptr;
        forced = std::strtol(e, &end, 10);
        user_check(*e && *end == 0 && forced >= 1 && forced <= 1024, "LOOM_PIPELINES='", e,
                   "' is not a number of pipelines; give a positive number, e.g. LOOM_PIPELINES=1 "
                   "(one pipeline) or 4, or unset it");
    }
    // The JIT never cuts these, whatever LOOM_PIPELINES says: its crossing buffers are host
    // buffers, and a GPU pipeline would copy them to the host at every cut (extern stages run only
    // on the GPU). An artifact's chain keeps them on the device.
    if (runner == SegmentRunner::Jit) {
        if (target.has_gpu_feature()) return lim;
        for (const auto &f : p.funcs)
            if (f.is_extern || f.feeds_extern) return lim;
    }
    if (forced > 0) return SegmentLimits{(int)forced, 1};
    // Smaller pipelines lower faster even on one core, and more of them keep every core busy
    // (bench/DECISIONS.md#d51-jit-segments): the JIT takes 16 on any machine, where 8 on a small one
    // left the compile of the real CNNs longer and their runs no faster
    // (bench/DECISIONS.md#d168-jit-sixteen-segments-on-every-machine).
    unsigned hw = (unsigned)usable_cores();
    lim.max_segments = runner == SegmentRunner::Jit ? kJitSegments : (int)std::min(16u, std::max(8u, 2 * hw));
    return lim;
}

}  // namespace loom
