// Lowering driver and JIT: names, vars, estimates, producer/consumer lists, output copies,
// constants, and running a lowered pipeline end to end against the reference interpreter.
#include <gtest/gtest.h>

#include <fstream>

#include "codegen/jit.h"
#include "lower/flat_row_index.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "support/error.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

using Builder = loom::testing::GraphBuilder;

std::map<std::string, Tensor> jit_run(const Graph &g, const std::map<std::string, Tensor> &in) {
    LoweredPipeline lp = lower_graph(g);
    for (auto &f : lp.funcs) f.func.compute_root();
    JitModel m(std::move(lp));
    return m.run(in);
}

// A conv's zero-padded input (`<conv>_pad`; MobileNet's stride-2 depthwise shape) is written in
// dense vectors away from its border: Halide's loop partitioning must find a steady state without
// the clamp of the read index, which would turn every vector read into a gather.
TEST(Lower, PaddedConvInputIsReadInDenseVectors) {
    Builder b;
    std::string x = b.input("x", {1, 4, 112, 112});
    std::string w = b.random_constant("w", {4, 1, 3, 3}, 7);
    b.out("Conv", {x, w}, {1, 4, 56, 56},
          {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}},
           {"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t(4)}});
    LoweredPipeline lp = lower_graph(b.g);
    LoweredFunc *pad = nullptr;
    for (auto &f : lp.funcs) {
        f.func.compute_root();
        if (f.name.size() > 4 && f.name.compare(f.name.size() - 4, 4, "_pad") == 0) pad = &f;
    }
    ASSERT_NE(pad, nullptr);
    pad->func.vectorize(Halide::Var(pad->vars.back()), 8);
    std::vector<Halide::Func> outs;
    for (const auto &o : lp.output_funcs) outs.push_back(lp.find(o)->func);
    std::vector<Halide::Argument> args(lp.inputs.begin(), lp.inputs.end());
    const std::string stmt = loom::testing::temp_path("padded_conv.stmt");
    Halide::Pipeline(outs).compile_to_lowered_stmt(stmt, args, Halide::StmtOutputFormat::Text,
                                                   Halide::Target("x86-64-linux-avx-avx2-fma-f16c-sse41"));
    std::ifstream in(stmt);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t at = text.find("produce " + pad->name);
    ASSERT_NE(at, std::string::npos) << text;
    std::string body = text.substr(at, text.find("consume " + pad->name, at) - at);
    // The steady state stores whole vectors loaded densely; only the border rows and columns select.
    EXPECT_NE(body.find("] = x["), std::string::npos) << body;
    EXPECT_EQ(body.find("max(ramp("), std::string::npos) << body;
    EXPECT_EQ(body.find("min(ramp("), std::string::npos) << body;
}

TEST(Lower, Names) {
    EXPECT_EQ(sanitize_name("/encoder/fc1/Gemm"), "encoder_fc1_gemm");
    EXPECT_EQ(sanitize_name("onnx::Add_12"), "onnx_add_12");
    EXPECT_EQ(sanitize_name("123"), "v123");
    EXPECT_EQ(sanitize_name("__a__b__"), "a_b");
    EXPECT_EQ(sanitize_name(""), "v");
    EXPECT_EQ(var_names_for_rank(4), (std::vector<std::string>{"n", "c", "h", "w"}));
    EXPECT_EQ(var_names_for_rank(3), (std::vector<std::string>{"b", "i", "j"}));
    EXPECT_EQ(var_names_for_rank(7).back(), "d6");
}

TEST(Lower, PipelineStructure) {
    Builder b;
    std::string x = b.input("input.1", {3, 5});
    std::string w = b.constant("w", Tensor::from_doubles(DType::F32, {5}, {1, 2, 3, 4, 5}));
    std::string a = b.node("Add", {x, w}, {3, 5}, {}, DType::F32, "/enc/Add");
    std::string r = b.node("Relu", {a}, {3, 5}, {}, DType::F32, "/enc/Relu");
    std::string s = b.node("Sigmoid", {a}, {3, 5}, {}, DType::F32, "enc_add");  // name clash
    b.output(r);
    b.output(s);
    b.output(r);  // same value twice: second gets a copy Func
    b.output(x);  // an input as output: copy Func
    b.output(w);  // a constant as output: copy Func
    LoweredPipeline lp = lower_graph(b.g);

    ASSERT_EQ(lp.inputs.size(), 1u);
    EXPECT_EQ(lp.inputs[0].name(), "input_1");
    EXPECT_EQ(lp.inputs[0].dimensions(), 2);
    const LoweredFunc *add = lp.find("enc_add");
    ASSERT_NE(add, nullptr);
    EXPECT_EQ(add->op, "Add");
    EXPECT_EQ(add->vars, (std::vector<std::string>{"i", "j"}));
    EXPECT_EQ(add->extents, (Shape{3, 5}));
    EXPECT_EQ(add->input_reads, (std::vector<std::string>{"input.1"}));
    EXPECT_TRUE(add->producers.empty());
    EXPECT_EQ(add->consumers.size(), 2u);
    EXPECT_TRUE(add->is_pointwise);
    EXPECT_FALSE(add->is_output);
    ASSERT_NE(lp.find("enc_add_2"), nullptr);  // the clashing node got a unique name
    EXPECT_EQ(lp.find("enc_add_2")->op, "Sigmoid");
    const LoweredFunc *relu = lp.find("enc_relu");
    ASSERT_NE(relu, nullptr);
    EXPECT_EQ(relu->producers, (std::vector<std::string>{"enc_add"}));
    EXPECT_TRUE(relu->is_output);
    // Halide's vars carry the schedule names.
    EXPECT_EQ(relu->func.args()[0].name(), "j");
    EXPECT_EQ(relu->func.args()[1].name(), "i");

    ASSERT_EQ(lp.output_funcs.size(), 5u);
    EXPECT_EQ(lp.output_funcs[0], "enc_relu");
    EXPECT_NE(lp.output_funcs[2], "enc_relu");
    std::set<std::string> distinct(lp.output_funcs.begin(), lp.output_funcs.end());
    EXPECT_EQ(distinct.size(), 5u);
    // producers before consumers
    std::set<std::string> seen;
    for (const auto &f : lp.funcs) {
        for (const auto &p : f.producers) EXPECT_TRUE(seen.count(p)) << f.name << " before " << p;
        seen.insert(f.name);
    }
    std::vector<std::string> all = lp.func_names();
    std::set<std::string> names(all.begin(), all.end());
    EXPECT_EQ(names.size(), lp.funcs.size());

    Tensor xin(DType::F32, {3, 5});
    fill_random(xin, 1);
    JitModel m(std::move(lp));
    EXPECT_GT(m.compile_seconds(), 0);
    auto outs = m.run({{"input.1", xin}});
    auto ref = run_reference(b.g, {{"input.1", xin}});
    ASSERT_EQ(outs.size(), 4u);  // r appears twice in the graph outputs but once by name
    for (const auto &[name, t] : ref) EXPECT_TRUE(close(outs.at(name), t)) << name;
    EXPECT_GE(m.last_run_ms(), 0);
    EXPECT_EQ(m.time_runs({{"input.1", xin}}, 2).size(), 2u);
    // Timed runs reuse their output buffers without re-poisoning them: each run must still write
    // every element, so a second input's outputs replace the first's everywhere.
    Tensor x2(DType::F32, {3, 5});
    fill_random(x2, 2);
    EXPECT_GE(m.time_run({{"input.1", x2}}), 0);
    auto ref2 = run_reference(b.g, {{"input.1", x2}});
    const auto &out_names = m.lowered().output_names;
    ASSERT_EQ(m.timed_outputs().size(), out_names.size());
    for (size_t k = 0; k < out_names.size(); k++)
        EXPECT_TRUE(close(m.timed_outputs()[k], ref2.at(out_names[k]))) << out_names[k];
}

TEST(Lower, InputErrorsNameTheInput) {
    Builder b;
    std::string x = b.input("x", {2, 3});
    b.output(b.node("Relu", {x}, {2, 3}));
    JitModel m(lower_graph(b.g));
    Tensor wrong(DType::F32, {3, 2});
    try {
        m.run({{"x", wrong}});
        FAIL() << "no error";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("'x' has shape 3x2"), std::string::npos) << e.what();
    }
    try {
        m.run({{"y", wrong}});
        FAIL() << "no error";
    } catch (const UserError &e) {
        EXPECT_NE(std::string(e.what()).find("missing input 'x'"), std::string::npos) << e.what();
    }
}

TEST(Lower, BadScheduleIsAUserError) {
    Builder b;
    std::string x = b.input("x", {4, 4});
    std::string r = b.node("Relu", {x}, {4, 4});
    b.output(b.node("Neg", {r}, {4, 4}));
    LoweredPipeline lp = lower_graph(b.g);
    // compute_at a var the consumer does not have: Halide rejects it at compile time.
    lp.funcs[0].func.compute_at(lp.funcs[1].func, Halide::Var("nope"));
    EXPECT_THROW(JitModel m(std::move(lp)), UserError);
}

TEST(Lower, JitCacheBuildsOnce) {
    Builder b;
    std::string x = b.input("x", {7});
    b.output(b.node("Exp", {x}, {7}));
    JitKey key{graph_fingerprint(b.g), "", host_target().to_string()};
    int builds = 0;
    auto build = [&] {
        builds++;
        return std::make_unique<JitModel>(lower_graph(b.g));
    };
    JitModel &a = jit_cache_get(key, build);
    JitModel &c = jit_cache_get(key, build);
    EXPECT_EQ(&a, &c);
    EXPECT_EQ(builds, 1);
    Builder b2 = b;
    b2.g.nodes[0].op = "Log";
    EXPECT_NE(graph_fingerprint(b2.g), key.graph);
}

TEST(Lower, BoolAndIntInputsOutputs) {
    Builder b;
    std::string x = b.input("x", {2, 9});
    std::string y = b.input("y", {9});
    std::string m = b.input("m", {2, 1}, DType::Bool);
    std::string k = b.input("k", {2, 9}, DType::I64);
    std::string lt = b.node("Less", {x, y}, {2, 9}, {}, DType::Bool);
    std::string both = b.node("And", {lt, m}, {2, 9}, {}, DType::Bool);
    std::string w = b.node("Where", {both, x, y}, {2, 9});
    std::string kk = b.node("Add", {k, k}, {2, 9}, {}, DType::I64);
    b.output(both);
    b.output(w);
    b.output(kk);
    auto in = random_inputs(b.g, 5);
    auto outs = jit_run(b.g, in);
    auto ref = run_reference(b.g, in);
    for (const auto &[name, t] : ref) {
        EXPECT_EQ(outs.at(name).dtype(), b.g.value(name).dtype) << name;
        EXPECT_TRUE(close(outs.at(name), t)) << name;
    }
}

// A merge of dims read as flat rows: a load index with (x % 16)·512 + (x / 16)·8192, spelled as a
// GEMM's split k loop leaves it (the modulo of 4·x + 1 against 64, the divide through a let), becomes
// x·512 plus the rest, equal to the original for every x (negative ones too); an index whose
// coefficients are no such pair keeps its divide and modulo.
TEST(FlatRowIndex, FoldsTheDivideAndModuloOfOneRow) {
    using namespace Halide::Internal;
    using Halide::Expr;
    const Halide::Type i32 = Halide::Int(32);
    Expr x = Variable::make(i32, "x"), y = Variable::make(i32, "y"), row = Variable::make(i32, "row");
    auto load = [&](Expr index) { return Load::make(Halide::Float(32), "buf", index, Halide::Buffer<>(),
                                                    Halide::Internal::Parameter(), const_true(), ModulusRemainder()); };
    // row = x / 16 + 7 (a let, as Halide's CSE leaves it); the modulo of the unrolled k step 1.
    Expr paired = ((x * 4 + 1) % 64) * 128 + row * 8192 + y;
    Expr unpaired = (x % 16) * 512 + (x / 16) * 4096 + y;
    auto stmt_of = [&](Expr index) {
        return LetStmt::make("row", x / 16 + 7, Evaluate::make(load(index)));
    };
    struct Loads : public IRVisitor {
        std::vector<Expr> indices;
        using IRVisitor::visit;
        void visit(const Load *op) override { indices.push_back(op->index); }
    };
    struct DivMod : public IRVisitor {
        bool found = false;
        using IRVisitor::visit;
        void visit(const Div *) override { found = true; }
        void visit(const Mod *) override { found = true; }
    };
    auto has_divmod = [](const Expr &e) {
        DivMod v;
        e.accept(&v);
        return v.found;
    };
    Loads folded, kept;
    flat_row_indices(stmt_of(paired)).accept(&folded);
    flat_row_indices(stmt_of(unpaired)).accept(&kept);
    ASSERT_EQ(folded.indices.size(), 1u);
    ASSERT_EQ(kept.indices.size(), 1u);
    EXPECT_FALSE(has_divmod(folded.indices[0])) << folded.indices[0];
    EXPECT_TRUE(equal(kept.indices[0], unpaired)) << kept.indices[0];
    for (int xv = -200; xv <= 200; xv += 7)
        for (int yv : {-3, 0, 5}) {
            std::map<std::string, Expr> at = {{"x", xv}, {"y", yv}};
            Expr want = simplify(substitute(at, substitute("row", x / 16 + 7, paired)));
            Expr got = simplify(substitute(at, folded.indices[0]));
            ASSERT_TRUE(is_const(want) && is_const(got)) << want << " " << got;
            EXPECT_TRUE(equal(want, got)) << "x=" << xv << " y=" << yv << ": " << want << " against " << got;
        }
}

// A divide and modulo of one row by a moving extent (a Variable, as a model compiled for every size
// spells `size_seq`), with the divide's coefficient a multiple of the modulo's: nothing to fold
// (no constant divisor), the index kept as it is rather than a crash reading that divisor.
TEST(FlatRowIndex, KeepsADivideAndModuloByAMovingExtent) {
    using namespace Halide::Internal;
    using Halide::Expr;
    const Halide::Type i32 = Halide::Int(32);
    Expr x = Variable::make(i32, "x"), n = Variable::make(i32, "size_seq");
    Expr index = (x % n) * 64 + (x / n) * 64;
    Stmt s = Evaluate::make(Load::make(Halide::Float(32), "buf", index, Halide::Buffer<>(), Parameter(), const_true(),
                                       ModulusRemainder()));
    Stmt out = flat_row_indices(s);
    const Evaluate *e = out.as<Evaluate>();
    ASSERT_NE(e, nullptr);
    const Load *l = e->value.as<Load>();
    ASSERT_NE(l, nullptr);
    EXPECT_TRUE(equal(l->index, index)) << l->index;
}

}  // namespace
}  // namespace loom
