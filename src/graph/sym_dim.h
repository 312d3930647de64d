/// \file
/// Symbolic tensor dims for dynamic shapes: a dim is an integer expression over named symbols
/// (`H`, `batch`) built from +, -, * and floor division, constant-folded as it is built, so a
/// static dim is just a number and `(H + 1) / 2` stays an expression. Shape inference of a model
/// compiled for every size (graph/symbolic_shapes.h) writes them; lowering turns them into Halide
/// Exprs, and the runtime evaluates them at the sizes it is given.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace loom {

/// One dim: a constant, a symbol, or an operation on two dims. Immutable and cheap to copy.
class SymDim {
public:
    enum class Kind { Const, Symbol, Add, Sub, Mul, FloorDiv };

    SymDim(int64_t c = 0);  // NOLINT: a number is a static dim
    static SymDim symbol(const std::string &name);

    Kind kind() const { return node_->kind; }
    bool is_static() const { return node_->kind == Kind::Const; }
    /// The constant of a static dim (InternalError otherwise).
    int64_t value() const;
    /// The symbol's name (Kind::Symbol only).
    const std::string &name() const { return node_->name; }
    /// Operands of a binary dim.
    const SymDim &lhs() const { return *node_->a; }
    const SymDim &rhs() const { return *node_->b; }

    /// The value at \p sizes (symbol -> size); UserError for a symbol it does not bind, or a
    /// division by a value that is not positive.
    int64_t eval(const std::map<std::string, int64_t> &sizes) const;
    /// "(H + 1) / 2"; a static dim prints its number.
    std::string str() const;
    /// Adds the symbols it reads to \p out.
    void symbols(std::set<std::string> &out) const;

    bool operator==(const SymDim &o) const { return str() == o.str(); }
    bool operator!=(const SymDim &o) const { return !(*this == o); }

    friend SymDim operator+(const SymDim &a, const SymDim &b);
    friend SymDim operator-(const SymDim &a, const SymDim &b);
    friend SymDim operator*(const SymDim &a, const SymDim &b);
    /// Floor division (as ONNX's output-size formulas and Halide's int division).
    friend SymDim floordiv(const SymDim &a, const SymDim &b);

private:
    struct Node {
        Kind kind = Kind::Const;
        int64_t c = 0;
        std::string name;
        std::shared_ptr<const SymDim> a, b;
    };
    static SymDim make(Kind k, const SymDim &a, const SymDim &b);
    std::shared_ptr<const Node> node_;
};

/// A shape of symbolic dims, outermost first.
using SymShape = std::vector<SymDim>;

/// A symbol's declared range (`--dim NAME=LO..HI`): sizes outside it are refused at run time.
struct DimRange {
    int64_t lo = 1;
    int64_t hi = 1 << 30;
};

/// What a graph compiled for every size carries beside its values' symbolic shapes: the symbols
/// its inputs leave open, their declared ranges and representative sizes (what the concrete
/// shapes, the cost model and the reports use), and what must hold between dims for a size to be
/// valid (a Reshape keeps the element count, broadcast dims agree), checked before every run.
struct DynamicDims {
    std::vector<std::string> symbols;               ///< in the order the inputs name them
    std::map<std::string, DimRange> ranges;         ///< per symbol
    std::map<std::string, int64_t> representative;  ///< per symbol: the size the concrete shapes have
    struct Requirement {
        SymDim a, b;
        bool at_least = false;  ///< a >= b (else a == b)
        std::string what;       ///< "Reshape '/Reshape' keeps the element count"
    };
    std::vector<Requirement> requirements;
    bool active() const { return !symbols.empty(); }
    /// UserError naming the first requirement or range that \p sizes break.
    void check(const std::map<std::string, int64_t> &sizes) const;
    /// Per symbol, the smallest size a run can have: its range's lower end raised to the first
    /// size every requirement on that symbol alone accepts (an FPN's adds make a detector's height
    /// a multiple of 32: no run is smaller than 32). What a schedule may assume at every size.
    std::map<std::string, int64_t> least_sizes() const;
};

/// "Nx3xHxW"-style text of a symbolic shape ("(H + 1) / 2" dims in parentheses when compound).
std::string sym_shape_str(const SymShape &s);
/// True when every dim is static.
bool sym_shape_static(const SymShape &s);
/// The product of the dims.
SymDim sym_numel(const SymShape &s);
/// Every dim evaluated at \p sizes.
std::vector<int64_t> eval_shape(const SymShape &s, const std::map<std::string, int64_t> &sizes);

}  // namespace loom
