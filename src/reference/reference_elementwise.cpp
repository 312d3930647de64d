// Elementwise ops: unary math and activations, NumPy-broadcast binary and variadic ops,
// comparisons and logic (bool results), Where, Clip and Cast.
#include <cmath>
#include <limits>

#include "reference/reference_internal.h"

namespace loom::ref {
namespace {

bool is_int(DType t) { return !dtype_is_float(t) && t != DType::Bool; }

// Unary op: float math in double; \p fi (if given) keeps integer results exact.
template <typename FD, typename FI>
std::vector<Tensor> unary(const OpArgs &a, FD fd, FI fi) {
    const Tensor &x = a.input(0);
    Tensor out = a.new_output();
    a.check(x.numel() == out.numel(), "input ", shape_str(x.shape()), " but output ",
            shape_str(out.shape()));
    const int64_t n = out.numel();
    if (out.dtype() == DType::F64) {
        std::vector<double> v = to_f64(x);
        double *o = f64_data(out);
#pragma omp parallel for if (n > kParallelMin)
        for (int64_t i = 0; i < n; i++) o[i] = fd(v[i]);
    } else if (is_int(out.dtype()) && !dtype_is_float(x.dtype())) {
        for (int64_t i = 0; i < n; i++) out.set_int(i, fi(x.get_int(i)));
    } else {
        for (int64_t i = 0; i < n; i++) out.set(i, fd(x.get(i)));
    }
    return {out};
}

template <typename FD>
std::vector<Tensor> unary(const OpArgs &a, FD fd) {
    return unary(a, fd, [&](int64_t v) { return (int64_t)fd((double)v); });
}

double sigmoid(double x) {
    // Two forms so exp never overflows.
    if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
    double e = std::exp(x);
    return e / (1.0 + e);
}

// Broadcast n-ary op. Floating results in double; integer results through \p fi in int64 so shape
// arithmetic folds exactly; bool results through \p fd (comparisons) unless all inputs are
// integers, where \p fi decides so large int64 compare exactly.
template <typename FD, typename FI>
std::vector<Tensor> nary(const OpArgs &a, int min_inputs, FD fd, FI fi) {
    int k = a.num_inputs();
    a.check(k >= min_inputs, "needs at least ", min_inputs, " inputs, got ", k);
    std::vector<Shape> shapes;
    bool all_int = true;
    for (int i = 0; i < k; i++) {
        shapes.push_back(a.input(i).shape());
        all_int = all_int && !dtype_is_float(a.input(i).dtype());
    }
    Shape bs = broadcast_shapes(a, shapes);
    Tensor out = a.new_output();
    a.check(bs == out.shape(), "inputs broadcast to ", shape_str(bs), " but output is declared ",
            shape_str(out.shape()));
    Broadcaster b(bs, shapes);
    const int64_t n = out.numel();
    if (all_int && !dtype_is_float(out.dtype())) {
        std::vector<std::vector<int64_t>> v;
        for (int i = 0; i < k; i++) v.push_back(a.input(i).to_ints());
        std::vector<int64_t> args(k);
        for (int64_t i = 0; i < n; i++) {
            for (int j = 0; j < k; j++) args[j] = v[j][b.offset(j, i)];
            out.set_int(i, fi(args));
        }
        return {out};
    }
    std::vector<std::vector<double>> v;
    for (int i = 0; i < k; i++) v.push_back(to_f64(a.input(i)));
    if (out.dtype() == DType::F64) {
        double *o = f64_data(out);
#pragma omp parallel for if (n > kParallelMin)
        for (int64_t i = 0; i < n; i++) {
            double args[8];
            std::vector<double> many;
            double *p = args;
            if (k > 8) {
                many.resize(k);
                p = many.data();
            }
            for (int j = 0; j < k; j++) p[j] = v[j][b.offset(j, i)];
            o[i] = fd(p, k);
        }
    } else {
        std::vector<double> args(k);
        for (int64_t i = 0; i < n; i++) {
            for (int j = 0; j < k; j++) args[j] = v[j][b.offset(j, i)];
            out.set(i, fd(args.data(), k));
        }
    }
    return {out};
}

// Binary convenience: fd(x, y) in double, fi(x, y) in int64.
template <typename FD, typename FI>
std::vector<Tensor> binary(const OpArgs &a, FD fd, FI fi) {
    a.check(a.num_inputs() == 2, "needs 2 inputs, got ", a.num_inputs());
    return nary(
        a, 2, [&](const double *p, int) { return fd(p[0], p[1]); },
        [&](const std::vector<int64_t> &p) { return fi(p[0], p[1]); });
}

double nan_max(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); }
double nan_min(double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y); }

template <typename F, typename FI>
std::vector<Tensor> fold_op(const OpArgs &a, F f, FI fi, bool mean) {
    return nary(
        a, 1,
        [&](const double *p, int k) {
            double acc = p[0];
            for (int j = 1; j < k; j++) acc = f(acc, p[j]);
            return mean ? acc / k : acc;
        },
        [&](const std::vector<int64_t> &p) {
            int64_t acc = p[0];
            for (size_t j = 1; j < p.size(); j++) acc = fi(acc, p[j]);
            return mean ? acc / (int64_t)p.size() : acc;
        });
}

std::vector<Tensor> op_div(const OpArgs &a) {
    bool int_div = is_int(a.out.at(0).dtype);
    if (int_div) {
        const Tensor &d = a.input(1);
        for (int64_t i = 0; i < d.numel(); i++) a.check(d.get_int(i) != 0, "integer division by zero");
    }
    // ONNX integer Div truncates toward zero, as C++ does.
    return binary(
        a, [](double x, double y) { return x / y; }, [](int64_t x, int64_t y) { return x / y; });
}

std::vector<Tensor> op_where(const OpArgs &a) {
    a.check(a.num_inputs() == 3, "needs cond, a, b");
    return nary(
        a, 3, [](const double *p, int) { return p[0] != 0 ? p[1] : p[2]; },
        [](const std::vector<int64_t> &p) { return p[0] != 0 ? p[1] : p[2]; });
}

// Cast rounds to the target precision (a Cast to f16 loses bits in the real program too);
// float to integer truncates toward zero as ONNX specifies.
std::vector<Tensor> op_cast(const OpArgs &a) {
    const Tensor &x = a.input(0);
    DType to = dtype_from_name(a.node.get_string("to", dtype_name(a.out.at(0).dtype)));
    a.check(to == a.out.at(0).dtype, "attribute to='", dtype_name(to), "' but the output is declared ",
            dtype_name(a.out.at(0).dtype));
    const int64_t n = x.numel();
    Tensor t(to, x.shape());
    for (int64_t i = 0; i < n; i++) {
        if (to == DType::Bool) {
            t.set(i, x.get(i) != 0 ? 1 : 0);
        } else if (dtype_is_float(to)) {
            t.set(i, x.get(i));
        } else if (dtype_is_float(x.dtype())) {
            t.set(i, std::trunc(x.get(i)));
        } else {
            int64_t v = x.get_int(i);
            switch (to) {  // integer narrowing wraps (two's complement), as NumPy astype does
            case DType::I32: v = (int32_t)v; break;
            case DType::I16: v = (int16_t)v; break;
            case DType::I8: v = (int8_t)v; break;
            case DType::U8: v = (uint8_t)v; break;
            default: break;
            }
            t.set_int(i, v);
        }
    }
    return {dtype_is_float(to) ? t.cast(DType::F64) : t};
}

std::vector<Tensor> op_clip(const OpArgs &a) {
    double lo = a.node.get_float("min", -INFINITY), hi = a.node.get_float("max", INFINITY);
    return unary(
        a, [=](double x) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); },
        [=](int64_t x) {
            if (lo > -9.2e18 && (double)x < lo) return (int64_t)std::ceil(lo);
            if (hi < 9.2e18 && (double)x > hi) return (int64_t)std::floor(hi);
            return x;
        });
}

std::vector<Tensor> op_gelu(const OpArgs &a) {
    std::string approx = a.node.get_string("approximate", "none");
    if (approx == "tanh") {
        const double c = std::sqrt(2.0 / 3.14159265358979323846);
        return unary(a, [=](double x) { return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x))); });
    }
    a.check(approx == "none", "approximate='", approx, "' is not valid; use \"none\" or \"tanh\"");
    return unary(a, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
}

#define LOOM_UNARY(NAME, EXPR) \
    std::vector<Tensor> op_##NAME(const OpArgs &a) { return unary(a, [&](double x) { return EXPR; }); }

LOOM_UNARY(sqrt, std::sqrt(x))
LOOM_UNARY(exp, std::exp(x))
LOOM_UNARY(log, std::log(x))
LOOM_UNARY(reciprocal, 1.0 / x)
LOOM_UNARY(floor, std::floor(x))
LOOM_UNARY(ceil, std::ceil(x))
LOOM_UNARY(sigmoid, sigmoid(x))
LOOM_UNARY(tanh, std::tanh(x))
LOOM_UNARY(erf, std::erf(x))
LOOM_UNARY(sin, std::sin(x))
LOOM_UNARY(cos, std::cos(x))
LOOM_UNARY(softplus, x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)))
LOOM_UNARY(hardswish, x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)))
LOOM_UNARY(not, x == 0 ? 1.0 : 0.0)
#undef LOOM_UNARY

std::vector<Tensor> op_abs(const OpArgs &a) {
    return unary(a, [](double x) { return std::abs(x); }, [](int64_t x) { return x < 0 ? -x : x; });
}
std::vector<Tensor> op_neg(const OpArgs &a) {
    return unary(a, [](double x) { return -x; }, [](int64_t x) { return -x; });
}
std::vector<Tensor> op_relu(const OpArgs &a) {
    return unary(a, [](double x) { return x < 0 ? 0.0 : x; }, [](int64_t x) { return x < 0 ? 0 : x; });
}
std::vector<Tensor> op_swish(const OpArgs &a) {
    double al = a.node.get_float("alpha", 1.0);
    return unary(a, [=](double x) { return x * sigmoid(al * x); });
}
std::vector<Tensor> op_leaky_relu(const OpArgs &a) {
    double al = a.node.get_float("alpha", 0.01);
    return unary(a, [=](double x) { return x < 0 ? al * x : x; });
}
std::vector<Tensor> op_elu(const OpArgs &a) {
    double al = a.node.get_float("alpha", 1.0);
    return unary(a, [=](double x) { return x < 0 ? al * (std::exp(x) - 1) : x; });
}
std::vector<Tensor> op_hard_sigmoid(const OpArgs &a) {
    double al = a.node.get_float("alpha", 0.2), be = a.node.get_float("beta", 0.5);
    return unary(a, [=](double x) { return std::max(0.0, std::min(1.0, al * x + be)); });
}

std::vector<Tensor> op_add(const OpArgs &a) {
    return binary(a, [](double x, double y) { return x + y; }, [](int64_t x, int64_t y) { return x + y; });
}
std::vector<Tensor> op_sub(const OpArgs &a) {
    return binary(a, [](double x, double y) { return x - y; }, [](int64_t x, int64_t y) { return x - y; });
}
std::vector<Tensor> op_mul(const OpArgs &a) {
    return binary(a, [](double x, double y) { return x * y; }, [](int64_t x, int64_t y) { return x * y; });
}
std::vector<Tensor> op_pow(const OpArgs &a) {
    return binary(
        a, [](double x, double y) { return std::pow(x, y); },
        [](int64_t x, int64_t y) {
            if (y < 0) return (int64_t)std::trunc(std::pow((double)x, (double)y));
            int64_t r = 1;
            for (int64_t i = 0; i < y; i++) r *= x;
            return r;
        });
}
std::vector<Tensor> op_prelu(const OpArgs &a) {
    return binary(a, [](double x, double s) { return x < 0 ? s * x : x; },
                  [](int64_t x, int64_t s) { return x < 0 ? s * x : x; });
}
std::vector<Tensor> op_equal(const OpArgs &a) {
    return binary(a, [](double x, double y) { return double(x == y); }, [](int64_t x, int64_t y) { return int64_t(x == y); });
}
std::vector<Tensor> op_less(const OpArgs &a) {
    return binary(a, [](double x, double y) { return double(x < y); }, [](int64_t x, int64_t y) { return int64_t(x < y); });
}
std::vector<Tensor> op_greater(const OpArgs &a) {
    return binary(a, [](double x, double y) { return double(x > y); }, [](int64_t x, int64_t y) { return int64_t(x > y); });
}
std::vector<Tensor> op_and(const OpArgs &a) {
    return binary(a, [](double x, double y) { return double(x != 0 && y != 0); },
                  [](int64_t x, int64_t y) { return int64_t(x != 0 && y != 0); });
}
std::vector<Tensor> op_or(const OpArgs &a) {
    return binary(a, [](double x, double y) { return double(x != 0 || y != 0); },
                  [](int64_t x, int64_t y) { return int64_t(x != 0 || y != 0); });
}
int64_t imin(int64_t x, int64_t y) { return std::min(x, y); }
int64_t imax(int64_t x, int64_t y) { return std::max(x, y); }
double dadd(double x, double y) { return x + y; }
int64_t iadd(int64_t x, int64_t y) { return x + y; }
std::vector<Tensor> op_min(const OpArgs &a) { return fold_op(a, nan_min, imin, false); }
std::vector<Tensor> op_max(const OpArgs &a) { return fold_op(a, nan_max, imax, false); }
std::vector<Tensor> op_sum(const OpArgs &a) { return fold_op(a, dadd, iadd, false); }
std::vector<Tensor> op_mean(const OpArgs &a) { return fold_op(a, dadd, iadd, true); }

}  // namespace

void register_elementwise_ops(OpTable &t) {
    t["Sqrt"] = op_sqrt;
    t["Exp"] = op_exp;
    t["Log"] = op_log;
    t["Abs"] = op_abs;
    t["Neg"] = op_neg;
    t["Reciprocal"] = op_reciprocal;
    t["Floor"] = op_floor;
    t["Ceil"] = op_ceil;
    t["Relu"] = op_relu;
    t["Sigmoid"] = op_sigmoid;
    t["Tanh"] = op_tanh;
    t["Sin"] = op_sin;
    t["Cos"] = op_cos;
    t["Erf"] = op_erf;
    t["Softplus"] = op_softplus;
    t["HardSwish"] = op_hardswish;
    t["Swish"] = op_swish;
    t["Not"] = op_not;
    t["LeakyRelu"] = op_leaky_relu;
    t["Elu"] = op_elu;
    t["HardSigmoid"] = op_hard_sigmoid;
    t["Gelu"] = op_gelu;
    t["Clip"] = op_clip;
    t["Cast"] = op_cast;
    t["Add"] = op_add;
    t["Sub"] = op_sub;
    t["Mul"] = op_mul;
    t["Div"] = op_div;
    t["Pow"] = op_pow;
    t["PRelu"] = op_prelu;
    t["Equal"] = op_equal;
    t["Less"] = op_less;
    t["Greater"] = op_greater;
    t["And"] = op_and;
    t["Or"] = op_or;
    t["Min"] = op_min;
    t["Max"] = op_max;
    t["Sum"] = op_sum;
    t["Mean"] = op_mean;
    t["Where"] = op_where;
}

}  // namespace loom::ref
