#include "lower/flat_row_index.h"

#include <cstdlib>
#include <numeric>
#include <utility>
#include <vector>

namespace loom {

namespace {

using namespace Halide::Internal;
using Halide::Expr;

// An integer index as a sum of coefficient · term plus a constant.
struct LinearForm {
    std::vector<std::pair<Expr, int64_t>> terms;
    int64_t constant = 0;

    void add(const Expr &term, int64_t c) {
        for (auto &t : terms)
            if (equal(t.first, term)) {
                t.second += c;
                return;
            }
        terms.emplace_back(term, c);
    }
};

const int64_t *constant_of(const Expr &e) {
    const IntImm *i = e.as<IntImm>();
    return i ? &i->value : nullptr;
}

class FlatRowIndices : public IRMutator {
    using IRMutator::visit;
    Scope<Expr> lets;  // scalar integer lets in scope (Halide's common subexpressions)

    static constexpr int kMaxLetDepth = 8;

    void expand(const Expr &e, int64_t coef, LinearForm &f, int depth) const {
        if (const int64_t *c = constant_of(e)) {
            f.constant += coef * *c;
        } else if (const Add *a = e.as<Add>()) {
            expand(a->a, coef, f, depth);
            expand(a->b, coef, f, depth);
        } else if (const Sub *s = e.as<Sub>()) {
            expand(s->a, coef, f, depth);
            expand(s->b, -coef, f, depth);
        } else if (const Mul *m = e.as<Mul>(); m && (constant_of(m->a) || constant_of(m->b))) {
            bool left = constant_of(m->a) != nullptr;
            expand(left ? m->b : m->a, coef * *constant_of(left ? m->a : m->b), f, depth);
        } else if (const Variable *v = e.as<Variable>();
                   v && depth < kMaxLetDepth && lets.contains(v->name) && lets.get(v->name).defined()) {
            expand(lets.get(v->name), coef, f, depth + 1);
        } else if (const Mod *m = e.as<Mod>()) {
            divmod_term(m->a, m->b, true, coef, f, depth);
        } else if (const Div *d = e.as<Div>()) {
            divmod_term(d->a, d->b, false, coef, f, depth);
        } else {
            f.add(e, coef);
        }
    }

    // x % c or x / c with x = g·y + r (0 <= r < g, c a multiple of g) as the term y % (c/g)
    // (times g, plus r) or y / (c/g), y spelled from its linear form less its multiples of c/g,
    // so that the divide and the modulo of one row compare equal.
    void divmod_term(const Expr &x, const Expr &c_expr, bool mod, int64_t coef, LinearForm &f, int depth) const {
        const int64_t *c = constant_of(c_expr);
        if (!c || *c <= 0) {
            f.add(mod ? Expr(Mod::make(x, c_expr)) : Expr(Div::make(x, c_expr)), coef);
            return;
        }
        LinearForm lx;
        expand(x, 1, lx, depth);
        int64_t g = 0;
        for (const auto &t : lx.terms) g = std::gcd(g, std::llabs(t.second));
        int64_t r = 0;
        if (g > 1 && *c % g == 0 && lx.constant >= 0 && lx.constant < g) {
            r = lx.constant;
            lx.constant = 0;
            for (auto &t : lx.terms) t.second /= g;
        } else {
            g = 1;
        }
        // Terms of y that are multiples of c/g leave the modulo and come out of the divide whole.
        const int64_t cy = *c / g;
        LinearForm rest;
        for (const auto &[term, k] : lx.terms) {
            if (k % cy != 0) {
                rest.add(term, k);
            } else if (!mod) {
                f.add(term, coef * (k / cy));
            }
        }
        rest.constant = lx.constant;
        Expr y = rebuild(rest, x.type());
        Expr cg = make_const(x.type(), cy);
        if (mod) {
            f.add(Mod::make(y, cg), coef * g);
            f.constant += coef * r;
        } else {
            f.add(Div::make(y, cg), coef);
        }
    }

    static Expr rebuild(const LinearForm &f, Halide::Type t) {
        Expr e;
        for (const auto &[term, c] : f.terms) {
            if (c == 0) continue;
            Expr p = c == 1 ? term : term * make_const(t, c);
            e = e.defined() ? e + p : p;
        }
        if (!e.defined()) return make_const(t, f.constant);
        return f.constant == 0 ? e : e + make_const(t, f.constant);
    }

    // The index with every (x % c)·a + (x / c)·(a·c) folded to x·a, or undefined when it has none.
    Expr fold(const Expr &index) const {
        if (!index.type().is_int() || index.type().lanes() != 1) return Expr();
        LinearForm f;
        expand(index, 1, f, 0);
        bool folded = false;
        for (size_t i = 0; i < f.terms.size(); i++) {
            const Mod *m = f.terms[i].first.as<Mod>();
            int64_t a = f.terms[i].second;
            // A divisor that is no constant (a moving extent of a model compiled for every size)
            // has no multiple to compare the divide's coefficient with: such a pair stays as it is.
            if (!m || a == 0 || !constant_of(m->b)) continue;
            for (size_t j = 0; j < f.terms.size(); j++) {
                const Div *d = f.terms[j].first.as<Div>();
                if (!d || !equal(d->b, m->b) || !equal(d->a, m->a) || f.terms[j].second != a * *constant_of(m->b))
                    continue;
                Expr x = m->a;
                f.terms[i].second = 0;
                f.terms[j].second = 0;
                expand(x, a, f, kMaxLetDepth);
                folded = true;
                break;
            }
        }
        return folded ? simplify(rebuild(f, index.type())) : Expr();
    }

    Expr visit(const Load *op) override {
        Expr index = mutate(op->index), predicate = mutate(op->predicate);
        Expr flat;
        if (const Ramp *r = index.as<Ramp>()) {
            if (Expr base = fold(r->base); base.defined()) flat = Ramp::make(base, r->stride, r->lanes);
        } else if (const Broadcast *b = index.as<Broadcast>()) {
            if (Expr v = fold(b->value); v.defined()) flat = Broadcast::make(v, b->lanes);
        } else {
            flat = fold(index);
        }
        if (flat.defined()) index = flat;
        if (index.same_as(op->index) && predicate.same_as(op->predicate)) return op;
        return Load::make(op->type, op->name, index, op->image, op->param, predicate, op->alignment);
    }

    // Whether \p e reads memory or calls anything: such a let is a value of its own moment (the
    // buffer may change before the load that uses it), so it stays a name.
    static bool reads_memory(const Expr &e) {
        struct Reads : public IRVisitor {
            bool found = false;
            using IRVisitor::visit;
            void visit(const Load *) override { found = true; }
            void visit(const Call *) override { found = true; }
        } r;
        e.accept(&r);
        return r.found;
    }

    // A name bound to something else (a vector, a float, a loop) hides an outer binding.
    static Expr scoped(const Expr &value) {
        return value.type().is_int() && value.type().lanes() == 1 && !reads_memory(value) ? value : Expr();
    }

    Stmt visit(const For *op) override {
        lets.push(op->name, Expr());
        Stmt s = IRMutator::visit(op);
        lets.pop(op->name);
        return s;
    }

    // A Let or LetStmt: its value in scope (where scoped keeps it) while its body is mutated.
    template <typename LetNode, typename Body>
    Body mutate_let(const LetNode *op) {
        Expr value = mutate(op->value);
        lets.push(op->name, scoped(value));
        Body body = mutate(op->body);
        lets.pop(op->name);
        if (value.same_as(op->value) && body.same_as(op->body)) return op;
        return LetNode::make(op->name, value, body);
    }

    Expr visit(const Let *op) override { return mutate_let<Let, Expr>(op); }
    Stmt visit(const LetStmt *op) override { return mutate_let<LetStmt, Stmt>(op); }
};

}  // namespace

Stmt flat_row_indices(const Stmt &s) { return FlatRowIndices().mutate(s); }

void fold_flat_row_indices(Halide::Pipeline &pipeline) { pipeline.add_custom_lowering_pass(new FlatRowIndices); }

}  // namespace loom
