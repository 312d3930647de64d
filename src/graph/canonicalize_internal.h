/// \file
/// Private to src/graph: per-op canonicalisation and shape inference, used by
/// infer_shapes_and_fold (passes.cpp). One function per op family, split across
/// canonicalize_compute.cpp (pointwise, matmul, conv, pool, norm, reduce) and
/// canonicalize_layout.cpp (reshape family, slice, pad, gather, resize, folded ops).
#pragma once

#include <vector>

#include "graph/graph.h"

namespace loom::canon {

/// What canonicalising one node produced: usually the node itself (rewritten in place), sometimes
/// several nodes replacing it (e.g. Softmax of opset < 13 becomes Reshape, Softmax, Reshape).
/// Replacement nodes are returned un-inferred; the driver infers each in turn.
struct Result {
    std::vector<Node> replacement;  ///< empty: keep the (rewritten) node
};

/// Rewrites \p n to canonical form (op_catalog.h) and sets the ValueInfo of its outputs.
/// Inputs' ValueInfos are already inferred.
Result canonicalize_node(Graph &g, Node &n);

// Families (dispatch in canonicalize_compute.cpp).
Result canon_elementwise(Graph &g, Node &n);
Result canon_matmul(Graph &g, Node &n);
Result canon_conv(Graph &g, Node &n);
Result canon_pool(Graph &g, Node &n);
Result canon_norm(Graph &g, Node &n);
Result canon_reduce(Graph &g, Node &n);
Result canon_layout(Graph &g, Node &n);
Result canon_gather(Graph &g, Node &n);
Result canon_resize(Graph &g, Node &n);
Result canon_folded(Graph &g, Node &n);

// Shared helpers.
/// Shape of input \p i (must be given).
const Shape &in_shape(const Graph &g, const Node &n, int i);
DType in_dtype(const Graph &g, const Node &n, int i);
/// Sets output \p i's type and shape.
void set_output(Graph &g, const Node &n, int i, DType t, const Shape &s);
/// Input \p i as constant ints; UserError naming the node and \p what when it is not constant.
std::vector<int64_t> const_ints(const Graph &g, const Node &n, int i, const char *what);
std::vector<double> const_floats(const Graph &g, const Node &n, int i, const char *what);
/// Input \p i as one constant number; UserError naming the node and \p what unless it holds
/// exactly one element.
double const_scalar(const Graph &g, const Node &n, int i, const char *what);
/// Attribute \p name as a tensor of one element; UserError naming the node when it is another type
/// or another size.
const Tensor &attr_scalar_tensor(const Node &n, const std::string &name);
/// Normalises a possibly negative axis against \p rank; UserError when out of range.
int64_t norm_axis(const Node &n, int64_t axis, int64_t rank, const char *what = "axis");
/// NumPy broadcast of two shapes; UserError naming the node and both shapes when incompatible.
Shape broadcast(const Node &n, const Shape &a, const Shape &b);
/// Keeps the first \p k inputs.
void keep_inputs(Node &n, int k);
/// Rank check with a clear message.
void need_rank(const Graph &g, const Node &n, int i, int min_rank, int max_rank = 1 << 20);
/// UserError when an extra output (beyond the first \p k) is consumed or is a graph output.
void drop_unused_outputs(Graph &g, Node &n, int k, const char *what);
/// Makes a Reshape node named \p name from \p in to \p out with resolved shape \p s.
Node make_reshape(const std::string &name, const std::string &in, const std::string &out,
                  const Shape &s);

}  // namespace loom::canon
