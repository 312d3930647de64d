#include "schedule/size_specialization.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "schedule/schedule_internal.h"

namespace loom {

namespace {

/// What one stage's calls do to its moving pure vars.
struct StagePlan {
    bool eligible = true;
    std::map<std::string, std::string> root;      ///< loop name -> the pure var it came from ("" none)
    std::map<std::string, int64_t> step;          ///< loop name -> its root's points per iteration (1: the root)
    std::set<std::string> inner;                  ///< loops of a constant extent (inner pieces of splits)
    std::map<std::string, int64_t> factors;       ///< pure var -> product of the factors splitting it
    std::map<std::string, int64_t> must_divide;   ///< pure var -> factor its extent must divide
    bool whole_moving_loop = false;               ///< unrolls or vectorizes a whole moving loop
    std::map<std::string, int64_t> guarded_tiles; ///< pure var -> factor of its written GuardWithIf split
    std::map<std::string, int64_t> direct_splits; ///< moving pure var -> factor of a `split` of the var itself
    std::map<std::string, std::string> split_inner; ///< moving pure var -> the inner piece of that split
    std::set<std::string> vectorized;             ///< loops vectorized (whole or by a factor)
    bool vectorizes_moving = false;               ///< vectorizes a loop whose root var moves
    bool undivided = false;                       ///< a RoundUp factor does not divide its planned extent
    std::set<std::string> vectorized_moving_roots; ///< the moving pure vars whose loops it vectorizes
    std::set<std::string> odd_split_roots;        ///< pure vars some split of whose loops is not by a power of two
};

const std::set<std::string> &func_level_calls() {
    static const std::set<std::string> s = {"compute_root",  "compute_inline",  "compute_at", "store_at",
                                            "store_root",    "stream_stores",   "bound",      "align_bounds",
                                            "reorder_storage", "store_in",      "in",         "gpu_max_registers"};
    return s;
}

std::string tail_of(const PrimitiveCall &c, size_t i) { return i < c.args.size() ? c.args[i].name : "Auto"; }

/// The most tiles (at the planned size) of a stage that gets tail copies: its last, guarded tile
/// is at least a quarter of its rows there.
constexpr int64_t kTailCopiesMaxTiles = 4;

// Whether pure var \p v of \p lf has an extent that moves with the input sizes.
bool var_moves(const LoweredFunc &lf, const std::string &v) {
    for (size_t i = 0; i < lf.vars.size() && i < lf.dynamic_vars.size(); i++)
        if (lf.vars[i] == v) return bool(lf.dynamic_vars[i]);
    return false;
}

}  // namespace

std::string narrow_vectors_note(int64_t lanes) {
    return std::string(kNarrowVectorsNote) + std::to_string(lanes) + ")";
}

std::set<std::string> &size_copies_left_out() {
    static std::set<std::string> kinds;
    return kinds;
}

const std::set<std::string> &size_copy_kinds() {
    static const std::set<std::string> kinds = {"half-tile", "by-value", "narrow", "narrow-vectors", "remainder",
                                                "undivided"};
    return kinds;
}

int &tail_remainder_copies() {
    static int copies = 3;
    return copies;
}

bool changes_stage_loops(const std::string &name) {
    static const std::set<std::string> s = {"split", "fuse", "reorder", "tile", "vectorize", "unroll", "parallel"};
    return s.count(name) > 0;
}

std::map<std::pair<std::string, int>, SizeSpecialization> plan_size_specializations(
    const Schedule &s, const LoweredPipeline &p, const Halide::Target &target, LongEnough *long_enough,
    bool assume_long_enough) {
    if (!p.dynamic.active() || target.has_gpu_feature()) {
        if (long_enough) *long_enough = {};
        return {};
    }
    sched_internal::Model final_model = sched_internal::build_model(p, target);
    for (const auto &st : s.statements) sched_internal::check_statement(final_model, st, s.file);
    return sched_internal::plan_size_specializations(s, p, target, final_model, long_enough, assume_long_enough);
}

std::map<std::pair<std::string, int>, SizeSpecialization> sched_internal::plan_size_specializations(
    const Schedule &s, const LoweredPipeline &p, const Halide::Target &target, Model &final_model,
    LongEnough *long_enough, bool assume_long_enough) {
    std::map<std::pair<std::string, int>, SizeSpecialization> out;
    if (long_enough) *long_enough = {};
    if (!p.dynamic.active() || target.has_gpu_feature()) return out;
    std::map<std::pair<std::string, int>, StagePlan> plans;
    std::map<std::string, const LoweredFunc *> func_of;  // schedule name -> the pipeline Func whose loops it has
    std::map<std::string, std::string> computed_at;      // Func -> the Func it is computed inside
    std::map<std::string, std::string> computed_at_loop;  // Func -> the loop of that Func it is computed in
    std::set<std::string> rfactored;  // Halide cannot rfactor a specialized definition: none for those Funcs
    for (const auto &lf : p.funcs) func_of[lf.name] = &lf;
    for (const auto &st : s.statements)
        for (const auto &c : st.calls) {
            // A wrapper's loops span the wrapped Func's.
            if (c.name == "in" && !c.as_name.empty() && func_of.count(st.func)) func_of[c.as_name] = func_of[st.func];
            if (c.name == "rfactor") rfactored.insert(st.func);
            if (c.name == "compute_at" && !c.args.empty()) {
                computed_at[st.func] = c.args[0].name;
                if (c.args.size() > 1) computed_at_loop[st.func] = c.args[1].name;
            }
        }
    std::set<std::string> hosts;  // Funcs with another computed inside them
    for (const auto &[inner, at] : computed_at) hosts.insert(at);
    for (const auto &st : s.statements) {
        auto fi = func_of.find(st.func);
        const std::string &st_func = st.func;
        if (fi == func_of.end() || fi->second->dynamic_vars.empty()) continue;
        const LoweredFunc *lf = fi->second;
        StagePlan &sp = plans[{st.func, st.stage}];
        const int st_index = st.stage;
        const bool computed_inside = computed_at.count(st.func) > 0;
        if (sp.root.empty())
            for (const auto &v : lf->vars) sp.root[v] = v;
        auto root = [&](const std::string &n) {
            auto it = sp.root.find(n);
            return it == sp.root.end() ? std::string() : it->second;
        };
        auto moving = [&](const std::string &v) { return v == "?" || var_moves(*lf, v); };
        bool split_call = false;  // the call being read is a `split` (whose factor a copy may change)
        auto split = [&](const std::string &v, const std::vector<std::string> &made, int64_t factor,
                         const std::string &tail) {
            // made: {outer, inner} (or {v} for vectorize/unroll/parallel with a factor, v the outer).
            std::string r = root(v);
            if (factor < 1 || (factor & (factor - 1)) != 0) sp.odd_split_roots.insert(r);
            bool in_piece = sp.inner.count(v) > 0;
            int64_t st = sp.step.count(v) ? sp.step[v] : 1;
            for (const auto &m : made) sp.root[m] = r;
            if (made.size() == 2) sp.inner.insert(made[1]);
            if (in_piece) {  // a piece of constant extent: no size of the root needed
                sp.inner.insert(made[0]);
                return;
            }
            sp.step[made[0]] = st * factor;
            if (r.empty() || !moving(r)) return;
            if (r == "?") {  // a split of a fused moving loop: its extent is no one dim's
                sp.eligible = false;
                return;
            }
            // A split the schedule itself guards holds at every extent: it asks nothing of the sizes,
            // unless Funcs computed inside its tiles unroll their whole loops where the tiles are full.
            bool guarded = tail == "GuardWithIf" || tail == "Predicate" || tail == "PredicateLoads" ||
                           tail == "PredicateStores";
            if (guarded && !hosts.count(st_func)) {
                if (v == r && st == 1 && factor > 1) sp.guarded_tiles[r] = std::max<int64_t>(sp.guarded_tiles[r], factor);
                return;
            }
            if (v == r && st == 1 && split_call) {
                sp.direct_splits[r] = factor;
                sp.split_inner[r] = made[1];
            }
            // ShiftInwards and an unguarded tail need the loop to reach the factor: the root st * factor.
            int64_t &f = sp.factors[r];
            f = std::max<int64_t>(f, st * factor);
            // RoundUp (Auto's tail for a pure var of an update) widens what a root Func computes,
            // and with it what its producers read, up to the graph's inputs: the factor must divide
            // the extent there. Inside a consumer's full tile the extent is the tile's, which the
            // schedule's factors already fit.
            bool rounds_up = tail == "RoundUp" || (tail == "Auto" && st_index >= 0);
            if (rounds_up && (lf->is_output || !computed_inside)) {
                if (v != r) sp.eligible = false;  // a rounded-up split of a split: not worth the proof
                else sp.must_divide[r] = std::max<int64_t>(sp.must_divide[r], factor);
            }
        };
        for (const auto &c : st.calls) {
            if (func_level_calls().count(c.name)) continue;
            if (!changes_stage_loops(c.name)) {
                sp.eligible = false;
                continue;
            }
            const auto &a = c.args;
            split_call = c.name == "split";
            if (c.name == "split") {
                split(a[0].name, {a[1].name, a[2].name}, a[3].value, tail_of(c, 4));
            } else if (c.name == "tile") {
                bool tail = !a.back().is_int();
                size_t core = a.size() - (tail ? 1 : 0);
                std::string t = tail ? a.back().name : "Auto";
                if (core == 8) {
                    split(a[0].name, {a[2].name, a[4].name}, a[6].value, t);
                    split(a[1].name, {a[3].name, a[5].name}, a[7].value, t);
                } else {
                    split(a[0].name, {a[2].name}, a[4].value, t);
                    split(a[1].name, {a[3].name}, a[5].value, t);
                }
            } else if (c.name == "fuse") {
                std::string r0 = root(a[0].name), r1 = root(a[1].name);
                bool mv = (!r0.empty() && moving(r0)) || (!r1.empty() && moving(r1));
                sp.root[a[2].name] = mv ? "?" : "";
                if (sp.inner.count(a[0].name) && sp.inner.count(a[1].name)) sp.inner.insert(a[2].name);
            } else if (c.name == "vectorize" || c.name == "unroll" || c.name == "parallel") {
                if (c.name == "vectorize") {
                    sp.vectorized.insert(a[0].name);
                    std::string r = root(a[0].name);
                    if (!r.empty() && r != "?" && moving(r)) {
                        sp.vectorizes_moving = true;
                        sp.vectorized_moving_roots.insert(r);
                    }
                }
                if (a.size() >= 2) split(a[0].name, {a[0].name, a[0].name + "$inner"}, a[1].value, tail_of(c, 2));
                else if (c.name != "parallel" && moving(root(a[0].name))) sp.whole_moving_loop = true;
            }
        }
    }
    // One condition per kernel (a root Func and every stage computed inside it): a stage computed
    // inside another sees that one's full tiles only where both take their specializations, and
    // identical conditions let Halide fold the nesting; separate kernels meet only through whole
    // buffers, so each takes its own, and a short size still runs the kernels it is long enough for.
    auto kernel_of = [&](std::string f) {
        std::set<std::string> seen;
        for (auto it = computed_at.find(f); it != computed_at.end() && seen.insert(f).second; it = computed_at.find(f))
            f = it->second;
        return f;
    };
    struct Need {
        std::map<std::string, std::pair<Halide::Expr, int64_t>> at_least;  // extent text -> (extent, size it needs)
        std::map<std::string, std::pair<Halide::Expr, int64_t>> divides;   // extent text -> (extent, divisor)
    };
    std::map<std::string, Need> needs;  // kernel -> what its specialization needs
    std::set<std::string> specialized_funcs;
    for (auto &[key, sp] : plans) {
        if (!sp.eligible || rfactored.count(key.first)) continue;
        const LoweredFunc *lf = func_of.at(key.first);
        for (const auto &[v, f] : sp.factors) {
            size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
            if (i >= lf->dynamic_extents.size() || !lf->dynamic_extents[i].defined()) {
                sp.eligible = false;
                break;
            }
        }
        // A RoundUp split whose factor does not divide even the planned extent (a 40-wide row in
        // vectors of 16) would make its kernel's condition false at every size the plan was made
        // for: that stage stays guarded instead, and its kernel keeps its specialization.
        // A Func alone in its kernel has no other stage to keep from its specialization: it stays
        // eligible, its guarded copy serving the planned size as before, so that its sizes below its
        // tiles take the narrow copies (the detector's stage-2 convs planned 40 columns wide in tiles
        // of 32, 2 columns wide at 32x32; bench/DECISIONS.md#d234-dynamic-shapes-undivided-tiles-take-narrow-copies).
        const bool alone = !computed_at.count(key.first) && !hosts.count(key.first);
        for (const auto &[v, d] : sp.must_divide) {
            size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
            if (d > 1 && (i >= lf->extents.size() || lf->extents[i] % d != 0)) {
                if (alone && i < lf->extents.size() &&
                    !size_copies_left_out().count("undivided"))
                    sp.undivided = true;
                else sp.eligible = false;
            }
        }
        if (!sp.eligible) continue;
        Need &nd = needs[kernel_of(key.first)];
        for (const auto &[v, f] : sp.factors) {
            size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
            const Halide::Expr &e = lf->dynamic_extents[i];
            std::ostringstream es;
            es << e;
            int64_t need = std::min<int64_t>(f, lf->extents[i]);
            auto &al = nd.at_least[es.str()];
            al = {e, std::max(al.second, need)};
            auto d = sp.must_divide.find(v);
            if (d != sp.must_divide.end() && d->second > 1) {
                auto &dv = nd.divides[es.str()];
                dv = {e, std::max(dv.second, d->second)};
            }
        }
        if (!sp.factors.empty()) specialized_funcs.insert(key.first);
    }
    // What every run's sizes are known to be: a term true over these intervals needs no test.
    Halide::Internal::Scope<Halide::Internal::Interval> sizes;
    std::ostringstream least_text;
    for (const auto &[sym, least] : p.dynamic.least_sizes()) {
        auto param = p.size_params.find(sym);
        if (param == p.size_params.end()) continue;
        const DimRange &r = p.dynamic.ranges.at(sym);
        sizes.push(param->second.name(), Halide::Internal::Interval(Halide::Expr((int)least),
                                                                    Halide::Expr((int)std::min<int64_t>(r.hi, 1 << 30))));
        least_text << (least_text.tellp() > 0 ? ", " : "") << sym << " >= " << least;
    }
    auto always_holds = [&](const Halide::Expr &extent, int64_t need) {
        Halide::Internal::Interval in = Halide::Internal::bounds_of_expr_in_scope(extent, sizes);
        if (!in.has_lower_bound()) return false;
        const int64_t *lo = Halide::Internal::as_const_int(Halide::Internal::simplify(in.min));
        return lo && *lo >= need;
    };
    struct Condition {
        Halide::Expr cond;
        std::string text;
        bool always = false;
        bool guard_round_ups = false;
    };
    std::map<std::string, Condition> cond_of;  // kernel -> its condition
    std::map<std::string, Halide::Expr> long_terms;  // text -> term, over every kernel
    for (const auto &[kernel, nd] : needs) {
        Halide::Expr cond;
        std::ostringstream text;
        auto add = [&](const Halide::Expr &term, const std::string &t) {
            cond = cond.defined() ? (cond && term) : term;
            text << (text.tellp() > 0 ? ", " : "") << t;
        };
        bool proved = false, assumed = false;
        for (const auto &[t, en] : nd.at_least) {
            if (en.second <= 1) continue;
            if (always_holds(en.first, en.second)) {
                proved = true;
                continue;
            }
            std::string term = t + " >= " + std::to_string(en.second);
            long_terms[term] = en.first >= (int)en.second;
            if (assume_long_enough) proved = assumed = true;  // the caller runs this plan only there
            else add(long_terms[term], term);
        }
        // Loops long enough at every size: one copy of the kernel, its divisions (RoundUp splits)
        // guarded, rather than two copies of it (compile time; bench/DECISIONS.md#d105).
        if (!cond.defined() && (proved || !nd.divides.empty())) {
            std::string where = assumed ? "every size this plan runs at (its loops long enough)"
                                        : "every size (" + least_text.str() + ")";
            cond_of[kernel] = {Halide::Expr(), where, true, !nd.divides.empty()};
            continue;
        }
        for (const auto &[t, en] : nd.divides)
            add(en.first % (int)en.second == 0, t + " % " + std::to_string(en.second) + " == 0");
        if (cond.defined()) cond_of[kernel] = {cond, text.str()};
    }
    if (long_enough) {
        for (const auto &[text, term] : long_terms) {
            long_enough->condition = long_enough->condition.defined() ? (long_enough->condition && term) : term;
            long_enough->text += (long_enough->text.empty() ? "" : ", ") + text;
        }
    }
    // Whether a Func computed at loop \p loop of Func \p host covers a tile of it rather than whole
    // moving loops: no loop of the host inside \p loop moves (only constant pieces of split moving
    // loops are inside; their outer pieces at or outside \p loop), in the host's final loop order.
    // A GEMM's accumulator computed at `jo` of its wrapper, inside the wrapper's row tiles `io`,
    // covers a 6-row tile though `jo` splits a dim that does not move. Computed at the outer piece
    // of a split of a loop that does not move with a whole moving loop inside (`compute_at(add, co)`
    // over whole moving rows), it spans that loop.
    auto in_moving_tile = [&](const std::string &host, const std::string &loop) {
        const sched_internal::FuncModel *hm = final_model.find(host);
        if (!hm) return false;
        std::set<std::string> fused_moving;  // fuses of a moving loop, in any of the host's stages
        for (const auto &[key, hp] : plans)
            if (key.first == host)
                for (const auto &[n, r] : hp.root)
                    if (r == "?") fused_moving.insert(n);
        // Halide's LoopLevel(f, var) is the last stage that has the var.
        for (auto st = hm->stages.rbegin(); st != hm->stages.rend(); ++st) {
            int at = st->find(loop);
            if (at < 0) continue;
            for (int d = 0; d < at; d++)
                if (st->dims[d].moves || fused_moving.count(st->dims[d].name)) return false;
            return true;
        }
        return false;
    };
    for (const auto &[key, sp] : plans) {
        if (!sp.eligible || rfactored.count(key.first)) continue;
        auto c = cond_of.find(kernel_of(key.first));
        if (c == cond_of.end()) continue;
        // A whole moving loop unrolls or vectorizes where its Func is computed inside a full tile of
        // a specialized one (a constant extent there); elsewhere it stays a plain loop.
        // Tiles whose RoundUp splits are guarded (one copy taken at every size) are not all full,
        // and a Func computed outside its host's split of a moving loop spans that whole loop.
        auto at = computed_at.find(key.first);
        bool full_tiles = at != computed_at.end() && specialized_funcs.count(at->second) &&
                          !c->second.guard_round_ups && in_moving_tile(at->second, computed_at_loop[key.first]);
        if (sp.factors.empty() && !(sp.whole_moving_loop && full_tiles)) continue;
        out[key] = {c->second.cond, c->second.text, sp.whole_moving_loop && full_tiles, c->second.always,
                    c->second.guard_round_ups, {}};
    }
    // An undivided tile's copy with the tails as written would serve only multiples of its factor,
    // where the guarded copy's full tiles are those tails already (as D224 found for divided row tiles).
    for (auto &[key, spec] : out)
        for (const auto &[k2, sp2] : plans)
            if (sp2.undivided && kernel_of(k2.first) == kernel_of(key.first)) spec.written_copy = false;
    // A kernel whose one condition is its row tiles' length (`size_seq >= 6`) runs its guarded copy
    // at every shorter size: there the rows of a tile are guards inside the reduction loop and the
    // accumulators go through memory. A copy with tiles of half the rows (`size_seq >= 3`, each
    // split of those rows by 3) keeps them in registers for the sizes from half a tile up
    // (bench/DECISIONS.md#d144-dynamic-shapes-short-rows-copy). Below the shortest tile, the smallest
    // sizes by value (`size_seq == 1`, 2 …) each get a copy whose tile is the whole rows: the split by
    // that size divides the rows exactly (no tail to guard, none rounded up past an output's end), so
    // the rows unroll as in a compile for that size; the guarded copy is left for the sizes between
    // them and the shortest tile, and for extents the tile does not divide
    // (bench/DECISIONS.md#d220-dynamic-shapes-smallest-rows-by-value). Only where every split of
    // those rows in the kernel is the tile itself, not vectorized, so that changing it changes
    // nothing else; the half tile only where no divisibility term is left to the copy.
    std::set<std::string> every_size_copied;  // kernels whose copies leave no size to the guarded one
    for (const auto &[kernel, nd] : needs) {
        auto c = cond_of.find(kernel);
        if (c == cond_of.end() || c->second.always) continue;
        const std::pair<const std::string, std::pair<Halide::Expr, int64_t>> *term = nullptr;
        int terms = 0;
        for (const auto &at : nd.at_least)
            if (at.second.second > 1) {
                term = &at;
                terms++;
            }
        if (terms != 1) continue;
        const int64_t tile = term->second.second;
        std::string var;
        bool ok = true;
        for (const auto &[key, sp] : plans) {
            if (!sp.eligible || rfactored.count(key.first) || kernel_of(key.first) != kernel) continue;
            const LoweredFunc *lf = func_of.at(key.first);
            for (const auto &[v, f] : sp.factors) {
                size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
                std::ostringstream es;
                es << lf->dynamic_extents[i];
                if (es.str() != term->first) continue;
                auto d = sp.direct_splits.find(v);
                ok = ok && f == tile && d != sp.direct_splits.end() && d->second == tile &&
                     !sp.vectorized.count(sp.split_inner.at(v)) && (var.empty() || var == v);
                var = v;
            }
        }
        if (!ok || var.empty()) continue;
        bool other_divides = false;  // a divisibility term of another extent: a copy cannot tell
        for (const auto &[t, en] : nd.divides) other_divides |= t != term->first;
        if (other_divides) continue;
        auto add_copy = [&](const Halide::Expr &cond, const std::string &text, int64_t factor) {
            for (auto &[key, spec] : out)
                if (kernel_of(key.first) == kernel && !spec.always) {
                    spec.more.push_back({cond, text});
                    spec.more_factors.push_back({{var, factor}});
                }
        };
        int64_t shortest = tile;
        if (nd.divides.empty() && tile >= 4 && tile % 2 == 0 && !size_copies_left_out().count("half-tile")) {
            add_copy(term->second.first >= (int)(tile / 2), term->first + " >= " + std::to_string(tile / 2), tile / 2);
            shortest = tile / 2;
        }
        const Halide::Expr &e = term->second.first;
        Halide::Internal::Interval in = Halide::Internal::bounds_of_expr_in_scope(e, sizes);
        const int64_t *lo = in.has_lower_bound() ? Halide::Internal::as_const_int(Halide::Internal::simplify(in.min)) : nullptr;
        // A kernel with a divisibility term has no half tile: the sizes between the copies and its
        // tile would run the guarded copy, all of their rows in its guarded last tile (the MLP at
        // batch 7: 1.9x). It takes a copy for each size below its tile instead, while the tile is
        // short (bench/DECISIONS.md#d223-dynamic-shapes-every-size-below-a-divided-tile).
        int most = size_copies_left_out().count("by-value") ? 0 : tail_remainder_copies();
        if (!nd.divides.empty() && most > 0 && tile <= kMostCopiesBelowADividedTile) most = std::max<int>(most, (int)tile - 1);
        // Such a kernel's copy with the tails as written only repeats the guarded copy's full tiles
        // (bench/DECISIONS.md#d224-dynamic-shapes-no-written-copy-of-a-divided-tile).
        if (!nd.divides.empty() && most > 0 && nd.divides.begin()->second.second == tile)
            for (auto &[key, spec] : out)
                if (kernel_of(key.first) == kernel && !spec.always) spec.written_copy = false;
        int made = 0;
        int64_t v = lo ? std::max<int64_t>(*lo, 1) : 1;
        for (; v < shortest && made < most; v++, made++) {
            // The last of them, where they and the tiles leave no size to the guarded copy (no
            // divisibility term either), is taken unconditionally: the guarded copy is not compiled.
            bool last = v + 1 == shortest && nd.divides.empty();
            add_copy(last ? Halide::Internal::const_true() : (e == (int)v),
                     term->first + " == " + std::to_string(v) + kWholeRowsNote, v);
            if (last) every_size_copied.insert(kernel);
        }
    }
    // A kernel that vectorizes a moving loop runs its guarded copy, at the sizes below its tiles,
    // as guarded scalar lanes with its accumulators in memory. A narrow copy splits every moving loop
    // by 1 and vectorizes or unrolls none (no tail to guard; the loops that do not move keep the
    // schedule's vectors and unrolling) and takes every size where the kernel's loops are too short
    // for its tiles; the guarded copy is left only where they are long enough but a RoundUp split
    // does not divide, and not compiled at all for a kernel with no such split
    // (bench/DECISIONS.md#d155-dynamic-shapes-narrow-copy).
    // Below its tiles a kernel that vectorizes one moving loop (a conv's columns) runs the narrow
    // copy as scalars, where its loop is often still a few vectors long (the detector's convs at
    // 8 or 4 columns, their plan's vectors 16 wide). Before the narrow copy it takes one copy per
    // narrower vector (half the target's natural vector, then a quarter, at least 4 lanes), each
    // taken where that loop reaches the vector: the narrow copy's loops but that one, whose splits
    // and vectors are by those lanes at most, so its accumulators stay vectors in registers
    // (bench/DECISIONS.md#d233-dynamic-shapes-narrow-copies-in-narrower-vectors). Only where every
    // split of that loop is by a power of two (the narrower tiles nest in the written ones) and, for
    // a kernel with a RoundUp split (guarded in the copy), where no Func is computed inside its tiles.
    auto narrow_vector_copies = [&](const std::string &kernel, const Need &nd, const Halide::Expr &not_long_enough) {
        if (size_copies_left_out().count("narrow-vectors")) return;
        std::set<std::string> roots;  // the moving pure vars the kernel vectorizes
        for (const auto &[key, sp] : plans)
            if (sp.eligible && !rfactored.count(key.first) && kernel_of(key.first) == kernel)
                roots.insert(sp.vectorized_moving_roots.begin(), sp.vectorized_moving_roots.end());
        if (roots.size() != 1 || (not_long_enough.defined() && hosts.count(kernel))) return;
        const std::string v = *roots.begin();
        std::vector<Halide::Expr> extents;  // of v, in every Func of the kernel that splits it
        int64_t tile = 0;  // the shortest v the copy with the tails as written takes: narrower lanes only

        for (const auto &[key, sp] : plans) {
            if (!sp.eligible || rfactored.count(key.first) || kernel_of(key.first) != kernel) continue;
            if (sp.odd_split_roots.count(v)) return;
            if (!sp.factors.count(v) && !sp.vectorized_moving_roots.count(v)) continue;
            const LoweredFunc *lf = func_of.at(key.first);
            size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
            if (i >= lf->dynamic_extents.size() || !lf->dynamic_extents[i].defined()) return;
            extents.push_back(lf->dynamic_extents[i]);
            std::ostringstream es;
            es << lf->dynamic_extents[i];
            auto need = nd.at_least.find(es.str());
            if (need != nd.at_least.end() && need->second.second > 1)
                tile = tile ? std::min(tile, need->second.second) : need->second.second;
        }
        if (extents.empty() || tile == 0) return;
        const LoweredFunc *root = func_of.at(kernel);
        if (!root->func.defined()) return;
        const int natural = target.natural_vector_size(root->func.output_types()[0]);
        int copies = 0;
        for (int64_t lanes = natural / 2; lanes >= kLeastNarrowVectorLanes && copies < kMostNarrowVectorCopies;
             lanes /= 2) {
            if (lanes >= tile) continue;  // the copy with the tails as written takes those sizes
            copies++;
            Halide::Expr cond;
            std::set<std::string> texts;
            for (const Halide::Expr &e : extents) {
                Halide::Expr term = e >= (int)lanes;
                cond = cond.defined() ? (cond && term) : term;
                std::ostringstream es;
                es << e << " >= " << lanes;
                texts.insert(es.str());
            }
            std::string text;
            for (const auto &t : texts) text += (text.empty() ? "" : ", ") + t;
            if (not_long_enough.defined()) cond = not_long_enough && cond;
            // Halide makes one specialization of a stage per condition: a copy whose condition another
            // copy of the kernel already has would be that copy, scheduled twice.
            bool repeats = false;
            for (const auto &[key, spec] : out) {
                if (kernel_of(key.first) != kernel || spec.always) continue;
                repeats |= spec.condition.defined() && Halide::Internal::equal(spec.condition, cond);
                for (const auto &m : spec.more) repeats |= Halide::Internal::equal(m.first, cond);
            }
            if (repeats) continue;
            for (auto &[key, spec] : out) {
                if (kernel_of(key.first) != kernel || spec.always) continue;
                const StagePlan &sp = plans.at(key);
                spec.narrow_vector_lanes[(int)spec.more.size()] = lanes;
                spec.more.push_back({cond, text + narrow_vectors_note(lanes)});
                spec.more_factors.push_back({});
                for (const auto &[loop, r] : sp.root)
                    if (r == v) spec.vector_loops.insert(loop);
            }
        }
    };
    if (!size_copies_left_out().count("narrow")) {
        for (const auto &[kernel, nd] : needs) {
            auto c = cond_of.find(kernel);
            if (c == cond_of.end() || c->second.always || every_size_copied.count(kernel)) continue;
            bool vectorizes = false;
            for (const auto &[key, sp] : plans)
                if (sp.eligible && !rfactored.count(key.first) && kernel_of(key.first) == kernel && sp.vectorizes_moving)
                    vectorizes = true;
            if (!vectorizes) continue;
            Halide::Expr long_enough;
            std::string text;
            for (const auto &[t, en] : nd.at_least) {
                if (en.second <= 1 || always_holds(en.first, en.second)) continue;
                Halide::Expr term = en.first >= (int)en.second;
                long_enough = long_enough.defined() ? (long_enough && term) : term;
                text += (text.empty() ? "" : " or ") + t + " < " + std::to_string(en.second);
            }
            if (!long_enough.defined()) continue;
            Halide::Expr cond = nd.divides.empty() ? Halide::Internal::const_true() : !long_enough;
            narrow_vector_copies(kernel, nd, nd.divides.empty() ? Halide::Expr() : !long_enough);
            for (auto &[key, spec] : out) {
                if (kernel_of(key.first) != kernel || spec.always) continue;
                const StagePlan &sp = plans.at(key);
                const LoweredFunc *lf = func_of.at(key.first);
                spec.narrow = (int)spec.more.size();
                spec.more.push_back({cond, text + kNarrowCopyNote});
                spec.more_factors.push_back({});
                for (const auto &[loop, r] : sp.root)
                    if (var_moves(*lf, r)) spec.narrow_loops.insert(loop);
            }
        }
    }
    // A stage whose only moving split is a GuardWithIf the schedule writes (D106: it asks nothing
    // of the sizes) keeps a guard per row in its last tile, inside its reduction loop: there the
    // accumulators go through memory. Where the tile's remainder is known (`size_batch % 6 == 4`)
    // Halide's simplifier folds those guards as a compile for one size does. One copy per
    // remainder: the planned size's, then the smallest sizes' (batch 1 and 2) by their values.
    const int copies = size_copies_left_out().count("remainder") ? 0 : tail_remainder_copies();
    for (const auto &[key, sp] : plans) {
        if (copies <= 0 || !sp.eligible || rfactored.count(key.first) || out.count(key) || sp.guarded_tiles.size() != 1 ||
            computed_at.count(key.first) || hosts.count(key.first))
            continue;
        const LoweredFunc *lf = func_of.at(key.first);
        const auto &[v, f] = *sp.guarded_tiles.begin();
        size_t i = std::find(lf->vars.begin(), lf->vars.end(), v) - lf->vars.begin();
        if (i >= lf->dynamic_extents.size() || !lf->dynamic_extents[i].defined()) continue;
        const Halide::Expr &e = lf->dynamic_extents[i];
        if (!e.as<Halide::Internal::Variable>()) continue;  // the simplifier learns `x % f == r` of a variable only
        // Over more tiles the guarded last one is a small part of the work: the copies' compile
        // time buys nothing measurable (bench/DECISIONS.md#d136-dynamic-shapes-tail-copies-where-they-pay).
        if (lf->extents[i] > kTailCopiesMaxTiles * f) continue;
        SizeSpecialization spec;
        auto add = [&](const Halide::Expr &c, const std::string &t) {
            if (!spec.condition.defined()) spec = {c, t, false, false, false, {}};
            else if ((int)spec.more.size() + 1 < copies) spec.more.push_back({c, t});
        };
        std::ostringstream es;
        es << e;
        const int64_t planned = lf->extents[i] % f;
        add((e % (int)f) == (int)planned, es.str() + " % " + std::to_string(f) + " == " + std::to_string(planned));
        // The smallest sizes (batch 1, 2) by their values: a copy of one tile, a fraction of a remainder's.
        Halide::Internal::Interval in = Halide::Internal::bounds_of_expr_in_scope(e, sizes);
        const int64_t *lo = in.has_lower_bound() ? Halide::Internal::as_const_int(Halide::Internal::simplify(in.min)) : nullptr;
        for (int64_t v = lo ? *lo : f; v < f && (int)spec.more.size() + 1 < copies; v++)
            if (v != planned) add(e == (int)v, es.str() + " == " + std::to_string(v));
        out[key] = spec;
    }
    return out;
}

}  // namespace loom
