/// \file
/// Shapes and tensors with data. A Tensor owns its bytes (row-major, outermost dim first, as ONNX
/// and NumPy store them) and reads/writes any element as double or int64 whatever its dtype, so the
/// reference interpreter and constant folding can be written once for all dtypes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace loom {

/// An allocator aligned to 64 bytes (one cache line, one AVX-512 vector): compiled pipelines run
/// directly on Tensor memory, and Halide emits aligned vector loads for masked tails.
template <typename T>
struct AlignedAllocator {
    using value_type = T;
    static constexpr std::size_t kAlign = 64;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U> &) {}
    T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(kAlign))); }
    void deallocate(T *p, std::size_t) { ::operator delete(p, std::align_val_t(kAlign)); }
    template <typename U>
    bool operator==(const AlignedAllocator<U> &) const { return true; }
    template <typename U>
    bool operator!=(const AlignedAllocator<U> &) const { return false; }
};

/// A tensor's storage: bytes, 64-byte aligned.
using TensorBytes = std::vector<uint8_t, AlignedAllocator<uint8_t>>;

/// Dimensions, outermost first (ONNX order).
using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for rank 0; INT64_MAX when the product overflows).
int64_t shape_numel(const Shape &s);
/// "1x3x224x224" ("scalar" for rank 0).
std::string shape_str(const Shape &s);
/// Row-major strides of \p s, in elements.
std::vector<int64_t> shape_strides(const Shape &s);

/// The most bytes one tensor may take: 4 GiB (a self-contained ONNX file holds at most 2 GiB), or
/// the environment variable LOOM_MAX_TENSOR_BYTES (a byte count; suffixes K M G T allowed).
int64_t max_tensor_bytes();
/// Bytes a tensor of \p dtype and \p shape takes. UserError naming \p what if a dim is negative,
/// the size overflows, or it exceeds max_tensor_bytes() (saying how to raise the limit).
int64_t checked_tensor_bytes(DType dtype, const Shape &shape, const std::string &what);

/// A dense tensor with data.
class Tensor {
public:
    Tensor() = default;
    /// A tensor of \p shape, every byte zero; UserError (checked_tensor_bytes) past the size limit.
    Tensor(DType dtype, Shape shape);

    DType dtype() const { return dtype_; }
    const Shape &shape() const { return shape_; }
    int rank() const { return (int)shape_.size(); }
    int64_t numel() const { return shape_numel(shape_); }
    const TensorBytes &bytes() const { return bytes_; }
    TensorBytes &bytes() { return bytes_; }
    void *data() { return bytes_.data(); }
    const void *data() const { return bytes_.data(); }

    /// Element \p i (flat, row-major) converted to double.
    double get(int64_t i) const;
    /// Element \p i converted to int64 (floats truncate).
    int64_t get_int(int64_t i) const;
    /// Stores \p v at flat index \p i, converted to the dtype (ints round to nearest, bools v != 0).
    void set(int64_t i, double v);
    /// Stores an integer exactly (no trip through double, so INT64_MAX survives).
    void set_int(int64_t i, int64_t v);

    /// All elements as doubles / int64s.
    std::vector<double> to_doubles() const;
    std::vector<int64_t> to_ints() const;

    /// Builders.
    static Tensor from_doubles(DType dtype, Shape shape, const std::vector<double> &v);
    static Tensor from_ints(DType dtype, Shape shape, const std::vector<int64_t> &v);
    static Tensor scalar(DType dtype, double v);

    /// Same data, another shape with the same element count.
    Tensor reshaped(Shape s) const;
    /// A copy converted to \p dtype.
    Tensor cast(DType dtype) const;

private:
    DType dtype_ = DType::F32;
    Shape shape_;
    TensorBytes bytes_;
};

/// Fills \p t with uniform random values in [lo, hi) from a deterministic generator
/// (integers: [lo, hi) rounded down; bools: 0/1).
void fill_random(Tensor &t, uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace loom
