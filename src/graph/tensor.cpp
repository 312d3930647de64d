#include "graph/tensor.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>

#include "support/error.h"

namespace loom {

int64_t shape_numel(const Shape &s) {
    int64_t n = 1;
    for (int64_t d : s)  // a product past int64 (a corrupt shape) saturates; size checks then refuse it
        if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
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

int64_t max_tensor_bytes() {
    // Read on every call (cheap next to an allocation) so that tests and embedders can set it late.
    const char *env = std::getenv("LOOM_MAX_TENSOR_BYTES");
    if (!env || !*env) return int64_t(4) << 30;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(env, &end, 10);
    int shift = 0;
    if (end && *end) {
        switch (std::toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: shift = -1;
        }
        if (shift > 0) end++;
    }
    user_check(errno == 0 && end != env && *end == '\0' && shift >= 0 && v > 0 &&
                   v <= (std::numeric_limits<int64_t>::max() >> shift),
               "LOOM_MAX_TENSOR_BYTES='", env, "' is not a positive byte count; expected e.g. 8G or 8589934592");
    return (int64_t)v << shift;
}

namespace {
std::string human_bytes(double b) {
    const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && u < 6) b /= 1024, u++;
    std::ostringstream os;
    os << std::setprecision(u ? 3 : 20) << b << " " << units[u];
    return os.str();
}
}  // namespace

int64_t checked_tensor_bytes(DType dtype, const Shape &shape, const std::string &what) {
    int64_t bytes = dtype_size(dtype);
    double approx = bytes;  // keeps growing past an overflow, for the message
    bool overflow = false;
    for (int64_t d : shape) {
        user_check(d >= 0, what, " has a negative dim in shape [", shape_str(shape),
                   "]; dims must be >= 0");
        approx *= (double)d;
        overflow = overflow || __builtin_mul_overflow(bytes, d, &bytes);
    }
    if (approx == 0) return 0;
    const int64_t limit = max_tensor_bytes();
    if (!overflow && bytes <= limit) return bytes;
    user_check(approx < 0x1p60, what, " (", dtype_name(dtype), " ", shape_str(shape),
               ") would take more bytes than a 64-bit address space holds; the shape is corrupt");
    user_check(false, what, " (", dtype_name(dtype), " ", shape_str(shape), ") would take ",
               human_bytes(approx), ", over Loom's limit of ", human_bytes((double)limit),
               " per tensor; if the shape is right and the memory is there, raise the limit, e.g. "
               "LOOM_MAX_TENSOR_BYTES=", (int64_t)std::ceil(approx / (1 << 30)), "G");
    return bytes;
}

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)),
      bytes_(checked_tensor_bytes(dtype_, shape_, "a tensor"), 0) {}

namespace {
float float_from_bits(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
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
    return float_from_bits(bits);
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
        uint32_t h = man >> shift, rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1))) h++;
        return sign | h;
    }
    // Round to nearest even, as hardware conversions (F16C, PTX cvt.rn) do.
    uint32_t h = sign | (exp << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return h;
}
// bfloat16 is the top half of a float: widening is exact, narrowing rounds to nearest even.
float bf16_to_float(uint16_t b) { return float_from_bits((uint32_t)b << 16); }
uint16_t float_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);  // NaN stays NaN
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
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
    case DType::BF16: return bf16_to_float(load<uint16_t>(bytes_, i));
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
    case DType::BF16: store<uint16_t>(bytes_, i, float_to_bf16((float)v)); break;
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
