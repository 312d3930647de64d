/// \file
/// Private to src/reference: the op table of the reference interpreter and the helpers its op
/// families share. One source file per family registers its ops (the way Halide splits its
/// simplifier): elementwise, linalg (MatMul, Gemm, Conv, ConvTranspose), pool_norm (pools,
/// normalisations, reductions, softmax), layout (shape-moving ops, Gather, Pad) and resize.
///
/// Conventions: float data is computed in double and returned as f64 tensors; integer and bool
/// results keep their declared dtype. Checks that can fail happen before any OpenMP loop (an
/// exception must not leave a parallel region).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "support/error.h"

namespace loom::ref {

/// Loops with fewer iterations than this stay serial, so constant folding of tiny tensors does
/// not pay for a thread team. Used as `#pragma omp parallel for if (n > kParallelMin)`.
constexpr int64_t kParallelMin = 4096;

/// What an op implementation sees: the node, its inputs (nullptr for omitted optional inputs)
/// and the declared type and shape of each output.
struct OpArgs {
    const Node &node;
    const std::vector<const Tensor *> &in;
    const std::vector<ValueInfo> &out;

    /// Input \p i; UserError naming the node when it is missing.
    const Tensor &input(int i) const;
    /// Input \p i, or nullptr when omitted.
    const Tensor *optional(int i) const { return i < (int)in.size() ? in[i] : nullptr; }
    /// Number of inputs given (trailing omitted ones dropped).
    int num_inputs() const;
    /// The declared shape of output \p i.
    const Shape &out_shape(int i = 0) const { return out.at(i).shape; }
    /// A zero tensor for output \p i: f64 when its declared dtype is floating, else that dtype.
    Tensor new_output(int i = 0) const;
    /// True when output \p i is wanted (it exists and has a name).
    bool wants(int i) const { return i < (int)out.size() && i < (int)node.outputs.size() && !node.outputs[i].empty(); }
    /// Throws a UserError prefixed with the node's description.
    template <typename... Args>
    [[noreturn]] void fail(const Args &...args) const {
        throw UserError(str_cat(node.describe(), ": ", args...));
    }
    /// fail() unless \p cond.
    template <typename... Args>
    void check(bool cond, const Args &...args) const {
        if (!cond) fail(args...);
    }
};

using OpFn = std::vector<Tensor> (*)(const OpArgs &);
using OpTable = std::map<std::string, OpFn>;

void register_elementwise_ops(OpTable &t);
void register_linalg_ops(OpTable &t);
void register_pool_norm_ops(OpTable &t);
void register_reduce_ops(OpTable &t);
void register_layout_ops(OpTable &t);
void register_resize_ops(OpTable &t);

/// All elements as doubles (fast for f32 / f64).
std::vector<double> to_f64(const Tensor &t);
/// The data of an f64 tensor.
double *f64_data(Tensor &t);
/// An f64 tensor of \p shape holding \p v.
Tensor f64_tensor(const Shape &shape, const std::vector<double> &v);

/// Output \p i of \p a filled from doubles (f64 as is; integer dtypes round to nearest).
Tensor output_from(const OpArgs &a, const std::vector<double> &v, int i = 0);

/// NumPy broadcast of \p shapes; UserError (via \p a) naming the shapes when incompatible.
Shape broadcast_shapes(const OpArgs &a, const std::vector<Shape> &shapes);

/// Reads inputs broadcast to a common output shape: offset(k, i) is the flat index into input
/// k of flat output index i.
class Broadcaster {
public:
    Broadcaster(const Shape &out, const std::vector<Shape> &ins);
    int64_t offset(int k, int64_t i) const {
        if (identity_[k]) return i;
        int64_t off = 0;
        for (int d = (int)out_.size() - 1; d >= 0; d--) {
            int64_t idx = i % out_[d];
            i /= out_[d];
            off += idx * strides_[k][d];
        }
        return off;
    }

private:
    Shape out_;
    std::vector<std::vector<int64_t>> strides_;  // per input, over out's dims; 0 where broadcast
    std::vector<bool> identity_;
};

/// Builds output tensor \p info from \p in by index map: out[o] = in[src[o]], or \p fill where
/// src[o] < 0. Exact for every dtype (integers never pass through double).
Tensor gather_elements(const Tensor &in, const std::vector<int64_t> &src, const ValueInfo &info,
                       double fill = 0.0);

/// Multi-index of flat index \p i in \p shape (outermost first).
std::vector<int64_t> unflatten(int64_t i, const Shape &shape);

/// \p v with \p n entries, or \p def repeated when \p v is empty; fail() when the length is wrong.
std::vector<int64_t> ints_or(const OpArgs &a, const char *attr, size_t n, int64_t def);

}  // namespace loom::ref
