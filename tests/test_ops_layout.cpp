// Layout, gather and resize ops lowered to Halide and JIT-run, against the reference
// interpreter: odd sizes, size-1 dims, negative steps and pads, runtime indices.
#include <gtest/gtest.h>

#include "autoschedule/autoschedule.h"
#include "codegen/jit.h"
#include "lower/lowered.h"
#include "ops/lower_graph.h"
#include "reference/reference.h"
#include "schedule/schedule_apply.h"
#include "graph_builder.h"
#include "test_util.h"

namespace loom {
namespace {

using loom::testing::close;

using Builder = loom::testing::GraphBuilder;
using loom::testing::check;

TEST(OpsLayout, ReshapeTransposeSliceExpandTile) {
    Builder b;
    std::string x = b.input("x", {2, 3, 5});
    std::string y = b.input("y", {3, 1});
    b.out("Reshape", {x}, {6, 5}, {{"shape", std::vector<int64_t>{6, 5}}});
    b.out("Reshape", {x}, {5, 6}, {{"shape", std::vector<int64_t>{5, 6}}});
    b.out("Reshape", {x}, {30}, {{"shape", std::vector<int64_t>{30}}});
    b.out("Reshape", {x}, {2, 1, 3, 1, 5}, {{"shape", std::vector<int64_t>{2, 1, 3, 1, 5}}});
    b.out("Reshape", {x}, {3, 2, 5}, {{"shape", std::vector<int64_t>{3, 2, 5}}});
    b.out("Reshape", {y}, {3}, {{"shape", std::vector<int64_t>{3}}});
    b.out("Transpose", {x}, {5, 2, 3}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    b.out("Transpose", {x}, {3, 2, 5}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    b.out("Slice", {x}, {1, 2, 2}, {{"starts", std::vector<int64_t>{1, 0, 1}},
                                    {"steps", std::vector<int64_t>{1, 2, 2}}});
    b.out("Slice", {x}, {2, 3, 3}, {{"starts", std::vector<int64_t>{1, 2, 4}},
                                    {"steps", std::vector<int64_t>{-1, -1, -2}}});
    b.out("Expand", {y}, {2, 3, 4}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
    b.out("Expand", {x}, {2, 3, 5}, {{"shape", std::vector<int64_t>{2, 3, 5}}});
    b.out("Tile", {x}, {4, 3, 10}, {{"repeats", std::vector<int64_t>{2, 1, 2}}});
    b.out("Tile", {y}, {3, 3}, {{"repeats", std::vector<int64_t>{1, 3}}});
    check(b, random_inputs(b.g, 11));
}

// DepthToSpace in both modes, block sizes 2 and 3, odd spatial sizes, against the reference; and
// the reference against the ONNX specification's own example (input 0..47 as [1, 8, 2, 3]).
TEST(OpsLayout, DepthToSpaceBothModes) {
    Builder b;
    std::string x = b.input("x", {2, 18, 3, 5});
    for (const char *mode : {"DCR", "CRD"}) {
        b.out("DepthToSpace", {x}, {2, 2, 9, 15}, {{"blocksize", int64_t(3)}, {"mode", std::string(mode)}});
        b.out("DepthToSpace", {b.node("Relu", {x}, {2, 18, 3, 5})}, {2, 18, 3, 5},
              {{"blocksize", int64_t(1)}, {"mode", std::string(mode)}});
    }
    std::string x2 = b.input("x2", {1, 8, 7, 3});
    b.out("DepthToSpace", {x2}, {1, 2, 14, 6}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
    b.out("DepthToSpace", {x2}, {1, 2, 14, 6}, {{"blocksize", int64_t(2)}, {"mode", std::string("DCR")}});
    check(b, random_inputs(b.g, 12));

    Builder spec;
    std::string v = spec.input("v", {1, 8, 2, 3});
    std::string dcr = spec.out("DepthToSpace", {v}, {1, 2, 4, 6}, {{"blocksize", int64_t(2)}, {"mode", std::string("DCR")}});
    std::string crd = spec.out("DepthToSpace", {v}, {1, 2, 4, 6}, {{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}});
    Tensor in(DType::F32, {1, 8, 2, 3});
    for (int64_t i = 0; i < in.numel(); i++) in.set(i, (double)i);
    auto ref = run_reference(spec.g, {{v, in}});
    const std::vector<double> dcr_row0 = {0, 12, 1, 13, 2, 14}, dcr_row1 = {24, 36, 25, 37, 26, 38};
    const std::vector<double> crd_row0 = {0, 6, 1, 7, 2, 8}, crd_row1 = {12, 18, 13, 19, 14, 20};
    for (int k = 0; k < 6; k++) {
        EXPECT_EQ(ref.at(dcr).get(k), dcr_row0[k]);
        EXPECT_EQ(ref.at(dcr).get(6 + k), dcr_row1[k]);
        EXPECT_EQ(ref.at(crd).get(k), crd_row0[k]);
        EXPECT_EQ(ref.at(crd).get(6 + k), crd_row1[k]);
    }
    check(spec, {{v, in}});
}

TEST(OpsLayout, ConcatSplit) {
    Builder b;
    std::string a = b.input("a", {2, 3, 5});
    std::string c = b.input("c", {2, 1, 5});
    std::string d = b.input("d", {2, 4, 5});
    b.out("Concat", {a, c, d}, {2, 8, 5}, {{"axis", int64_t(1)}});
    b.out("Concat", {a, a}, {4, 3, 5}, {{"axis", int64_t(0)}});
    b.out("Concat", {c}, {2, 1, 5}, {{"axis", int64_t(2)}});
    // Split into three outputs of one node.
    Node n;
    n.op = "Split";
    n.name = "/blk/split";
    n.inputs = {d};
    n.attrs = {{"axis", int64_t(1)}, {"split", std::vector<int64_t>{1, 2, 1}}};
    for (int k = 0; k < 3; k++) {
        std::string o = "split_out" + std::to_string(k);
        n.outputs.push_back(o);
        b.g.values[o] = ValueInfo{o, DType::F32, {2, k == 1 ? 2 : 1, 5}, {}, true};
        b.g.outputs.push_back(o);
    }
    b.g.nodes.push_back(n);
    LoweredPipeline lp = lower_graph(b.g);
    EXPECT_NE(lp.find("blk_split_0"), nullptr);
    EXPECT_NE(lp.find("blk_split_2"), nullptr);
    check(b, random_inputs(b.g, 12));
}

TEST(OpsLayout, Pad) {
    Builder b;
    std::string x = b.input("x", {2, 3, 5});
    std::vector<int64_t> pads{0, 1, 2, 1, 2, 3};
    Shape o{3, 6, 10};
    b.out("Pad", {x}, o, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 1.5}});
    b.out("Pad", {x}, o, {{"pads", pads}, {"mode", std::string("reflect")}, {"value", 0.0}});
    b.out("Pad", {x}, o, {{"pads", pads}, {"mode", std::string("edge")}, {"value", 0.0}});
    // Negative pads crop.
    b.out("Pad", {x}, {2, 2, 5}, {{"pads", std::vector<int64_t>{0, -1, 1, 0, 0, -1}},
                                  {"mode", std::string("constant")}, {"value", 0.0}});
    check(b, random_inputs(b.g, 13));
}

TEST(OpsLayout, Gather) {
    Builder b;
    std::string data = b.input("data", {7, 3, 5});
    std::string idx = b.input("idx", {2, 3}, DType::I64);  // runtime indices in [0, 10)
    // Runtime indices shifted to [-5, 5): negative ones count from the end.
    std::string sh = b.node("Sub", {idx, b.scalar(5, DType::I64)}, {2, 3}, {}, DType::I64);
    b.out("Gather", {data, sh}, {2, 3, 3, 5}, {{"axis", int64_t(0)}});
    b.out("Gather", {data, b.constant(Tensor::from_ints(DType::I64, {4}, {0, -1, 2, 4}))}, {7, 3, 4},
          {{"axis", int64_t(2)}});
    b.out("Gather", {data, b.constant(Tensor::from_ints(DType::I32, {}, {1}))}, {7, 5},
          {{"axis", int64_t(1)}});
    check(b, random_inputs(b.g, 14));
}

TEST(OpsLayout, Resize) {
    Builder b;
    std::string x = b.input("x", {1, 2, 3, 5});
    std::vector<double> up{1, 1, 2, 2};
    Shape o{1, 2, 6, 10};
    auto attrs = [&](std::vector<double> sc, const char *mode, const char *ctm, const char *nm) {
        std::map<std::string, AttrValue> a{{"scales", sc}, {"mode", std::string(mode)},
                                           {"coordinate_transformation_mode", std::string(ctm)},
                                           {"nearest_mode", std::string(nm)},
                                           {"cubic_coeff_a", -0.75}, {"exclude_outside", int64_t(0)}};
        return a;
    };
    b.out("Resize", {x}, o, attrs(up, "nearest", "asymmetric", "floor"));
    b.out("Resize", {x}, o, attrs(up, "nearest", "half_pixel", "round_prefer_floor"));
    b.out("Resize", {x}, o, attrs(up, "nearest", "align_corners", "round_prefer_ceil"));
    b.out("Resize", {x}, o, attrs(up, "linear", "half_pixel", "round_prefer_floor"));
    b.out("Resize", {x}, o, attrs(up, "linear", "align_corners", "round_prefer_floor"));
    b.out("Resize", {x}, o, attrs(up, "linear", "asymmetric", "round_prefer_floor"));
    b.out("Resize", {x}, o, attrs(up, "linear", "pytorch_half_pixel", "round_prefer_floor"));
    b.out("Resize", {x}, {1, 2, 7, 3}, attrs({1, 1, 7.0 / 3, 0.6}, "linear", "half_pixel", "round_prefer_floor"));
    b.out("Resize", {x}, o, attrs(up, "cubic", "half_pixel", "round_prefer_floor"));
    auto ex = attrs(up, "cubic", "half_pixel", "round_prefer_floor");
    ex["exclude_outside"] = int64_t(1);
    ex["cubic_coeff_a"] = -0.5;
    b.out("Resize", {x}, o, ex);
    check(b, random_inputs(b.g, 15));
}

// Nearest upsampling by 2 and 4 (lowered as integer x / s plus a per-phase offset, resize.cpp)
// under every coordinate mode and rounding, against the reference's float formula: the phases
// that land before the first input (half_pixel with floor: -1) are clamped like the float form.
TEST(OpsLayout, ResizeNearestPowerOfTwoEveryMode) {
    Builder b;
    std::string x = b.input("x", {1, 2, 5, 7});
    for (double s : {2.0, 4.0})
        for (const char *ctm : {"asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"})
            for (const char *nm : {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"}) {
                std::map<std::string, AttrValue> a{{"scales", std::vector<double>{1, 1, s, s}},
                                                   {"mode", std::string("nearest")},
                                                   {"coordinate_transformation_mode", std::string(ctm)},
                                                   {"nearest_mode", std::string(nm)}};
                b.out("Resize", {x}, {1, 2, 5 * (int64_t)s, 7 * (int64_t)s}, a);
            }
    check(b, random_inputs(b.g, 16));
}

// Linear upsampling by 2 and 4 (the first tap x / s plus a per-phase step, the weight per phase,
// resize.cpp) under every coordinate mode but align_corners (the float formula), against the
// reference: plain loop nests, and the auto schedule's vector loops, whose edge clamps loop
// partitioning moves out of the steady state. Odd sizes, so the last vector is partial.
TEST(OpsLayout, ResizeLinearPowerOfTwoEveryMode) {
    Builder b;
    std::string x = b.input("x", {2, 3, 5, 19});
    for (double s : {2.0, 4.0})
        for (const char *ctm : {"asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"}) {
            std::map<std::string, AttrValue> a{{"scales", std::vector<double>{1, 1, s, s}},
                                               {"mode", std::string("linear")},
                                               {"coordinate_transformation_mode", std::string(ctm)}};
            b.out("Resize", {x}, {2, 3, 5 * (int64_t)s, 19 * (int64_t)s}, a);
        }
    auto in = random_inputs(b.g, 17);
    check(b, in);
    LoweredPipeline lp = lower_graph(b.g);
    apply_schedule(auto_schedule(lp, host_target(), reference_machine(host_target(), 2)), lp, host_target());
    JitModel m(std::move(lp));
    auto outs = m.run(in);
    for (const auto &[name, t] : run_reference(b.g, in))
        EXPECT_TRUE(loom::testing::close(outs.at(name), t)) << name << " under the auto schedule";
}

}  // namespace
}  // namespace loom
