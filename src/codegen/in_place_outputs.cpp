#include "codegen/in_place_outputs.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "codegen/jit_segments.h"

namespace loom {

namespace {

using namespace Halide::Internal;

// One walk of the statement in execution order (a pre-order of its nodes; a loop's body stands for
// all its iterations), noting where the input is read and where the output is produced.
class Scan : public IRVisitor {
  public:
    explicit Scan(const InPlacePair &pair) : pair_(pair) {}

    InPlaceFacts finish() {
        InPlaceFacts f;
        f.reads_input = reads_;
        f.writes_output = productions_ > 0;
        if (!f.writes_output) return f;
        std::string why = inside_problem_;
        if (why.empty() && productions_ > 1) why = "the output is produced in more than one place";
        if (why.empty()) why = stores_overlap();
        for (const Read &r : outside_) {
            if (!why.empty()) break;
            if (r.pos > begin_) why = "the input is read after the output's production";
            for (int l : r.loops)
                if (why.empty() && std::find(production_loops_.begin(), production_loops_.end(), l) != production_loops_.end())
                    why = "the input is read in a loop around the output's production";
        }
        f.safe = why.empty();
        f.why = why;
        return f;
    }

  private:
    using IRVisitor::visit;
    struct Read {
        int pos;
        std::vector<int> loops;
    };
    const InPlacePair &pair_;
    int pos_ = 0, next_loop_ = 0, inside_ = 0, productions_ = 0, begin_ = -1;
    std::vector<int> loops_, production_loops_;
    std::vector<std::string> loop_names_;
    size_t production_loop_depth_ = 0;
    const Store *store_ = nullptr;  // the store of the output whose value is being visited
    bool reads_ = false;
    std::vector<Read> outside_;
    std::string inside_problem_;

    void problem(const std::string &why) {
        if (inside_problem_.empty()) inside_problem_ = why;
    }

    // A read of the input at this point: \p index the element (undefined: the whole buffer).
    void read(const Halide::Expr &index) {
        reads_ = true;
        if (inside_ == 0) {
            outside_.push_back({pos_, loops_});
        } else if (!store_ || !index.defined() || !equal(index, store_->index)) {
            problem("inside the output's production the input is read other than at the element being stored");
        }
    }

    // Stores of the output, as the elements they write: the flat index of the first lane is
    // constant + Σ coefficient · loop variable, `lanes` consecutive elements from there.
    struct Footprint {
        std::map<std::string, int64_t> terms;
        int64_t constant = 0, lanes = 1;
        std::map<std::string, std::pair<int64_t, int64_t>> ranges;  // of its loop variables: (min, extent)
    };
    std::map<std::string, Halide::Expr> lets_;                      // let-bound names in scope
    std::map<std::string, std::pair<int64_t, int64_t>> loop_range_;  // loop variable -> (min, extent)
    std::vector<Footprint> stores_;

    // \p e as constant + Σ c·loop variable through the lets in scope; false when it is not one.
    bool linear(const Halide::Expr &e, int64_t coef, Footprint &f, int depth) const {
        if (depth > 64) return false;
        if (const IntImm *i = e.as<IntImm>()) {
            f.constant += coef * i->value;
            return true;
        }
        if (const Add *a = e.as<Add>()) return linear(a->a, coef, f, depth + 1) && linear(a->b, coef, f, depth + 1);
        if (const Sub *s = e.as<Sub>()) return linear(s->a, coef, f, depth + 1) && linear(s->b, -coef, f, depth + 1);
        if (const Mul *m = e.as<Mul>()) {
            if (const IntImm *c = m->b.as<IntImm>()) return linear(m->a, coef * c->value, f, depth + 1);
            if (const IntImm *c = m->a.as<IntImm>()) return linear(m->b, coef * c->value, f, depth + 1);
            return false;
        }
        // A fused loop's variable taken apart (t / c, t % c of a loop from 0): two variables of
        // their own, whose pair tells t apart.
        const Div *dv = e.as<Div>();
        const Mod *md = e.as<Mod>();
        if (dv || md) {
            const Halide::Expr &a = dv ? dv->a : md->a;
            const IntImm *c = (dv ? dv->b : md->b).as<IntImm>();
            const Variable *v = a.as<Variable>();
            auto r = v ? loop_range_.find(v->name) : loop_range_.end();
            if (!c || c->value <= 0 || r == loop_range_.end() || r->second.first != 0) return false;
            const int64_t ext = r->second.second;
            std::string name = v->name + (dv ? "/" : "%") + std::to_string(c->value);
            f.terms[name] += coef;
            f.ranges[name] = {0, dv ? (ext + c->value - 1) / c->value : std::min(ext, c->value)};
            return true;
        }
        if (const Variable *v = e.as<Variable>()) {
            if (auto l = lets_.find(v->name); l != lets_.end()) return linear(l->second, coef, f, depth + 1);
            if (!loop_range_.count(v->name)) return false;
            f.terms[v->name] += coef;
            f.ranges[v->name] = loop_range_.at(v->name);
            return true;
        }
        return false;
    }

    // The elements of one store, or false when they cannot be told (a min or max in the index:
    // a vector loop's shifted last iteration; a stride other than 1; a name not a loop's).
    bool footprint(const Store *op, Footprint &f) const {
        Halide::Expr base = op->index;
        if (const Ramp *r = op->index.as<Ramp>()) {
            const IntImm *stride = r->stride.as<IntImm>();
            if (!stride || stride->value != 1) return false;
            base = r->base;
            f.lanes = r->lanes;
        } else if (op->index.type().lanes() != 1) {
            return false;
        }
        return linear(base, 1, f, 0);
    }

    // Whether the footprint's index moves with loop variable \p v: through v, or through both
    // v / c and v % c (either may be missing when its range is one value).
    static bool moves_with(const Footprint &f, const std::string &v) {
        if (auto t = f.terms.find(v); t != f.terms.end() && t->second != 0) return true;
        for (const auto &[name, c] : f.terms) {
            if (c == 0 || name.size() <= v.size() || name.compare(0, v.size(), v) != 0 || name[v.size()] != '/') continue;
            std::string mod = v + "%" + name.substr(v.size() + 1);
            auto m = f.terms.find(mod);
            if (m != f.terms.end() && m->second != 0) return true;
            if (m == f.terms.end() && f.ranges.count(mod) == 0) {
                // v / c alone: v % c must be a single value (c == 1)
                if (name.substr(v.size() + 1) == "1") return true;
            }
        }
        return false;
    }

    // Whether the stores of the output write no element twice: each store's iterations lie apart
    // (its loop variables' coefficients nest, the smallest at least its lanes), and the spans of
    // different stores do not meet.
    std::string stores_overlap() const {
        std::vector<std::pair<int64_t, int64_t>> spans;  // [first, last] element
        for (const Footprint &f : stores_) {
            std::vector<std::pair<int64_t, int64_t>> vars;  // (|coefficient|, extent)
            int64_t lo = f.constant, hi = f.constant + f.lanes - 1;
            for (const auto &[name, c] : f.terms) {
                if (c == 0) continue;
                const auto [mn, ext] = f.ranges.at(name);
                if (ext <= 0) continue;
                lo += c > 0 ? c * mn : c * (mn + ext - 1);
                hi += c > 0 ? c * (mn + ext - 1) : c * mn;
                if (ext > 1) vars.push_back({c > 0 ? c : -c, ext});
            }
            std::sort(vars.begin(), vars.end());
            int64_t covered = f.lanes;  // elements one iteration of the inner loops spans
            for (const auto &[c, ext] : vars) {
                if (c < covered) return "a store of the output writes some elements in more than one iteration";
                covered = c * (ext - 1) + covered;
            }
            spans.push_back({lo, hi});
        }
        std::sort(spans.begin(), spans.end());
        for (size_t k = 1; k < spans.size(); k++)
            if (spans[k].first <= spans[k - 1].second) return "two stores of the output may write the same element";
        return "";
    }

    template <typename LetNode>
    void visit_let(const LetNode *op) {
        op->value.accept(this);
        auto saved = lets_.find(op->name) != lets_.end() ? std::optional<Halide::Expr>(lets_[op->name]) : std::nullopt;
        lets_[op->name] = op->value;
        op->body.accept(this);
        if (saved) lets_[op->name] = *saved;
        else lets_.erase(op->name);
    }
    void visit(const LetStmt *op) override { visit_let(op); }
    void visit(const Let *op) override { visit_let(op); }

    void visit(const For *op) override {
        pos_++;
        loops_.push_back(next_loop_++);
        loop_names_.push_back(op->name);
        Footprint mn, ext;
        op->min.accept(this);
        op->extent.accept(this);
        // A loop whose bounds are no constants has no range: a store indexed by it fails `linear`.
        bool known = linear(op->min, 1, mn, 0) && mn.terms.empty() && linear(op->extent, 1, ext, 0) && ext.terms.empty();
        if (known) loop_range_[op->name] = {mn.constant, ext.constant};
        op->body.accept(this);
        loop_range_.erase(op->name);
        loop_names_.pop_back();
        loops_.pop_back();
    }

    void visit(const ProducerConsumer *op) override {
        pos_++;
        if (!op->is_producer || op->name != pair_.output) {
            IRVisitor::visit(op);
            return;
        }
        if (productions_++ == 0) {
            begin_ = pos_;
            production_loops_ = loops_;
            production_loop_depth_ = loop_names_.size();
        }
        if (!loops_.empty()) problem("the output is produced inside a loop");
        inside_++;
        IRVisitor::visit(op);
        inside_--;
    }

    void visit(const Store *op) override {
        pos_++;
        if (op->name != pair_.output) {
            IRVisitor::visit(op);
            return;
        }
        if (inside_ == 0) problem("the output is stored outside its production");
        Footprint f;
        if (footprint(op, f)) stores_.push_back(f);
        else problem("a store of the output writes elements that cannot be told apart from another's");
        // A loop inside the production that the index does not move with stores its elements again.
        for (size_t k = production_loop_depth_; k < loop_names_.size() && inside_ > 0; k++) {
            auto r = loop_range_.find(loop_names_[k]);
            if ((r == loop_range_.end() || r->second.second > 1) && !moves_with(f, loop_names_[k]))
                problem("a store of the output repeats in a loop its index does not move with");
        }
        const Store *outer = store_;
        store_ = op;
        op->value.accept(this);
        op->predicate.accept(this);
        store_ = nullptr;  // the index itself reads nothing of the input at the stored element
        op->index.accept(this);
        store_ = outer;
    }

    void visit(const Load *op) override {
        pos_++;
        if (op->name == pair_.output && inside_ > 0)
            problem("the output's production reads the output (an update: an element stored twice)");
        if (op->name == pair_.input) read(op->index);
        IRVisitor::visit(op);
    }

    // The input's buffer named as a whole (a copy, a prefetch, an extern call) past the checks at
    // the entry: a read of any element at this point.
    void visit(const Variable *op) override {
        if (op->type.is_handle() && (op->name == pair_.input + ".buffer" || op->name == pair_.input)) read(Halide::Expr());
    }
};

class Recorder : public IRMutator {
  public:
    Recorder(std::function<void(const Stmt &)> record) : record_(std::move(record)) {}
    using IRMutator::mutate;
    Stmt mutate(const Stmt &s) override {
        record_(s);
        return s;
    }

  private:
    std::function<void(const Stmt &)> record_;
};

}  // namespace

int order_reads_before_outputs(const LoweredPipeline &p, const std::vector<std::pair<size_t, size_t>> &pairs) {
    // Funcs that (transitively) read each Func: a reader that depends on the output gets no call.
    std::map<std::string, std::set<std::string>> readers;
    for (const LoweredFunc &f : p.funcs)
        for (const auto &pr : f.producers) readers[pr].insert(f.name);
    auto depends_on = [&](const std::string &f, const std::string &out) {
        std::set<std::string> seen;
        std::vector<std::string> todo = {out};
        while (!todo.empty()) {
            std::string x = todo.back();
            todo.pop_back();
            if (x == f) return true;
            if (!seen.insert(x).second) continue;
            for (const auto &r : readers[x]) todo.push_back(r);
        }
        return false;
    };
    // The root Funcs whose loop nests compute a Func: its own root, or for an inlined one its
    // readers' roots; and every Function by name (wrappers included) to call a root by.
    const std::map<std::string, std::string> owner = kernel_roots(p);
    std::map<std::string, Function> functions;
    for (const LoweredFunc &f : p.funcs) {
        functions.emplace(f.name, f.func.function());
        for (const auto &[of, w] : f.func.function().wrappers()) functions.emplace(Function(w).name(), Function(w));
    }
    std::function<void(const std::string &, std::set<std::string> &, int)> roots_of =
        [&](const std::string &f, std::set<std::string> &out, int depth) {
            auto o = owner.find(f);
            if (o != owner.end() && !o->second.empty()) {
                out.insert(o->second);
                return;
            }
            if (depth < 16)
                for (const auto &r : readers[f]) roots_of(r, out, depth + 1);
        };
    int added = 0;
    for (const auto &[in, out] : pairs) {
        const std::string &input = p.input_names.at(in);
        const LoweredFunc *u = p.find(p.output_funcs.at(out));
        if (!u || u->func.has_update_definition() || u->func.outputs() != 1) continue;
        std::set<std::string> roots;
        for (const LoweredFunc &d : p.funcs)
            if (d.name != u->name && std::find(d.input_reads.begin(), d.input_reads.end(), input) != d.input_reads.end())
                roots_of(d.name, roots, 0);
        Function uf = u->func.function();
        Halide::Expr &value = uf.definition().values()[0];
        for (const std::string &r : roots) {
            auto fn = functions.find(r);
            if (r == u->name || fn == functions.end() || fn->second.outputs() != 1 || depends_on(r, u->name)) continue;
            if (auto o = owner.find(u->name); o != owner.end() && o->second == r) continue;  // u is computed in r
            std::vector<Halide::Expr> origin(fn->second.dimensions(), Halide::Expr(0));
            Halide::Expr call = Call::make(fn->second, origin, 0);
            value = value + Halide::cast(value.type(), call) * make_zero(value.type());
            added++;
        }
    }
    return added;
}

InPlaceFacts in_place_facts(const Stmt &s, const InPlacePair &pair) {
    Scan scan(pair);
    s.accept(&scan);
    return scan.finish();
}

InPlaceCheck::InPlaceCheck(std::vector<InPlacePair> pairs) : state_(std::make_shared<State>()) {
    state_->pairs = std::move(pairs);
}

void InPlaceCheck::watch(Halide::Pipeline &pipeline, size_t index, size_t count) {
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->facts.resize(count);
        state_->lowered.resize(count, false);
    }
    std::shared_ptr<State> st = state_;
    pipeline.add_custom_lowering_pass(new Recorder([st, index](const Stmt &s) {
        std::vector<InPlaceFacts> facts;
        for (const InPlacePair &p : st->pairs) facts.push_back(in_place_facts(s, p));
        std::lock_guard<std::mutex> lock(st->mutex);
        st->facts[index] = std::move(facts);
        st->lowered[index] = true;
    }));
}

std::vector<std::string> InPlaceCheck::reasons() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const size_t n = state_->pairs.size();
    std::vector<std::string> why(n);
    if (state_->lowered.empty() || std::find(state_->lowered.begin(), state_->lowered.end(), false) != state_->lowered.end()) {
        for (auto &w : why) w = "not every pipeline was lowered";
        return why;
    }
    for (size_t k = 0; k < n; k++) {
        int writer = -1;
        for (size_t p = 0; p < state_->facts.size(); p++)
            if (state_->facts[p][k].writes_output) {
                if (writer >= 0) why[k] = "the output is written by more than one pipeline";
                writer = (int)p;
            }
        if (!why[k].empty()) continue;
        if (writer < 0) {
            why[k] = "no pipeline writes the output";
            continue;
        }
        if (!state_->facts[(size_t)writer][k].safe) {
            why[k] = state_->facts[(size_t)writer][k].why;
            continue;
        }
        for (size_t p = (size_t)writer + 1; p < state_->facts.size(); p++)
            if (state_->facts[p][k].reads_input) {
                why[k] = "a later pipeline reads the input";
                break;
            }
    }
    return why;
}

std::vector<bool> InPlaceCheck::verdicts() const {
    std::vector<bool> v;
    for (const auto &w : reasons()) v.push_back(w.empty());
    return v;
}

}  // namespace loom
