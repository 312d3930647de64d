#include "graph/sym_dim.h"

#include "support/error.h"

namespace loom {

SymDim::SymDim(int64_t c) {
    auto n = std::make_shared<Node>();
    n->kind = Kind::Const;
    n->c = c;
    node_ = n;
}

SymDim SymDim::symbol(const std::string &name) {
    auto n = std::make_shared<Node>();
    n->kind = Kind::Symbol;
    n->name = name;
    SymDim d;
    d.node_ = n;
    return d;
}

int64_t SymDim::value() const {
    internal_check(is_static(), "SymDim::value of the symbolic dim ", str());
    return node_->c;
}

SymDim SymDim::make(Kind k, const SymDim &a, const SymDim &b) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->a = std::make_shared<const SymDim>(a);
    n->b = std::make_shared<const SymDim>(b);
    SymDim d;
    d.node_ = n;
    return d;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

SymDim operator+(const SymDim &a, const SymDim &b) {
    if (a.is_static() && b.is_static()) return a.value() + b.value();
    if (b.is_static() && b.value() == 0) return a;
    if (a.is_static() && a.value() == 0) return b;
    if (a.is_static()) return b + a;  // constants on the right, so they can merge
    // (x + c1) + c2 -> x + (c1 + c2); (x - c1) + c2 -> x + (c2 - c1)
    if (b.is_static() && a.kind() == SymDim::Kind::Add && a.rhs().is_static()) return a.lhs() + (a.rhs().value() + b.value());
    if (b.is_static() && a.kind() == SymDim::Kind::Sub && a.rhs().is_static()) return a.lhs() + (b.value() - a.rhs().value());
    if (b.is_static() && b.value() < 0) return SymDim::make(SymDim::Kind::Sub, a, -b.value());
    return SymDim::make(SymDim::Kind::Add, a, b);
}

SymDim operator-(const SymDim &a, const SymDim &b) {
    if (a.is_static() && b.is_static()) return a.value() - b.value();
    if (b.is_static()) return a + SymDim(-b.value());
    if (a == b) return 0;
    return SymDim::make(SymDim::Kind::Sub, a, b);
}

SymDim operator*(const SymDim &a, const SymDim &b) {
    if (a.is_static() && b.is_static()) return a.value() * b.value();
    if (a.is_static()) return b * a;
    if (b.is_static() && b.value() == 1) return a;
    if (b.is_static() && b.value() == 0) return 0;
    // (x * c1) * c2 -> x * (c1 * c2)
    if (b.is_static() && a.kind() == SymDim::Kind::Mul && a.rhs().is_static()) return a.lhs() * (a.rhs().value() * b.value());
    return SymDim::make(SymDim::Kind::Mul, a, b);
}

SymDim floordiv(const SymDim &a, const SymDim &b) {
    if (a.is_static() && b.is_static()) {
        user_check(b.value() > 0, "a dim divided by ", b.value());
        return floor_div(a.value(), b.value());
    }
    if (b.is_static() && b.value() == 1) return a;
    if (a == b) return 1;
    if (b.is_static() && b.value() > 0) {
        // (x * c1) / c2 with c2 | c1 -> x * (c1 / c2); (x / c1) / c2 -> x / (c1 * c2)
        if (a.kind() == SymDim::Kind::Mul && a.rhs().is_static() && a.rhs().value() % b.value() == 0)
            return a.lhs() * (a.rhs().value() / b.value());
        if (a.kind() == SymDim::Kind::FloorDiv && a.rhs().is_static() && a.rhs().value() > 0)
            return floordiv(a.lhs(), a.rhs().value() * b.value());
    }
    return SymDim::make(SymDim::Kind::FloorDiv, a, b);
}

int64_t SymDim::eval(const std::map<std::string, int64_t> &sizes) const {
    switch (kind()) {
    case Kind::Const: return node_->c;
    case Kind::Symbol: {
        auto it = sizes.find(node_->name);
        user_check(it != sizes.end(), "dim '", node_->name, "' has no size");
        return it->second;
    }
    case Kind::Add: return lhs().eval(sizes) + rhs().eval(sizes);
    case Kind::Sub: return lhs().eval(sizes) - rhs().eval(sizes);
    case Kind::Mul: return lhs().eval(sizes) * rhs().eval(sizes);
    case Kind::FloorDiv: {
        int64_t d = rhs().eval(sizes);
        user_check(d > 0, "dim ", str(), " divides by ", rhs().str(), " = ", d);
        return floor_div(lhs().eval(sizes), d);
    }
    }
    return 0;
}

std::string SymDim::str() const {
    auto operand = [](const SymDim &d) {
        return d.kind() == Kind::Const || d.kind() == Kind::Symbol ? d.str() : "(" + d.str() + ")";
    };
    switch (kind()) {
    case Kind::Const: return std::to_string(node_->c);
    case Kind::Symbol: return node_->name;
    case Kind::Add: return lhs().str() + " + " + operand(rhs());
    case Kind::Sub: return lhs().str() + " - " + operand(rhs());
    case Kind::Mul: return operand(lhs()) + "*" + operand(rhs());
    case Kind::FloorDiv: return operand(lhs()) + "/" + operand(rhs());
    }
    return "?";
}

void SymDim::symbols(std::set<std::string> &out) const {
    if (kind() == Kind::Symbol) out.insert(node_->name);
    if (node_->a) node_->a->symbols(out);
    if (node_->b) node_->b->symbols(out);
}

std::string sym_shape_str(const SymShape &s) {
    std::string r;
    for (size_t d = 0; d < s.size(); d++) {
        std::string t = s[d].str();
        bool compound = s[d].kind() != SymDim::Kind::Const && s[d].kind() != SymDim::Kind::Symbol;
        r += (d ? "x" : "") + (compound ? "(" + t + ")" : t);
    }
    return s.empty() ? "scalar" : r;
}

bool sym_shape_static(const SymShape &s) {
    for (const auto &d : s)
        if (!d.is_static()) return false;
    return true;
}

SymDim sym_numel(const SymShape &s) {
    SymDim n = 1;
    for (const auto &d : s) n = n * d;
    return n;
}

std::vector<int64_t> eval_shape(const SymShape &s, const std::map<std::string, int64_t> &sizes) {
    std::vector<int64_t> r;
    for (const auto &d : s) r.push_back(d.eval(sizes));
    return r;
}

void DynamicDims::check(const std::map<std::string, int64_t> &sizes) const {
    for (const auto &s : symbols) {
        auto it = sizes.find(s);
        user_check(it != sizes.end(), "dim '", s, "' has no size");
        const DimRange &r = ranges.at(s);
        user_check(it->second >= r.lo && it->second <= r.hi, "dim '", s, "' = ", it->second,
                   " is outside its declared range ", r.lo, "..", r.hi, "; compile with a wider --dim ", s,
                   "=LO..HI or bind it with --input");
    }
    for (const auto &q : requirements) {
        int64_t a = q.a.eval(sizes), b = q.b.eval(sizes);
        user_check(q.at_least ? a >= b : a == b, q.what, " needs ", q.a.str(), (q.at_least ? " >= " : " == "),
                   q.b.str(), ", but it is ", a, " against ", b, " at these input sizes; give sizes the model accepts");
    }
}

std::map<std::string, int64_t> DynamicDims::least_sizes() const {
    std::map<std::string, int64_t> least;
    for (const auto &s : symbols) {
        const DimRange &r = ranges.at(s);
        std::vector<const Requirement *> own;  // requirements on this symbol alone
        for (const auto &q : requirements) {
            std::set<std::string> read;
            q.a.symbols(read);
            q.b.symbols(read);
            if (read.size() == 1 && read.count(s)) own.push_back(&q);
        }
        auto accepted = [&](int64_t v) {
            std::map<std::string, int64_t> at{{s, v}};
            for (const Requirement *q : own) {
                try {
                    int64_t a = q->a.eval(at), b = q->b.eval(at);
                    if (q->at_least ? a < b : a != b) return false;
                } catch (const UserError &) {  // a division by a size that is not positive there
                    return false;
                }
            }
            return true;
        };
        // A bounded scan: past it the range's own lower end stands (always a valid lower bound).
        int64_t v = r.lo;
        const int64_t last = std::min<int64_t>(r.hi, r.lo + 4096);
        while (v < last && !accepted(v)) v++;
        least[s] = accepted(v) ? v : r.lo;
    }
    return least;
}

}  // namespace loom
