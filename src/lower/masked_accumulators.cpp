#include "lower/masked_accumulators.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace loom {

namespace {

using namespace Halide::Internal;
using Halide::Expr;

bool is_host_loop(const For *op) {
    return (op->device_api == Halide::DeviceAPI::None || op->device_api == Halide::DeviceAPI::Host) &&
           op->for_type == ForType::Serial;
}

/// What a loop body does with each buffer it stores to under a predicate.
class BodyAccesses : public IRVisitor {
    using IRVisitor::visit;

public:
    std::map<std::string, Expr> lets;    ///< every let bound in the body, by name (once, or to one value)
    std::set<std::string> ambiguous;     ///< let names bound to different values in the body
    std::set<std::string> inner_vars;    ///< loop and let names bound in the body
    bool parallel_inside = false;
    std::vector<const Store *> stores;   ///< predicated vector stores
    std::vector<const Load *> loads;
    std::set<std::string> named;         ///< names used as plain variables (buffer arguments of calls)

private:
    void visit(const For *op) override {
        inner_vars.insert(op->name);
        if (op->for_type != ForType::Serial && op->for_type != ForType::Unrolled) parallel_inside = true;
        IRVisitor::visit(op);
    }
    void bind(const std::string &name, const Expr &value) {
        inner_vars.insert(name);
        auto it = lets.find(name);
        if (ambiguous.count(name)) return;
        if (it == lets.end()) lets[name] = value;
        else if (!equal(it->second, value)) {
            lets.erase(it);
            ambiguous.insert(name);
        }
    }
    void visit(const LetStmt *op) override {
        bind(op->name, op->value);
        IRVisitor::visit(op);
    }
    void visit(const Let *op) override {
        bind(op->name, op->value);
        IRVisitor::visit(op);
    }
    void visit(const Store *op) override {
        stores.push_back(op);
        IRVisitor::visit(op);
    }
    void visit(const Load *op) override {
        loads.push_back(op);
        IRVisitor::visit(op);
    }
    void visit(const Variable *op) override { named.insert(op->name); }
    void visit(const Allocate *op) override {
        inner_vars.insert(op->name);
        IRVisitor::visit(op);
    }
};

std::string str(const Expr &e) {
    std::ostringstream o;
    o << e;
    return o.str().substr(0, 160);
}

/// \p e with the body's lets substituted until none is left (lowered lets are not recursive).
Expr expand(Expr e, const std::map<std::string, Expr> &lets) {
    for (int i = 0; i < 16; i++) {
        Expr next = substitute(lets, e);
        if (next.same_as(e) || equal(next, e)) break;
        e = next;
    }
    return simplify(e);
}

struct Accumulator {
    std::string buffer, copy;
    Expr index, predicate;  ///< expanded: loop-invariant
    Halide::Type type;
    Halide::Buffer<> image;
    Halide::Internal::Parameter load_param, store_param;
};

/// The accumulator of \p acc that \p name at \p index (expanded) under \p pred is, or nullptr.
const Accumulator *find_accumulator(const std::vector<Accumulator> &acc, const std::string &name, const Expr &index,
                                    const Expr &pred) {
    for (const auto &a : acc)
        if (a.buffer == name && equal(a.index, index) && equal(a.predicate, pred)) return &a;
    return nullptr;
}

/// Replaces the accumulators' accesses in a loop body by accesses to their stack copies.
class UseCopies : public IRMutator {
    using IRMutator::visit;
    const std::vector<Accumulator> &acc;
    const std::map<std::string, Expr> &lets;

public:
    UseCopies(const std::vector<Accumulator> &a, const std::map<std::string, Expr> &l) : acc(a), lets(l) {}

private:
    Expr visit(const Load *op) override {
        const Accumulator *a = find_accumulator(acc, op->name, expand(op->index, lets), expand(op->predicate, lets));
        if (!a) return IRMutator::visit(op);
        int lanes = op->type.lanes();
        return Load::make(op->type, a->copy, Ramp::make(0, 1, lanes), Halide::Buffer<>(),
                          Halide::Internal::Parameter(), const_true(lanes), ModulusRemainder());
    }
    Stmt visit(const Store *op) override {
        const Accumulator *a = find_accumulator(acc, op->name, expand(op->index, lets), expand(op->predicate, lets));
        if (!a) return IRMutator::visit(op);
        int lanes = op->value.type().lanes();
        return Store::make(a->copy, mutate(op->value), Ramp::make(0, 1, lanes), Halide::Internal::Parameter(),
                           const_true(lanes), ModulusRemainder());
    }
};

class MaskedAccumulatorsInRegisters : public IRMutator {
    using IRMutator::visit;
    bool in_gpu = false;

    Stmt visit(const For *op) override {
        bool host = op->device_api == Halide::DeviceAPI::None || op->device_api == Halide::DeviceAPI::Host;
        if (!host || in_gpu) {
            bool was = in_gpu;
            in_gpu = true;
            Stmt s = IRMutator::visit(op);
            in_gpu = was;
            return s;
        }
        if (!is_host_loop(op)) return IRMutator::visit(op);
        BodyAccesses body;
        op->body.accept(&body);
        if (body.parallel_inside) return IRMutator::visit(op);
        std::set<std::string> inner = body.inner_vars;
        inner.insert(op->name);
        auto invariant = [&](const Expr &e) {
            for (const auto &v : inner)
                if (expr_uses_var(e, v)) return false;
            return true;
        };
        // Candidates: predicated vector stores whose index and predicate do not move in the loop.
        // A buffer may have several (an unrolled loop's accumulators): each index is another
        // coordinate of the same Func, and the predicate keeps each to its own elements, so the
        // active lanes of two of them never meet.
        std::vector<Accumulator> acc;
        std::set<std::string> rejected;
        for (const Store *s : body.stores) {
            if (rejected.count(s->name) || body.inner_vars.count(s->name)) continue;
            int lanes = s->value.type().lanes();
            Expr index = expand(s->index, body.lets), pred = expand(s->predicate, body.lets);
            if (lanes < 2 || is_const_one(pred) || !invariant(index) || !invariant(pred)) {
                rejected.insert(s->name);
                continue;
            }
            const Accumulator *same = find_accumulator(acc, s->name, index, pred);
            if (same && same->type != s->value.type()) {
                rejected.insert(s->name);
                continue;
            }
            if (same) continue;
            Accumulator a;
            a.buffer = s->name;
            a.index = index;
            a.predicate = pred;
            a.type = s->value.type();
            a.store_param = s->param;
            acc.push_back(a);
        }
        for (const Load *l : body.loads) {
            bool stored = false;
            for (const auto &a : acc) stored |= a.buffer == l->name;
            if (!stored) continue;
            Accumulator *a = const_cast<Accumulator *>(
                find_accumulator(acc, l->name, expand(l->index, body.lets), expand(l->predicate, body.lets)));
            if (!a || a->type != l->type) {
                rejected.insert(l->name);
                continue;
            }
            a->image = l->image;
            a->load_param = l->param;
        }
        std::vector<Accumulator> kept;
        for (const auto &a : acc)
            // A buffer named as a plain variable (handed to a call) may be read another way.
            if (!rejected.count(a.buffer) && !body.named.count(a.buffer) && !body.named.count(a.buffer + ".buffer"))
                kept.push_back(a);
        acc.swap(kept);
        if (std::getenv("LOOM_MACC_DEBUG")) {
            for (const Store *st : body.stores)
                if (!is_const_one(st->predicate))
                    std::fprintf(stderr, "macc loop %s: store %s pred %s idx %s -> %s\n", op->name.c_str(), st->name.c_str(),
                                 str(expand(st->predicate, body.lets)).c_str(), str(expand(st->index, body.lets)).c_str(),
                                 find_accumulator(acc, st->name, expand(st->index, body.lets), expand(st->predicate, body.lets)) ? "hoisted" : "kept");
        }
        if (acc.empty()) return IRMutator::visit(op);

        for (auto &a : acc) a.copy = unique_name(a.buffer + "_register");
        Stmt inner_body = mutate(UseCopies(acc, body.lets).mutate(op->body));
        Stmt loop = For::make(op->name, op->min, op->extent, op->for_type, op->device_api, inner_body);
        std::vector<Stmt> before, after;
        for (const auto &a : acc) {
            const std::string &name = a.buffer;
            int lanes = a.type.lanes();
            Expr ramp = Ramp::make(0, 1, lanes);
            Expr load = Load::make(a.type, name, a.index, a.image, a.load_param, a.predicate, ModulusRemainder());
            before.push_back(Store::make(a.copy, load, ramp, Halide::Internal::Parameter(), const_true(lanes),
                                         ModulusRemainder()));
            Expr copy = Load::make(a.type, a.copy, ramp, Halide::Buffer<>(), Halide::Internal::Parameter(),
                                   const_true(lanes), ModulusRemainder());
            after.push_back(Store::make(name, copy, a.index, a.store_param, a.predicate, ModulusRemainder()));
        }
        std::vector<Stmt> seq = before;
        seq.push_back(loop);
        seq.insert(seq.end(), after.begin(), after.end());
        Stmt s = IfThenElse::make(op->extent > 0, Block::make(seq));
        for (const auto &a : acc)
            s = Allocate::make(a.copy, a.type.element_of(), Halide::MemoryType::Stack, {Expr(a.type.lanes())},
                               const_true(), s);
        return s;
    }
};

}  // namespace

Stmt masked_accumulators_in_registers(const Stmt &s) { return MaskedAccumulatorsInRegisters().mutate(s); }

void keep_masked_accumulators_in_registers(Halide::Pipeline &pipeline) {
    if (const char *e = std::getenv("LOOM_MASKED_ACC"); e && std::string(e) == "0") return;
    pipeline.add_custom_lowering_pass(new MaskedAccumulatorsInRegisters);
}

}  // namespace loom
