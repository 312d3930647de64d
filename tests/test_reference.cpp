// The reference interpreter against hand-computed values, one test per op family, plus
// run_reference / random_inputs and their user errors.
#include <cmath>

#include "reference/reference.h"
#include "support/error.h"
#include "test_util.h"

namespace loom {
namespace {

using Attrs = std::map<std::string, AttrValue>;

Tensor F(Shape s, std::vector<double> v) { return Tensor::from_doubles(DType::F32, std::move(s), v); }
Tensor I(Shape s, std::vector<int64_t> v, DType t = DType::I64) { return Tensor::from_ints(t, std::move(s), v); }
ValueInfo out(Shape s, DType t = DType::F32) {
    ValueInfo v;
    v.name = "y";
    v.dtype = t;
    v.shape = std::move(s);
    v.has_shape = true;
    return v;
}

// Evaluates a one-node "graph": inputs named in0.., outputs out0.. (nullptr = omitted input).
std::vector<Tensor> eval(const std::string &op, std::vector<const Tensor *> ins, std::vector<ValueInfo> outs,
                         Attrs attrs = {}) {
    Node n;
    n.name = "n_" + op;
    n.op = op;
    for (size_t i = 0; i < ins.size(); i++) n.inputs.push_back(ins[i] ? "in" + std::to_string(i) : "");
    for (size_t i = 0; i < outs.size(); i++) n.outputs.push_back("out" + std::to_string(i));
    n.attrs = std::move(attrs);
    return evaluate_node(n, ins, outs);
}
Tensor eval1(const std::string &op, std::vector<const Tensor *> ins, ValueInfo o, Attrs attrs = {}) {
    return eval(op, std::move(ins), {std::move(o)}, std::move(attrs)).at(0);
}

// Checks shape and every element; float results must come back as f64.
void expect_values(const Tensor &t, const Shape &s, const std::vector<double> &v, double tol = 1e-9) {
    ASSERT_EQ(shape_str(t.shape()), shape_str(s));
    ASSERT_EQ((size_t)t.numel(), v.size());
    for (size_t i = 0; i < v.size(); i++) EXPECT_NEAR(t.get((int64_t)i), v[i], tol) << "flat index " << i;
}
void expect_f64(const Tensor &t, const Shape &s, const std::vector<double> &v, double tol = 1e-9) {
    EXPECT_EQ(t.dtype(), DType::F64);
    expect_values(t, s, v, tol);
}

template <typename F>
std::string user_error_of(F f) {
    try {
        f();
    } catch (const UserError &e) {
        return e.what();
    }
    return "<no UserError>";
}

// ---------------------------------------------------------------- elementwise

TEST(ReferenceElementwise, BinaryBroadcastsBothWays) {
    Tensor a = F({2, 1}, {1, 2}), b = F({3}, {10, 20, 30});
    expect_f64(eval1("Add", {&a, &b}, out({2, 3})), {2, 3}, {11, 21, 31, 12, 22, 32});
    expect_f64(eval1("Sub", {&b, &a}, out({2, 3})), {2, 3}, {9, 19, 29, 8, 18, 28});
    Tensor c = F({2, 3}, {1, 2, 3, 4, 5, 6}), s = F({}, {2});
    expect_f64(eval1("Mul", {&s, &c}, out({2, 3})), {2, 3}, {2, 4, 6, 8, 10, 12});
    expect_f64(eval1("Div", {&c, &b}, out({2, 3})), {2, 3}, {0.1, 0.1, 0.1, 0.4, 0.25, 0.2});
    Tensor e = F({1, 3}, {2, 0.5, -1});
    expect_f64(eval1("Pow", {&c, &e}, out({2, 3})), {2, 3}, {1, std::sqrt(2.0), 1.0 / 3, 16, std::sqrt(5.0), 1.0 / 6});
    Tensor bad = F({4}, {1, 2, 3, 4});
    std::string msg = user_error_of([&] { eval1("Add", {&c, &bad}, out({2, 4})); });
    EXPECT_NE(msg.find("2x3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_Add"), std::string::npos) << msg;
}

TEST(ReferenceElementwise, IntegerArithmeticStaysExact) {
    Tensor a = I({3}, {7, -7, (int64_t)1 << 60}), b = I({3}, {2, 2, 1});
    Tensor q = eval1("Div", {&a, &b}, out({3}, DType::I64));
    EXPECT_EQ(q.dtype(), DType::I64);
    EXPECT_EQ(q.to_ints(), (std::vector<int64_t>{3, -3, (int64_t)1 << 60}));  // truncates toward 0
    Tensor s = eval1("Add", {&a, &b}, out({3}, DType::I64));
    EXPECT_EQ(s.to_ints()[2], ((int64_t)1 << 60) + 1);
    Tensor z = I({1}, {0});
    EXPECT_NE(user_error_of([&] { eval1("Div", {&a, &z}, out({3}, DType::I64)); }).find("division by zero"),
              std::string::npos);
}

TEST(ReferenceElementwise, VariadicMinMaxSumMean) {
    Tensor a = F({2}, {1, 5}), b = F({1}, {3}), c = F({2, 1}, {0, 10});
    expect_f64(eval1("Max", {&a, &b, &c}, out({2, 2})), {2, 2}, {3, 5, 10, 10});
    expect_f64(eval1("Min", {&a, &b, &c}, out({2, 2})), {2, 2}, {0, 0, 1, 3});
    expect_f64(eval1("Sum", {&a, &b, &c}, out({2, 2})), {2, 2}, {4, 8, 14, 18});
    expect_f64(eval1("Mean", {&a, &b, &c}, out({2, 2})), {2, 2}, {4.0 / 3, 8.0 / 3, 14.0 / 3, 6});
    expect_f64(eval1("Max", {&a}, out({2})), {2}, {1, 5});
}

TEST(ReferenceElementwise, ComparisonsLogicAndWhere) {
    Tensor a = F({3}, {1, 2, 3}), b = F({1}, {2});
    Tensor lt = eval1("Less", {&a, &b}, out({3}, DType::Bool));
    EXPECT_EQ(lt.dtype(), DType::Bool);
    expect_values(lt, {3}, {1, 0, 0});
    expect_values(eval1("Greater", {&a, &b}, out({3}, DType::Bool)), {3}, {0, 0, 1});
    expect_values(eval1("Equal", {&a, &b}, out({3}, DType::Bool)), {3}, {0, 1, 0});
    Tensor p = I({2, 1}, {1, 0}, DType::Bool), q = I({2}, {1, 0}, DType::Bool);
    expect_values(eval1("And", {&p, &q}, out({2, 2}, DType::Bool)), {2, 2}, {1, 0, 0, 0});
    expect_values(eval1("Or", {&p, &q}, out({2, 2}, DType::Bool)), {2, 2}, {1, 1, 1, 0});
    expect_values(eval1("Not", {&q}, out({2}, DType::Bool)), {2}, {0, 1});
    Tensor x = F({2, 2}, {1, 2, 3, 4}), y = F({}, {-1});
    expect_f64(eval1("Where", {&q, &x, &y}, out({2, 2})), {2, 2}, {1, -1, 3, -1});
    Tensor i = I({2}, {5, 6}), j = I({2, 1}, {7, 8});
    Tensor w = eval1("Where", {&p, &i, &j}, out({2, 2}, DType::I64));
    EXPECT_EQ(w.to_ints(), (std::vector<int64_t>{5, 6, 8, 8}));
}

TEST(ReferenceElementwise, UnaryActivations) {
    Tensor x = F({4}, {-2, -0.5, 0, 1});
    expect_f64(eval1("Relu", {&x}, out({4})), {4}, {0, 0, 0, 1});
    expect_f64(eval1("Abs", {&x}, out({4})), {4}, {2, 0.5, 0, 1});
    expect_f64(eval1("Neg", {&x}, out({4})), {4}, {2, 0.5, 0, -1});
    expect_f64(eval1("LeakyRelu", {&x}, out({4}), {{"alpha", 0.1}}), {4}, {-0.2, -0.05, 0, 1});
    expect_f64(eval1("Elu", {&x}, out({4}), {{"alpha", 2.0}}), {4},
               {2 * (std::exp(-2.0) - 1), 2 * (std::exp(-0.5) - 1), 0, 1});
    expect_f64(eval1("HardSigmoid", {&x}, out({4}), {{"alpha", 0.4}, {"beta", 0.6}}), {4}, {0, 0.4, 0.6, 1});
    expect_f64(eval1("Sigmoid", {&x}, out({4})), {4},
               {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(0.5)), 0.5, 1 / (1 + std::exp(-1.0))});
    expect_f64(eval1("Softplus", {&x}, out({4})), {4},
               {std::log(1 + std::exp(-2.0)), std::log(1 + std::exp(-0.5)), std::log(2.0), std::log(1 + std::exp(1.0))});
    Tensor h = F({4}, {-4, -3, 1, 3});
    expect_f64(eval1("HardSwish", {&h}, out({4})), {4}, {0, 0, 1 * (1.0 / 6 + 0.5), 3});
    expect_f64(eval1("Swish", {&x}, out({4}), {{"alpha", 2.0}}), {4},
               {-2 / (1 + std::exp(4.0)), -0.5 / (1 + std::exp(1.0)), 0, 1 / (1 + std::exp(-2.0))});
    Tensor g = F({2}, {1, -0.5});
    expect_f64(eval1("Gelu", {&g}, out({2}), {{"approximate", std::string("none")}}), {2},
               {0.8413447460685429, -0.15426876936299347}, 1e-12);
    expect_f64(eval1("Gelu", {&g}, out({2}), {{"approximate", std::string("tanh")}}), {2},
               {0.8411919906082768, -0.15428599017485606}, 1e-9);
    expect_f64(eval1("Erf", {&g}, out({2})), {2}, {0.8427007929497149, -0.5204998778130465}, 1e-12);
    Tensor p = F({3}, {4, 0.25, 1});
    expect_f64(eval1("Sqrt", {&p}, out({3})), {3}, {2, 0.5, 1});
    expect_f64(eval1("Reciprocal", {&p}, out({3})), {3}, {0.25, 4, 1});
    expect_f64(eval1("Log", {&p}, out({3})), {3}, {std::log(4.0), std::log(0.25), 0});
    expect_f64(eval1("Exp", {&g}, out({2})), {2}, {std::exp(1.0), std::exp(-0.5)});
    expect_f64(eval1("Tanh", {&g}, out({2})), {2}, {std::tanh(1.0), std::tanh(-0.5)});
    Tensor r = F({3}, {-1.5, 0.5, 2.0});
    expect_f64(eval1("Floor", {&r}, out({3})), {3}, {-2, 0, 2});
    expect_f64(eval1("Ceil", {&r}, out({3})), {3}, {-1, 1, 2});
}

TEST(ReferenceElementwise, PReluSlopeBroadcastsPerChannel) {
    Tensor x = F({1, 2, 1, 2}, {-1, 2, -3, 4}), slope = F({2, 1, 1}, {0.5, 0.25});
    expect_f64(eval1("PRelu", {&x, &slope}, out({1, 2, 1, 2})), {1, 2, 1, 2}, {-0.5, 2, -0.75, 4});
}

TEST(ReferenceElementwise, ClipAndCast) {
    Tensor x = F({4}, {-2.7, -0.5, 0.5, 2.7});
    expect_f64(eval1("Clip", {&x}, out({4}), {{"min", -1.0}, {"max", 1.0}}), {4}, {-1, -0.5, 0.5, 1});
    expect_f64(eval1("Clip", {&x}, out({4}), {{"min", 0.0}}), {4}, {0, 0, 0.5, 2.7}, 1e-6);
    Tensor c = eval1("Cast", {&x}, out({4}, DType::I32), {{"to", std::string("i32")}});
    EXPECT_EQ(c.dtype(), DType::I32);
    EXPECT_EQ(c.to_ints(), (std::vector<int64_t>{-2, 0, 0, 2}));  // truncation, not rounding
    Tensor b = eval1("Cast", {&x}, out({4}, DType::Bool), {{"to", std::string("bool")}});
    EXPECT_EQ(b.to_ints(), (std::vector<int64_t>{1, 1, 1, 1}));
    Tensor tenth = Tensor::from_doubles(DType::F64, {1}, {0.1});
    // A cast to f16 keeps f16's precision (0.1 -> 0.0999755859375), returned as f64.
    expect_f64(eval1("Cast", {&tenth}, out({1}, DType::F16), {{"to", std::string("f16")}}), {1}, {0.0999755859375}, 0);
    Tensor i = I({2}, {300, -1});
    EXPECT_EQ(eval1("Cast", {&i}, out({2}, DType::U8), {{"to", std::string("u8")}}).to_ints(),
              (std::vector<int64_t>{44, 255}));  // wraps like NumPy astype
}

// ---------------------------------------------------------------- matmul / gemm

TEST(ReferenceLinalg, MatMulShapesAndOneDOperands) {
    Tensor a = F({2, 3}, {1, 2, 3, 4, 5, 6}), b = F({3, 2}, {1, 0, 0, 1, 1, 1});
    expect_f64(eval1("MatMul", {&a, &b}, out({2, 2})), {2, 2}, {4, 5, 10, 11});
    Tensor v = F({3}, {1, -1, 2});
    expect_f64(eval1("MatMul", {&v, &b}, out({2})), {2}, {3, 1});
    expect_f64(eval1("MatMul", {&a, &v}, out({2})), {2}, {5, 11});
    EXPECT_NE(user_error_of([&] { eval1("MatMul", {&a, &a}, out({2, 3})); }).find("inner dims"), std::string::npos);
}

TEST(ReferenceLinalg, MatMulBatchBroadcastsBothWays) {
    Tensor a = F({2, 1, 1, 2}, {1, 2, 3, 4});          // batch (2, 1)
    Tensor b = F({1, 3, 2, 1}, {1, 0, 0, 1, 1, 1});    // batch (1, 3)
    expect_f64(eval1("MatMul", {&a, &b}, out({2, 3, 1, 1})), {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7});
    Tensor m = F({2, 2}, {1, 0, 0, 2});                // rank 2 against a batch of 2
    Tensor x = F({2, 1, 2}, {1, 1, 2, 3});
    expect_f64(eval1("MatMul", {&x, &m}, out({2, 1, 2})), {2, 1, 2}, {1, 2, 2, 6});
}

TEST(ReferenceLinalg, GemmAlphaBetaTransposesAndCBroadcast) {
    Tensor A = F({2, 2}, {1, 2, 3, 4}), At = F({2, 2}, {1, 3, 2, 4});
    Tensor Bt = F({3, 2}, {1, 0, 1, 1, 0, 2});  // B = [[1,1,0],[0,1,2]]
    Tensor C = F({3}, {10, 20, 30});
    Attrs at{{"alpha", 2.0}, {"beta", 0.5}, {"transA", int64_t(0)}, {"transB", int64_t(1)}};
    expect_f64(eval1("Gemm", {&A, &Bt, &C}, out({2, 3}), at), {2, 3}, {7, 16, 23, 11, 24, 31});
    at["transA"] = int64_t(1);
    expect_f64(eval1("Gemm", {&At, &Bt, &C}, out({2, 3}), at), {2, 3}, {7, 16, 23, 11, 24, 31});
    Tensor Ccol = F({2, 1}, {1, -1});
    expect_f64(eval1("Gemm", {&At, &Bt, &Ccol}, out({2, 3}), at), {2, 3}, {2.5, 6.5, 8.5, 5.5, 13.5, 15.5});
    expect_f64(eval1("Gemm", {&At, &Bt, nullptr}, out({2, 3}), at), {2, 3}, {2, 6, 8, 6, 14, 16});
}

// ---------------------------------------------------------------- conv

Attrs conv_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads, std::vector<int64_t> d,
                 int64_t group = 1) {
    return {{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"dilations", d}, {"group", group}};
}

TEST(ReferenceConv, Conv2DBiasAndAsymmetricPads) {
    Tensor x = F({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), w = F({1, 1, 2, 2}, {1, 0, 0, 1}), b = F({1}, {1});
    expect_f64(eval1("Conv", {&x, &w, &b}, out({1, 1, 2, 2}), conv_attrs({2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1})),
               {1, 1, 2, 2}, {7, 9, 13, 15});
    // pads: top 1, left 0, bottom 0, right 1.
    expect_f64(eval1("Conv", {&x, &w}, out({1, 1, 3, 3}), conv_attrs({2, 2}, {1, 1}, {1, 0, 0, 1}, {1, 1})),
               {1, 1, 3, 3}, {2, 3, 0, 6, 8, 3, 12, 14, 6});
    std::string msg = user_error_of(
        [&] { eval1("Conv", {&x, &w}, out({1, 1, 3, 3}), conv_attrs({2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1})); });
    EXPECT_NE(msg.find("1x1x2x2"), std::string::npos) << msg;
}

TEST(ReferenceConv, StridesAndDilations) {
    std::vector<double> v;
    for (int i = 0; i < 25; i++) v.push_back(i);  // x[h][w] = 5h + w
    Tensor x = F({1, 1, 5, 5}, v), w = F({1, 1, 2, 2}, {1, 1, 1, 1});
    expect_f64(eval1("Conv", {&x, &w}, out({1, 1, 2, 2}), conv_attrs({2, 2}, {2, 2}, {0, 0, 0, 0}, {2, 2})),
               {1, 1, 2, 2}, {24, 32, 64, 72});
}

TEST(ReferenceConv, GroupsAnd1DAnd3D) {
    Tensor x = F({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), w = F({4, 1, 1, 1}, {1, 2, 3, 4});
    expect_f64(eval1("Conv", {&x, &w}, out({1, 4, 2, 2}), conv_attrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2)),
               {1, 4, 2, 2}, {1, 2, 3, 4, 2, 4, 6, 8, 15, 18, 21, 24, 20, 24, 28, 32});
    Tensor x1 = F({1, 2, 4}, {1, 2, 3, 4, 1, 1, 1, 1}), w1 = F({1, 2, 3}, {1, 0, -1, 0, 1, 0});
    expect_f64(eval1("Conv", {&x1, &w1}, out({1, 1, 4}), conv_attrs({3}, {1}, {1, 1}, {1})), {1, 1, 4},
               {-1, -1, -1, 4});
    Tensor x3 = F({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), w3 = F({1, 1, 2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
    expect_f64(eval1("Conv", {&x3, &w3}, out({1, 1, 1, 1, 1}),
                     conv_attrs({2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1})),
               {1, 1, 1, 1, 1}, {36});
}

TEST(ReferenceConv, ConvTransposeStridesPadsOutputPaddingGroupsDilations) {
    Tensor x = F({1, 1, 2}, {1, 2}), w = F({1, 1, 3}, {1, 1, 1});
    auto ct = [](std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d, std::vector<int64_t> op,
                 std::vector<int64_t> k, int64_t g = 1) {
        Attrs a = conv_attrs(k, s, p, d, g);
        a["output_padding"] = op;
        return a;
    };
    expect_f64(eval1("ConvTranspose", {&x, &w}, out({1, 1, 5}), ct({2}, {0, 0}, {1}, {0}, {3})), {1, 1, 5},
               {1, 1, 3, 2, 2});
    expect_f64(eval1("ConvTranspose", {&x, &w}, out({1, 1, 3}), ct({2}, {1, 1}, {1}, {0}, {3})), {1, 1, 3}, {1, 3, 2});
    expect_f64(eval1("ConvTranspose", {&x, &w}, out({1, 1, 4}), ct({2}, {1, 0}, {1}, {0}, {3})), {1, 1, 4}, {1, 3, 2, 2});
    expect_f64(eval1("ConvTranspose", {&x, &w}, out({1, 1, 6}), ct({2}, {0, 0}, {1}, {1}, {3})), {1, 1, 6},
               {1, 1, 3, 2, 2, 0});
    Tensor wd = F({1, 1, 2}, {1, 10}), b = F({1}, {0.5});
    expect_f64(eval1("ConvTranspose", {&x, &wd, &b}, out({1, 1, 4}), ct({1}, {0, 0}, {2}, {0}, {2})), {1, 1, 4},
               {1.5, 2.5, 10.5, 20.5});
    Tensor xg = F({1, 2, 1, 1}, {1, 2}), wg = F({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
    expect_f64(eval1("ConvTranspose", {&xg, &wg}, out({1, 2, 2, 2}), ct({1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, {2, 2}, 2)),
               {1, 2, 2, 2}, {1, 2, 3, 4, 10, 12, 14, 16});
}

// ---------------------------------------------------------------- pools

Attrs pool_attrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads, std::vector<int64_t> d,
                 int64_t ceil_mode = 0, int64_t include_pad = 0) {
    return {{"kernel_shape", k}, {"strides", s},          {"pads", pads},
            {"dilations", d},    {"ceil_mode", ceil_mode}, {"count_include_pad", include_pad}};
}

TEST(ReferencePool, MaxPoolCeilModeAndIndices) {
    Tensor x = F({1, 1, 1, 5}, {1, 5, 2, 4, 3});
    auto r = eval("MaxPool", {&x}, {out({1, 1, 1, 3}), out({1, 1, 1, 3}, DType::I64)},
                  pool_attrs({1, 2}, {1, 2}, {0, 0, 0, 0}, {1, 1}, 1));
    expect_f64(r[0], {1, 1, 1, 3}, {5, 4, 3});
    EXPECT_EQ(r[1].to_ints(), (std::vector<int64_t>{1, 3, 4}));
    expect_f64(eval1("MaxPool", {&x}, out({1, 1, 1, 2}), pool_attrs({1, 2}, {1, 2}, {0, 0, 0, 0}, {1, 1}, 0)),
               {1, 1, 1, 2}, {5, 4});
}

TEST(ReferencePool, MaxPoolPadsAndDilations) {
    Tensor x = F({1, 1, 5}, {1, 3, 2, 5, 4});
    expect_f64(eval1("MaxPool", {&x}, out({1, 1, 5}), pool_attrs({2}, {1}, {1, 1}, {2})), {1, 1, 5}, {3, 2, 5, 4, 5});
    Tensor n = F({1, 1, 2}, {-3, -1});  // padding never wins a max, even over negatives
    expect_f64(eval1("MaxPool", {&n}, out({1, 1, 3}), pool_attrs({2}, {1}, {1, 1}, {1})), {1, 1, 3}, {-3, -1, -1});
}

TEST(ReferencePool, AveragePoolCountIncludePadAndCeilMode) {
    Tensor x = F({1, 1, 3}, {1, 2, 3});
    expect_f64(eval1("AveragePool", {&x}, out({1, 1, 2}), pool_attrs({2}, {2}, {1, 1}, {1}, 0, 1)), {1, 1, 2}, {0.5, 2.5});
    expect_f64(eval1("AveragePool", {&x}, out({1, 1, 2}), pool_attrs({2}, {2}, {1, 1}, {1}, 0, 0)), {1, 1, 2}, {1, 2.5});
    // ceil_mode's extra window reaches past the end padding; that part is never counted.
    Tensor y = F({1, 1, 4}, {1, 2, 3, 4});
    expect_f64(eval1("AveragePool", {&y}, out({1, 1, 2}), pool_attrs({3}, {2}, {0, 0}, {1}, 1, 1)), {1, 1, 2}, {2, 3.5});
    Tensor z = F({1, 1, 2, 2}, {1, 2, 3, 4});
    expect_f64(eval1("AveragePool", {&z}, out({1, 1, 1, 1}), pool_attrs({2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1})),
               {1, 1, 1, 1}, {2.5});
}

TEST(ReferencePool, GlobalPools) {
    Tensor x = F({1, 2, 2}, {1, 3, -1, -5});
    expect_f64(eval1("GlobalAveragePool", {&x}, out({1, 2, 1})), {1, 2, 1}, {2, -3});
    expect_f64(eval1("GlobalMaxPool", {&x}, out({1, 2, 1})), {1, 2, 1}, {3, -1});
}

// ---------------------------------------------------------------- normalisations

TEST(ReferenceNorm, BatchAndInstanceNormalization) {
    Tensor x = F({1, 2, 1, 2}, {1, 2, 3, 4});
    Tensor scale = F({2}, {1, 2}), bias = F({2}, {0, 1}), mean = F({2}, {1, 3}), var = F({2}, {4, 0.25});
    expect_f64(eval1("BatchNormalization", {&x, &scale, &bias, &mean, &var}, out({1, 2, 1, 2}), {{"epsilon", 0.0}}),
               {1, 2, 1, 2}, {0, 0.5, 1, 5});
    Tensor xi = F({1, 2, 2}, {1, 3, 10, 14}), si = F({2}, {2, 1}), bi = F({2}, {1, 7});
    expect_f64(eval1("InstanceNormalization", {&xi, &si, &bi}, out({1, 2, 2}), {{"epsilon", 0.0}}), {1, 2, 2},
               {-1, 3, 6, 8});
}

TEST(ReferenceNorm, LayerNormalizationWithAndWithoutBias) {
    Tensor x = F({2, 2}, {1, 3, 2, 6}), s = F({2}, {1, 2}), b = F({2}, {0, 10});
    Attrs at{{"axis", int64_t(1)}, {"epsilon", 0.0}};
    auto r = eval("LayerNormalization", {&x, &s, &b}, {out({2, 2}), out({2, 1}), out({2, 1})}, at);
    expect_f64(r[0], {2, 2}, {-1, 12, -1, 12});
    expect_f64(r[1], {2, 1}, {2, 4});
    expect_f64(r[2], {2, 1}, {1, 0.5});
    expect_f64(eval1("LayerNormalization", {&x, &s}, out({2, 2}), at), {2, 2}, {-1, 2, -1, 2});
    // axis 0: normalise over everything (mean 3, variance 3.5); Scale broadcasts over rows.
    const double sd = std::sqrt(3.5);
    expect_f64(eval1("LayerNormalization", {&x, &s}, out({2, 2}), {{"axis", int64_t(0)}, {"epsilon", 0.0}}), {2, 2},
               {-2 / sd, 0, -1 / sd, 6 / sd});
}

TEST(ReferenceNorm, GroupNormalizationScalePerChannelOrPerGroup) {
    Tensor x = F({1, 4, 1, 1}, {1, 3, 2, 6});
    Tensor sc = F({4}, {1, 2, 3, 4}), bc = F({4}, {0, 0, 0, 1});
    Attrs at{{"num_groups", int64_t(2)}, {"epsilon", 0.0}};
    expect_f64(eval1("GroupNormalization", {&x, &sc, &bc}, out({1, 4, 1, 1}), at), {1, 4, 1, 1}, {-1, 2, -3, 5});
    Tensor sg = F({2}, {1, 2}), bg = F({2}, {0, 1});
    expect_f64(eval1("GroupNormalization", {&x, &sg, &bg}, out({1, 4, 1, 1}), at), {1, 4, 1, 1}, {-1, 1, -1, 3});
}

// ---------------------------------------------------------------- reductions, softmax

TEST(ReferenceReduce, ReduceOpsAxesAndKeepdims) {
    Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
    auto red = [&](const char *op, std::vector<int64_t> axes, int64_t keep, Shape os) {
        return eval1(op, {&x}, out(os), {{"axes", axes}, {"keepdims", keep}});
    };
    expect_f64(red("ReduceSum", {1}, 0, {2}), {2}, {6, 15});
    expect_f64(red("ReduceMean", {0}, 1, {1, 3}), {1, 3}, {2.5, 3.5, 4.5});
    expect_f64(red("ReduceMax", {0, 1}, 0, {}), {}, {6});
    expect_f64(red("ReduceMin", {0, 1}, 1, {1, 1}), {1, 1}, {1});
    expect_f64(red("ReduceProd", {1}, 1, {2, 1}), {2, 1}, {6, 120});
    expect_f64(red("ReduceL2", {1}, 0, {2}), {2}, {std::sqrt(14.0), std::sqrt(77.0)});
    Tensor y = F({2, 2, 2}, {1, 8, 3, 4, 5, 6, 7, 2});
    expect_f64(eval1("ReduceMax", {&y}, out({2, 2}), {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}}),
               {2, 2}, {3, 8, 7, 6});
    expect_f64(eval1("ReduceSum", {&y}, out({1, 2, 1}), {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t(1)}}),
               {1, 2, 1}, {20, 16});
    EXPECT_NE(user_error_of([&] { red("ReduceSum", {1}, 1, {2}); }).find("2x1"), std::string::npos);
}

TEST(ReferenceReduce, ArgMaxArgMinSelectLastIndex) {
    Tensor x = F({2, 3}, {1, 3, 3, 5, 2, 5});
    Attrs at{{"axis", int64_t(1)}, {"keepdims", int64_t(1)}, {"select_last_index", int64_t(0)}};
    Tensor first = eval1("ArgMax", {&x}, out({2, 1}, DType::I64), at);
    EXPECT_EQ(first.dtype(), DType::I64);
    EXPECT_EQ(first.to_ints(), (std::vector<int64_t>{1, 0}));
    at["select_last_index"] = int64_t(1);
    EXPECT_EQ(eval1("ArgMax", {&x}, out({2, 1}, DType::I64), at).to_ints(), (std::vector<int64_t>{2, 2}));
    Attrs mn{{"axis", int64_t(0)}, {"keepdims", int64_t(0)}, {"select_last_index", int64_t(0)}};
    Tensor m = eval1("ArgMin", {&x}, out({3}, DType::I64), mn);
    EXPECT_EQ(m.shape(), (Shape{3}));
    EXPECT_EQ(m.to_ints(), (std::vector<int64_t>{0, 1, 0}));
}

TEST(ReferenceReduce, SoftmaxIsStableAndPerAxis) {
    Tensor x = F({2, 2}, {0, std::log(3.0), 1000, 1000});
    expect_f64(eval1("Softmax", {&x}, out({2, 2}), {{"axis", int64_t(1)}}), {2, 2}, {0.25, 0.75, 0.5, 0.5}, 1e-7);
    Tensor c = F({2, 2}, {0, 1, std::log(3.0), 1});
    expect_f64(eval1("Softmax", {&c}, out({2, 2}), {{"axis", int64_t(0)}}), {2, 2}, {0.25, 0.5, 0.75, 0.5}, 1e-7);
    expect_f64(eval1("LogSoftmax", {&x}, out({2, 2}), {{"axis", int64_t(1)}}), {2, 2},
               {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)}, 1e-6);
}

TEST(ReferenceReduce, BigSoftmaxRunsParallelAndNormalises) {
    const int64_t rows = 64, cols = 200;
    Tensor x(DType::F32, {rows, cols});
    fill_random(x, 7, -5, 5);
    Tensor y = eval1("Softmax", {&x}, out({rows, cols}), {{"axis", int64_t(1)}});
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += y.get(r * cols + c);
        EXPECT_NEAR(s, 1.0, 1e-12);
    }
    // One element checked by hand: exp(x) / sum exp over its row.
    double den = 0;
    for (int64_t c = 0; c < cols; c++) den += std::exp(x.get(5 * cols + c));
    EXPECT_NEAR(y.get(5 * cols + 17), std::exp(x.get(5 * cols + 17)) / den, 1e-12);
}

// ---------------------------------------------------------------- layout

TEST(ReferenceLayout, ReshapeTransposeKeepData) {
    Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
    expect_f64(eval1("Reshape", {&x}, out({3, 2}), {{"shape", std::vector<int64_t>{3, 2}}}), {3, 2}, {1, 2, 3, 4, 5, 6});
    expect_f64(eval1("Transpose", {&x}, out({3, 2}), {{"perm", std::vector<int64_t>{1, 0}}}), {3, 2}, {1, 4, 2, 5, 3, 6});
    Tensor y = F({2, 1, 3}, {1, 2, 3, 4, 5, 6});
    expect_f64(eval1("Transpose", {&y}, out({3, 2, 1}), {{"perm", std::vector<int64_t>{2, 0, 1}}}), {3, 2, 1},
               {1, 4, 2, 5, 3, 6});
    Tensor i = I({2, 2}, {1, (int64_t)1 << 62, 3, 4});
    Tensor ti = eval1("Transpose", {&i}, out({2, 2}, DType::I64), {{"perm", std::vector<int64_t>{1, 0}}});
    EXPECT_EQ(ti.to_ints(), (std::vector<int64_t>{1, 3, (int64_t)1 << 62, 4}));
}

TEST(ReferenceLayout, ConcatAndUnequalSplit) {
    Tensor a = F({2, 1}, {1, 4}), b = F({2, 2}, {2, 3, 5, 6});
    expect_f64(eval1("Concat", {&a, &b}, out({2, 3}), {{"axis", int64_t(1)}}), {2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor p = I({1}, {7}), q = I({2}, {8, 9});
    EXPECT_EQ(eval1("Concat", {&p, &q}, out({3}, DType::I64), {{"axis", int64_t(0)}}).to_ints(),
              (std::vector<int64_t>{7, 8, 9}));
    Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
    auto r = eval("Split", {&x}, {out({2, 1}), out({2, 2})}, {{"axis", int64_t(1)}, {"split", std::vector<int64_t>{1, 2}}});
    ASSERT_EQ(r.size(), 2u);
    expect_f64(r[0], {2, 1}, {1, 4});
    expect_f64(r[1], {2, 2}, {2, 3, 5, 6});
    auto r0 = eval("Split", {&x}, {out({1, 3}), out({1, 3})}, {{"axis", int64_t(0)}, {"split", std::vector<int64_t>{1, 1}}});
    expect_f64(r0[1], {1, 3}, {4, 5, 6});
}

TEST(ReferenceLayout, SliceWithStartsAndNegativeSteps) {
    Tensor x = F({5}, {0, 1, 2, 3, 4});
    expect_f64(eval1("Slice", {&x}, out({3}), {{"starts", std::vector<int64_t>{4}}, {"steps", std::vector<int64_t>{-2}}}),
               {3}, {4, 2, 0});
    Tensor y = F({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
    expect_f64(eval1("Slice", {&y}, out({2, 2}), {{"starts", std::vector<int64_t>{1, 1}}, {"steps", std::vector<int64_t>{1, 2}}}),
               {2, 2}, {11, 13, 21, 23});
    EXPECT_NE(user_error_of([&] {
                  eval1("Slice", {&x}, out({3}), {{"starts", std::vector<int64_t>{4}}, {"steps", std::vector<int64_t>{1}}});
              }).find("outside"),
              std::string::npos);
}

TEST(ReferenceLayout, GatherNegativeIndicesAnyAxis) {
    Tensor d = F({3, 2}, {1, 2, 3, 4, 5, 6});
    Tensor idx = I({2}, {-1, 0});
    expect_f64(eval1("Gather", {&d, &idx}, out({2, 2}), {{"axis", int64_t(0)}}), {2, 2}, {5, 6, 1, 2});
    Tensor idx2 = I({2, 2}, {1, 0, -2, -1}, DType::I32);
    expect_f64(eval1("Gather", {&d, &idx2}, out({3, 2, 2}), {{"axis", int64_t(1)}}), {3, 2, 2},
               {2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6});
    Tensor scalar_idx = I({}, {-2});
    expect_f64(eval1("Gather", {&d, &scalar_idx}, out({2}), {{"axis", int64_t(0)}}), {2}, {3, 4});
    Tensor shape_vec = I({3}, {8, 16, 32});
    Tensor one = I({1}, {-1});
    Tensor g = eval1("Gather", {&shape_vec, &one}, out({1}, DType::I64), {{"axis", int64_t(0)}});
    EXPECT_EQ(g.dtype(), DType::I64);
    EXPECT_EQ(g.to_ints(), (std::vector<int64_t>{32}));
    Tensor bad = I({1}, {3});
    EXPECT_NE(user_error_of([&] { eval1("Gather", {&d, &bad}, out({1, 2}), {{"axis", int64_t(0)}}); })
                  .find("out of range"),
              std::string::npos);
}

TEST(ReferenceLayout, ExpandAndTile) {
    Tensor x = F({3, 1}, {1, 2, 3});
    expect_f64(eval1("Expand", {&x}, out({2, 3, 2}), {{"shape", std::vector<int64_t>{2, 1, 2}}}), {2, 3, 2},
               {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
    Tensor t = F({2, 2}, {1, 2, 3, 4});
    expect_f64(eval1("Tile", {&t}, out({2, 6}), {{"repeats", std::vector<int64_t>{1, 3}}}), {2, 6},
               {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
    expect_f64(eval1("Tile", {&t}, out({4, 2}), {{"repeats", std::vector<int64_t>{2, 1}}}), {4, 2},
               {1, 2, 3, 4, 1, 2, 3, 4});
}

TEST(ReferenceLayout, PadConstantReflectEdgeAndNegative) {
    Tensor x = F({3}, {1, 2, 3});
    auto pad = [&](const char *mode, std::vector<int64_t> pads, Shape os, double value = 0) {
        return eval1("Pad", {&x}, out(os), {{"pads", pads}, {"mode", std::string(mode)}, {"value", value}});
    };
    expect_f64(pad("reflect", {2, 2}, {7}), {7}, {3, 2, 1, 2, 3, 2, 1});
    expect_f64(pad("edge", {2, 2}, {7}), {7}, {1, 1, 1, 2, 3, 3, 3});
    expect_f64(pad("constant", {2, 2}, {7}, 9), {7}, {9, 9, 1, 2, 3, 9, 9});
    expect_f64(pad("constant", {-1, 1}, {3}), {3}, {2, 3, 0});
    Tensor y = F({2, 3}, {1, 2, 3, 4, 5, 6});
    expect_f64(eval1("Pad", {&y}, out({3, 5}),
                     {{"pads", std::vector<int64_t>{1, 1, 0, 1}}, {"mode", std::string("reflect")}, {"value", 0.0}}),
               {3, 5}, {5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5});
}

// ---------------------------------------------------------------- resize

Attrs resize_attrs(std::vector<double> scales, const char *mode, const char *ctm, const char *nearest = "round_prefer_floor",
                   int64_t exclude = 0) {
    return {{"scales", scales},         {"mode", std::string(mode)}, {"coordinate_transformation_mode", std::string(ctm)},
            {"nearest_mode", std::string(nearest)}, {"cubic_coeff_a", -0.75}, {"exclude_outside", exclude}};
}

TEST(ReferenceResize, NearestModes) {
    Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
    expect_f64(eval1("Resize", {&x}, out({1, 1, 4, 4}), resize_attrs({1, 1, 2, 2}, "nearest", "asymmetric", "floor")),
               {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    Tensor v = F({2}, {10, 20});
    expect_f64(eval1("Resize", {&v}, out({4}), resize_attrs({2}, "nearest", "half_pixel")), {4}, {10, 10, 20, 20});
    // asymmetric x/2 hits .5 exactly: the nearest modes disagree there.
    Tensor w = F({3}, {1, 2, 3});
    expect_f64(eval1("Resize", {&w}, out({6}), resize_attrs({2}, "nearest", "asymmetric", "round_prefer_floor")), {6},
               {1, 1, 2, 2, 3, 3});
    expect_f64(eval1("Resize", {&w}, out({6}), resize_attrs({2}, "nearest", "asymmetric", "round_prefer_ceil")), {6},
               {1, 2, 2, 3, 3, 3});
    expect_f64(eval1("Resize", {&w}, out({6}), resize_attrs({2}, "nearest", "asymmetric", "ceil")), {6},
               {1, 2, 2, 3, 3, 3});
    Tensor d = F({4}, {1, 2, 3, 4});
    expect_f64(eval1("Resize", {&d}, out({2}), resize_attrs({0.5}, "nearest", "asymmetric", "floor")), {2}, {1, 3});
}

TEST(ReferenceResize, LinearCoordinateModes) {
    Tensor v = F({2}, {10, 20});
    expect_f64(eval1("Resize", {&v}, out({4}), resize_attrs({2}, "linear", "half_pixel")), {4}, {10, 12.5, 17.5, 20});
    expect_f64(eval1("Resize", {&v}, out({4}), resize_attrs({2}, "linear", "align_corners")), {4},
               {10, 40.0 / 3, 50.0 / 3, 20});
    expect_f64(eval1("Resize", {&v}, out({4}), resize_attrs({2}, "linear", "asymmetric")), {4}, {10, 15, 20, 20});
    Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
    expect_f64(eval1("Resize", {&x}, out({1, 1, 3, 3}), resize_attrs({1, 1, 1.5, 1.5}, "linear", "align_corners")),
               {1, 1, 3, 3}, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
    Tensor d = F({4}, {1, 2, 3, 4});
    expect_f64(eval1("Resize", {&d}, out({1}), resize_attrs({0.25}, "linear", "pytorch_half_pixel")), {1}, {1});
    expect_f64(eval1("Resize", {&d}, out({1}), resize_attrs({0.25}, "linear", "half_pixel")), {1}, {2.5});
    EXPECT_NE(user_error_of([&] { eval1("Resize", {&d}, out({1}), resize_attrs({0.25}, "linear", "tf_crop_and_resize")); })
                  .find("tf_crop_and_resize"),
              std::string::npos);
}

TEST(ReferenceResize, CubicAndExcludeOutside) {
    Tensor x = F({4}, {0, 10, 20, 30});
    Tensor y = eval1("Resize", {&x}, out({8}), resize_attrs({2}, "cubic", "asymmetric"));
    EXPECT_NEAR(y.get(2), 10, 1e-12);      // x_orig = 1: exactly a sample
    EXPECT_NEAR(y.get(3), 15, 1e-12);      // x_orig = 1.5, all taps inside: cubic reproduces a ramp
    EXPECT_NEAR(y.get(1), 4.0625, 1e-12);  // x_orig = 0.5: the left tap clamps to x[0]
    Tensor e = eval1("Resize", {&x}, out({8}), resize_attrs({2}, "cubic", "asymmetric", "round_prefer_floor", 1));
    EXPECT_NEAR(e.get(1), 4.0625 / 1.09375, 1e-12);  // the outside tap dropped, weights renormalised
}

// ---------------------------------------------------------------- run_reference

// x (2x2) --MatMul w--> --Add b--> --Relu--> y
Graph tiny_graph() {
    Graph g;
    g.name = "tiny";
    auto info = [&](const std::string &n, Shape s) {
        ValueInfo v = out(std::move(s));
        v.name = n;
        g.values[n] = v;
    };
    info("x", {2, 2});
    info("mm", {2, 2});
    info("sum", {2, 2});
    info("y", {2, 2});
    g.inputs = {"x"};
    g.set_constant("w", F({2, 2}, {1, 2, 3, 4}));
    g.set_constant("b", F({2}, {-10, 1}));
    g.nodes.push_back(Node{"mm", "MatMul", {"x", "w"}, {"mm"}, {}});
    g.nodes.push_back(Node{"add", "Add", {"mm", "b"}, {"sum"}, {}});
    g.nodes.push_back(Node{"relu", "Relu", {"sum"}, {"y"}, {}});
    g.outputs = {"y", "w"};
    return g;
}

TEST(ReferenceRun, TinyGraph) {
    Graph g = tiny_graph();
    g.validate();
    std::map<std::string, Tensor> in{{"x", F({2, 2}, {1, 1, 2, -1})}};
    auto res = run_reference(g, in);
    // x @ w = [[4, 6], [-1, 0]]; + b = [[-6, 7], [-11, 1]]; relu.
    ASSERT_EQ(res.count("y"), 1u);
    expect_f64(res.at("y"), {2, 2}, {0, 7, 0, 1});
    expect_f64(res.at("w"), {2, 2}, {1, 2, 3, 4});  // an initializer that is also an output
}

TEST(ReferenceRun, UserErrorsNameTheInput) {
    Graph g = tiny_graph();
    std::string missing = user_error_of([&] { run_reference(g, {}); });
    EXPECT_NE(missing.find("'x'"), std::string::npos) << missing;
    EXPECT_NE(missing.find("2x2"), std::string::npos) << missing;
    std::string shape = user_error_of([&] { run_reference(g, {{"x", F({2, 3}, {1, 2, 3, 4, 5, 6})}}); });
    EXPECT_NE(shape.find("'x'"), std::string::npos) << shape;
    EXPECT_NE(shape.find("2x3"), std::string::npos) << shape;
    EXPECT_NE(shape.find("expected 2x2"), std::string::npos) << shape;
    std::string dtype = user_error_of([&] { run_reference(g, {{"x", I({2, 2}, {1, 2, 3, 4})}}); });
    EXPECT_NE(dtype.find("i64"), std::string::npos) << dtype;
    EXPECT_NE(dtype.find("f32"), std::string::npos) << dtype;
    std::string typo = user_error_of([&] { run_reference(g, {{"xx", F({2, 2}, {1, 2, 3, 4})}}); });
    EXPECT_NE(typo.find("did you mean 'xx'"), std::string::npos) << typo;
}

TEST(ReferenceRun, UnknownOpNamesOpAndNode) {
    Node n{"weird_node", "FancyOp", {"x"}, {"y"}, {}};
    Tensor x = F({1}, {1});
    std::string msg = user_error_of([&] { evaluate_node(n, {&x}, {out({1})}); });
    EXPECT_NE(msg.find("FancyOp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weird_node"), std::string::npos) << msg;
}

TEST(ReferenceRun, RandomInputsAreDeterministicAndInRange) {
    Graph g = tiny_graph();
    ValueInfo ids = out({50}, DType::I64);
    ids.name = "ids";
    g.values["ids"] = ids;
    g.inputs.push_back("ids");
    auto a = random_inputs(g, 1), b = random_inputs(g, 1), c = random_inputs(g, 2);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a.at("x").dtype(), DType::F32);
    EXPECT_EQ(a.at("x").shape(), (Shape{2, 2}));
    EXPECT_EQ(a.at("x").bytes(), b.at("x").bytes());
    EXPECT_NE(a.at("x").bytes(), c.at("x").bytes());
    for (double v : a.at("x").to_doubles()) {
        EXPECT_GE(v, -1.0);
        EXPECT_LT(v, 1.0);
        EXPECT_NE(v, 0.0);
    }
    for (int64_t v : a.at("ids").to_ints()) {
        EXPECT_GE(v, 0);
        EXPECT_LT(v, 10);
    }
    g.values["x"].shape = {-1, 2};
    g.values["x"].symbols = {"batch", ""};
    std::string msg = user_error_of([&] { random_inputs(g, 1); });
    EXPECT_NE(msg.find("batch"), std::string::npos) << msg;
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Tensors big enough for the OpenMP paths, checked against an independent formulation:
// a 1x1 convolution is a matrix product, and so is a 1x1 stride-1 ConvTranspose.
TEST(ReferenceParallel, BigConvAgreesWithMatMul) {
    const int64_t C = 32, M = 16, H = 16, W = 16;
    Tensor x(DType::F32, {1, C, H, W}), w(DType::F32, {M, C, 1, 1});
    fill_random(x, 1);
    fill_random(w, 2);
    Tensor conv = eval1("Conv", {&x, &w}, out({1, M, H, W}), conv_attrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}));
    Tensor w2 = w.reshaped({M, C}), x2 = x.reshaped({C, H * W});
    Tensor mm = eval1("MatMul", {&w2, &x2}, out({M, H * W}));
    EXPECT_TRUE(testing::close(conv.reshaped({M, H * W}), mm, 1e-14, 1e-12));
    Tensor wt = w.reshaped({C, M, 1, 1});  // ConvTranspose reads W as (C, M): the transposed product
    Attrs ct = conv_attrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1});
    ct["output_padding"] = std::vector<int64_t>{0, 0};
    Tensor deconv = eval1("ConvTranspose", {&x, &wt}, out({1, M, H, W}), ct);
    Tensor wt2 = wt.reshaped({C, M});
    Tensor gemm = eval1("Gemm", {&wt2, &x2, nullptr}, out({M, H * W}),
                        {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t(1)}, {"transB", int64_t(0)}});
    EXPECT_TRUE(testing::close(deconv.reshaped({M, H * W}), gemm, 1e-14, 1e-12));
    // And the transpose of a big tensor round-trips.
    Tensor t = eval1("Transpose", {&x2}, out({H * W, C}), {{"perm", std::vector<int64_t>{1, 0}}});
    Tensor back = eval1("Transpose", {&t}, out({C, H * W}), {{"perm", std::vector<int64_t>{1, 0}}});
    EXPECT_TRUE(testing::close(back, x2.cast(DType::F64), 1e-300, 1e-300));
}

}  // namespace
}  // namespace loom
