// The ONNX importer: every fixture under tests/data imports into the expected raw graph, the
// attribute/initializer/Constant forms convert exactly, and every user error names the culprit
// and the fix. Error cases build their ModelProtos in C++.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "frontends/onnx/onnx_import.h"
#include "support/tensor_file_name.h"
#include "graph/npy.h"
#include "graph/passes.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "support/error.h"
#include "test_util.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using loom::testing::user_error_of;
using Histogram = std::map<std::string, int>;

Histogram op_histogram(const Graph &g) {
    Histogram h;
    for (const auto &n : g.nodes) h[n.op]++;
    return h;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string &name) {
    fs::path d = fs::temp_directory_path() / ("loom_test_onnx_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return (d / name).string();
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

// --- fixtures ---------------------------------------------------------------------------------

struct Fixture {
    std::string name;
    int opset;
    int nodes;
    int initializers;
    std::vector<std::string> inputs, outputs;
    Histogram ops;
};

const std::vector<Fixture> &fixtures() {
    static const std::vector<Fixture> f = {
        {"mlp", 13, 9, 9, {"x"}, {"y"},
         {{"Gemm", 3}, {"Relu", 1}, {"Div", 1}, {"Erf", 1}, {"Add", 1}, {"Mul", 2}}},
        {"dynamic_mlp", 13, 9, 9, {"x"}, {"y"},
         {{"Gemm", 3}, {"Relu", 1}, {"Div", 1}, {"Erf", 1}, {"Add", 1}, {"Mul", 2}}},
        {"cnn", 13, 17, 20, {"x"}, {"y"},
         {{"AveragePool", 1}, {"BatchNormalization", 3}, {"Clip", 1}, {"Conv", 3}, {"Flatten", 1},
          {"Gemm", 1}, {"GlobalAveragePool", 1}, {"MaxPool", 1}, {"Pad", 1}, {"Relu", 3},
          {"Softmax", 1}}},
        {"inverted_residual", 13, 11, 19, {"x"}, {"y"},
         {{"Add", 1}, {"BatchNormalization", 3}, {"Clip", 2}, {"Conv", 3}, {"Relu", 2}}},
        {"cnn_opset9", 9, 17, 17, {"x"}, {"y"},
         {{"AveragePool", 1}, {"BatchNormalization", 3}, {"Clip", 1}, {"Conv", 3}, {"Flatten", 1},
          {"Gemm", 1}, {"GlobalAveragePool", 1}, {"MaxPool", 1}, {"Pad", 1}, {"Relu", 3},
          {"Softmax", 1}}},
        {"transformer", 16, 46, 25, {"x"}, {"y"},
         {{"Add", 11}, {"Div", 4}, {"Erf", 1}, {"MatMul", 6}, {"Mul", 4}, {"Pow", 2},
          {"ReduceMean", 4}, {"Reshape", 4}, {"Softmax", 1}, {"Split", 1}, {"Sqrt", 2},
          {"Sub", 2}, {"Transpose", 4}}},
        {"sigmoid_affine", 13, 3, 0, {"x", "w", "b"}, {"y"}, {{"Mul", 1}, {"Add", 1}, {"Sigmoid", 1}}},
        {"sum_prologue", 13, 3, 1, {"x", "y", "z"}, {"out"}, {{"Add", 1}, {"Mul", 1}, {"ReduceSum", 1}}},
        {"softmax_rows", 13, 1, 0, {"x"}, {"y"}, {{"Softmax", 1}}},
        {"layernorm_rows", 13, 9, 4, {"x"}, {"y"},
         {{"Add", 2}, {"Div", 1}, {"Mul", 1}, {"Pow", 1}, {"ReduceMean", 2}, {"Sqrt", 1}, {"Sub", 1}}},
    };
    return f;
}

class ImportFixture : public ::testing::TestWithParam<Fixture> {};

TEST_P(ImportFixture, StructureMatchesTheExport) {
    const Fixture &f = GetParam();
    Graph g = import_onnx(testing::data_path(f.name + ".onnx"));
    EXPECT_EQ(g.opset, f.opset);
    EXPECT_EQ((int)g.nodes.size(), f.nodes);
    EXPECT_EQ((int)g.initializers.size(), f.initializers);
    EXPECT_EQ(g.inputs, f.inputs);
    EXPECT_EQ(g.outputs, f.outputs);
    EXPECT_EQ(op_histogram(g), f.ops);
    EXPECT_EQ(g.name, "torch_jit");
    EXPECT_NO_THROW(g.validate());
    // Every node output has a ValueInfo; intermediates are not shaped yet.
    for (const auto &n : g.nodes) {
        EXPECT_FALSE(n.name.empty());
        for (const auto &o : n.outputs) {
            ASSERT_TRUE(g.has_value(o)) << o;
            bool is_output = std::find(g.outputs.begin(), g.outputs.end(), o) != g.outputs.end();
            if (!is_output) {
                EXPECT_FALSE(g.value(o).has_shape) << o;
            }
        }
    }
    // Inputs are typed and shaped like the .npy inputs saved with the fixture.
    for (const auto &in : g.inputs) {
        Tensor t = read_npy(testing::data_path(f.name + "/" + in + ".npy"));
        const ValueInfo &vi = g.value(in);
        EXPECT_TRUE(vi.has_shape);
        EXPECT_EQ(vi.dtype, DType::F32);
        ASSERT_EQ(vi.shape.size(), t.shape().size()) << in;
        for (size_t d = 0; d < vi.shape.size(); d++)
            if (vi.shape[d] >= 0) {
                EXPECT_EQ(vi.shape[d], t.shape()[d]) << in << " dim " << d;
            }
    }
    for (const auto &out : g.outputs) {
        Tensor t = read_npy(testing::data_path(f.name + "/expected_" + out + ".npy"));
        EXPECT_EQ(g.value(out).shape.size(), t.shape().size());
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ImportFixture, ::testing::ValuesIn(fixtures()),
                         [](const auto &info) { return info.param.name; });

// The imported weights and attributes are right if the reference interpreter, run on the prepared
// graph, gives PyTorch's outputs on the inputs saved with the fixture.
TEST_P(ImportFixture, ReproducesPyTorchThroughTheReference) {
    const Fixture &f = GetParam();
    Graph g = import_onnx(testing::data_path(f.name + ".onnx"));
    std::map<std::string, Tensor> inputs;
    PrepareOptions opts;
    for (const auto &in : g.inputs) {
        inputs[in] = read_npy(testing::data_path(f.name + "/" + in + ".npy"));
        opts.bindings[in] = inputs[in].shape();
    }
    prepare_graph(g, opts);
    auto outputs = run_reference(g, inputs);
    for (const auto &out : f.outputs) {
        ASSERT_TRUE(outputs.count(out)) << out;
        Tensor expected = read_npy(testing::data_path(f.name + "/expected_" + out + ".npy"));
        EXPECT_TRUE(testing::close(outputs.at(out), expected, 1e-5, 1e-4)) << f.name << " " << out;
    }
}

TEST(OnnxImport, DynamicBatchIsSymbolic) {
    Graph g = import_onnx(testing::data_path("dynamic_mlp.onnx"));
    const ValueInfo &x = g.value("x");
    EXPECT_EQ(x.shape, (Shape{-1, 64}));
    EXPECT_EQ(x.symbols, (std::vector<std::string>{"batch", ""}));
    EXPECT_EQ(g.value("y").symbols, (std::vector<std::string>{"batch", ""}));
    Graph s = import_onnx(testing::data_path("mlp.onnx"));
    EXPECT_EQ(s.value("x").shape, (Shape{4, 64}));
    EXPECT_TRUE(s.value("x").symbols.empty());
}

TEST(OnnxImport, AttributesAndWeightsConvert) {
    Graph g = import_onnx(testing::data_path("cnn.onnx"));
    const Node *conv = g.find_node("/dw/dw.0/Conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->get_int("group", 0), 32);
    EXPECT_EQ(conv->get_ints("kernel_shape"), (std::vector<int64_t>{3, 3}));
    EXPECT_EQ(conv->get_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    const Node *bn = g.find_node("/dw/dw.1/BatchNormalization");
    ASSERT_NE(bn, nullptr);
    EXPECT_NEAR(bn->get_float("epsilon", 0), 1e-5, 1e-10);
    EXPECT_EQ(bn->inputs.size(), 5u);
    EXPECT_EQ(g.constant("dw.0.weight")->shape(), (Shape{32, 1, 3, 3}));
    EXPECT_EQ(g.constant("fc.weight")->shape(), (Shape{10, 32}));
    // running_var was set to values in [0.25, 1.75): the raw data arrived intact.
    for (double v : g.constant("dw.1.running_var")->to_doubles()) EXPECT_TRUE(v >= 0.25 && v < 1.75);
    EXPECT_EQ(g.find_node("/fc/Gemm")->get_int("transB", 0), 1);
    // Clip's min/max are Constant nodes at opset 13: now initializers feeding the Clip.
    const Node *clip = g.find_node("/Clip");
    ASSERT_NE(clip, nullptr);
    ASSERT_EQ(clip->inputs.size(), 3u);
    EXPECT_EQ(g.constant(clip->inputs[2])->get(0), 6.0);

    Graph old = import_onnx(testing::data_path("cnn_opset9.onnx"));
    EXPECT_EQ(old.find_node("/Clip")->get_float("max", 0), 6.0);
    EXPECT_EQ(old.find_node("/avg/Pad")->get_string("mode", ""), "constant");
    EXPECT_EQ(old.find_node("/avg/Pad")->get_ints("pads").size(), 8u);
    EXPECT_FALSE(old.has_value("stem.0.weight") && !old.is_constant("stem.0.weight"));

    Graph t = import_onnx(testing::data_path("transformer.onnx"));
    int reshapes = 0;
    for (const auto &n : t.nodes) {
        if (n.op == "Transpose") {
            EXPECT_EQ(n.get_ints("perm").size(), 4u) << n.name;
        }
        if (n.op == "Reshape") {
            const Tensor *shape = t.constant(n.inputs[1]);
            ASSERT_NE(shape, nullptr) << n.name;
            EXPECT_EQ(shape->dtype(), DType::I64);
            reshapes++;
        }
    }
    EXPECT_EQ(reshapes, 4);
}

TEST(OnnxImport, NodesAreTopologicallySorted) {
    for (const auto &f : fixtures()) {
        Graph g = import_onnx(testing::data_path(f.name + ".onnx"));
        for (size_t i = 0; i < g.nodes.size(); i++)
            for (const auto &in : g.nodes[i].inputs)
                if (!in.empty()) {
                    EXPECT_LT(g.producer(in), (int)i) << f.name << " " << in;
                }
    }
}

// --- models built in C++ ----------------------------------------------------------------------

onnx::ValueInfoProto value_info(const std::string &name, std::vector<int64_t> dims, int type = 1) {
    onnx::ValueInfoProto v;
    v.set_name(name);
    auto *tt = v.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
    return v;
}

onnx::NodeProto *add_node(onnx::GraphProto *g, const std::string &op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string &name = "") {
    auto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto &i : in) n->add_input(i);
    for (auto &o : out) n->add_output(o);
    return n;
}

// x:[2,3] -> Relu 'relu' -> y
onnx::ModelProto tiny_model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    auto *op = m.add_opset_import();
    op->set_domain("");
    op->set_version(13);
    auto *g = m.mutable_graph();
    g->set_name("tiny");
    *g->add_input() = value_info("x", {2, 3});
    add_node(g, "Relu", {"x"}, {"y"}, "relu");
    *g->add_output() = value_info("y", {2, 3});
    return m;
}

Graph import_model(const onnx::ModelProto &m, const std::string &name = "tiny.onnx") {
    return import_onnx_bytes(m.SerializeAsString(), name);
}

TEST(OnnxImport, TinyModel) {
    Graph g = import_model(tiny_model());
    EXPECT_EQ(g.name, "tiny");
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].name, "relu");
    EXPECT_EQ(g.value("y").shape, (Shape{2, 3}));
}

TEST(OnnxImport, UnnamedAndDuplicateNodesGetUniqueNames) {
    onnx::ModelProto m = tiny_model();
    auto *g = m.mutable_graph();
    add_node(g, "Relu", {"y"}, {"y2"});             // node 1: unnamed -> Relu_1
    add_node(g, "Neg", {"y2"}, {"y3"}, "relu");     // duplicate of node 0's name
    add_node(g, "Abs", {"y3"}, {"y4"}, "Relu_1");   // a given name equal to a generated one
    g->mutable_output(0)->set_name("y4");
    Graph r = import_model(m);
    std::vector<std::string> names;
    for (const auto &n : r.nodes) names.push_back(n.name);
    EXPECT_EQ(names, (std::vector<std::string>{"relu", "Relu_1_1", "relu_1", "Relu_1"}));
}

TEST(OnnxImport, InitializerEncodingsAndConstantForms) {
    onnx::ModelProto m = tiny_model();
    auto *g = m.mutable_graph();
    auto add_init = [&](const std::string &name, int type, std::vector<int64_t> dims) {
        auto *t = g->add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        for (int64_t d : dims) t->add_dims(d);
        return t;
    };
    auto *f = add_init("f", 1, {2});
    f->add_float_data(1.5f), f->add_float_data(-2.0f);
    auto *d = add_init("d", 11, {1});
    d->add_double_data(0.125);
    auto *i = add_init("i", 7, {2});
    i->add_int64_data(INT64_MAX), i->add_int64_data(-3);
    auto *h = add_init("h", 10, {1});
    h->add_int32_data(0x3c00);  // 1.0 in half
    auto *b = add_init("b", 9, {3});
    b->add_int32_data(1), b->add_int32_data(0), b->add_int32_data(1);
    auto *s8 = add_init("s8", 3, {2});
    s8->add_int32_data(-128), s8->add_int32_data(127);
    auto *raw = add_init("raw", 6, {2});
    int32_t rv[2] = {7, -9};
    raw->set_raw_data(std::string((const char *)rv, 8));
    // An initializer also listed as a graph input (IR < 4 style) stays a constant.
    *g->add_input() = value_info("f", {2});

    auto constant = [&](const std::string &out, const std::string &attr) {
        auto *a = add_node(g, "Constant", {}, {out})->add_attribute();
        a->set_name(attr);
        return a;
    };
    auto *c1 = constant("c_float", "value_float");
    c1->set_type(onnx::AttributeProto::FLOAT), c1->set_f(2.5f);
    auto *c2 = constant("c_ints", "value_ints");
    c2->set_type(onnx::AttributeProto::INTS), c2->add_ints(4), c2->add_ints(5);
    auto *c3 = constant("c_int", "value_int");
    c3->set_type(onnx::AttributeProto::INT), c3->set_i(-7);
    auto *c4 = constant("c_floats", "value_floats");
    c4->set_type(onnx::AttributeProto::FLOATS), c4->add_floats(0.5f);
    auto *c5 = constant("c_tensor", "value");
    c5->set_type(onnx::AttributeProto::TENSOR);
    c5->mutable_t()->set_data_type(7), c5->mutable_t()->add_int64_data(42);

    auto *n = add_node(g, "LeakyRelu", {"y"}, {"z"}, "leaky");
    auto *alpha = n->add_attribute();
    alpha->set_name("alpha"), alpha->set_type(onnx::AttributeProto::FLOAT), alpha->set_f(0.25f);
    auto *names = n->add_attribute();
    names->set_name("tags"), names->set_type(onnx::AttributeProto::STRINGS), names->add_strings("a");
    auto *fl = n->add_attribute();
    fl->set_name("scales"), fl->set_type(onnx::AttributeProto::FLOATS), fl->add_floats(2.0f);
    *g->add_output() = value_info("z", {2, 3});

    Graph r = import_model(m);
    EXPECT_EQ(r.inputs, (std::vector<std::string>{"x"}));
    EXPECT_EQ(r.constant("f")->to_doubles(), (std::vector<double>{1.5, -2.0}));
    EXPECT_EQ(r.constant("d")->dtype(), DType::F64);
    EXPECT_EQ(r.constant("d")->get(0), 0.125);
    EXPECT_EQ(r.constant("i")->get_int(0), INT64_MAX);
    EXPECT_EQ(r.constant("h")->dtype(), DType::F16);
    EXPECT_EQ(r.constant("h")->get(0), 1.0);
    EXPECT_EQ(r.constant("b")->to_ints(), (std::vector<int64_t>{1, 0, 1}));
    EXPECT_EQ(r.constant("s8")->to_ints(), (std::vector<int64_t>{-128, 127}));
    EXPECT_EQ(r.constant("raw")->to_ints(), (std::vector<int64_t>{7, -9}));
    EXPECT_EQ(r.constant("c_float")->shape(), Shape{});
    EXPECT_EQ(r.constant("c_float")->get(0), 2.5);
    EXPECT_EQ(r.constant("c_ints")->to_ints(), (std::vector<int64_t>{4, 5}));
    EXPECT_EQ(r.constant("c_int")->dtype(), DType::I64);
    EXPECT_EQ(r.constant("c_int")->get_int(0), -7);
    EXPECT_EQ(r.constant("c_floats")->to_doubles(), (std::vector<double>{0.5}));
    EXPECT_EQ(r.constant("c_tensor")->get_int(0), 42);
    for (const auto &node : r.nodes) EXPECT_NE(node.op, "Constant");
    const Node *leaky = r.find_node("leaky");
    EXPECT_EQ(leaky->get_float("alpha", 0), 0.25);
    EXPECT_EQ(std::get<std::vector<std::string>>(leaky->attrs.at("tags")),
              (std::vector<std::string>{"a"}));
    EXPECT_EQ(leaky->get_floats("scales"), (std::vector<double>{2.0}));
}

// --- user errors ------------------------------------------------------------------------------

TEST(OnnxImportErrors, MissingFile) {
    std::string msg = user_error_of([] { import_onnx("/no/such/dir/resnet.onnx"); });
    EXPECT_HAS(msg, "/no/such/dir/resnet.onnx");
    EXPECT_HAS(msg, "no such file");
}

TEST(OnnxImportErrors, TruncatedFile) {
    std::string bytes = read_file(testing::data_path("mlp.onnx"));
    std::string path = temp_path("half_mlp.onnx");
    std::ofstream(path, std::ios::binary).write(bytes.data(), (std::streamsize)bytes.size() / 2);
    std::string msg = user_error_of([&] { import_onnx(path); });
    EXPECT_HAS(msg, path);
    EXPECT_HAS(msg, "truncated");
    EXPECT_HAS(msg, "re-export");
}

TEST(OnnxImportErrors, GarbageBytes) {
    std::string msg = user_error_of([] { import_onnx_bytes(std::string("\xff\xff\xff\xff garbage", 12), "junk.onnx"); });
    EXPECT_HAS(msg, "junk.onnx");
    EXPECT_HAS(msg, "not an ONNX protobuf");
    EXPECT_HAS(user_error_of([] { import_onnx_bytes("", "empty.onnx"); }), "empty.onnx: the file is empty");
    onnx::ModelProto no_graph;
    no_graph.set_ir_version(8);
    EXPECT_HAS(user_error_of([&] { import_model(no_graph, "nograph.onnx"); }), "nograph.onnx: the file holds no ONNX graph");
    EXPECT_HAS(user_error_of([] { import_onnx(fs::temp_directory_path().string()); }), "is a directory");
}

TEST(OnnxImportErrors, UnsupportedOpNamesOpNodeOpsetAndSupportedOps) {
    onnx::ModelProto m = tiny_model();
    add_node(m.mutable_graph(), "FooBar", {"y"}, {"z"}, "my_foo");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "tiny.onnx");
    EXPECT_HAS(msg, "'FooBar'");
    EXPECT_HAS(msg, "my_foo");
    EXPECT_HAS(msg, "opset 13");
    EXPECT_HAS(msg, "supported ops: Abs Add");
    EXPECT_HAS(msg, "Softmax");

    onnx::ModelProto typo = tiny_model();
    add_node(typo.mutable_graph(), "Rellu", {"y"}, {"z"});
    msg = user_error_of([&] { import_model(typo); });
    EXPECT_HAS(msg, "Rellu 'Rellu_1'");
    EXPECT_HAS(msg, "did you mean 'Relu'");
}

TEST(OnnxImportErrors, NonDefaultDomain) {
    onnx::ModelProto m = tiny_model();
    add_node(m.mutable_graph(), "FusedGemm", {"y"}, {"z"}, "fused")->set_domain("com.microsoft");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "FusedGemm 'fused'");
    EXPECT_HAS(msg, "'com.microsoft'");
    EXPECT_HAS(msg, "default ONNX domain");
}

TEST(OnnxImportErrors, GraphOutputProducedByNobody) {
    onnx::ModelProto m = tiny_model();
    *m.mutable_graph()->add_output() = value_info("logits", {2, 3});
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "tiny.onnx");
    EXPECT_HAS(msg, "graph output 'logits' is produced by no node");
    EXPECT_HAS(msg, "output_names");
}

TEST(OnnxImportErrors, NodeReadsUndefinedTensor) {
    onnx::ModelProto m = tiny_model();
    add_node(m.mutable_graph(), "Add", {"y", "bias"}, {"z"}, "add_bias");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "Add 'add_bias'");
    EXPECT_HAS(msg, "'bias'");
    EXPECT_HAS(msg, "no node, graph input or initializer defines");
    EXPECT_HAS(msg, "declare it as a graph input");
}

TEST(OnnxImportErrors, MissingInitializerSuggestsTheCloseName) {
    onnx::ModelProto m = tiny_model();
    auto *g = m.mutable_graph();
    auto *w = g->add_initializer();
    w->set_name("fc.weights");
    w->set_data_type(1);
    w->add_dims(3), w->add_dims(3);
    for (int i = 0; i < 9; i++) w->add_float_data(1);
    add_node(g, "Gemm", {"y", "fc.weight"}, {"z"}, "fc");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "Gemm 'fc' reads 'fc.weight'");
    EXPECT_HAS(msg, "did you mean 'fc.weights'");
    EXPECT_HAS(msg, "export_params=True");
}

TEST(OnnxImportErrors, ExternalDataSaysHowToInline) {
    onnx::ModelProto m = tiny_model();
    auto *w = m.mutable_graph()->add_initializer();
    w->set_name("big_weight");
    w->set_data_type(1);
    w->add_dims(1000);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *e = w->add_external_data();
    e->set_key("location"), e->set_value("weights.bin");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "initializer 'big_weight'");
    EXPECT_HAS(msg, "external file");
    EXPECT_HAS(msg, "save_as_external_data=False");
    EXPECT_HAS(msg, "onnx.load('tiny.onnx')");
}

TEST(OnnxImportErrors, CorruptInitializerData) {
    onnx::ModelProto m = tiny_model();
    auto *w = m.mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(1);
    w->add_dims(4);
    w->set_raw_data(std::string(12, '\0'));
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "initializer 'w' (f32 4) has 12 bytes of raw_data; expected 16");

    onnx::ModelProto s = tiny_model();
    auto *str = s.mutable_graph()->add_initializer();
    str->set_name("labels");
    str->set_data_type(8);  // STRING
    msg = user_error_of([&] { import_model(s); });
    EXPECT_HAS(msg, "initializer 'labels'");
    EXPECT_HAS(msg, "not supported");
}

TEST(OnnxImportErrors, NoDefaultOpset) {
    onnx::ModelProto m = tiny_model();
    m.mutable_opset_import(0)->set_domain("ai.onnx.ml");
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "no opset of the default ONNX domain");
    EXPECT_HAS(msg, "'ai.onnx.ml'");
}

TEST(OnnxImportErrors, UnsupportedAttributeType) {
    onnx::ModelProto m = tiny_model();
    auto *a = add_node(m.mutable_graph(), "Relu", {"y"}, {"z"}, "r2")->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    std::string msg = user_error_of([&] { import_model(m); });
    EXPECT_HAS(msg, "Relu 'r2': attribute 'body'");
    EXPECT_HAS(msg, "GRAPH");
}

// --- hostile models ---------------------------------------------------------------------------
// Each model is built here, written to its own folder and imported from the file (then prepared),
// as `loom inspect` / `loom run` would; each must end in a UserError naming the culprit and the fix.

// Writes \p m to a fresh folder as model.onnx; returns its path.
std::string write_model(const onnx::ModelProto &m, const std::string &folder) {
    fs::path dir = fs::path(temp_path("hostile")) / folder;
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string path = (dir / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << m.SerializeAsString();
    return path;
}

// The UserError of importing and preparing \p m from a file in its own folder.
std::string hostile_error(const onnx::ModelProto &m, const std::string &folder) {
    std::string path = write_model(m, folder);
    return user_error_of([&] {
        Graph g = import_onnx(path);
        prepare_graph(g);
    });
}

onnx::TensorProto *add_initializer(onnx::GraphProto *g, const std::string &name, int type,
                                   std::vector<int64_t> dims) {
    auto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    return t;
}

// An initializer 'w' whose data lives in the external file \p location, read by a node.
onnx::ModelProto model_with_external_data(const std::string &location) {
    onnx::ModelProto m = tiny_model();
    auto *w = add_initializer(m.mutable_graph(), "w", 1, {2, 3});
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto *e = w->add_external_data();
    e->set_key("location"), e->set_value(location);
    add_node(m.mutable_graph(), "Add", {"y", "w"}, {"z"}, "add_w");
    return m;
}

TEST(HostileModels, ExternalDataNeverReadsOutsideTheModel) {
    // A file outside the model's folder that a hostile location could point at.
    std::string secret = temp_path("secret.bin");
    std::ofstream(secret, std::ios::binary) << std::string(24, '\x7f');
    int k = 0;
    for (const std::string &location : {std::string("../secret.bin"), secret, std::string("link.bin"),
                                        std::string("weights.bin")}) {
        std::string path = write_model(model_with_external_data(location), "external_" + std::to_string(k++));
        if (location == "link.bin")  // a symlink inside the folder that leads out of it
            fs::create_symlink(secret, fs::path(path).parent_path() / "link.bin");
        std::string msg = user_error_of([&] { import_onnx(path); });
        EXPECT_HAS(msg, path);
        EXPECT_HAS(msg, "initializer 'w'");
        EXPECT_HAS(msg, "('" + location + "')");
        EXPECT_HAS(msg, "Loom does not read");
        EXPECT_HAS(msg, "save_as_external_data=False");
    }
}

TEST(HostileModels, HugeDimsAreRefusedBeforeAllocating) {
    onnx::ModelProto m = tiny_model();
    add_initializer(m.mutable_graph(), "huge", 1, {int64_t(1) << 40})->set_raw_data(std::string(100, '\0'));
    std::string msg = hostile_error(m, "huge_dim");
    EXPECT_HAS(msg, "model.onnx: initializer 'huge' (f32 1099511627776) would take 4 TiB");
    EXPECT_HAS(msg, "over Loom's limit of 4 GiB per tensor");
    EXPECT_HAS(msg, "LOOM_MAX_TENSOR_BYTES=4096G");

    onnx::ModelProto overflow = tiny_model();  // 2^62 * 2^62 * 4 bytes wraps int64
    add_initializer(overflow.mutable_graph(), "wraps", 1, {int64_t(1) << 62, int64_t(1) << 62, 0x10});
    msg = hostile_error(overflow, "overflow_dim");
    EXPECT_HAS(msg, "initializer 'wraps'");
    EXPECT_HAS(msg, "more bytes than a 64-bit address space holds");

    onnx::ModelProto negative = tiny_model();
    add_initializer(negative.mutable_graph(), "neg", 1, {4, -3});
    msg = hostile_error(negative, "negative_dim");
    EXPECT_HAS(msg, "initializer 'neg' has a negative dim in shape [4x-3]");

    onnx::ModelProto neg_input = tiny_model();
    neg_input.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-5);
    msg = hostile_error(neg_input, "negative_input_dim");
    EXPECT_HAS(msg, "graph input 'x' has a negative dim -5");
}

TEST(HostileModels, SmallFileCannotClaimABigTensor) {
    // 10^9 floats (4 GB, under the limit) backed by 100 bytes: refused by the byte count, before
    // the 4 GB would be allocated.
    onnx::ModelProto raw = tiny_model();
    add_initializer(raw.mutable_graph(), "claims", 1, {1000000000})->set_raw_data(std::string(100, '\1'));
    std::string msg = hostile_error(raw, "claims_raw");
    EXPECT_HAS(msg, "initializer 'claims' (f32 1000000000) has 100 bytes of raw_data; expected 4000000000");
    EXPECT_HAS(msg, "re-export");

    onnx::ModelProto typed = tiny_model();
    auto *t = add_initializer(typed.mutable_graph(), "claims", 7, {500000000});  // INT64, 4 GB
    for (int i = 0; i < 12; i++) t->add_int64_data(i);
    msg = hostile_error(typed, "claims_typed");
    EXPECT_HAS(msg, "initializer 'claims' (i64 500000000) has 12 values in int64_data; expected 500000000");

    onnx::ModelProto odd = tiny_model();  // raw_data not a whole number of elements
    add_initializer(odd.mutable_graph(), "odd", 1, {2, 3})->set_raw_data(std::string(23, '\0'));
    EXPECT_HAS(hostile_error(odd, "odd_raw"), "initializer 'odd' (f32 2x3) has 23 bytes of raw_data; expected 24");
}

TEST(HostileModels, FileOverProtobufsLimitIsNotRead) {
    std::string path = temp_path("three_gib.onnx");
    std::ofstream(path, std::ios::binary) << "x";
    fs::resize_file(path, uintmax_t(3) << 30);  // sparse: no disk space used
    std::string msg = user_error_of([&] { import_onnx(path); });
    fs::remove(path);
    EXPECT_HAS(msg, path + ": the file is 3072 MiB, over the 2 GiB");
    EXPECT_HAS(msg, "external data");
}

TEST(HostileModels, HugeInputsAndIntermediatesNameTheCulprit) {
    onnx::ModelProto input = tiny_model();
    auto *dims = input.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    dims->mutable_dim(0)->set_dim_value(1 << 20), dims->mutable_dim(1)->set_dim_value(1 << 20);
    std::string msg = hostile_error(input, "huge_input");
    EXPECT_HAS(msg, "input 'x' (f32 1048576x1048576) would take 4 TiB");
    EXPECT_HAS(msg, "LOOM_MAX_TENSOR_BYTES");

    // A 100-byte model asking for a 16 GiB intermediate.
    onnx::ModelProto expand = tiny_model();
    auto *shape = add_initializer(expand.mutable_graph(), "big_shape", 7, {4});
    for (int64_t d : {int64_t(1) << 21, int64_t(1) << 10, int64_t(2), int64_t(3)}) shape->add_int64_data(d);
    add_node(expand.mutable_graph(), "Expand", {"y", "big_shape"}, {"z"}, "blow_up");
    *expand.mutable_graph()->mutable_output(0) = value_info("z", {1 << 21, 1 << 10, 2, 3});
    msg = hostile_error(expand, "huge_expand");
    EXPECT_HAS(msg, "Expand 'blow_up': output 'z' (f32 2097152x1024x2x3) would take 48 GiB");
    EXPECT_HAS(msg, "LOOM_MAX_TENSOR_BYTES=48G");

    // The limit is the user's to raise (preparing allocates nothing for a runtime intermediate).
    setenv("LOOM_MAX_TENSOR_BYTES", "64G", 1);
    Graph g = import_onnx(write_model(expand, "huge_expand_allowed"));
    EXPECT_NO_THROW(prepare_graph(g));
    setenv("LOOM_MAX_TENSOR_BYTES", "lots", 1);
    EXPECT_HAS(user_error_of([&] { max_tensor_bytes(); }), "LOOM_MAX_TENSOR_BYTES='lots' is not a positive byte count");
    unsetenv("LOOM_MAX_TENSOR_BYTES");
}

TEST(HostileModels, CyclesAndDeepGraphs) {
    onnx::ModelProto self = tiny_model();
    add_node(self.mutable_graph(), "Add", {"y", "loop"}, {"loop"}, "eats_itself");
    std::string msg = hostile_error(self, "self_cycle");
    EXPECT_HAS(msg, "model.onnx");
    EXPECT_HAS(msg, "cycle");
    EXPECT_HAS(msg, "Add 'eats_itself'");
    EXPECT_HAS(msg, "acyclic");

    onnx::ModelProto pair = tiny_model();
    add_node(pair.mutable_graph(), "Add", {"y", "b"}, {"a"}, "first");
    add_node(pair.mutable_graph(), "Relu", {"a"}, {"b"}, "second");
    msg = hostile_error(pair, "two_cycle");
    EXPECT_HAS(msg, "cycle");
    EXPECT_HAS(msg, "acyclic");

    // 100000 nodes listed last-first: sorting them must not recurse once per node.
    onnx::ModelProto deep = tiny_model();
    auto *g = deep.mutable_graph();
    g->clear_node();
    const int depth = 100000;
    for (int i = depth - 1; i >= 0; i--)
        add_node(g, "Relu", {i == 0 ? "x" : "v" + std::to_string(i - 1)}, {i == depth - 1 ? "y" : "v" + std::to_string(i)});
    Graph big = import_onnx(write_model(deep, "deep"));
    ASSERT_EQ(big.nodes.size(), (size_t)depth);
    EXPECT_EQ(big.nodes.front().inputs[0], "x");
    EXPECT_EQ(big.nodes.back().outputs[0], "y");

    // Subgraphs (If/Loop bodies) are refused, not walked.
    onnx::ModelProto sub = tiny_model();
    auto *branch = add_node(sub.mutable_graph(), "If", {"y"}, {"z"}, "branchy")->add_attribute();
    branch->set_name("then_branch");
    branch->set_type(onnx::AttributeProto::GRAPH);
    *branch->mutable_g() = sub.graph();
    msg = hostile_error(sub, "subgraph");
    EXPECT_HAS(msg, "If 'branchy'");
    EXPECT_HAS(msg, "not supported");
}

TEST(HostileModels, TypeConfusion) {
    onnx::ModelProto mixed = tiny_model();  // f32 + i64
    auto *w = add_initializer(mixed.mutable_graph(), "int_bias", 7, {3});
    for (int i = 0; i < 3; i++) w->add_int64_data(i);
    add_node(mixed.mutable_graph(), "Add", {"y", "int_bias"}, {"z"}, "mixed_add");
    *mixed.mutable_graph()->mutable_output(0) = value_info("z", {2, 3});
    std::string msg = hostile_error(mixed, "mixed_types");
    EXPECT_HAS(msg, "Add 'mixed_add': input 1 ('int_bias') is i64 but input 0 ('y') is f32");
    EXPECT_HAS(msg, "Cast");

    onnx::ModelProto strings = tiny_model();
    strings.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(8);
    msg = hostile_error(strings, "string_input");
    EXPECT_HAS(msg, "graph input 'x'");
    EXPECT_HAS(msg, "not supported");

    onnx::ModelProto attr = tiny_model();  // LeakyRelu alpha given as a string
    auto *a = add_node(attr.mutable_graph(), "LeakyRelu", {"y"}, {"z"}, "leaky")->add_attribute();
    a->set_name("alpha"), a->set_type(onnx::AttributeProto::STRING), a->set_s("0.1");
    *attr.mutable_graph()->mutable_output(0) = value_info("z", {2, 3});
    msg = hostile_error(attr, "string_alpha");
    EXPECT_HAS(msg, "LeakyRelu 'leaky': attribute 'alpha' should be a float");

    onnx::ModelProto fill = tiny_model();  // ConstantOfShape's value as an int, not a tensor
    auto *shape = add_initializer(fill.mutable_graph(), "shape", 7, {2});
    shape->add_int64_data(2), shape->add_int64_data(3);
    auto *v = add_node(fill.mutable_graph(), "ConstantOfShape", {"shape"}, {"c"}, "fill")->add_attribute();
    v->set_name("value"), v->set_type(onnx::AttributeProto::INT), v->set_i(1);
    add_node(fill.mutable_graph(), "Add", {"y", "c"}, {"z"}, "add_c");
    *fill.mutable_graph()->mutable_output(0) = value_info("z", {2, 3});
    msg = hostile_error(fill, "int_fill");
    EXPECT_HAS(msg, "ConstantOfShape 'fill': attribute 'value' must be a tensor of one element; it is 1");
}

TEST(HostileModels, TooFewInputsOrOutputs) {
    struct Case {
        std::string op;
        std::vector<std::string> inputs;
        std::string expect;
    };
    for (const Case &c : std::vector<Case>{
             {"Add", {"y"}, "Add 'short': needs at least 2 input(s) but input 1 is not given (it has 1)"},
             {"Conv", {"y", ""}, "Conv 'short': needs at least 2 input(s) but input 1 is not given"},
             {"MatMul", {"", "y"}, "MatMul 'short': needs at least 2 input(s) but input 0 is empty"},
             {"BatchNormalization", {"y", "y", "y"}, "BatchNormalization 'short': needs at least 5 input(s)"},
             {"Relu", {}, "Relu 'short': needs at least 1 input(s) but input 0 is not given (it has 0)"}}) {
        onnx::ModelProto m = tiny_model();
        add_node(m.mutable_graph(), c.op, c.inputs, {"z"}, "short");
        *m.mutable_graph()->mutable_output(0) = value_info("z", {2, 3});
        std::string msg = hostile_error(m, "short_" + c.op);
        EXPECT_HAS(msg, c.expect);
        EXPECT_HAS(msg, "malformed");
    }
    onnx::ModelProto no_out = tiny_model();
    add_node(no_out.mutable_graph(), "Relu", {"y"}, {}, "mute");
    EXPECT_HAS(hostile_error(no_out, "no_output"), "Relu 'mute': has no output");

    onnx::ModelProto range = tiny_model();  // Range whose start is a vector
    auto *start = add_initializer(range.mutable_graph(), "start", 1, {2});
    start->add_float_data(0), start->add_float_data(1);
    auto *one = add_initializer(range.mutable_graph(), "one", 1, {});
    one->add_float_data(1);
    add_node(range.mutable_graph(), "Range", {"start", "one", "one"}, {"r"}, "rng");
    add_node(range.mutable_graph(), "Add", {"y", "r"}, {"z"}, "add_r");
    *range.mutable_graph()->mutable_output(0) = value_info("z", {2, 3});
    EXPECT_HAS(hostile_error(range, "vector_range"), "Range 'rng': input 0 (start, 'start') must hold one value; it is f32 2");
}

TEST(HostileModels, CliSaysErrorAndExitsOne) {
    onnx::ModelProto m = tiny_model();
    add_initializer(m.mutable_graph(), "huge", 1, {int64_t(1) << 40})->set_raw_data(std::string(100, '\0'));
    std::string path = write_model(m, "cli_huge");
    for (const char *cmd : {"inspect", "run"}) {
        std::string out;
        int rc = testing::run_command(std::string(LOOM_BINARY) + " " + cmd + " " + path, out);
        EXPECT_EQ(rc, 1) << out;
        EXPECT_HAS(out, "error: " + path + ": initializer 'huge' (f32 1099511627776) would take 4 TiB");
        EXPECT_HAS(out, "LOOM_MAX_TENSOR_BYTES");
    }
    onnx::ModelProto cyc = tiny_model();
    add_node(cyc.mutable_graph(), "Add", {"y", "loop"}, {"loop"}, "eats_itself");
    std::string out;
    EXPECT_EQ(testing::run_command(std::string(LOOM_BINARY) + " inspect " + write_model(cyc, "cli_cycle"), out), 1) << out;
    EXPECT_HAS(out, "error: ");
    EXPECT_HAS(out, "cycle");

    // Caught in shape inference rather than import: the same error line, naming the file, and exit code.
    std::string expand = LOOM_SOURCE_DIR "/fuzz/regressions/onnx_import/expand_48GiB.onnx";
    for (const char *cmd : {"inspect", "run"}) {
        EXPECT_EQ(testing::run_command(std::string(LOOM_BINARY) + " " + cmd + " " + expand, out), 1) << out;
        EXPECT_HAS(out, "error: " + expand + ": Expand 'blow_up': output 'z' (f32 2097152x1024x2x3) would take 48 GiB");
    }
}

// Exporters name tensors like paths; a model's input named "/in/x" and output "../y%" keep their
// .npy files inside the folder given (--save, --inputs, `loom compile`'s data/, loom_run), written
// as %2F and %25, so no name reaches a parent folder or a subfolder.
TEST(HostileModels, TensorNamesLikePathsStayInTheirFolder) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto *g = m.mutable_graph();
    g->set_name("paths");
    *g->add_input() = value_info("/in/x", {2, 3});
    add_node(g, "Relu", {"/in/x"}, {"../y%"}, "relu");
    *g->add_output() = value_info("../y%", {2, 3});
    const std::string model = write_model(m, "path_names");
    const fs::path dir = fs::path(model).parent_path();
    EXPECT_EQ(tensor_file_stem("/in/x"), "%2Fin%2Fx");
    EXPECT_EQ(tensor_file_stem("../y%"), "..%2Fy%25");
    EXPECT_EQ(tensor_file_stem("plain_name.0"), "plain_name.0");

    Tensor x(DType::F32, {2, 3});
    for (int64_t i = 0; i < x.numel(); i++) x.set(i, (double)i - 2.5);
    fs::create_directories(dir / "inputs");
    write_npy((dir / "inputs" / "%2Fin%2Fx.npy").string(), x);
    std::string out;
    ASSERT_EQ(testing::run_command(std::string(LOOM_BINARY) + " run " + model + " --inputs " + (dir / "inputs").string() +
                                       " --save " + (dir / "saved").string(), out), 0) << out;
    EXPECT_FALSE(fs::exists(dir / "y%.npy")) << "an output escaped --save";
    Tensor y = read_npy((dir / "saved" / "..%2Fy%25.npy").string());
    for (int64_t i = 0; i < y.numel(); i++) EXPECT_EQ(y.get(i), std::max(0.0, x.get(i))) << i;

    // A missing input file is named as it is looked for.
    fs::remove(dir / "inputs" / "%2Fin%2Fx.npy");
    EXPECT_EQ(testing::run_command(std::string(LOOM_BINARY) + " run " + model + " --inputs " + (dir / "inputs").string(), out), 1);
    EXPECT_HAS(out, (dir / "inputs" / "%2Fin%2Fx.npy").string());
    EXPECT_HAS(out, "%2F");

    const fs::path art = dir / "art";
    ASSERT_EQ(testing::run_command(std::string(LOOM_BINARY) + " compile " + model + " --auto -o " + art.string(), out), 0) << out;
    EXPECT_TRUE(fs::exists(art / "data" / "%2Fin%2Fx.npy")) << out;
    EXPECT_TRUE(fs::exists(art / "data" / "expected_..%2Fy%25.npy")) << out;
    const fs::path runner = fs::path(LOOM_BINARY).parent_path() / "loom_run";
    ASSERT_TRUE(fs::exists(runner)) << "build the loom-run target";
    ASSERT_EQ(testing::run_command(runner.string() + " " + art.string() + " --mode host --reps 2 --warmup 1", out), 0) << out;
    EXPECT_HAS(out, "ok=1");
}

}  // namespace
}  // namespace loom
