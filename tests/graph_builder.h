/// \file
/// A small builder of canonical graphs for op tests, and the check every op test makes: lower,
/// compute_root every Func, JIT-run (outputs poisoned), compare each output with the reference.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "codegen/jit.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "test_util.h"

namespace loom::testing {

/// A hand-built canonical graph.
struct GraphBuilder {
    Graph g;
    int count = 0;
    std::string input(const std::string &name, Shape s, DType t = DType::F32) {
        g.values[name] = ValueInfo{name, t, s, {}, true};
        g.inputs.push_back(name);
        return name;
    }
    std::string constant(const std::string &name, Tensor t) {
        g.set_constant(name, t);
        g.values[name].has_shape = true;
        return name;
    }
    std::string constant(Tensor t) { return constant("const" + std::to_string(count++), std::move(t)); }
    std::string scalar(double v, DType t = DType::F32) { return constant(Tensor::scalar(t, v)); }
    /// A float32 initializer \p name of shape \p s, uniform random in [lo, hi) from \p seed.
    std::string random_constant(const std::string &name, Shape s, uint64_t seed, double lo = -1, double hi = 1) {
        Tensor t(DType::F32, s);
        fill_random(t, seed, lo, hi);
        g.set_constant(name, t);
        g.values[name].has_shape = true;
        return name;
    }
    /// A node named \p name (default "<op>_<n>"); returns its output value.
    std::string node(const std::string &op, std::vector<std::string> in, Shape s,
                     std::map<std::string, AttrValue> attrs = {}, DType t = DType::F32,
                     const std::string &name = "") {
        Node n;
        n.op = op;
        n.name = name.empty() ? op + "_" + std::to_string(count) : name;
        n.inputs = std::move(in);
        std::string out = "v" + std::to_string(count++);
        n.outputs = {out};
        n.attrs = std::move(attrs);
        g.values[out] = ValueInfo{out, t, s, {}, true};
        g.nodes.push_back(n);
        return out;
    }
    /// Marks value \p v (a node output, input or constant) as a graph output, again if repeated.
    void output(const std::string &v) { g.outputs.push_back(v); }
    /// A node that is also a graph output.
    std::string out(const std::string &op, std::vector<std::string> in, Shape s,
                    std::map<std::string, AttrValue> attrs = {}, DType t = DType::F32,
                    const std::string &name = "") {
        std::string v = node(op, std::move(in), s, std::move(attrs), t, name);
        g.outputs.push_back(v);
        return v;
    }
};

/// nn.Linear then \p act ("gelu": the erf form, or "relu") on an [M, K] matrix, stored in bfloat16
/// node for node as torch.onnx writes a bf16 model (bench/gpu/kernel_models.py bf16_bias_*):
/// Gemm(x, W [N, K], b, transB=1), then Relu, or Div by √2 as bf16 (1.4140625, or \p sqrt2), Erf,
/// Add 1, Mul by the product, Mul 0.5; the weights random, rounded to bf16. Returns the output.
inline std::string bf16_linear(GraphBuilder &b, const std::string &act, int64_t M, int64_t K, int64_t N,
                               double sqrt2 = 1.4142135623730951) {
    const DType h = DType::BF16;
    Tensor w(DType::F32, {N, K}), bias(DType::F32, {N});
    fill_random(w, 3, -0.5, 0.5);
    fill_random(bias, 4, -0.5, 0.5);
    std::string y = b.node("Gemm", {b.input("x", {M, K}, h), b.constant("w", w.cast(h)), b.constant("b", bias.cast(h))},
                           {M, N}, {{"transB", int64_t(1)}}, h);
    if (act == "relu") return b.out("Relu", {y}, {M, N}, {}, h);
    std::string e = b.node("Erf", {b.node("Div", {y, b.scalar(sqrt2, h)}, {M, N}, {}, h)}, {M, N}, {}, h);
    e = b.node("Mul", {y, b.node("Add", {e, b.scalar(1.0, h)}, {M, N}, {}, h)}, {M, N}, {}, h);
    return b.out("Mul", {e, b.scalar(0.5, h)}, {M, N}, {}, h);
}

/// A batched GEMM [3, 21, 24] x [3, 24, 40] (of a Relu) that is a graph output and is also read by
/// a Tanh, the second output; schedule() wraps the GEMM (`in()`, realized in its place) and
/// computes it per 4x8 tile of the wrapper, 21 rows leaving a tile that is shifted inwards.
struct WrappedGemm {
    GraphBuilder b;
    WrappedGemm() {
        std::string mm = b.node("MatMul", {b.node("Relu", {b.input("a", {3, 21, 24})}, {3, 21, 24}),
                                           b.input("w", {3, 24, 40})},
                                {3, 21, 40});
        b.output(mm);
        b.out("Tanh", {mm}, {3, 21, 40});
    }
    std::string schedule(const LoweredPipeline &lp) const {
        const std::string g = lp.output_funcs.at(0);
        std::string text = g + ".in() as " + g + "_out;\n" + g +
                           "_out.compute_root().split(j, jo, ji, 8).split(i, io, ii, 4).reorder(ji, ii, jo, io, b)"
                           ".vectorize(ji, 8).parallel(b);\n" + g + ".compute_at(" + g +
                           "_out, jo).vectorize(j, 8).unroll(i);\n" + g +
                           ".update(0).reorder(j, i, k).vectorize(j, 8).unroll(i);\n";
        for (const auto &f : lp.funcs)
            if (f.name != g) text += f.name + ".compute_root();\n";
        return text;
    }
};

/// Lowers, compute_roots every Func, JIT-runs on \p in and checks every output against the
/// reference (outputs are poisoned by the JIT before the run).
inline void check(const GraphBuilder &b, const std::map<std::string, Tensor> &in, double rel = 1e-5) {
    LoweredPipeline lp = lower_graph(b.g);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    auto outs = m.run(in);
    auto ref = run_reference(b.g, in);
    ASSERT_EQ(outs.size(), ref.size());
    for (const auto &[name, t] : ref) {
        const Node &n = b.g.nodes[b.g.producer(name)];
        EXPECT_EQ(outs.at(name).dtype(), b.g.value(name).dtype) << n.op;
        EXPECT_TRUE(close(outs.at(name), t, rel)) << n.op << " (" << n.name << ")";
    }
}

}  // namespace loom::testing
