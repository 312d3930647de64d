/// \file
/// The hand-built pipeline the schedule-language tests apply schedules to (no graph, no lowering:
/// the schedule stage is tested on its own).
#pragma once

#include <Halide.h>

#include "lower/lowered.h"
#include "ops/lower_graph.h"

// A small hand-built pipeline in the shape lower_graph produces (vars outermost first):
//   a(i, j) = in(i, j) * 2 + 1            pointwise, consumed by b
//   b(i, j) = Σ_k a(i, k) * w(k, j)       matmul, RDom "k"
//   c(i, j) = max(b(i, j), 0)             output
//   tot(j)  = Σ_r in(r, j)                output, RDom "r" (1-D)
//   g()     = Σ_{r.x, r.y} in(r.y, r.x)   output, RDom "r" (2-D)
//   nz(i)   = fold of in(i, k): nz*x + 1  output, not associative
struct TestPipeline {
    loom::LoweredPipeline p;
    Halide::ImageParam in;
    Halide::Buffer<float> w;
    int M = 64, K = 32, N = 48;
};

inline loom::LoweredFunc lfunc(const std::string &name, Halide::Func f, std::vector<std::string> vars,
                               std::vector<int64_t> ext, std::vector<std::vector<std::string>> rv,
                               std::vector<std::string> producers, std::vector<std::string> consumers,
                               bool out, bool pw) {
    loom::LoweredFunc lf;
    lf.name = name;
    lf.func = f;
    lf.node = name;
    lf.op = "Test";
    lf.vars = vars;
    lf.extents = ext;
    lf.update_rvars = rv;
    lf.producers = producers;
    lf.consumers = consumers;
    lf.is_output = out;
    lf.is_pointwise = pw;
    return lf;
}

inline TestPipeline make_pipeline() {
    using namespace Halide;
    TestPipeline t;
    t.in = ImageParam(Float(32), 2, "in");
    t.w = Buffer<float>(t.N, t.K, "w");
    for (int k = 0; k < t.K; k++)
        for (int j = 0; j < t.N; j++) t.w(j, k) = 0.01f * ((j * 7 + k * 13) % 17) - 0.08f;
    Var i("i"), j("j");
    RDom k(0, t.K, "k"), r(0, t.M, "r"), r2(0, t.K, 0, t.M, "r"), k2(0, t.K, "k");
    Func a("a"), b("b"), c("c"), tot("tot"), g("g"), nz("nz");
    a(j, i) = t.in(j, i) * 2.f + 1.f;
    b(j, i) = 0.f;
    b(j, i) += a(k, i) * t.w(j, k);
    c(j, i) = max(b(j, i), 0.f);
    tot(j) = 0.f;
    tot(j) += t.in(j, r);
    g() = 0.f;
    g() += t.in(r2.x, r2.y);
    nz(i) = 0.f;
    nz(i) = nz(i) * t.in(k2, i) + 1.f;
    auto &p = t.p;
    p.inputs = {t.in};
    p.input_names = {"in"};
    p.funcs.push_back(lfunc("a", a, {"i", "j"}, {t.M, t.K}, {}, {}, {"b"}, false, true));
    p.funcs.push_back(lfunc("b", b, {"i", "j"}, {t.M, t.N}, {{"k"}}, {"a"}, {"c"}, false, false));
    p.funcs.push_back(lfunc("c", c, {"i", "j"}, {t.M, t.N}, {}, {"b"}, {}, true, true));
    p.funcs.push_back(lfunc("tot", tot, {"j"}, {t.K}, {{"r"}}, {}, {}, true, false));
    p.funcs.push_back(lfunc("g", g, {}, {}, {{"r.x", "r.y"}}, {}, {}, true, false));
    p.funcs.push_back(lfunc("nz", nz, {"i"}, {t.M}, {{"k"}}, {}, {}, true, false));
    for (auto &lf : p.funcs)  // the Funcs that read the graph input, as lowering records them
        if (lf.name == "a" || lf.name == "tot" || lf.name == "g" || lf.name == "nz") lf.input_reads = {"in"};
    p.output_funcs = {"c", "tot", "g", "nz"};
    p.output_names = p.output_funcs;
    return t;
}
