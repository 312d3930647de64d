// Outputs written over inputs (codegen/in_place_outputs.h): which pairs the lowered statement
// allows, and the ordering calls that let a reader of the input run before the output is written.
// Lowering only, for a fixed target: nothing depends on the machine running the tests.
#include <gtest/gtest.h>

#include "codegen/in_place_outputs.h"
#include "codegen/jit.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::ImageParam;
using Halide::Var;

const Halide::Target kTarget("x86-64-linux-avx-avx2-f16c-fma-sse41");

// Why each pair may not share storage in \p pl, lowered for kTarget ("" where it may).
std::vector<std::string> reasons(Halide::Pipeline pl, const std::vector<Halide::Argument> &args,
                                 const std::vector<InPlacePair> &pairs) {
    InPlaceCheck check(pairs);
    check.watch(pl, 0, 1);
    pl.compile_to_module(args, "in_place", kTarget);
    return check.reasons();
}

ImageParam dense_input(int extent) {
    ImageParam p(Halide::Float(32), 1, "p");
    p.dim(0).set_bounds(0, extent).set_stride(1);
    return p;
}

void dense_output(Func f, int extent) { f.output_buffer().dim(0).set_bounds(0, extent).set_stride(1); }

// A reader of the input realized before the output, and the output reading the input only at the
// element it stores (vectors that tile the buffer exactly): it may write over the input.
TEST(InPlaceOutputs, ElementwiseOutputAfterItsReadersMayShare) {
    ImageParam p = dense_input(64);
    Var x("x");
    Func g("g"), o("o");
    g(x) = p(63 - x) * 2.0f;
    g.compute_root();
    o(x) = p(x) - g(x);
    o.vectorize(x, 8);
    dense_output(o, 64);
    EXPECT_EQ(reasons(Halide::Pipeline({o}), {p}, {{p.name(), o.name()}}), std::vector<std::string>{""});
}

// Halide realizes the outputs in order: the second reads the input after the first wrote it.
TEST(InPlaceOutputs, InputReadAfterTheOutputIsWrittenMayNotShare) {
    ImageParam p = dense_input(64);
    Var x("x");
    Func o("o"), r("r");
    o(x) = p(x) * 0.5f;
    r(x) = p(x) + 1.0f;
    dense_output(o, 64);
    dense_output(r, 64);
    std::vector<std::string> why = reasons(Halide::Pipeline({o, r}), {p}, {{p.name(), o.name()}, {p.name(), r.name()}});
    EXPECT_EQ(why[0], "the input is read after the output's production");
    EXPECT_EQ(why[1], "") << "r is the last to read p, each element where it stores it";
}

// A vector loop over 10 elements in vectors of 8 shifts its last vector inwards: elements 2-7 are
// stored twice, the second time from inputs the first store may already have overwritten.
TEST(InPlaceOutputs, OverlappingVectorsMayNotShare) {
    ImageParam p = dense_input(10);
    Var x("x");
    Func o("o");
    o(x) = p(x) - 1.0f;
    o.vectorize(x, 8);
    dense_output(o, 10);
    std::vector<std::string> why = reasons(Halide::Pipeline({o}), {p}, {{p.name(), o.name()}});
    ASSERT_EQ(why.size(), 1u);
    EXPECT_NE(why[0], "");
    // Without the shift (8 elements, one vector) it may.
    ImageParam q = dense_input(8);
    Func o8("o8");
    o8(x) = q(x) - 1.0f;
    o8.vectorize(x, 8);
    dense_output(o8, 8);
    EXPECT_EQ(reasons(Halide::Pipeline({o8}), {q}, {{q.name(), o8.name()}}), std::vector<std::string>{""});
}

// An output with an update stores each element twice; and one reading its input at another
// element than the one it stores cannot share either.
TEST(InPlaceOutputs, UpdatesAndShiftedReadsMayNotShare) {
    ImageParam p = dense_input(64);
    Var x("x");
    Func o("o");
    o(x) = p(x);
    o(x) += p(x) * 2.0f;
    dense_output(o, 64);
    EXPECT_NE(reasons(Halide::Pipeline({o}), {p}, {{p.name(), o.name()}})[0], "");
    ImageParam q = dense_input(64);
    Func s("s");
    s(x) = q(63 - x) + 1.0f;
    dense_output(s, 64);
    EXPECT_EQ(reasons(Halide::Pipeline({s}), {q}, {{q.name(), s.name()}})[0],
              "inside the output's production the input is read other than at the element being stored");
}

// A graph whose first output (u = w - x) would be realized before its second (r = x·w) reads w:
// order_reads_before_outputs makes r come first, so u may then be written over w, and the outputs
// are the reference interpreter's either way.
TEST(InPlaceOutputs, OrderingCallsRealizeReadersFirst) {
    loom::testing::GraphBuilder b;
    std::string w = b.input("w", {8, 8}), x = b.input("x", {8, 8});
    b.out("Sub", {w, x}, {8, 8}, {}, DType::F32, "u");
    b.out("MatMul", {x, w}, {8, 8}, {}, DType::F32, "r");
    auto lowered = [&] {
        LoweredPipeline lp = lower_graph(b.g);
        for (auto &f : lp.funcs) f.func.compute_root();
        return lp;
    };
    auto why = [&](const LoweredPipeline &lp) {
        std::vector<Halide::Argument> args(lp.inputs.begin(), lp.inputs.end());
        return reasons(lp.pipeline(), args, {{lp.inputs[0].name(), lp.realized_output(0).name()}})[0];
    };
    LoweredPipeline plain = lowered();
    EXPECT_EQ(why(plain), "the input is read after the output's production");
    LoweredPipeline ordered = lowered();
    EXPECT_EQ(order_reads_before_outputs(ordered, {{0, 0}}), 1);
    EXPECT_EQ(why(ordered), "");
    std::map<std::string, Tensor> in = random_inputs(b.g, 7);
    std::map<std::string, Tensor> want = run_reference(b.g, in);
    JitModel m(std::move(ordered));
    std::map<std::string, Tensor> got = m.run(in);
    for (const auto &o : b.g.outputs) EXPECT_TRUE(loom::testing::close(got.at(o), want.at(o), 1e-6)) << o;
}

}  // namespace
}  // namespace loom
