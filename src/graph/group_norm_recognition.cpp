// recognize_group_norm (passes.h): PyTorch exports nn.GroupNorm (before opset 18) as
// Reshape(x, [N, G, -1]) → InstanceNormalization(scale, bias of G) → Reshape back to x's shape,
// followed by the affine Mul and Add per channel. Through the two reshapes the statistics and the
// output read x by a flattened index (a division and a modulo a point), and no row kernel spans the
// reshape, which left it over twice as slow as Mullapudi2016's schedule
// (bench/DECISIONS.md#d17-fused-rvars-rfactor). One GroupNormalization node (opset 18's per-group
// scale and bias) reads x in its own layout; the Mul and Add stay and fuse with it as pointwise
// epilogue.
#include <algorithm>

#include "graph/passes.h"

namespace loom {

namespace {

int64_t product(const Shape &s, size_t from) {
    int64_t n = 1;
    for (size_t k = from; k < s.size(); k++) n *= s[k];
    return n;
}

bool only_reader(const Graph &g, const std::string &value, int node) {
    std::vector<int> c = g.consumers(value);
    return c.size() == 1 && c[0] == node &&
           !g.is_output(value);
}

}  // namespace

int recognize_group_norm(Graph &g) {
    int replaced = 0;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        const Node &in = g.nodes[i];
        if (in.op != "InstanceNormalization" || in.num_inputs() != 3) continue;
        const int r1 = g.producer(in.inputs[0]);
        if (r1 < 0 || g.nodes[r1].op != "Reshape" || !only_reader(g, in.inputs[0], (int)i)) continue;
        const std::vector<int> after = g.consumers(in.outputs[0]);
        if (after.size() != 1 || g.nodes[after[0]].op != "Reshape" || !only_reader(g, in.outputs[0], after[0]))
            continue;
        const std::string &x = g.nodes[r1].inputs[0];
        const Node &r2 = g.nodes[after[0]];
        if (!g.has_value(x) || !g.value(x).has_shape || !g.value(in.inputs[0]).has_shape ||
            !g.value(r2.outputs[0]).has_shape)
            continue;
        const Shape &sx = g.value(x).shape, &sg = g.value(in.inputs[0]).shape;
        const Tensor *scale = g.constant(in.inputs[1]), *bias = g.constant(in.inputs[2]);
        // [N, C, ...] viewed as [N, G, C/G * ...] and back to [N, C, ...]; scale and bias per group.
        if (sx.size() < 3 || sg.size() != 3 || g.value(r2.outputs[0]).shape != sx || sg[0] != sx[0] ||
            sg[1] < 1 || sx[1] % sg[1] != 0 || sg[2] != product(sx, 1) / sg[1] || !scale || !bias ||
            scale->numel() != sg[1] || bias->numel() != sg[1])
            continue;
        Node gn;
        gn.op = "GroupNormalization";
        gn.name = in.name;  // its Funcs keep the InstanceNormalization's names
        g.nodes[i].name = g.unique_name(in.name + "_replaced");
        gn.inputs = {x, in.inputs[1], in.inputs[2]};
        gn.outputs = r2.outputs;
        gn.attrs["num_groups"] = int64_t(sg[1]);
        gn.attrs["epsilon"] = in.get_float("epsilon", 1e-5);
        g.nodes[after[0]] = gn;  // the reshapes and the InstanceNormalization are left to dead code
        replaced++;
    }
    return replaced;
}

}  // namespace loom
