// recognize_attention (passes.h): scaled-dot-product attention as exporters write it,
//   MatMul(q, kᵀ) → [Mul or Div by a scalar] → [Add mask] → Softmax(last axis) → MatMul(·, v),
// with the scale also found as scalar Muls on q or kᵀ (torch.onnx's export of
// F.scaled_dot_product_attention scales both operands by the scale's square root), becomes one
// FusedAttention node (op_catalog.h) whose lowering never materializes the S×S scores.
#include <algorithm>
#include <cmath>

#include "graph/passes.h"

namespace loom {

namespace {

bool only_reader(const Graph &g, const std::string &value, int node) {
    std::vector<int> c = g.consumers(value);
    return c.size() == 1 && c[0] == node &&
           !g.is_output(value);
}

bool float_value(const Graph &g, const std::string &v) {
    return g.has_value(v) && g.value(v).has_shape && g.value(v).dtype == DType::F32;
}

// The value of a finite scalar float constant, or NaN.
double scalar_constant(const Graph &g, const std::string &v) {
    const Tensor *t = g.constant(v);
    if (!t || t->numel() != 1 || t->dtype() != DType::F32) return NAN;
    double x = t->get(0);
    return std::isfinite(x) ? x : NAN;
}

// When node \p p (read only by \p reader) multiplies or divides by a nonzero scalar constant, the
// other operand and the factor; else {"", 1}.
std::pair<std::string, double> scaled_operand(const Graph &g, int p, int reader) {
    if (p < 0) return {"", 1};
    const Node &n = g.nodes[p];
    if (n.num_inputs() != 2 || !only_reader(g, n.outputs[0], reader)) return {"", 1};
    if (n.op == "Mul") {
        for (int s = 0; s < 2; s++) {
            double c = scalar_constant(g, n.inputs[s]);
            if (std::isfinite(c) && c != 0 && !g.constant(n.inputs[1 - s]) &&
                g.value(n.inputs[1 - s]).shape == g.value(n.outputs[0]).shape)
                return {n.inputs[1 - s], c};
        }
    } else if (n.op == "Div") {
        double c = scalar_constant(g, n.inputs[1]);
        if (std::isfinite(c) && c != 0 && g.value(n.inputs[0]).shape == g.value(n.outputs[0]).shape)
            return {n.inputs[0], 1 / c};
    }
    return {"", 1};
}

// True when \p mask broadcasts (NumPy rules, no growth of the result) to \p s.
bool broadcasts_to(const Shape &mask, const Shape &s) {
    if (mask.size() > s.size()) return false;
    for (size_t k = 0; k < mask.size(); k++) {
        int64_t m = mask[mask.size() - 1 - k], d = s[s.size() - 1 - k];
        if (m != 1 && m != d) return false;
    }
    return true;
}

}  // namespace

bool fits_cudnn_attention(const Shape &q, const Shape &kt, const Shape &v, bool masked) {
    const size_t r = q.size();
    if (masked || (r != 3 && r != 4)) return false;
    const int64_t d = q[r - 1];
    return d == v[r - 1] && d % 8 == 0 && d <= 128 && kt[r - 2] == d;
}

int recognize_attention(Graph &g, AttentionFusion mode) {
    if (mode == AttentionFusion::Off) return 0;
    int replaced = 0;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        const Node &sm = g.nodes[i];
        if (sm.op != "Softmax" || !float_value(g, sm.outputs[0])) continue;
        const Shape &ss = g.value(sm.outputs[0]).shape;
        const size_t r = ss.size();
        if (r < 3 || sm.get_int("axis", -1) != (int64_t)r - 1) continue;
        // Softmax → MatMul(p, v), the only reader.
        std::vector<int> after = g.consumers(sm.outputs[0]);
        if (after.size() != 1 || !only_reader(g, sm.outputs[0], after[0])) continue;
        const Node &pv = g.nodes[after[0]];
        if (pv.op != "MatMul" || pv.inputs[0] != sm.outputs[0] || pv.inputs[1] == pv.inputs[0]) continue;
        const std::string v = pv.inputs[1];
        if (!float_value(g, v) || g.value(v).shape.size() != r || !float_value(g, pv.outputs[0])) continue;
        // Walk up: [Add mask] ← [scale] ← MatMul(q, kᵀ).
        std::string x = sm.inputs[0], mask;
        int reader = (int)i;
        double scale = 1;
        int p = g.producer(x);
        if (p >= 0 && g.nodes[p].op == "Add" && g.nodes[p].num_inputs() == 2 && only_reader(g, x, reader)) {
            const Node &add = g.nodes[p];
            for (int s = 0; s < 2 && mask.empty(); s++) {
                int up = g.producer(add.inputs[s]);
                const std::string &other = add.inputs[1 - s];
                bool scores_side = up >= 0 && (g.nodes[up].op == "MatMul" || g.nodes[up].op == "Mul" ||
                                               g.nodes[up].op == "Div");
                if (scores_side && g.value(add.inputs[s]).shape == ss && float_value(g, other) &&
                    broadcasts_to(g.value(other).shape, ss) && other != add.inputs[s]) {
                    mask = other;
                    x = add.inputs[s];
                }
            }
            if (mask.empty()) continue;
            reader = p;
            p = g.producer(x);
        }
        if (auto [in, c] = scaled_operand(g, p, reader); !in.empty()) {
            scale *= c;
            x = in;
            reader = p;
            p = g.producer(x);
        }
        if (p < 0 || g.nodes[p].op != "MatMul" || !only_reader(g, x, reader)) continue;
        const Node &qk = g.nodes[p];
        std::string q = qk.inputs[0], kt = qk.inputs[1];
        for (std::string *operand : {&q, &kt}) {
            if (auto [in, c] = scaled_operand(g, g.producer(*operand), p); !in.empty()) {
                scale *= c;
                *operand = in;
            }
        }
        if (!float_value(g, q) || !float_value(g, kt) || g.constant(q) || g.constant(kt) || g.constant(v)) continue;
        const Shape &sq = g.value(q).shape, &sk = g.value(kt).shape, &sv = g.value(v).shape;
        if (sq.size() != r || sk.size() != r) continue;
        bool same_batch = true;
        for (size_t d = 0; d + 2 < r; d++) same_batch &= sq[d] == ss[d] && sk[d] == ss[d] && sv[d] == ss[d];
        if (!same_batch || sq[r - 2] != ss[r - 2] || sk[r - 1] != ss[r - 1] || sk[r - 2] != sq[r - 1] ||
            sv[r - 2] != ss[r - 1])
            continue;
        if (mode == AttentionFusion::Cudnn && !fits_cudnn_attention(sq, sk, sv, !mask.empty())) continue;
        Node fa;
        fa.op = "FusedAttention";
        fa.name = sm.name;  // its Funcs are named after the Softmax
        g.nodes[i].name = g.unique_name(sm.name + "_replaced");
        fa.inputs = {q, kt, v};
        if (!mask.empty()) fa.inputs.push_back(mask);
        fa.outputs = pv.outputs;
        fa.attrs["scale"] = scale;
        g.nodes[after[0]] = fa;  // the scores' nodes are left to dead code
        replaced++;
    }
    return replaced;
}

}  // namespace loom
