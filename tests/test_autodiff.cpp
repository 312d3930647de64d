// Graph-level autodiff (src/autodiff): every vector-Jacobian rule against central finite
// differences of the loss on the reference interpreter (double), the gradient graph compiled by the
// JIT against the interpreter, `loom grad --check` against PyTorch autograd on the fixtures
// frontends/torch/export_grad_fixtures.py exports, and the user errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <stdexcept>
#include <fstream>
#include <map>
#include <set>

#include "autodiff/autodiff.h"
#include "autodiff/loss.h"
#include "autodiff/parameters.h"
#include "autodiff/recompute_partition.h"
#include "autodiff/training_step.h"
#include "autoschedule/autoschedule.h"
#include "autoschedule/machine_model.h"
#include "cli/train_artifact.h"
#include "cli/training_model.h"
#include "codegen/jit.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "graph_builder.h"
#include "ops/lower_graph.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "schedule/schedule_builtin.h"
#include "schedule/schedule_printer.h"
#include "test_util.h"

namespace loom::testing {
namespace {

// The largest |fd - grad| over every element of every parameter, relative to max |grad| of that
// parameter, with the loss computed by the interpreter in double.
double worst_fd_error(const GradientGraph &gg, const std::map<std::string, Tensor> &inputs) {
    auto ref = run_reference(gg.graph, inputs);
    Graph loss_graph = gg.graph;
    loss_graph.outputs = {gg.loss};
    eliminate_dead_code(loss_graph);
    double worst = 0;
    for (const auto &p : gg.parameters) {
        const Tensor &grad = ref.at(gg.gradient_of.at(p));
        double scale = 1e-6;
        for (int64_t i = 0; i < grad.numel(); i++) scale = std::max(scale, std::abs(grad.get(i)));
        Graph lg = loss_graph;
        lg.value(p).dtype = DType::F64;
        auto in = inputs;
        Tensor &w = in[p];
        w = w.cast(DType::F64);
        for (int64_t i = 0; i < w.numel(); i++) {
            double v = w.get(i), h = 1e-6;
            w.set(i, v + h);
            double up = run_reference(lg, in).at(gg.loss).get(0);
            w.set(i, v - h);
            double down = run_reference(lg, in).at(gg.loss).get(0);
            w.set(i, v);
            double err = std::abs((up - down) / (2 * h) - grad.get(i)) / scale;
            EXPECT_TRUE(std::isfinite(grad.get(i))) << p << "[" << i << "]";
            if (!(err < 1e-5)) ADD_FAILURE() << p << "[" << i << "]: fd " << (up - down) / (2 * h) << ", grad " << grad.get(i);
            worst = std::max(worst, err);
        }
    }
    return worst;
}

// Differentiates \p b's graph through mse against a random target, with every float input a
// parameter, and checks every gradient element against finite differences.
void check_rule(GraphBuilder b, const std::string &what, uint64_t seed = 3) {
    std::vector<std::string> params;
    for (const auto &i : b.g.inputs)
        if (dtype_is_float(b.g.value(i).dtype)) params.push_back(i);
    GradientGraph gg = differentiate(b.g, params, "mse", reference_evaluator());
    auto in = random_inputs(gg.graph, seed);
    for (auto &[name, t] : in)  // integer inputs: valid indices
        if (t.dtype() == DType::I64) fill_random(t, seed, -2, 3);
    double err = worst_fd_error(gg, in);
    EXPECT_LT(err, 1e-5) << what;
}

GraphBuilder unary(const std::string &op, std::map<std::string, AttrValue> attrs = {}, double offset = 0) {
    GraphBuilder b;
    std::string x = b.input("x", {3, 5});
    if (offset != 0) x = b.node("Add", {b.node("Mul", {x, x}, {3, 5}), b.scalar(offset)}, {3, 5});
    b.out(op, {x}, {3, 5}, attrs);
    return b;
}

TEST(AutodiffRules, Pointwise) {
    for (const char *op : {"Neg", "Exp", "Abs", "Relu", "Sigmoid", "Tanh", "Erf", "Softplus", "Sin", "Cos", "HardSwish"})
        check_rule(unary(op), op);
    check_rule(unary("Sqrt", {}, 0.5), "Sqrt");
    check_rule(unary("Log", {}, 0.5), "Log");
    check_rule(unary("Reciprocal", {}, 0.5), "Reciprocal");
    check_rule(unary("LeakyRelu", {{"alpha", 0.1}}), "LeakyRelu");
    check_rule(unary("LeakyRelu", {{"alpha", -0.3}}), "LeakyRelu, negative alpha");
    check_rule(unary("Elu", {{"alpha", 0.7}}), "Elu");
    check_rule(unary("Elu", {{"alpha", -0.4}}), "Elu, negative alpha");
    check_rule(unary("Swish", {{"alpha", 1.5}}), "Swish");
    check_rule(unary("HardSigmoid", {{"alpha", 0.6}, {"beta", 0.5}}), "HardSigmoid");
    check_rule(unary("Gelu", {{"approximate", std::string("none")}}), "Gelu");
    check_rule(unary("Gelu", {{"approximate", std::string("tanh")}}), "Gelu tanh");
    check_rule(unary("Clip", {{"min", -0.5}, {"max", 0.4}}), "Clip");
}

// The exact GELU as exporters write it (x / √2, Erf, + 1, · x, · 0.5; or · 1/√2, 0.5 · x first, ·
// 0.5 before · x) becomes one Gelu node, whose gradient reads its output (Φ(x) = y / x): the
// gradient graph evaluates no erf outside the forward's Gelu, and its gradients match finite
// differences, at x = 0 and tiny x too (Φ = 1/2), in the interpreter and the JIT
// (bench/DECISIONS.md#d159-exact-gelu-gradient-reads-its-output). Near misses stay as written.
TEST(AutodiffRules, ExactGeluRegionIsOneNodeWhoseGradientReadsItsOutput) {
    enum Form { Exporter, HalfFirst, HalfBeforeX, AddsTwo, SumReadElsewhere };
    for (Form form : {Exporter, HalfFirst, HalfBeforeX, AddsTwo, SumReadElsewhere}) {
        GraphBuilder b;
        std::string x = b.input("x", {6, 8});
        std::string h = b.node("Gemm", {x, b.input("w1", {8, 12}), b.input("b1", {12})}, {6, 12}, {}, DType::F32, "fc1");
        std::string u = form == HalfFirst ? b.node("Mul", {h, b.scalar(M_SQRT1_2)}, {6, 12})
                                          : b.node("Div", {h, b.scalar(M_SQRT2)}, {6, 12});
        std::string one = b.node("Add", {b.node("Erf", {u}, {6, 12}), b.scalar(form == AddsTwo ? 2.0 : 1.0)}, {6, 12});
        std::string y;
        if (form == HalfFirst) y = b.node("Mul", {b.node("Mul", {b.scalar(0.5), h}, {6, 12}), one}, {6, 12});
        else if (form == HalfBeforeX) y = b.node("Mul", {h, b.node("Mul", {one, b.scalar(0.5)}, {6, 12})}, {6, 12});
        else y = b.node("Mul", {b.node("Mul", {h, one}, {6, 12}), b.scalar(0.5)}, {6, 12});
        std::string act = form == SumReadElsewhere ? b.node("Add", {y, one}, {6, 12}) : y;
        b.out("Gemm", {act, b.input("w2", {12, 5}), b.input("b2", {5})}, {6, 5}, {}, DType::F32, "fc2");
        GradientGraph gg = differentiate(b.g, {"w1", "b1", "w2", "b2"}, "mse", reference_evaluator());
        int erfs = 0, gelus = 0;
        for (const Node &n : gg.graph.nodes) {
            erfs += n.op == "Erf";
            gelus += n.op == "Gelu";
            if (n.op == "Gelu") {
                EXPECT_EQ(n.get_string("approximate", ""), "none");
                EXPECT_EQ(n.outputs[0], y) << "the region's output keeps its name";
                EXPECT_FALSE(is_backward_node(n));
            }
        }
        bool fused = form == Exporter || form == HalfFirst || form == HalfBeforeX;
        EXPECT_EQ(erfs, fused ? 0 : 1) << form;
        EXPECT_EQ(gelus, fused ? 1 : 0) << form;
        auto in = random_inputs(gg.graph, 13);
        EXPECT_LT(worst_fd_error(gg, in), 1e-5) << form;
    }
    // Φ = y / x where x is far from 0, 1/2 at 0 and below 1e-20: d/dx sum(GELU(x)) against
    // Φ(x) + x φ(x) in double, through the interpreter and the JIT (outputs poisoned).
    GraphBuilder b;
    std::string x = b.input("x", {2, 8});
    std::string one = b.node("Add", {b.node("Erf", {b.node("Div", {x, b.scalar(M_SQRT2)}, {2, 8})}, {2, 8}), b.scalar(1.0)}, {2, 8});
    std::string y = b.node("Mul", {b.node("Mul", {x, one}, {2, 8}), b.scalar(0.5)}, {2, 8});
    b.out("ReduceSum", {y}, {1, 1}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t(1)}});
    GradientGraph gg = differentiate(b.g, {"x"}, "output", reference_evaluator());
    Tensor xv(DType::F32, {2, 8});
    const double values[16] = {0, 1e-30, -1e-25, 1e-19, -3e-20, 0.25, -0.75, 1.5, -2.5, 3.75, -5, 6.5, -9, 12, 0.001, -0.002};
    for (int i = 0; i < 16; i++) xv.set(i, values[i]);
    std::map<std::string, Tensor> in = {{"x", xv}};
    auto ref = run_reference(gg.graph, in);
    LoweredPipeline lp = lower_graph(gg.graph);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    auto jit = m.run(in);
    for (const auto *got : {&ref, &jit}) {
        const Tensor &dx = got->at(gg.gradient_of.at("x"));
        for (int i = 0; i < 16; i++) {
            double v = (float)values[i];
            double want = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
            EXPECT_NEAR(dx.get(i), want, 2e-6) << (got == &ref ? "reference" : "JIT") << " x = " << values[i];
        }
    }
}

TEST(AutodiffRules, BroadcastBinary) {
    for (const char *op : {"Add", "Sub", "Mul", "Div", "PRelu", "Max", "Min", "Sum", "Mean"}) {
        GraphBuilder b;
        std::string x = b.input("x", {2, 3, 4}), w = b.input("w", {3, 1});
        if (std::string(op) == "Div") w = b.node("Add", {b.node("Mul", {w, w}, {3, 1}), b.scalar(0.5)}, {3, 1});
        b.out(op, {x, w}, {2, 3, 4});
        check_rule(b, op);
    }
    GraphBuilder p;
    std::string x = p.node("Add", {p.node("Mul", {p.input("x", {4}), p.input("x2", {4})}, {4}), p.scalar(1.5)}, {4});
    p.out("Pow", {x, p.scalar(3)}, {4});
    check_rule(p, "Pow");
    GraphBuilder wh;
    std::string c = wh.node("Greater", {wh.input("c", {3, 4}), wh.scalar(0)}, {3, 4}, {}, DType::Bool);
    wh.out("Where", {c, wh.input("a", {3, 4}), wh.input("b", {4})}, {3, 4});
    check_rule(wh, "Where");
}

TEST(AutodiffRules, MatMulAndGemm) {
    GraphBuilder b;
    b.out("MatMul", {b.input("a", {2, 3, 4}), b.input("w", {4, 5})}, {2, 3, 5});
    check_rule(b, "MatMul batched x matrix");
    GraphBuilder t;  // a Linear as exported: the weight [N, K] read through a Transpose
    std::string wt = t.node("Transpose", {t.input("w", {5, 4})}, {4, 5}, {{"perm", std::vector<int64_t>{1, 0}}});
    t.out("MatMul", {t.input("a", {2, 3, 4}), wt}, {2, 3, 5});
    check_rule(t, "MatMul batched x transposed matrix");
    // Its weight gradient is one product over every row, in the weight's layout: no sum over the
    // batch, no transpose between the product and the update.
    GradientGraph tg = differentiate(t.g, {"w"}, "mse", reference_evaluator());
    int k = tg.graph.producer(tg.gradient_of.at("w"));
    ASSERT_GE(k, 0);
    EXPECT_EQ(tg.graph.nodes[k].op, "MatMul");
    for (const Node &n : tg.graph.nodes) EXPECT_NE(n.op, "ReduceSum") << n.name;
    GraphBuilder v;
    v.out("MatMul", {v.input("a", {4}), v.input("w", {2, 4, 3})}, {2, 3});
    check_rule(v, "MatMul vector x batched");
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            GraphBuilder g;
            Shape sa = ta ? Shape{4, 3} : Shape{3, 4}, sb = tb ? Shape{5, 4} : Shape{4, 5};
            g.out("Gemm", {g.input("a", sa), g.input("b", sb), g.input("c", {5})}, {3, 5},
                  {{"alpha", 0.7}, {"beta", 1.3}, {"transA", int64_t(ta)}, {"transB", int64_t(tb)}});
            check_rule(g, "Gemm transA=" + std::to_string(ta) + " transB=" + std::to_string(tb));
        }
}

std::map<std::string, AttrValue> window(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads,
                                        std::vector<int64_t> d = {1, 1}) {
    return {{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"dilations", d}};
}

int64_t k_of(const std::map<std::string, AttrValue> &attrs, int d) {
    return std::get<std::vector<int64_t>>(attrs.at("kernel_shape"))[d];
}

TEST(AutodiffRules, Conv) {
    struct Case {
        std::string what;
        int64_t group, cin, cout;
        std::map<std::string, AttrValue> attrs;
        Shape y;
    };
    std::vector<Case> cases = {
        {"3x3 pad 1", 1, 3, 4, window({3, 3}, {1, 1}, {1, 1, 1, 1}), {2, 4, 6, 7}},
        {"stride 2, uneven pads", 1, 3, 4, window({3, 2}, {2, 2}, {1, 0, 0, 1}), {2, 4, 3, 4}},
        {"dilation 2", 1, 2, 3, window({3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}), {2, 3, 6, 7}},
        {"2 groups", 2, 4, 6, window({3, 3}, {2, 1}, {1, 1, 1, 1}), {2, 6, 3, 7}},
        {"depthwise", 4, 4, 4, window({3, 3}, {1, 1}, {1, 1, 1, 1}), {2, 4, 6, 7}},
    };
    for (auto &c : cases) {
        GraphBuilder b;
        auto attrs = c.attrs;
        attrs["group"] = c.group;
        auto k = std::get<std::vector<int64_t>>(attrs["kernel_shape"]);
        b.out("Conv", {b.input("x", {2, c.cin, 6, 7}), b.input("w", {c.cout, c.cin / c.group, k[0], k[1]}), b.input("bias", {c.cout})},
              c.y, attrs);
        check_rule(b, "Conv " + c.what);
        // The same window transposed: [2, cout, 6, 7] back to the conv's input shape.
        GraphBuilder t;
        auto ta = c.attrs;
        ta["group"] = c.group;
        ta["output_padding"] = std::vector<int64_t>(2, 0);
        Shape xin = {2, c.cin, 6, 7};
        // output_padding that maps y back to exactly x's shape
        auto s = std::get<std::vector<int64_t>>(ta["strides"]), d = std::get<std::vector<int64_t>>(ta["dilations"]),
             pads = std::get<std::vector<int64_t>>(ta["pads"]);
        std::vector<int64_t> op(2);
        for (int k = 0; k < 2; k++) op[k] = xin[2 + k] - ((c.y[2 + k] - 1) * s[k] - pads[k] - pads[2 + k] + d[k] * (k_of(ta, k) - 1) + 1);
        ta["output_padding"] = op;
        t.out("ConvTranspose", {t.input("y", c.y), t.input("w", {c.cout, c.cin / c.group, k[0], k[1]}), t.input("bias", {c.cin})},
              xin, ta);
        check_rule(t, "ConvTranspose " + c.what);
    }
}

TEST(AutodiffRules, Pooling) {
    GraphBuilder m;
    auto a = window({3, 3}, {2, 2}, {1, 1, 1, 1});
    a["ceil_mode"] = int64_t(1);
    m.out("MaxPool", {m.input("x", {2, 3, 7, 6})}, {2, 3, 4, 4}, a);
    check_rule(m, "MaxPool 3x3/2 pad 1 ceil");
    GraphBuilder m2;
    m2.out("MaxPool", {m2.input("x", {1, 2, 6, 6})}, {1, 2, 3, 3}, window({2, 2}, {2, 2}, {0, 0, 0, 0}));
    check_rule(m2, "MaxPool 2x2/2");
    for (int64_t include : {0, 1}) {
        GraphBuilder p;
        auto w = window({3, 3}, {2, 2}, {1, 1, 1, 1});
        w["count_include_pad"] = include;
        w["ceil_mode"] = int64_t(0);
        p.out("AveragePool", {p.input("x", {2, 3, 7, 6})}, {2, 3, 4, 3}, w);
        check_rule(p, "AveragePool count_include_pad=" + std::to_string(include));
    }
    GraphBuilder tiled;  // kernel = stride: the broadcast path
    auto tw = window({2, 2}, {2, 2}, {0, 0, 0, 0});
    tw["count_include_pad"] = int64_t(0);
    tw["ceil_mode"] = int64_t(0);
    tiled.out("AveragePool", {tiled.input("x", {2, 3, 4, 6})}, {2, 3, 2, 3}, tw);
    check_rule(tiled, "AveragePool 2x2/2");
    GraphBuilder g;
    g.out("GlobalAveragePool", {g.input("x", {2, 3, 4, 5})}, {2, 3, 1, 1});
    check_rule(g, "GlobalAveragePool");
    GraphBuilder gm;
    gm.out("GlobalMaxPool", {gm.input("x", {2, 3, 4, 5})}, {2, 3, 1, 1});
    check_rule(gm, "GlobalMaxPool");
}

// A backward that recomputes a max's input may round it otherwise than the forward did (a CUDA
// kernel's fused multiply-adds; the CNN step's stem gradients were off by 100% on the GPU). Each
// rule for a maximum is run with its backward reading X scaled by (1 + 2^-20), which moves every
// value off the forward's maximum but keeps the argmax: its gradients must equal the plain run's.
TEST(AutodiffRules, MaximaRouteGradientsWhenTheBackwardRoundsXOtherwise) {
    std::vector<std::pair<std::string, GraphBuilder>> cases;
    GraphBuilder mp;
    mp.out("MaxPool", {mp.input("x", {1, 2, 6, 6})}, {1, 2, 3, 3}, window({2, 2}, {2, 2}, {0, 0, 0, 0}));
    cases.emplace_back("MaxPool", mp);
    GraphBuilder gm;
    gm.out("GlobalMaxPool", {gm.input("x", {2, 3, 4, 5})}, {2, 3, 1, 1});
    cases.emplace_back("GlobalMaxPool", gm);
    GraphBuilder rm;
    rm.out("ReduceMax", {rm.input("x", {3, 5})}, {3}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(0)}});
    cases.emplace_back("ReduceMax", rm);
    GraphBuilder em;
    em.out("Max", {em.input("x", {3, 5}), em.input("z", {3, 5})}, {3, 5});
    cases.emplace_back("Max", em);
    for (auto &[what, b] : cases) {
        std::vector<std::string> params;
        for (const auto &i : b.g.inputs) params.push_back(i);
        GradientGraph gg = differentiate(b.g, params, "mse", reference_evaluator());
        auto in = random_inputs(gg.graph, 5);
        auto plain = run_reference(gg.graph, in);
        Graph rounded = gg.graph;
        Node scale;
        scale.op = "Mul";
        scale.name = "round_x_otherwise";
        rounded.values["x_scale"] = ValueInfo{"x_scale", DType::F32, {}, {}, true};
        rounded.initializers["x_scale"] = Tensor::scalar(DType::F32, 1.0 + std::ldexp(1.0, -20));
        rounded.values["x_rounded"] = ValueInfo{"x_rounded", DType::F32, rounded.value("x").shape, {}, true};
        scale.inputs = {"x", "x_scale"};
        scale.outputs = {"x_rounded"};
        for (size_t k = (size_t)gg.forward_nodes; k < rounded.nodes.size(); k++)
            for (auto &v : rounded.nodes[k].inputs)
                if (v == "x") v = "x_rounded";
        rounded.nodes.insert(rounded.nodes.begin() + gg.forward_nodes, scale);
        auto got = run_reference(rounded, in);
        for (const auto &p : params) {
            const Tensor &want = plain.at(gg.gradient_of.at(p)), &have = got.at(gg.gradient_of.at(p));
            double scale_of = 0;
            for (int64_t i = 0; i < want.numel(); i++) scale_of = std::max(scale_of, std::abs(want.get(i)));
            ASSERT_GT(scale_of, 0) << what;
            for (int64_t i = 0; i < want.numel(); i++)
                ASSERT_NEAR(have.get(i), want.get(i), 1e-5 * scale_of) << what << " d" << p << "[" << i << "]";
        }
    }
}

TEST(AutodiffRules, ReductionsAndSoftmax) {
    for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"}) {
        GraphBuilder b;
        b.out(op, {b.input("x", {3, 4, 5})}, {3, 1, 5}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}});
        check_rule(b, op);
        GraphBuilder c;
        c.out(op, {c.input("x", {3, 4, 5})}, {4}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t(0)}});
        check_rule(c, std::string(op) + " two axes");
    }
    for (const char *op : {"Softmax", "LogSoftmax"}) {
        GraphBuilder b;
        b.out(op, {b.input("x", {3, 4, 5})}, {3, 4, 5}, {{"axis", int64_t(1)}});
        check_rule(b, op);
    }
}

TEST(AutodiffRules, Layout) {
    GraphBuilder b;
    std::string x = b.input("x", {2, 3, 4});
    std::string t = b.node("Transpose", {x}, {4, 2, 3}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    std::string r = b.node("Reshape", {t}, {8, 3}, {{"shape", std::vector<int64_t>{8, 3}}});
    std::string e = b.node("Expand", {b.node("Reshape", {b.input("v", {3})}, {1, 3}, {{"shape", std::vector<int64_t>{1, 3}}})},
                           {8, 3}, {{"shape", std::vector<int64_t>{8, 3}}});
    b.out("Mul", {r, e}, {8, 3});
    check_rule(b, "Transpose, Reshape, Expand");

    GraphBuilder s;
    std::string xs = s.input("x", {4, 6});
    Node split;
    split.op = "Split";
    split.name = "split";
    split.inputs = {xs};
    split.outputs = {"s0", "s1"};
    split.attrs = {{"axis", int64_t(1)}, {"split", std::vector<int64_t>{2, 4}}};
    s.g.values["s0"] = ValueInfo{"s0", DType::F32, {4, 2}, {}, true};
    s.g.values["s1"] = ValueInfo{"s1", DType::F32, {4, 4}, {}, true};
    s.g.nodes.push_back(split);
    std::string cat = s.node("Concat", {s.node("Tanh", {"s1"}, {4, 4}), "s0", s.input("z", {4, 1})}, {4, 7}, {{"axis", int64_t(1)}});
    s.out("Slice", {cat}, {2, 3}, {{"starts", std::vector<int64_t>{1, 0}}, {"steps", std::vector<int64_t>{2, 3}}});
    check_rule(s, "Split, Concat, Slice with steps");

    GraphBuilder p;
    p.out("Pad", {p.input("x", {2, 3})}, {5, 4},
          {{"pads", std::vector<int64_t>{1, 0, 2, 1}}, {"mode", std::string("constant")}, {"value", 0.5}});
    check_rule(p, "Pad");
    GraphBuilder tl;
    tl.out("Tile", {tl.input("x", {2, 3})}, {4, 9}, {{"repeats", std::vector<int64_t>{2, 3}}});
    check_rule(tl, "Tile");
    GraphBuilder ga;
    ga.out("Gather", {ga.input("table", {5, 3}), ga.input("idx", {2, 4}, DType::I64)}, {2, 4, 3}, {{"axis", int64_t(0)}});
    check_rule(ga, "Gather (embedding)");
}

TEST(AutodiffRules, Resize) {
    struct Case {
        std::string mode, ctm;
        std::vector<double> scales;
        Shape y;
    };
    for (const Case &c : {Case{"nearest", "asymmetric", {1, 1, 2, 3}, {1, 2, 6, 12}},
                          Case{"linear", "half_pixel", {1, 1, 2, 1.5}, {1, 2, 6, 6}},
                          Case{"linear", "align_corners", {1, 1, 0.5, 2}, {1, 2, 1, 8}},
                          Case{"cubic", "half_pixel", {1, 1, 2, 2}, {1, 2, 6, 8}}}) {
        GraphBuilder b;
        b.out("Resize", {b.input("x", {1, 2, 3, 4})}, c.y,
              {{"scales", c.scales}, {"mode", c.mode}, {"coordinate_transformation_mode", c.ctm},
               {"nearest_mode", std::string("round_prefer_floor")}, {"cubic_coeff_a", -0.75}, {"exclude_outside", int64_t(0)}});
        check_rule(b, "Resize " + c.mode + " " + c.ctm);
    }
}

TEST(AutodiffRules, NormsInTrainingMode) {
    GraphBuilder bn;
    bn.out("BatchNormalization", {bn.input("x", {3, 2, 3, 2}), bn.input("s", {2}), bn.input("b", {2}),
                                   bn.constant("mean", Tensor::from_doubles(DType::F32, {2}, {0.3, -0.2})),
                                   bn.constant("var", Tensor::from_doubles(DType::F32, {2}, {1.5, 0.7}))},
           {3, 2, 3, 2}, {{"epsilon", 1e-5}});
    check_rule(bn, "BatchNormalization");
    GraphBuilder ln;
    ln.out("LayerNormalization", {ln.input("x", {3, 6}), ln.input("s", {6}), ln.input("b", {6})}, {3, 6},
           {{"axis", int64_t(1)}, {"epsilon", 1e-5}});
    check_rule(ln, "LayerNormalization");
    GraphBuilder in;
    in.out("InstanceNormalization", {in.input("x", {2, 3, 4}), in.input("s", {3}), in.input("b", {3})}, {2, 3, 4},
           {{"epsilon", 1e-5}});
    check_rule(in, "InstanceNormalization");
    GraphBuilder gn;
    gn.out("GroupNormalization", {gn.input("x", {2, 4, 3}), gn.input("s", {4}), gn.input("b", {4})}, {2, 4, 3},
           {{"num_groups", int64_t(2)}, {"epsilon", 1e-5}});
    check_rule(gn, "GroupNormalization");
}

TEST(AutodiffRules, CrossEntropyLoss) {
    GraphBuilder b;
    b.out("MatMul", {b.input("x", {4, 3}), b.input("w", {3, 5})}, {4, 5});
    GradientGraph gg = differentiate(b.g, {"w"}, "cross_entropy");
    auto in = random_inputs(gg.graph, 5);
    in[gg.target] = Tensor::from_ints(DType::I64, {4}, {0, 4, 2, 2});
    EXPECT_LT(worst_fd_error(gg, in), 1e-5);
}

// The gradient graph is an ordinary graph: lowered, compute_root'ed and JIT-compiled, it matches
// the interpreter running the same graph.
TEST(AutodiffJit, GradientGraphCompilesAndMatchesTheReference) {
    GraphBuilder b;
    std::string h = b.node("Relu", {b.node("Gemm", {b.input("x", {8, 16}), b.input("w1", {16, 32}), b.input("b1", {32})}, {8, 32})}, {8, 32});
    b.out("Softmax", {b.node("MatMul", {h, b.input("w2", {32, 10})}, {8, 10})}, {8, 10}, {{"axis", int64_t(1)}});
    GradientGraph gg = differentiate(b.g, {"w1", "b1", "w2"}, "mse");
    auto in = random_inputs(gg.graph, 9);
    LoweredPipeline lp = lower_graph(gg.graph);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    auto outs = m.run(in);
    auto ref = run_reference(gg.graph, in);
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t, 1e-5)) << name;
}

TEST(AutodiffErrors, NameTheCulpritAndTheFix) {
    GraphBuilder b;
    b.out("Relu", {b.input("x", {2, 3})}, {2, 3});
    std::string m = user_error_of([&] { differentiate(b.g, {"x"}, "msa"); });
    EXPECT_NE(m.find("unknown loss 'msa'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'mse'"), std::string::npos) << m;

    m = user_error_of([&] { differentiate(b.g, {"x"}, "output"); });
    EXPECT_NE(m.find("not one element"), std::string::npos) << m;
    EXPECT_NE(m.find("--loss mse"), std::string::npos) << m;

    GraphBuilder r;  // an op with no rule (a future op; every canonical op has one today)
    r.out("Upsample", {r.input("x", {1, 1, 2, 2})}, {1, 1, 4, 4}, {}, DType::F32, "up");
    m = user_error_of([&] { differentiate(r.g, {"x"}, "mse"); });
    EXPECT_NE(m.find("Upsample 'up': Loom has no gradient rule for Upsample"), std::string::npos) << m;
    EXPECT_NE(m.find("keep it out of the trained part"), std::string::npos) << m;

    GraphBuilder c;
    c.out("Relu", {c.input("x", {2, 3, 4})}, {2, 3, 4});
    m = user_error_of([&] { differentiate(c.g, {"x"}, "cross_entropy"); });
    EXPECT_NE(m.find("logits [N, C]"), std::string::npos) << m;
    EXPECT_NE(m.find("2x3x4"), std::string::npos) << m;
}

// --- loom grad on the PyTorch fixtures ---------------------------------------------------------

struct Cli {
    int rc;
    std::string out;
};
Cli loom(const std::string &args) {
    Cli r;
    r.rc = run_command(loom_binary() + " " + args, r.out);
    return r;
}

// A fixture export_grad_fixtures.py writes; ctest runs it first (a fixture setup), so a binary
// run by hand before it is told how to make them rather than failing on a missing file.
std::string grad_fixture(const std::string &name) {
    const std::string path = data_path("grad/" + name);
    if (!std::filesystem::exists(path))
        throw std::runtime_error(path + " is missing: it is written by `ctest -R export_grad_fixtures` "
                                 "(frontends/torch/export_grad_fixtures.py); run that before this test binary");
    return path;
}

void check_fixture(const std::string &name, const std::string &loss) {
    Cli r = loom("grad " + grad_fixture(name + ".onnx") + " --loss " + loss + " --inputs " + grad_fixture(name) + " --check");
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(count_of(r.out, "FAILED"), 0u) << r.out;
    // Every parameter was compared with PyTorch's gradient (a number in the torch column).
    size_t params = 0;
    for (const auto &e : std::filesystem::directory_iterator(grad_fixture(name)))
        params += e.path().filename().string().rfind("grad_", 0) == 0;
    EXPECT_GT(params, 0u);
    EXPECT_EQ(count_of(r.out, "  ok"), params + 1) << r.out;  // and the loss
    EXPECT_NE(r.out.find("loss vs torch"), std::string::npos) << r.out;
}

TEST(LoomGrad, MlpMatchesTorchAndFiniteDifferences) { check_fixture("mlp", "cross_entropy"); }
TEST(LoomGrad, TransformerBlockMatchesTorchAndFiniteDifferences) { check_fixture("transformer", "mse"); }
TEST(LoomGrad, SmallCnnMatchesTorchAndFiniteDifferences) { check_fixture("cnn", "mse"); }

TEST(LoomGrad, UserErrors) {
    Cli h = loom("grad --help");
    EXPECT_NE(h.out.find("Ops with a gradient rule"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find(" MaxPool "), std::string::npos) << h.out;
    Cli r = loom("grad " + grad_fixture("mlp.onnx") + " --loss crossentropy");
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("unknown loss 'crossentropy'; did you mean 'cross_entropy'"), std::string::npos) << r.out;

    std::string dir = temp_path("grad_bad_target");
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(grad_fixture("mlp/x.npy"), dir + "/x.npy", std::filesystem::copy_options::overwrite_existing);
    write_npy(dir + "/target.npy", Tensor(DType::I64, {3}));
    r = loom("grad " + grad_fixture("mlp.onnx") + " --loss cross_entropy --inputs " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("target.npy: the target is 3 but the loss needs 8"), std::string::npos) << r.out;
    write_npy(dir + "/target.npy", Tensor::from_ints(DType::I64, {8}, {0, 1, 2, 3, 4, 5, 6, 10}));
    r = loom("grad " + grad_fixture("mlp.onnx") + " --loss cross_entropy --inputs " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("target class 10 at [7] is out of range: the output has 10 classes"), std::string::npos) << r.out;
    std::filesystem::remove_all(dir);
}

// --- loom compile --train ----------------------------------------------------------------------

// The trainer's C API, opened as an application would.
struct Trainer {
    void *lib = nullptr, *t = nullptr;
    void *(*create)();
    int (*step)(void *, const void *const *, const void *, float *);
    int (*num_parameters)();
    const char *(*parameter_name)(int);
    int64_t (*parameter_size)(int);
    float *(*parameter)(void *, int);
    int (*num_state)();
    int (*num_buffers)();
    const char *(*buffer_name)(int);
    int64_t (*buffer_size)(int);
    float *(*buffer)(void *, int);
    int64_t (*steps)(void *);
    void (*destroy)(void *);
    template <typename F>
    void sym(F &f, const std::string &n) {
        f = reinterpret_cast<F>(dlsym(lib, n.c_str()));
        ASSERT_NE((void *)f, nullptr) << n;
    }
    Trainer(const std::string &dir, const std::string &name) {
        lib = dlopen((dir + "/lib" + name + "_train.so").c_str(), RTLD_NOW | RTLD_LOCAL);
        EXPECT_NE(lib, nullptr) << dlerror();
        if (!lib) return;
        sym(create, name + "_train_create");
        sym(step, name + "_train_step");
        sym(num_parameters, name + "_train_num_parameters");
        sym(parameter_name, name + "_train_parameter_name");
        sym(parameter_size, name + "_train_parameter_size");
        sym(parameter, name + "_train_parameter");
        sym(num_state, name + "_train_num_state");
        sym(num_buffers, name + "_train_num_buffers");
        sym(buffer_name, name + "_train_buffer_name");
        sym(buffer_size, name + "_train_buffer_size");
        sym(buffer, name + "_train_buffer");
        sym(steps, name + "_train_steps");
        sym(destroy, name + "_train_destroy");
        t = create();
    }
    ~Trainer() {
        if (t) destroy(t);
        if (lib) dlclose(lib);
    }
    Tensor param(int k) {
        Tensor p(DType::F32, {parameter_size(k)});
        std::memcpy(p.data(), parameter(t, k), p.bytes().size());
        return p;
    }
    Tensor buf(int k) {
        Tensor p(DType::F32, {buffer_size(k)});
        std::memcpy(p.data(), buffer(t, k), p.bytes().size());
        return p;
    }
};

// One step of the compiled training step of the MLP fixture (cross entropy) against PyTorch:
// the loss is torch's, and the update is p - lr * torch's gradient (sgd) or Adam's first step.
void check_first_step(const std::string &optimizer) {
    std::string dir = temp_path("train_" + optimizer);
    Cli r = loom("compile " + grad_fixture("mlp.onnx") + " --train --loss cross_entropy --optimizer " + optimizer +
                 " --lr 0.05 --force --name mlp_" + optimizer + " -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    Trainer tr(dir, "mlp_" + optimizer);
    ASSERT_NE(tr.t, nullptr);
    ASSERT_EQ(tr.num_parameters(), 6);
    EXPECT_EQ(tr.num_state(), optimizer == "adam" ? 12 : 0);
    std::vector<Tensor> before;
    for (int k = 0; k < 6; k++) before.push_back(tr.param(k));
    Tensor x = read_npy(grad_fixture("mlp/x.npy")), target = read_npy(grad_fixture("mlp/target.npy")).cast(DType::I64);
    const void *inputs[] = {x.data()};
    float loss = -1;
    ASSERT_EQ(tr.step(tr.t, inputs, target.data(), &loss), 0);
    EXPECT_NEAR(loss, read_npy(grad_fixture("mlp/loss.npy")).get(0), 1e-5);
    EXPECT_EQ(tr.steps(tr.t), 1);
    for (int k = 0; k < 6; k++) {
        Tensor g = read_npy(grad_fixture(std::string("mlp/grad_") + tr.parameter_name(k) + ".npy"));
        Tensor want(DType::F32, {tr.parameter_size(k)});
        for (int64_t i = 0; i < want.numel(); i++) {
            double gi = g.get(i), step = optimizer == "sgd" ? gi : gi / (std::abs(gi) + 1e-8);
            want.set(i, before[k].get(i) - 0.05 * step);
        }
        Tensor delta_got(DType::F64, {want.numel()}), delta_want(DType::F64, {want.numel()});
        Tensor now = tr.param(k);
        for (int64_t i = 0; i < want.numel(); i++) {
            delta_got.set(i, now.get(i) - before[k].get(i));
            delta_want.set(i, want.get(i) - before[k].get(i));
        }
        // Adam's first step is lr * sign(g): a gradient within float noise of 0 may flip it.
        EXPECT_TRUE(close(delta_got, delta_want, optimizer == "sgd" ? 1e-4 : 2e-2)) << tr.parameter_name(k);
    }
    // Training on one batch: the loss falls.
    float first = loss;
    for (int s = 0; s < 30; s++) ASSERT_EQ(tr.step(tr.t, inputs, target.data(), &loss), 0);
    EXPECT_LT(loss, 0.7 * first) << optimizer;
    std::filesystem::remove_all(dir);
}

TEST(TrainStep, SgdStepMatchesTorch) { check_first_step("sgd"); }
TEST(TrainStep, AdamStepMatchesTorch) { check_first_step("adam"); }

// The step lists its next values in the order the backward reaches their parameters (the MLP's
// fc3 first, fc1 last; each parameter's Adam state right after it): Halide realizes a pipeline
// depth first from its outputs, so each layer's update runs as soon as its gradient can and the
// activations its weight gradient reads are freed early
// (bench/DECISIONS.md#d219-step-memory-one-pipeline-planned-arena). output_index finds each.
TEST(TrainStep, NextValuesListedInBackwardOrder) {
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("mlp.onnx"), {}, "cross_entropy", "", "min-cut");
    OptimizerSpec adam;
    adam.name = "adam";
    TrainingStepGraph step = make_training_step(tm.grad, adam);
    ASSERT_EQ(step.graph.outputs.size(), 1 + 6 * 3u);
    std::map<std::string, size_t> at;
    for (const auto &p : step.parameters) at[p] = step.output_index(p);
    EXPECT_LT(at.at("fc3.weight"), at.at("fc2.weight"));
    EXPECT_LT(at.at("fc2.weight"), at.at("fc1.weight"));
    for (const auto &st : step.state) {
        std::string p = st.substr(0, st.find(".adam_"));
        size_t k = step.output_index(st);
        EXPECT_TRUE(k == at.at(p) + 1 || k == at.at(p) + 2) << st;
    }
    std::set<size_t> seen;
    for (const auto *names : {&step.parameters, &step.state})
        for (const auto &v : *names) EXPECT_TRUE(seen.insert(step.output_index(v)).second) << v;
}

// A training step's Gemm over few rows (Y = X·Wᵀ + b, M(K+N) at most half of N·K) reads its
// parameter W as the product's A, as stored: the step computes (W·Xᵀ)ᵀ and transposes the [M, K]
// input and the [N, M] product instead of W (bench/DECISIONS.md#d150-few-row-gemms-read-the-weight-as-a).
// Each variant (transA, no bias, a scalar bias, an activation chain between two rewritten Gemms, a
// Gemm over too many rows) computes the original graph's outputs on random data.
TEST(TrainStep, FewRowGemmsReadTheWeightAsA) {
    testing::GraphBuilder b;
    std::string x = b.input("x", {8, 64}), xt = b.input("xt", {64, 8}), w1 = b.input("w1", {128, 64}),
                b1 = b.input("b1", {128}), w2 = b.input("w2", {96, 128}), b2 = b.input("b2", {1, 96}),
                w3 = b.input("w3", {10, 96}), b3 = b.input("b3", {10}), s = b.input("s", {1}),
                wide = b.input("wide", {300, 64});
    std::map<std::string, AttrValue> tb = {{"transB", int64_t(1)}};
    std::string h1 = b.node("Gemm", {x, w1, b1}, {8, 128}, tb);
    std::string a1 = b.node("Relu", {h1}, {8, 128});
    std::string h2 = b.node("Gemm", {a1, w2, b2}, {8, 96}, tb);
    // GELU's erf form, as PyTorch exports it: h2 read twice, scalars on the side.
    std::string erf = b.node("Erf", {b.node("Div", {h2, b.scalar(1.4142135)}, {8, 96})}, {8, 96});
    std::string a2 = b.node("Mul", {b.node("Mul", {h2, b.node("Add", {erf, b.scalar(1.0)}, {8, 96})}, {8, 96}),
                                    b.scalar(0.5)}, {8, 96});
    b.output(b.node("Gemm", {a2, w3, b3}, {8, 10}, tb));  // N = 10: too narrow, keeps its weight transpose
    b.output(b.node("Gemm", {xt, w1, s}, {8, 128}, {{"transA", int64_t(1)}, {"transB", int64_t(1)}}));
    b.output(b.node("Gemm", {a1, w2}, {8, 96}, tb));          // no bias
    b.output(b.node("Gemm", {x, wide}, {8, 300}, tb));         // K = 64: 2·8·364 > 300·64 is false; rewritten
    std::string many = b.input("many", {64, 64});
    b.output(b.node("Gemm", {many, w1, b1}, {64, 128}, tb));   // 2·64·192 > 128·64: kept
    b.output(a1);
    Graph before = b.g;
    std::vector<std::string> params = {"w1", "w2", "w3", "wide"};
    EXPECT_EQ(gemm_weights_read_as_a(b.g, params), 5);
    b.g.validate();
    std::set<std::string> as_a;
    int transposes_of_weights = 0, transposes_of_activations = 0;
    for (const auto &n : b.g.nodes) {
        if (n.op == "Gemm" && n.get_int("transB", 0) == 0) as_a.insert(n.inputs[0]);
        if (n.op == "Transpose") {
            transposes_of_weights += std::count(params.begin(), params.end(), n.inputs[0]) > 0;
            transposes_of_activations += n.inputs[0] == a1 || n.inputs[0] == a2 || n.inputs[0] == h1;
        }
    }
    EXPECT_EQ(as_a, (std::set<std::string>{"w1", "w2", "wide"}));
    EXPECT_EQ(transposes_of_weights, 0);
    // The second layer's B is ReLU(product + bias) in the product's layout, not a transpose of a1.
    EXPECT_EQ(transposes_of_activations, 0);
    auto in = random_inputs(before, 7);
    auto want = run_reference(before, in), got = run_reference(b.g, in);
    ASSERT_EQ(want.size(), got.size());
    for (const auto &[name, t] : want) EXPECT_TRUE(close(got.at(name), t, 1e-5)) << name;

    // The MLP fixture's step: fc1 and fc2 (8 rows) read their weights as A, fc3 (10 outputs)
    // through its transpose; the plan has no transpose of fc1's or fc2's weight.
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("mlp.onnx"), {}, "cross_entropy", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    FixedMachine m = machines::avx2_2core();
    std::string plan = print_schedule(auto_schedule(p, m.target, m.model));
    EXPECT_EQ(plan.find("fc1_gemm_weight_transpose"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("fc2_gemm_weight_transpose"), std::string::npos) << plan;
    EXPECT_NE(plan.find("fc3_gemm_weight_transpose.compute_root()"), std::string::npos) << plan;
    // On a GPU the forward keeps reading the weight through its transpose (cuBLAS's flag, no kernel).
    auto reading_as_a = [](const Graph &graph, const std::string &w) {
        int count = 0;
        for (const auto &n : graph.nodes) count += n.op == "Gemm" && n.inputs[0] == w;
        return count;
    };
    EXPECT_EQ(reading_as_a(step.graph, "fc2.weight"), 1);
    EXPECT_EQ(reading_as_a(make_training_step(tm.grad, OptimizerSpec{}, StepDevice::Gpu).graph, "fc2.weight"), 0);
}

// A training step's plan for the AVX2 preset, JIT-compiled for this host, computes what the
// interpreter does on random data (seed \p seed).
void expect_avx2_plan_matches_interpreter(const TrainingStepGraph &step, uint64_t seed) {
    LoweredPipeline lp = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    FixedMachine avx2 = machines::avx2_2core();
    apply_schedule(auto_schedule(lp, avx2.target, avx2.model), lp, host_target());
    JitModel jit(std::move(lp));
    auto in = random_inputs(step.graph, seed);
    auto got = jit.run(in), want = run_reference(step.graph, in);
    ASSERT_EQ(got.size(), want.size());
    for (const auto &[name, t] : want) EXPECT_TRUE(close(got.at(name), t, 1e-4)) << name;
}

// A training step's ReLU and GELU after a weight-as-A product (D150) read the [N, M] product
// transposed and gather each vector from V of its rows; the plan runs them in V x V tiles, the
// transposed var unrolled inside each vector step, so the V gathers of a tile share their cache
// lines (bench/DECISIONS.md#d214-in-cache-transposed-reads-in-square-tiles). The MLP fixture's
// step (8 rows): on the AVX2 preset both kernels are tiled 8 x 8; on AVX-512 its 8 rows are no
// multiple of 16 and keep the row loops. The AVX2 plan JIT-compiled matches the interpreter on
// random data.
TEST(TrainStep, TransposedProductReadsRunInSquareTiles) {
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("mlp.onnx"), {}, "cross_entropy", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    auto plan_for = [&](const FixedMachine &m) {
        LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
        return print_schedule(auto_schedule(p, m.target, m.model));
    };
    const std::string avx2 = plan_for(machines::avx2_2core()), avx512 = plan_for(machines::avx512_2core());
    for (const std::string f : {"relu", "gelu"}) {
        size_t at = avx2.find("\n" + f + ".compute_root()");
        ASSERT_NE(at, std::string::npos) << f << "\n" << avx2;
        std::string stmt = avx2.substr(at, avx2.find(';', at) - at);
        for (const char *call : {"split(i, io, ii, 8)", "split(j, jo, ji, 8)", "reorder(ji, ii, jo, io)", "unroll(ii)"})
            EXPECT_NE(stmt.find(call), std::string::npos) << f << ": " << call << "\n" << stmt;
        EXPECT_EQ(avx512.find(f + ": gathers its vectors"), std::string::npos) << avx512;
    }
    expect_avx2_plan_matches_interpreter(step, 17);
}

// The transformer fixture's step planned for a fixed machine (avx512_2core): its exact GELU is one
// forward kernel, and the GELU gradient stays in the epilogue of the GEMM that computes the
// incoming gradient, reading the saved output (a Where for Φ = y / x, φ's Exp) and evaluating no
// erf: no Func of the plan is an Erf (bench/DECISIONS.md#d159-exact-gelu-gradient-reads-its-output).
TEST(TrainStep, ExactGeluGradientEvaluatesNoErf) {
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("transformer.onnx"), {}, "mse", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    FixedMachine m = machines::avx512_2core();
    std::string plan = print_schedule(auto_schedule(p, m.target, m.model));
    EXPECT_NE(plan.find("gelu.compute_root()"), std::string::npos) << plan;
    EXPECT_EQ(plan.find("erf"), std::string::npos) << plan;
    size_t k = plan.find("_where_mul_exp (gemm): fuses grad_matmul_");
    EXPECT_NE(k, std::string::npos) << plan;
}

// Attention's Kᵀ (forward) and Vᵀ (backward, dP = dO·Vᵀ) are B operands whose vectors gather
// across heads; each is a transpose of a head split that nothing else reads, so the plan stores the
// transpose in the split's place and the GEMM loads B's rows
// (bench/DECISIONS.md#d165-attention-b-operands-stored-transposed). The step, planned for the
// AVX2 preset and JIT-compiled, matches the interpreter on random data.
TEST(TrainStep, AttentionBOperandsAreStoredTransposed) {
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("transformer.onnx"), {}, "mse", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    for (const FixedMachine &m : {machines::avx512_2core(), machines::avx2_2core()}) {
        LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
        std::string plan = print_schedule(auto_schedule(p, m.target, m.model));
        for (const char *stored : {"\ntranspose_1.compute_root()", "\ngrad_transpose_196.compute_root()",
                                   "\nreshape_1.compute_inline()"})
            EXPECT_NE(plan.find(stored), std::string::npos) << m.name << ": " << stored << "\n" << plan;
        EXPECT_EQ(plan.find("fuses transpose, transpose_1 into matmul"), std::string::npos) << m.name << "\n" << plan;
    }
    expect_avx2_plan_matches_interpreter(step, 11);
}

// The weight gradients dW = Xᵀ·dY read X and dY through a reshape merging [batch, seq] into rows,
// (row / seq, row % seq) of the stored [batch, seq, d]: with D174's lowering pass every load in a
// GEMM's k loop of the step planned for AVX-512 indexes its rows flat (no divide or modulo left
// for the micro-kernel to recompute per k step; before, the four weight gradients' loads had
// them), and the AVX2 plan JIT-compiled matches the interpreter on random data.
TEST(TrainStep, WeightGradientGemmsReadRowsFlat) {
    using namespace Halide::Internal;
    using Halide::Expr;
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("transformer.onnx"), {}, "mse", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    // Loads inside the k loops of GEMM updates, and those whose index divides or takes a modulo.
    struct KLoopLoads : public IRMutator {
        int loads = 0;
        std::vector<std::string> divmod;
        int in_k = 0;
        bool found = false;
        using IRMutator::visit;
        Stmt visit(const For *op) override {
            bool k = op->name.find(".s1.k") != std::string::npos;
            in_k += k;
            Stmt s = IRMutator::visit(op);
            in_k -= k;
            return s;
        }
        Expr visit(const Div *op) override { found = true; return IRMutator::visit(op); }
        Expr visit(const Mod *op) override { found = true; return IRMutator::visit(op); }
        Expr visit(const Load *op) override {
            if (in_k && op->type.is_float()) {
                loads++;
                found = false;
                mutate(op->index);
                if (found) divmod.push_back(op->name);
            }
            return IRMutator::visit(op);
        }
    };
    FixedMachine avx512 = machines::avx512_2core();
    LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    apply_schedule(auto_schedule(p, avx512.target, avx512.model), p, avx512.target);
    Halide::Pipeline pl = p.pipeline();
    auto *seen = new KLoopLoads;  // the pipeline owns its passes
    pl.add_custom_lowering_pass(seen);
    std::vector<Halide::Argument> args(p.inputs.begin(), p.inputs.end());
    std::string stmt = temp_path("flat_rows.stmt");
    pl.compile_to_lowered_stmt(stmt, args, Halide::Text, avx512.target);
    std::filesystem::remove(stmt);
    EXPECT_GT(seen->loads, 0);
    std::string names;
    for (const auto &n : seen->divmod) names += " " + n;
    EXPECT_TRUE(seen->divmod.empty()) << seen->divmod.size() << " loads with a divide or modulo:" << names;

    expect_avx2_plan_matches_interpreter(step, 13);
}

// A weight gradient dW = Xᵀ·dY over the [batch, seq] rows reads both operands through inlined
// reshapes of whole rows, evaluated once per multiply-add; their index math is per row (D174 folds
// it), so the kernel's FLOPs are the product's own: the model counted 2 FLOPs per evaluation of
// each reshape, three times the product's (201.5 MFLOP for ff2's 67.1 in the bench transformer).
TEST(TrainStep, WeightGradientGemmFlopsAreTheProducts) {
    cli::TrainingModel tm = cli::load_training_model(grad_fixture("transformer.onnx"), {}, "mse", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    FixedMachine avx512 = machines::avx512_2core();
    AutoScheduleResult r = auto_schedule_with_plan(p, avx512.target, avx512.model);
    int checked = 0;
    for (const Kernel &k : r.plan.kernels) {
        if (k.kind != KernelKind::Gemm) continue;
        bool row_view = false;
        double product = 0, rest = 0;
        for (const auto &f : k.funcs) {
            const FuncDecision *d = r.plan.decision(f);
            ASSERT_NE(d, nullptr) << f;
            row_view |= d->why.find("a reshape of whole rows read as an operand") != std::string::npos;
            const LoweredFunc *lf = p.find(f);
            ASSERT_NE(lf, nullptr) << f;
            double points = 1;
            for (int64_t e : lf->extents) points *= (double)e;
            (lf->op == "MatMul" || lf->op == "Gemm" ? product : rest) += points * lf->flops_per_point;
        }
        if (!row_view) continue;
        checked++;
        EXPECT_GT(product, 0) << k.root;
        EXPECT_GE(k.flops, product) << k.root;
        EXPECT_LE(k.flops, product + rest + 1e-3 * product) << k.root << ": " << k.flops / 1e6 << " MFLOP for a product of "
                                                            << product / 1e6;
    }
    EXPECT_GE(checked, 2) << "the fixture's weight gradients read their rows through inlined reshapes";
}

// `--target host-cuda` names no CUDA capability, for which Halide emits sm_20 code without warp
// shuffles (LLVM aborted selecting shfl.idx in the transformer step's row reductions); it compiles
// as `--target cuda` does, with capability 8.0, on a machine without a GPU.
TEST(TrainStep, HostCudaTargetCompilesAsCuda) {
    std::string dir = temp_path("train_host_cuda");
    Cli r = loom("compile " + grad_fixture("transformer.onnx") + " --train --loss mse --optimizer sgd --lr 0.01 " +
                 "--target host-cuda --force --name tf_cuda -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("cuda_capability_80"), std::string::npos) << r.out;
    EXPECT_TRUE(std::filesystem::exists(dir + "/libtf_cuda_train.so")) << r.out;
    std::filesystem::remove_all(dir);
}

TEST(TrainStep, UserErrors) {
    Cli r = loom("compile " + grad_fixture("mlp.onnx") + " --train --optimizer adamw -o " + temp_path("bad_opt"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("unknown optimizer 'adamw'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sgd or adam"), std::string::npos) << r.out;
    r = loom("compile " + grad_fixture("mlp.onnx") + " --train --lr -1 -o " + temp_path("bad_lr"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("--lr -1 is not a positive learning rate"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(temp_path("bad_lr")));
    // The cuBLAS/cuDNN switches apply to a CUDA step only.
    r = loom("compile " + grad_fixture("mlp.onnx") + " --train --tf32 -o " + temp_path("bad_tf32"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("loom compile --train: --tf32 applies to cuBLAS/cuDNN on --target cuda only"), std::string::npos)
        << r.out;
    EXPECT_FALSE(std::filesystem::exists(temp_path("bad_tf32")));
}

// The CPU trainer's buffer allocator, compiled alone with a stand-in for Halide's hooks: the
// first step's requests (a block of 1 MiB freed before one of 768 KiB and one of 4 KiB live
// together) are planned into one arena of 1 MiB, which later steps' requests of the recorded sizes
// take, in place of the blocks a cache kept (1 MiB + 768 KiB + 4 KiB at most); a step that asks in
// another order gets blocks that do not overlap (some from the heap); the last trainer gone, the
// arena goes back (bench/DECISIONS.md#d219-step-memory-one-pipeline-planned-arena).
TEST(TrainStep, BufferArenaPlansTheFirstStep) {
    std::string dir = temp_path("buffer_cache");
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/cache.cpp") << R"(#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>
)" << loom::cli::host_buffer_cache_source()
                                      << R"(
halide_malloc_t hook_malloc;
halide_free_t hook_free;
halide_malloc_t halide_set_custom_malloc(halide_malloc_t m) { hook_malloc = m; return nullptr; }
halide_free_t halide_set_custom_free(halide_free_t f) { hook_free = f; return nullptr; }
bool in_arena(void *p) { return arena && p >= arena && p < arena + cache_bytes; }
int main() {
    buffer_cache_retain();
    int planned = 0;
    for (int step = 0; step < 3; step++) {
        buffer_cache_step_begin();
        void *a = hook_malloc(nullptr, 1 << 20);
        static_cast<char *>(a)[(1 << 20) - 1] = 1;
        hook_free(nullptr, a);
        void *b = hook_malloc(nullptr, 768 << 10);
        void *c = hook_malloc(nullptr, 4096);
        planned += in_arena(a) + in_arena(b) + in_arena(c);
        hook_free(nullptr, c);
        hook_free(nullptr, b);
        buffer_cache_step_end();
    }
    std::printf("arena %zu, planned %d, fallbacks %zu\n", cache_bytes, planned, cache_fallbacks);
    buffer_cache_step_begin();  // the small request first: its place is not the first request's
    char *c = static_cast<char *>(hook_malloc(nullptr, 4096));
    char *b = static_cast<char *>(hook_malloc(nullptr, 768 << 10));
    bool apart = c + 4096 <= b || b + (768 << 10) <= c;
    hook_free(nullptr, b);
    hook_free(nullptr, c);
    buffer_cache_step_end();
    std::printf("reordered apart: %d\n", apart);
    buffer_cache_release();
    std::printf("released %zu\n", cache_bytes);
}
)";
    Cli c;
    c.rc = run_command("g++ -std=c++17 -O1 -o " + dir + "/cache " + dir + "/cache.cpp && " + dir + "/cache", c.out);
    ASSERT_EQ(c.rc, 0) << c.out;
    EXPECT_NE(c.out.find("arena " + std::to_string(1 << 20) + ", planned 6, fallbacks 0\n"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("reordered apart: 1\n"), std::string::npos) << c.out;
    EXPECT_NE(c.out.find("released 0\n"), std::string::npos) << c.out;
}

// `loom compile --train --machine` plans the step for a fixed machine, as `loom autoschedule
// --machine` does: the preset sets the target (the manifest's), and the plan is the cost model's
// for the preset's model with the overrides, line for line past the file's first header line,
// whatever machine runs the test. A name that is no preset, a preset against another --target, a
// --machine with --eager and one on a plain compile are refused before anything is written.
TEST(TrainStep, MachinePresetPlansTheStep) {
    std::string dir = temp_path("train_machine");
    std::string mlp = grad_fixture("mlp.onnx");
    Cli r = loom("compile " + mlp + " --train --loss cross_entropy --machine avx9_1core -o " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("loom compile --train --machine: unknown machine preset 'avx9_1core'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("avx512_2core"), std::string::npos) << r.out;  // the listing of presets
    r = loom("compile " + mlp + " --train --machine avx512_2core --target x86-64-linux-avx-avx2-f16c-fma-sse41 -o " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("drop --target (the preset sets it) or the preset"), std::string::npos) << r.out;
    r = loom("compile " + mlp + " --train --machine avx2_2core --eager -o " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("--machine with --eager"), std::string::npos) << r.out;
    r = loom("compile " + mlp + " --machine avx2_2core -o " + dir);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("loom autoschedule M --machine avx2_2core"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir));

    r = loom("compile " + mlp + " --train --loss cross_entropy --machine avx512_2core cores=16 l2_bytes=256K --force " +
             "--name mlp_m -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    FixedMachine preset = machines::avx512_2core();
    std::ifstream manifest(dir + "/manifest.txt");
    std::string text((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\ntarget " + preset.target.to_string() + "\n"), std::string::npos) << text;
    std::ifstream planned(dir + "/schedule.sched");
    std::string got((std::istreambuf_iterator<char>(planned)), std::istreambuf_iterator<char>());
    MachineModel m = preset.model;
    override_machine(m, "cores=16");
    override_machine(m, "l2_bytes=256K");
    cli::TrainingModel tm = cli::load_training_model(mlp, {}, "cross_entropy", "", "min-cut");
    TrainingStepGraph step = make_training_step(tm.grad, OptimizerSpec{});
    LoweredPipeline p = lower_graph(step.graph, lowering_for_schedule(LowerOptions{}, "auto"));
    std::string want = print_schedule(auto_schedule(p, preset.target, m));
    auto past_first_line = [](const std::string &s) { return s.substr(s.find('\n') + 1); };
    EXPECT_EQ(past_first_line(got), past_first_line(want));
    EXPECT_NE(got.find("avx512_2core preset + cores=16 + l2_bytes=256K: 16 cores"), std::string::npos) << got;
    std::filesystem::remove_all(dir);

    // The preset's target with Halide's profiler: the same plan, profiled.
    r = loom("compile " + mlp + " --train --loss cross_entropy --machine avx512_2core cores=16 l2_bytes=256K --target " +
             preset.target.with_feature(Halide::Target::Profile).to_string() + " --force --name mlp_m -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::ifstream profiled_manifest(dir + "/manifest.txt");
    text.assign((std::istreambuf_iterator<char>(profiled_manifest)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\ntarget " + preset.target.with_feature(Halide::Target::Profile).to_string() + "\n"),
              std::string::npos) << text;
    std::ifstream profiled_plan(dir + "/schedule.sched");
    std::string profiled((std::istreambuf_iterator<char>(profiled_plan)), std::istreambuf_iterator<char>());
    EXPECT_EQ(past_first_line(profiled), past_first_line(want));
    std::filesystem::remove_all(dir);
}

// A caller's arrays need not be 64-byte aligned (malloc's are 16): the CPU trainer copies such an
// input into a buffer it keeps, so that after the first step a step allocates nothing (the glue's
// per-step staging copies grew glibc's heap by an input's size every step), and its steps equal
// those of a trainer given aligned copies of the same values, loss and parameters bit for bit. The
// driver counts the aligned allocations of the steps after the first two (it defines
// aligned_alloc, which the trainer's calls reach before libc's).
TEST(TrainStep, UnalignedInputsStagedOnceNotEveryStep) {
    std::string dir = temp_path("train_unaligned");
    Cli r = loom("compile " + grad_fixture("mlp.onnx") + " --train --loss cross_entropy --optimizer sgd --lr 0.05 " +
                 "--force --name mlp_ua -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::ofstream(dir + "/driver.cpp") << R"(#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
static int counting = 0, calls = 0;
extern "C" void *aligned_alloc(size_t align, size_t n) {
    static auto real = reinterpret_cast<void *(*)(size_t, size_t)>(dlsym(RTLD_NEXT, "aligned_alloc"));
    calls += counting;
    return real(align, n);
}
int main(int, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) return std::printf("%s\n", dlerror()), 1;
    auto create = reinterpret_cast<void *(*)()>(dlsym(lib, "mlp_ua_train_create"));
    auto step = reinterpret_cast<int (*)(void *, const void *const *, const void *, float *)>(dlsym(lib, "mlp_ua_train_step"));
    auto param = reinterpret_cast<float *(*)(void *, int)>(dlsym(lib, "mlp_ua_train_parameter"));
    auto size = reinterpret_cast<int64_t (*)(int)>(dlsym(lib, "mlp_ua_train_parameter_size"));
    auto nparams = reinterpret_cast<int (*)()>(dlsym(lib, "mlp_ua_train_num_parameters"));
    // x 8x64 f32 and 8 int64 classes, once 64-byte aligned and once 4 / 8 bytes past it.
    char *xa = static_cast<char *>(std::aligned_alloc(64, 4096)), *xu = static_cast<char *>(std::aligned_alloc(64, 4096));
    char *ca = static_cast<char *>(std::aligned_alloc(64, 128)), *cu = static_cast<char *>(std::aligned_alloc(64, 128));
    srand(7);
    for (int i = 0; i < 512; i++) {
        float v = rand() / (float)RAND_MAX * 2 - 1;
        std::memcpy(xa + 4 * i, &v, 4), std::memcpy(xu + 4 + 4 * i, &v, 4);
    }
    for (int i = 0; i < 8; i++) {
        int64_t k = rand() % 10;
        std::memcpy(ca + 8 * i, &k, 8), std::memcpy(cu + 8 + 8 * i, &k, 8);
    }
    void *a = create(), *u = create();
    const void *in_a[] = {xa}, *in_u[] = {xu + 4};
    int same = 1;
    for (int s = 0; s < 12; s++) {
        float la = NAN, lu = NAN;
        if (step(a, in_a, ca, &la)) return std::printf("aligned step failed\n"), 1;
        counting = s >= 2;
        if (step(u, in_u, cu + 8, &lu)) return std::printf("unaligned step failed\n"), 1;
        counting = 0;
        same &= la == lu && !std::isnan(la);
    }
    for (int k = 0; k < nparams(); k++) same &= std::memcmp(param(a, k), param(u, k), 4 * size(k)) == 0;
    std::printf("same %d allocations %d\n", same, calls);
}
)";
    Cli c;
    c.rc = run_command("g++ -std=c++17 -O1 -rdynamic -o " + dir + "/driver " + dir + "/driver.cpp -ldl && HL_NUM_THREADS=1 " +
                           dir + "/driver " + dir + "/libmlp_ua_train.so",
                       c.out);
    ASSERT_EQ(c.rc, 0) << c.out;
    EXPECT_NE(c.out.find("same 1 allocations 0\n"), std::string::npos) << c.out;
    std::filesystem::remove_all(dir);
}

// The CUDA training step compiles on a machine without a GPU; there its trainer refuses to start
// with a message naming CUDA, and on a machine with one it takes torch's first SGD step.
TEST(TrainStep, CudaStepCompilesAndRunsWhereThereIsAGpu) {
    std::string dir = temp_path("train_cuda");
    Cli r = loom("compile " + grad_fixture("mlp.onnx") + " --train --loss cross_entropy --optimizer sgd --lr 0.05 " +
                 "--target cuda --force --name mlp_cuda -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("cuda"), std::string::npos) << r.out;
    std::ifstream header(dir + "/mlp_cuda_train.h");
    std::string h((std::istreambuf_iterator<char>(header)), std::istreambuf_iterator<char>());
    EXPECT_NE(h.find("mlp_cuda_train_step_device"), std::string::npos);
    Trainer tr(dir, "mlp_cuda");
    if (!tr.t) {  // no GPU here: create failed, saying why
        ASSERT_NE(tr.lib, nullptr);
        auto last_error = reinterpret_cast<const char *(*)()>(dlsym(tr.lib, "mlp_cuda_train_last_error"));
        ASSERT_NE((void *)last_error, nullptr);
        std::string e = last_error();
        EXPECT_TRUE(e.find("libcuda") != std::string::npos || e.find("CUDA") != std::string::npos) << e;
        std::filesystem::remove_all(dir);
        GTEST_SKIP() << "no GPU: " << e;
    }
    Tensor x = read_npy(grad_fixture("mlp/x.npy")), target = read_npy(grad_fixture("mlp/target.npy")).cast(DType::I64);
    std::vector<Tensor> before;
    for (int k = 0; k < tr.num_parameters(); k++) before.push_back(tr.param(k));
    const void *inputs[] = {x.data()};
    float loss = -1;
    ASSERT_EQ(tr.step(tr.t, inputs, target.data(), &loss), 0);
    EXPECT_NEAR(loss, read_npy(grad_fixture("mlp/loss.npy")).get(0), 1e-4);
    for (int k = 0; k < tr.num_parameters(); k++) {
        Tensor g = read_npy(grad_fixture(std::string("mlp/grad_") + tr.parameter_name(k) + ".npy"));
        Tensor want(DType::F32, {tr.parameter_size(k)});
        for (int64_t i = 0; i < want.numel(); i++) want.set(i, before[k].get(i) - 0.05 * g.get(i));
        EXPECT_TRUE(close(tr.param(k), want, 1e-4)) << tr.parameter_name(k);
    }
    std::filesystem::remove_all(dir);
}

// --- save or recompute: the min-cut partition --------------------------------------------------

// A joint graph whose cheapest cut is known: the backward reads tanh(widen(mm_small)) (saving
// the 4 KiB MatMul beats the 16 KiB tanh), relu and sigmoid of one MatMul (saving the MatMul once
// beats both), add(mm_p, mm_q) (one 16 KiB sum beats two MatMuls) and a reduction (never
// recomputed: saved).
TEST(RecomputePartition, HandBuiltGraphCutIsTheKnownOptimum) {
    GraphBuilder b;
    std::string x = b.input("x", {64, 16});
    std::string w1 = b.input("w1", {16, 16}), w2 = b.input("w2", {16, 64}), w3 = b.input("w3", {16, 64}),
                w4 = b.input("w4", {16, 64});
    std::string small = b.node("MatMul", {x, w1}, {64, 16}, {}, DType::F32, "mm_small");
    std::string widen = b.node("Concat", {small, small, small, small}, {64, 64}, {{"axis", int64_t(1)}}, DType::F32, "widen");
    std::string t = b.node("Tanh", {widen}, {64, 64}, {}, DType::F32, "tanh");
    std::string h = b.node("MatMul", {x, w2}, {64, 64}, {}, DType::F32, "mm");
    std::string r = b.node("Relu", {h}, {64, 64}, {}, DType::F32, "relu");
    std::string sg = b.node("Sigmoid", {h}, {64, 64}, {}, DType::F32, "sigmoid");
    std::string p = b.node("MatMul", {x, w3}, {64, 64}, {}, DType::F32, "mm_p");
    std::string q = b.node("MatMul", {x, w4}, {64, 64}, {}, DType::F32, "mm_q");
    std::string add = b.node("Add", {p, q}, {64, 64}, {}, DType::F32, "add");
    std::string sum = b.node("ReduceSum", {r}, {64, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t(1)}},
                             DType::F32, "sum");
    std::string g1 = b.node("Mul", {t, r}, {64, 64}, {}, DType::F32, "grad_1");
    std::string g2 = b.node("Mul", {sg, add}, {64, 64}, {}, DType::F32, "grad_2");
    std::string g3 = b.node("Mul", {g1, sum}, {64, 64}, {}, DType::F32, "grad_3");
    b.out("Add", {g2, g3}, {64, 64}, {}, DType::F32, "grad_4");
    b.output(sum);

    RecomputePlan plan = plan_recompute(b.g);
    std::set<std::string> saved(plan.saved.begin(), plan.saved.end()),
        recomputed(plan.recomputed.begin(), plan.recomputed.end());
    EXPECT_EQ(saved, (std::set<std::string>{"mm_small", "mm", "add", "sum"})) << plan.describe();
    EXPECT_EQ(recomputed, (std::set<std::string>{"widen", "tanh", "relu", "sigmoid"})) << plan.describe();
    EXPECT_EQ(plan.saved_bytes, 64 * 16 * 4 + 2 * 64 * 64 * 4 + 64 * 4);
    EXPECT_EQ(plan.save_all_bytes, 4 * 64 * 64 * 4 + 64 * 4);
    EXPECT_EQ(plan.recompute_flops, 4 * 64 * 64);
    EXPECT_GT(plan.peak_bytes, 0);
    EXPECT_NE(plan.describe().find("recompute  tanh"), std::string::npos) << plan.describe();

    // The rewrite: the backward reads only saved values and its own clones; same values.
    Graph g = b.g;
    apply_recompute(g, plan);
    for (const Node &n : g.nodes) {
        if (!is_backward_node(n)) continue;
        for (const auto &v : n.inputs) {
            int k = g.producer(v);
            if (k >= 0 && !is_backward_node(g.nodes[k])) EXPECT_TRUE(saved.count(g.nodes[k].name)) << n.name << " reads " << v;
        }
    }
    EXPECT_EQ(g.nodes.size(), b.g.nodes.size() + 4);
    auto in = random_inputs(b.g, 5);
    auto want = run_reference(b.g, in), got = run_reference(g, in);
    for (const auto &o : b.g.outputs) EXPECT_TRUE(close(got.at(o), want.at(o), 1e-6)) << o;

    // Save-all keeps every value the backward reads.
    RecomputePlan all = plan_recompute(b.g, false);
    EXPECT_EQ(all.saved_bytes, plan.save_all_bytes);
    EXPECT_TRUE(all.recomputed.empty());
}

// A value a backward MatMul reads as an operand (directly or through a layout op) is saved, not
// recomputed: the GEMM's operand is stored in the backward anyway, so recomputing it would cost a
// kernel and a buffer of its size (a Linear's weight gradient reading GELU's output). The same
// value read only by a pointwise backward node is still recomputed from the cheaper MatMul.
TEST(RecomputePartition, GemmOperandsOfTheBackwardAreSaved) {
    for (bool through_reshape : {false, true}) {
        GraphBuilder b;
        std::string x = b.input("x", {64, 16});
        std::string w1 = b.input("w1", {16, 16}), w2 = b.input("w2", {16, 16});
        std::string small = b.node("MatMul", {x, w1}, {64, 16}, {}, DType::F32, "mm_small");
        std::string widen = b.node("Concat", {small, small, small, small}, {64, 64}, {{"axis", int64_t(1)}}, DType::F32, "widen");
        std::string t = b.node("Tanh", {widen}, {64, 64}, {}, DType::F32, "tanh");
        std::string other = b.node("MatMul", {x, w2}, {64, 16}, {}, DType::F32, "mm_other");
        std::string wide2 = b.node("Concat", {other, other, other, other}, {64, 64}, {{"axis", int64_t(1)}}, DType::F32, "widen_2");
        std::string s = b.node("Sigmoid", {wide2}, {64, 64}, {}, DType::F32, "sigmoid");
        std::string g = b.input("g", {64, 64});
        std::string operand = t;
        if (through_reshape)
            operand = b.node("Reshape", {t}, {64, 64}, {{"shape", std::vector<int64_t>{64, 64}}}, DType::F32, "grad_reshape_0");
        std::string gt = b.node("Transpose", {operand}, {64, 64}, {{"perm", std::vector<int64_t>{1, 0}}}, DType::F32, "grad_transpose_1");
        std::string dw = b.node("MatMul", {gt, g}, {64, 64}, {}, DType::F32, "grad_matmul_2");
        b.out("Add", {dw, b.node("Mul", {s, g}, {64, 64}, {}, DType::F32, "grad_mul_3")}, {64, 64}, {}, DType::F32, "grad_add_4");

        RecomputePlan plan = plan_recompute(b.g);
        std::set<std::string> saved(plan.saved.begin(), plan.saved.end()),
            recomputed(plan.recomputed.begin(), plan.recomputed.end());
        EXPECT_EQ(saved, (std::set<std::string>{"tanh", "mm_other"})) << through_reshape << "\n" << plan.describe();
        EXPECT_EQ(recomputed, (std::set<std::string>{"widen_2", "sigmoid"})) << through_reshape << "\n" << plan.describe();
        Graph after = b.g;
        apply_recompute(after, plan);
        auto in = random_inputs(b.g, 7);
        auto want = run_reference(b.g, in), got = run_reference(after, in);
        for (const auto &o : b.g.outputs) EXPECT_TRUE(close(got.at(o), want.at(o), 1e-6)) << o;
    }
}

// Relu's gradient tests its output (y > 0, the same mask as x > 0; LeakyRelu's and Elu's too while
// alpha > 0): the backward reads the activation the next layer's weight gradient saves anyway, so
// the pre-activation (fc1's product) is neither saved nor read by any backward node; the gradients
// still match finite differences.
TEST(RecomputePartition, ReluGradientReadsItsOutputNotItsInput) {
    for (auto [op, alpha] : std::vector<std::pair<std::string, double>>{{"Relu", 0}, {"LeakyRelu", 0.1}, {"Elu", 0.7}}) {
        GraphBuilder b;
        std::string x = b.input("x", {6, 8});
        std::string h = b.node("Gemm", {x, b.input("w1", {8, 12}), b.input("b1", {12})}, {6, 12}, {}, DType::F32, "fc1");
        std::map<std::string, AttrValue> attrs;
        if (op != "Relu") attrs["alpha"] = alpha;
        std::string r = b.node(op, {h}, {6, 12}, attrs, DType::F32, "act");
        b.out("Gemm", {r, b.input("w2", {12, 5}), b.input("b2", {5})}, {6, 5}, {}, DType::F32, "fc2");
        GradientGraph gg = differentiate(b.g, {"w1", "b1", "w2", "b2"}, "mse", reference_evaluator());
        for (const Node &n : gg.graph.nodes)
            if (is_backward_node(n))
                for (const auto &v : n.inputs) EXPECT_NE(v, h) << op << ": " << n.name << " reads the activation's input";
        RecomputePlan plan = plan_recompute(gg.graph);
        std::set<std::string> saved(plan.saved.begin(), plan.saved.end());
        EXPECT_EQ(saved, (std::set<std::string>{"act", "fc2"})) << op << "\n" << plan.describe();  // fc2: the loss reads it
        EXPECT_EQ(plan.saved_bytes, (6 * 12 + 6 * 5) * 4) << op << "\n" << plan.describe();
        auto in = random_inputs(gg.graph, 11);
        EXPECT_LT(worst_fd_error(gg, in), 1e-5) << op;
        Graph after = gg.graph;
        apply_recompute(after, plan);
        auto want = run_reference(gg.graph, in), got = run_reference(after, in);
        for (const auto &p : gg.parameters)
            EXPECT_TRUE(close(got.at(gg.gradient_of.at(p)), want.at(gg.gradient_of.at(p)), 1e-6)) << op << " " << p;
    }
}

// Whatever the partition, the gradient graph computes the same values (reference interpreter).
TEST(RecomputePartition, GradientsUnchangedOnTheFixtures) {
    for (std::string name : {"mlp", "transformer", "cnn"}) {
        std::string loss = name == "mlp" ? "cross_entropy" : "mse";
        auto cut = cli::load_training_model(grad_fixture(name + ".onnx"), {}, loss, "", "min-cut");
        auto all = cli::load_training_model(grad_fixture(name + ".onnx"), {}, loss, "", "save-all");
        EXPECT_FALSE(cut.recompute.recomputed.empty()) << name;
        EXPECT_LT(cut.recompute.saved_bytes, all.recompute.saved_bytes) << name;
        EXPECT_LE(cut.recompute.peak_bytes, all.recompute.peak_bytes) << name;
        auto in = cli::gradient_inputs(cut, grad_fixture(name), 1);
        auto a = run_reference(cut.grad.graph, in), b = run_reference(all.grad.graph, in);
        for (const auto &o : all.grad.graph.outputs) EXPECT_TRUE(close(a.at(o), b.at(o), 1e-6)) << name << " " << o;
    }
}

// The compiled training step of the CNN: the same parameters after three steps with either
// partition, its first loss PyTorch's; the report names the partition and its peak estimate.
TEST(RecomputePartition, TrainingStepUnchangedWhateverThePartition) {
    Tensor x = read_npy(grad_fixture("cnn/x.npy")), target = read_npy(grad_fixture("cnn/target.npy"));
    std::vector<std::vector<Tensor>> params;
    for (std::string mode : {"min-cut", "save-all"}) {
        std::string dir = temp_path("train_cnn_" + mode), name = mode == "min-cut" ? "cnn_cut" : "cnn_all";
        Cli r = loom("compile " + grad_fixture("cnn.onnx") + " --train --loss mse --recompute " + mode +
                     " --force --name " + name + " --report " + dir + ".report -o " + dir);
        ASSERT_EQ(r.rc, 0) << r.out;
        EXPECT_NE(r.out.find(mode + " partition (save or recompute)"), std::string::npos) << r.out;
        std::ifstream report(dir + ".report");
        std::string text((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
        EXPECT_NE(text.find("peak activation bytes in graph order"), std::string::npos) << text;
        Trainer tr(dir, name);
        ASSERT_NE(tr.t, nullptr);
        const void *inputs[] = {x.data()};
        float loss = -1;
        ASSERT_EQ(tr.step(tr.t, inputs, target.data(), &loss), 0);
        EXPECT_NEAR(loss, read_npy(grad_fixture("cnn/loss.npy")).get(0), 1e-4 * std::abs(loss) + 1e-6);
        for (int s = 0; s < 2; s++) ASSERT_EQ(tr.step(tr.t, inputs, target.data(), &loss), 0);
        params.emplace_back();
        for (int k = 0; k < tr.num_parameters(); k++) params.back().push_back(tr.param(k));
        std::filesystem::remove_all(dir);
        std::filesystem::remove(dir + ".report");
    }
    ASSERT_EQ(params[0].size(), params[1].size());
    for (size_t k = 0; k < params[0].size(); k++) EXPECT_TRUE(close(params[0][k], params[1][k], 1e-5)) << k;

    Cli r = loom("compile " + grad_fixture("cnn.onnx") + " --train --recompute mincut -o " + temp_path("bad_recompute"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.out.find("unknown --recompute 'mincut'; did you mean 'min-cut'?"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(temp_path("bad_recompute")));
}

// BatchNorm in training mode: a step updates each running mean and var as PyTorch's train-mode
// forward does (ONNX momentum 0.9, torch's 0.1; the variance unbiased), readable through the C API.
TEST(TrainStep, BatchNormRunningStatisticsMatchTorch) {
    std::string dir = temp_path("train_cnn_bn");
    Cli r = loom("compile " + grad_fixture("cnn.onnx") + " --train --loss mse --force --name cnn_bn -o " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    Trainer tr(dir, "cnn_bn");
    ASSERT_NE(tr.t, nullptr);
    ASSERT_EQ(tr.num_buffers(), 6);
    std::vector<Tensor> before;
    for (int k = 0; k < 6; k++) before.push_back(tr.buf(k));
    Tensor x = read_npy(grad_fixture("cnn/x.npy")), target = read_npy(grad_fixture("cnn/target.npy"));
    const void *inputs[] = {x.data()};
    ASSERT_EQ(tr.step(tr.t, inputs, target.data(), nullptr), 0);
    for (int k = 0; k < 6; k++) {
        std::string name = tr.buffer_name(k);
        EXPECT_NE(name.find("running_"), std::string::npos) << name;
        Tensor want = read_npy(grad_fixture("cnn/buffer_" + name + ".npy"));
        Tensor got = tr.buf(k);
        EXPECT_TRUE(close(got, want.reshaped({got.numel()}), 1e-5)) << name;
        EXPECT_FALSE(close(got, before[k], 1e-3)) << name << " did not move";
    }
    EXPECT_EQ(tr.buffer(tr.t, 6), nullptr);
    EXPECT_EQ(tr.buffer_size(-1), -1);
    std::filesystem::remove_all(dir);
}

// On CUDA a training step's GEMMs and 2-D convs, whose weights are parameters and whose gradient
// products have only computed operands, are library calls (LowerOptions::gemm_extern and
// conv_extern, as `loom compile --train --target cuda` lowers them): the CNN fixture's dense convs
// are cuDNN's forward pass, their input gradients (ConvTranspose by the parameter) the
// data-gradient pass and their weight gradients (autodiff's Conv of X^T by dY^T) the
// filter-gradient pass on X and dY, no transposed copy of either realized for it; its Gemm and
// both Gemms of its gradient are cuBLAS calls. The transformer block's linear layers (MatMul by a
// Transpose of the weight) call cuBLAS with the transpose as its flag, forward and backward. The
// CPU lowering of the same graphs has no library stage.
TEST(TrainStep, CudaLoweringCallsTheLibrariesForParameterWeights) {
    struct Lowered {
        std::map<std::string, int> calls;  // extern stages by kind (the suffix of their names)
        std::vector<std::string> realized_transposes;  // Transposes realized for a library call
    };
    auto lowered = [](const std::string &name) {
        cli::TrainingModel m = cli::load_training_model(grad_fixture(name + ".onnx"), {}, "mse", "", "min-cut");
        TrainingStepGraph step = make_training_step(m.grad, OptimizerSpec{}, StepDevice::Gpu);
        EXPECT_TRUE(lower_graph(step.graph).extern_calls.empty()) << name;
        LowerOptions lo;
        lo.gemm_extern = lo.conv_extern = true;
        LoweredPipeline p = lower_graph(step.graph, lo);
        Lowered out;
        for (const auto &[ext, shape] : p.extern_shapes)
            for (const char *kind : {"_cudnn_dgrad", "_cudnn_wgrad", "_cublas_batched", "_cudnn", "_cublas"})
                if (ext.find(kind) != std::string::npos) {
                    out.calls[kind]++;
                    break;
                }
        for (const auto &f : p.funcs)
            if (f.feeds_extern && f.op == "Transpose") out.realized_transposes.push_back(f.name);
        return out;
    };
    Lowered cnn = lowered("cnn");
    EXPECT_EQ(cnn.calls, (std::map<std::string, int>{
                             {"_cudnn", 2}, {"_cudnn_dgrad", 1}, {"_cudnn_wgrad", 2}, {"_cublas", 3}}))
        << "stem and down convs forward and filter gradient, down's input gradient (stem's input is data); fc's "
           "Gemm, its input and weight gradients";
    EXPECT_TRUE(cnn.realized_transposes.empty()) << cnn.realized_transposes[0];
    Lowered tr = lowered("transformer");
    EXPECT_EQ(tr.calls["_cublas"], 11) << "four linear layers, three input gradients (the block's input is data), "
                                          "four weight gradients (one product over every row each)";
    EXPECT_GE(tr.calls["_cublas_batched"], 4) << "attention's products and their gradients";
    for (const auto &t : tr.realized_transposes)
        for (const char *weight : {"qkv", "proj", "ff1", "ff2"})
            EXPECT_NE(t.rfind(std::string(weight) + "_transpose", 0), 0u) << t << ": the weight's transpose is cuBLAS's flag";
}

}  // namespace
}  // namespace loom::testing
