// recognize_swish (passes.h): exporters write hard-swish as Mul(x, HardSigmoid(x)) (PyTorch's
// opset-13 export of nn.Hardswish) and SiLU as Mul(x, Sigmoid(x)). Two nodes reading x make a
// diamond: the conv producing x has two consumers, so the cost model cannot make the activation
// its epilogue and computes the gate in a pass of its own. One HardSwish or Swish node reads x once
// and fuses like a ReLU (bench/DECISIONS.md#d133-swish-recognised).
#include <cmath>
#include <map>
#include <set>

#include "graph/passes.h"

namespace loom {

namespace {

// The op that Mul(x, gate(x)) becomes for the gate node \p n, or "" when it computes no swish:
// HardSigmoid with PyTorch's alpha 1/6 and beta 1/2 (to float precision), or Sigmoid.
std::string swish_of_gate(const Node &n) {
    if (n.op == "Sigmoid") return "Swish";
    if (n.op == "HardSigmoid" && std::fabs(n.get_float("alpha", 0.2) - 1.0 / 6) < 1e-6 &&
        std::fabs(n.get_float("beta", 0.5) - 0.5) < 1e-6)
        return "HardSwish";
    return "";
}

}  // namespace

int recognize_swish(Graph &g) {
    std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
    // Each value's producer and reader count, built once: Graph::producer and ::consumers walk the
    // whole graph for one value.
    std::map<std::string, int> producer, readers;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        for (const auto &o : g.nodes[i].outputs) producer[o] = (int)i;
        std::set<std::string> ins(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end());
        for (const auto &in : ins) readers[in]++;
    }
    std::set<size_t> dropped;
    int found = 0;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        Node &mul = g.nodes[i];
        if (mul.op != "Mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
        for (int side = 0; side < 2; side++) {
            const std::string &gate_value = mul.inputs[side], &x = mul.inputs[1 - side];
            auto at = producer.find(gate_value);
            if (at == producer.end() || dropped.count((size_t)at->second)) continue;
            const int p = at->second;
            const Node &gate = g.nodes[p];
            std::string op = swish_of_gate(gate);
            // The gate reads x itself and nothing else reads the gate: then the Mul is x * gate(x)
            // over x's own shape, and the gate node can go.
            if (op.empty() || gate.inputs.size() != 1 || gate.inputs[0] != x || outputs.count(gate_value) ||
                readers[gate_value] != 1 || !dtype_is_float(g.value(x).dtype))
                continue;
            dropped.insert((size_t)p);
            g.values.erase(gate_value);
            mul.op = op;
            mul.inputs = {x};
            mul.attrs.clear();
            if (op == "Swish") mul.attrs["alpha"] = 1.0;
            found++;
            break;
        }
    }
    if (dropped.empty()) return 0;
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); i++)
        if (!dropped.count(i)) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
    return found;
}

}  // namespace loom
