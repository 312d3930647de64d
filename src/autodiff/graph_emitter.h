/// \file
/// Appends canonical nodes to a graph with their output shapes given by the caller, so the
/// autodiff rules build forward-loss and backward nodes that need no second shape inference (the
/// canonical form is not re-canonicalizable for every op: a canonical Slice has no `ends`).
/// Private to src/autodiff.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace loom::autodiff {

/// Builds nodes into one graph; every value it makes gets a fresh name with a readable prefix.
class GraphEmitter {
public:
    explicit GraphEmitter(Graph &g, std::string prefix) : g_(g), prefix_(std::move(prefix)) {}

    Graph &graph() { return g_; }
    const Shape &shape(const std::string &v) const { return g_.value(v).shape; }
    DType dtype(const std::string &v) const { return g_.value(v).dtype; }

    /// A node \p op reading \p inputs, whose one output has \p shape and \p dtype; its output name.
    std::string op(const std::string &op, std::vector<std::string> inputs, Shape shape,
                   std::map<std::string, AttrValue> attrs = {}, DType dtype = DType::F32);
    /// A node with several outputs of the given shapes; their names.
    std::vector<std::string> op_n(const std::string &op, std::vector<std::string> inputs, std::vector<Shape> shapes,
                                  std::map<std::string, AttrValue> attrs = {});
    /// A scalar (rank 0) f32 constant.
    std::string scalar(double v, DType t = DType::F32);
    /// A constant tensor.
    std::string constant(const Tensor &t, const std::string &base = "const");
    /// Elementwise binary op with NumPy broadcast of the operands' shapes.
    std::string binary(const std::string &op, const std::string &a, const std::string &b);
    std::string add(const std::string &a, const std::string &b) { return binary("Add", a, b); }
    std::string sub(const std::string &a, const std::string &b) { return binary("Sub", a, b); }
    std::string mul(const std::string &a, const std::string &b) { return binary("Mul", a, b); }
    std::string div(const std::string &a, const std::string &b) { return binary("Div", a, b); }
    /// Elementwise unary op.
    std::string unary(const std::string &op, const std::string &x, std::map<std::string, AttrValue> attrs = {});
    /// Reshape to \p s (nothing when the shape is already \p s).
    std::string reshape(const std::string &x, const Shape &s);
    /// Transpose by \p perm (nothing for the identity).
    std::string transpose(const std::string &x, const std::vector<int64_t> &perm);
    /// ReduceSum over \p axes (nothing when \p axes is empty); over several axes in stages, the
    /// trailing ones reshaped to one flat axis first, then the leading ones.
    std::string reduce_sum(const std::string &x, std::vector<int64_t> axes, bool keepdims);
    /// Broadcasts \p x to \p s (nothing when equal).
    std::string expand(const std::string &x, const Shape &s);
    /// Sums a broadcast gradient \p g back to \p target_shape (the shape of the operand that was
    /// broadcast): ReduceSum over the broadcast axes, then Reshape.
    std::string unbroadcast(const std::string &g, const Shape &target_shape);
    /// Where(cond, a, b) with broadcast.
    std::string where(const std::string &c, const std::string &a, const std::string &b);

private:
    std::string fresh(const std::string &base);
    Graph &g_;
    std::string prefix_;
    int count_ = 0;
};

/// NumPy broadcast of two shapes; UserError when they do not broadcast.
Shape broadcast_shapes(const Shape &a, const Shape &b);

}  // namespace loom::autodiff
