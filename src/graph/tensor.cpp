#include "graph/tensor.h"

#include <cmath>
#include <cstring>
#include <random>

#include "graph/error.h"

namespace loom {

int64_t shape_numel(const Shape &s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

std::string shape_str(const Shape &s) {
    if (s.empty()) return "scalar";
    std::string r;
    for (size_t i = 0; i < s.size(); i++) r += (i ? "x" : "") + std::to_string(s[i]);
    return r;
}

std::vector<int64_t> shape_strides(const Shape &s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = (int)s.size() - 2; i >= 0; i--) st[i] = st[i + 1] * s[i + 1];
    return st;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(shape_numel(shape_) * dtype_size(dtype), 0) {}

namespace {
// IEEE half <-> float, enough for storing f16 weights and casts.
float half_to_float(uint16_t h) {
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) man <<= 1, exp--;
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, man = x & 0x7fffff;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0);
    if (exp >= 31) return sign | 0x7c00;
    if (exp <= 0) {
        if (exp < -10) return sign;
        man |= 0x800000;
        uint32_t shift = 14 - exp;
        uint32_t h = man >> shift;
        if ((man >> (shift - 1)) & 1) h++;
        return sign | h;
    }
    uint32_t h = sign | (exp << 10) | (man >> 13);
    if (man & 0x1000) h++;  // round half up; exact enough for weights
    return h;
}
template <typename T>
T load(const TensorBytes &b, int64_t i) {
    T v;
    std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
    return v;
}
template <typename T>
void store(TensorBytes &b, int64_t i, T v) {
    std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}
template <typename T>
T to_int_sat(double v) {
    if (std::isnan(v)) return 0;
    double r = std::nearbyint(v);
    if (r >= (double)std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
    if (r <= (double)std::numeric_limits<T>::lowest()) return std::numeric_limits<T>::lowest();
    return (T)r;
}
}  // namespace

double Tensor::get(int64_t i) const {
    switch (dtype_) {
    case DType::F32: return load<float>(bytes_, i);
    case DType::F16: return half_to_float(load<uint16_t>(bytes_, i));
    case DType::F64: return load<double>(bytes_, i);
    case DType::I64: return (double)load<int64_t>(bytes_, i);
    case DType::I32: return load<int32_t>(bytes_, i);
    case DType::I16: return load<int16_t>(bytes_, i);
    case DType::I8: return load<int8_t>(bytes_, i);
    case DType::U8: return load<uint8_t>(bytes_, i);
    case DType::Bool: return load<uint8_t>(bytes_, i) ? 1.0 : 0.0;
    }
    return 0;
}

int64_t Tensor::get_int(int64_t i) const {
    switch (dtype_) {
    case DType::I64: return load<int64_t>(bytes_, i);
    case DType::I32: return load<int32_t>(bytes_, i);
    default: return (int64_t)get(i);
    }
}

void Tensor::set(int64_t i, double v) {
    switch (dtype_) {
    case DType::F32: store<float>(bytes_, i, (float)v); break;
    case DType::F16: store<uint16_t>(bytes_, i, float_to_half((float)v)); break;
    case DType::F64: store<double>(bytes_, i, v); break;
    case DType::I64: store<int64_t>(bytes_, i, to_int_sat<int64_t>(v)); break;
    case DType::I32: store<int32_t>(bytes_, i, to_int_sat<int32_t>(v)); break;
    case DType::I16: store<int16_t>(bytes_, i, to_int_sat<int16_t>(v)); break;
    case DType::I8: store<int8_t>(bytes_, i, to_int_sat<int8_t>(v)); break;
    case DType::U8: store<uint8_t>(bytes_, i, to_int_sat<uint8_t>(v)); break;
    case DType::Bool: store<uint8_t>(bytes_, i, v != 0 ? 1 : 0); break;
    }
}

void Tensor::set_int(int64_t i, int64_t v) {
    switch (dtype_) {
    case DType::I64: store<int64_t>(bytes_, i, v); break;
    case DType::I32: store<int32_t>(bytes_, i, (int32_t)v); break;
    default: set(i, (double)v);
    }
}

std::vector<double> Tensor::to_doubles() const {
    std::vector<double> r(numel());
    for (int64_t i = 0; i < numel(); i++) r[i] = get(i);
    return r;
}

std::vector<int64_t> Tensor::to_ints() const {
    std::vector<int64_t> r(numel());
    for (int64_t i = 0; i < numel(); i++) r[i] = get_int(i);
    return r;
}

Tensor Tensor::from_doubles(DType dtype, Shape shape, const std::vector<double> &v) {
    Tensor t(dtype, std::move(shape));
    internal_check((int64_t)v.size() == t.numel(), "from_doubles: size mismatch");
    for (int64_t i = 0; i < t.numel(); i++) t.set(i, v[i]);
    return t;
}

Tensor Tensor::from_ints(DType dtype, Shape shape, const std::vector<int64_t> &v) {
    Tensor t(dtype, std::move(shape));
    internal_check((int64_t)v.size() == t.numel(), "from_ints: size mismatch");
    for (int64_t i = 0; i < t.numel(); i++) t.set_int(i, v[i]);
    return t;
}

Tensor Tensor::scalar(DType dtype, double v) { return from_doubles(dtype, {}, {v}); }

Tensor Tensor::reshaped(Shape s) const {
    internal_check(shape_numel(s) == numel(), "reshaped: ", shape_str(shape_), " to ", shape_str(s));
    Tensor t = *this;
    t.shape_ = std::move(s);
    return t;
}

Tensor Tensor::cast(DType dtype) const {
    Tensor t(dtype, shape_);
    bool ints = !dtype_is_float(dtype_) && !dtype_is_float(dtype);
    for (int64_t i = 0; i < numel(); i++) {
        if (ints) t.set_int(i, get_int(i));
        else t.set(i, get(i));
    }
    return t;
}

void fill_random(Tensor &t, uint64_t seed, double lo, double hi) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); i++) {
        double v = dist(rng);
        if (t.dtype() == DType::Bool) v = v > (lo + hi) / 2;
        else if (!dtype_is_float(t.dtype())) v = std::floor(v);
        t.set(i, v);
    }
}

}  // namespace loom
