// Elementwise ops lowered to Halide and JIT-run, against the reference interpreter: odd sizes,
// size-1 dims, scalars and broadcasting in every direction. Several ops share one graph (one
// compile) to keep the test quick.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "codegen/jit.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

using Builder = loom::testing::GraphBuilder;
using loom::testing::check;

TEST(OpsElementwise, UnaryFloat) {
    Builder b;
    Shape s{2, 3, 7};
    std::string x = b.input("x", s);
    std::string x3 = b.node("Mul", {x, b.scalar(3.0)}, s);  // [-3, 3): erf's interesting range
    std::string pos = b.node("Add", {b.node("Abs", {x}, s), b.scalar(0.25)}, s);
    for (const char *op : {"Abs", "Neg", "Floor", "Ceil", "Relu", "Sigmoid", "Tanh", "Erf",
                           "Softplus", "HardSwish", "Exp"})
        b.out(op, {x3}, s);
    for (const char *op : {"Sqrt", "Log", "Reciprocal"}) b.out(op, {pos}, s);
    b.out("LeakyRelu", {x3}, s, {{"alpha", 0.1}});
    b.out("Elu", {x3}, s, {{"alpha", 0.7}});
    b.out("Swish", {x3}, s, {{"alpha", 1.0}});
    b.out("Swish", {b.node("Mul", {x, b.scalar(40.0)}, s)}, s, {{"alpha", 0.5}});  // large |x|: no overflow
    b.out("HardSigmoid", {x3}, s, {{"alpha", 0.25}, {"beta", 0.4}});
    b.out("Gelu", {x3}, s, {{"approximate", std::string("none")}});
    b.out("Gelu", {x3}, s, {{"approximate", std::string("tanh")}});
    b.out("Clip", {x3}, s, {{"min", -1.5}, {"max", 0.5}});
    b.out("Clip", {x3}, s, {{"min", -INFINITY}, {"max", 0.5}});
    b.out("Softplus", {b.node("Mul", {x, b.scalar(40.0)}, s)}, s);  // large |x|: no overflow
    check(b, random_inputs(b.g, 1));
}

TEST(OpsElementwise, ErfIsAccurate) {
    // Dense sweep of erf over [-5, 5] against the reference, tighter than the general tolerance.
    Builder b;
    const int n = 2001;
    std::string x = b.input("x", {n});
    b.out("Erf", {x}, {n});
    std::vector<double> v(n);
    for (int k = 0; k < n; k++) v[k] = -5.0 + 10.0 * k / (n - 1);
    check(b, {{"x", Tensor::from_doubles(DType::F32, {n}, v)}}, 3e-7);
}

TEST(OpsElementwise, SinCosTanhAreAccurate) {
    // Vectorisable polynomial sin/cos and rational tanh: a sweep over [-100, 100] (many quadrants) against libm.
    Builder b;
    const int n = 4001;
    std::string x = b.input("x", {n});
    b.out("Sin", {x}, {n});
    b.out("Cos", {x}, {n});
    b.out("Tanh", {x}, {n});
    b.out("Tanh", {b.node("Mul", {x, b.scalar(0.01)}, {n})}, {n});  // [-1, 1]: the curved part
    std::vector<double> v(n);
    for (int k = 0; k < n; k++) v[k] = -100.0 + 200.0 * k / (n - 1) + 1e-3 * (k % 7);
    check(b, {{"x", Tensor::from_doubles(DType::F32, {n}, v)}}, 1e-6);
}

// Max abs error of the float32 sin/cos against libm in double, on random floats of several
// ranges (the reduction and the quadrant logic are what break first as |x| grows).
TEST(OpsElementwise, SinCosMaxErrorAcrossRanges) {
    Builder b;
    const int n = 1 << 14;
    std::string x = b.input("x", {n});
    b.out("Sin", {x}, {n});
    b.out("Cos", {x}, {n});
    LoweredPipeline lp = lower_graph(b.g);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    const std::string sin_out = b.g.outputs.at(0), cos_out = b.g.outputs.at(1);
    std::mt19937 rng(7);
    auto sample = [&](double lo, double hi) {
        std::uniform_real_distribution<double> u(lo, hi);
        std::vector<double> v(n);
        for (auto &e : v) e = (float)u(rng);
        return Tensor::from_doubles(DType::F32, {n}, v);
    };
    // Documented accuracy: about 1 ulp (7e-8) up to |x| = 1e5; the bound leaves room for 2 ulp.
    const double ranges[][2] = {{-1, 1}, {-10, 10}, {-1e3, 1e3}, {-1e4, 1e4}, {-1e5, 1e5},
                                {-1e4, -1}, {-1e5, -5e4}, {5e4, 1e5}, {-1e-3, 1e-3}};
    for (const auto &rg : ranges) {
        Tensor in = sample(rg[0], rg[1]);
        auto outs = m.run({{"x", in}});
        double es = 0, ec = 0;
        for (int64_t k = 0; k < n; k++) {
            double v = in.get(k);
            es = std::max(es, std::fabs(outs.at(sin_out).get(k) - std::sin(v)));
            ec = std::max(ec, std::fabs(outs.at(cos_out).get(k) - std::cos(v)));
        }
        EXPECT_LE(es, 1.5e-7) << "sin on [" << rg[0] << ", " << rg[1] << "]";
        EXPECT_LE(ec, 1.5e-7) << "cos on [" << rg[0] << ", " << rg[1] << "]";
    }
    // Beyond the accurate range the result is meaningless but bounded: never NaN, |v| <= 1.
    const double huge[][2] = {{1e6, 1e7}, {-1e9, -1e7}, {-1e38, 1e38}};
    for (const auto &rg : huge) {
        auto outs = m.run({{"x", sample(rg[0], rg[1])}});
        for (const auto *name : {&sin_out, &cos_out})
            for (int64_t k = 0; k < n; k++) {
                double v = outs.at(*name).get(k);
                ASSERT_TRUE(std::isfinite(v) && std::fabs(v) <= 1.0)
                    << *name << " on [" << rg[0] << ", " << rg[1] << "] gave " << v << " at " << k;
            }
    }
}

// sin(x)² + cos(x)² and sin(x)·cos(x) with sin and cos inlined into one loop, as the sincos
// workload runs: correct, and the range reduction is computed once (Halide's CSE shares it; the
// 1.5·2^23 shifter appears once in the lowered statement).
TEST(OpsElementwise, SinCosInlinedShareOneReduction) {
    Builder b;
    const int n = 1024;  // a multiple of the vector width: one loop, no tail version
    Shape s{n};
    std::string x = b.input("x", s);
    std::string sn = b.node("Sin", {x}, s), cs = b.node("Cos", {x}, s);
    b.out("Add", {b.node("Mul", {sn, sn}, s), b.node("Mul", {cs, cs}, s)}, s);
    LoweredPipeline lp = lower_graph(b.g);
    for (auto &f : lp.funcs)
        if (f.is_output) f.func.compute_root().vectorize(f.func.args()[0], 16);
        else f.func.compute_inline();
    std::string stmt_path = loom::testing::temp_path("sincos_shared.stmt");
    std::vector<Halide::Argument> args(lp.inputs.begin(), lp.inputs.end());
    lp.pipeline().compile_to_lowered_stmt(stmt_path, args, Halide::Text, host_target());
    std::ifstream f(stmt_path);
    std::stringstream text;
    text << f.rdbuf();
    std::string st = text.str();
    size_t count = 0;
    for (size_t at = st.find("12582912"); at != std::string::npos; at = st.find("12582912", at + 1)) count++;
    EXPECT_EQ(count, 1u) << "the sin/cos range reduction is not shared:\n" << st;
    std::remove(stmt_path.c_str());

    JitModel m(std::move(lp));
    std::vector<double> v(n);
    for (int k = 0; k < n; k++) v[k] = -300.0 + 600.0 * k / (n - 1);
    Tensor in = Tensor::from_doubles(DType::F32, s, v);
    auto outs = m.run({{"x", in}});
    auto ref = run_reference(b.g, {{"x", in}});
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-6, 3e-7)) << name;
}

TEST(OpsElementwise, BinaryBroadcast) {
    Builder b;
    std::string a = b.input("a", {3, 1, 5});
    std::string c = b.input("c", {4, 1});
    std::string d = b.input("d", {5});
    std::string e = b.input("e", {});  // rank 0
    Shape o{3, 4, 5};
    b.out("Add", {a, c}, o);
    b.out("Sub", {c, a}, o);
    b.out("Mul", {a, d}, {3, 1, 5});
    b.out("Mul", {e, a}, {3, 1, 5});
    b.out("Add", {e, e}, {});
    std::string pc = b.node("Add", {b.node("Abs", {c}, {4, 1}), b.scalar(0.5)}, {4, 1});
    std::string pa = b.node("Add", {b.node("Abs", {a}, {3, 1, 5}), b.scalar(0.5)}, {3, 1, 5});
    b.out("Div", {a, pc}, o);
    b.out("Pow", {pa, c}, o);
    b.out("Pow", {a, b.scalar(2.0)}, {3, 1, 5});
    b.out("Pow", {a, b.scalar(3.0)}, {3, 1, 5});
    b.out("Pow", {pa, b.scalar(0.5)}, {3, 1, 5});
    b.out("Pow", {pa, b.scalar(1.7)}, {3, 1, 5});
    for (const char *op : {"Min", "Max", "Sum", "Mean"}) b.out(op, {a, c, d}, o);
    b.out("Max", {d}, {5});
    b.out("PRelu", {a, d}, {3, 1, 5});
    b.out("PRelu", {c, b.scalar(0.2)}, {4, 1});
    std::string less = b.node("Less", {a, c}, o, {}, DType::Bool);
    b.out("Where", {less, a, c}, o);
    b.out("Where", {b.node("Greater", {d, e}, {5}, {}, DType::Bool), c, b.scalar(-2.0)}, {4, 5});
    b.out("Equal", {b.node("Floor", {c}, {4, 1}), b.node("Ceil", {d}, {5})}, {4, 5}, {}, DType::Bool);
    b.out("Greater", {a, c}, o, {}, DType::Bool);
    // A constant broadcast operand with more than one element.
    b.out("Add", {c, b.constant(Tensor::from_doubles(DType::F32, {1, 3}, {1, 2, 3}))}, {4, 3});
    check(b, random_inputs(b.g, 2));
}

TEST(OpsElementwise, IntegerBoolAndCast) {
    Builder b;
    std::string i = b.input("i", {2, 9}, DType::I64);
    std::string j = b.input("j", {9}, DType::I32);
    std::string x = b.input("x", {2, 9});
    std::string p = b.input("p", {2, 1}, DType::Bool);
    // ints in [-5, 5): negative numerators and denominators for truncating division.
    std::string im = b.node("Sub", {i, b.scalar(5, DType::I64)}, {2, 9}, {}, DType::I64);
    std::string den = b.node("Add", {b.node("Abs", {im}, {2, 9}, {}, DType::I64), b.scalar(1, DType::I64)},
                             {2, 9}, {}, DType::I64);
    b.out("Div", {im, den}, {2, 9}, {}, DType::I64);
    b.out("Div", {b.node("Neg", {im}, {2, 9}, {}, DType::I64), b.scalar(3, DType::I64)}, {2, 9}, {}, DType::I64);
    b.out("Mul", {j, j}, {9}, {}, DType::I32);
    b.out("Clip", {im}, {2, 9}, {{"min", -2.0}, {"max", 3.0}}, DType::I64);
    b.out("Min", {im, b.node("Cast", {j}, {9}, {{"to", std::string("i64")}}, DType::I64)}, {2, 9}, {}, DType::I64);
    std::string gt = b.node("Greater", {x, b.scalar(0.0)}, {2, 9}, {}, DType::Bool);
    b.out("Not", {gt}, {2, 9}, {}, DType::Bool);
    b.out("Or", {gt, p}, {2, 9}, {}, DType::Bool);
    b.out("And", {gt, p}, {2, 9}, {}, DType::Bool);
    b.out("Cast", {gt}, {2, 9}, {{"to", std::string("f32")}});
    b.out("Cast", {x}, {2, 9}, {{"to", std::string("bool")}}, DType::Bool);
    std::string big = b.node("Mul", {x, b.scalar(7.0)}, {2, 9});
    b.out("Cast", {big}, {2, 9}, {{"to", std::string("i32")}}, DType::I32);
    b.out("Cast", {im}, {2, 9}, {{"to", std::string("f32")}});
    b.out("Cast", {x}, {2, 9}, {{"to", std::string("f64")}}, DType::F64);
    b.out("Equal", {im, b.scalar(0, DType::I64)}, {2, 9}, {}, DType::Bool);
    check(b, random_inputs(b.g, 3));
}

}  // namespace
}  // namespace loom
