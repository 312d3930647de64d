// widen_half_precision (passes.h): f16 and bf16 models compute in f32. Loom's CPU and CUDA
// targets have no native arithmetic in either type (Halide 14 emulates f16 one op at a time and
// has no working bf16), and accumulating a GEMM or a norm in f16 loses what the model's weights
// hold; storing them is what the model's type is for. So every node but Cast computes in f32, and
// the model's own types survive where they are observable: at graph inputs and outputs, and as the
// rounding of every Cast to f16/bf16 inside a mixed graph (kept, then widened for its readers).
#include <algorithm>
#include <map>
#include <set>

#include "graph/passes.h"
#include "support/error.h"

namespace loom {

int widen_half_precision(Graph &g) {
    std::set<std::string> outputs(g.outputs.begin(), g.outputs.end());
    std::set<std::string> taken;  // node names too: nodes leave g.nodes as they are moved below
    for (const auto &n : g.nodes) taken.insert(n.name);
    auto fresh = [&](const std::string &base) {
        std::string n = g.unique_name(base);
        for (int k = 1; taken.count(n) || g.has_value(n); k++) n = g.unique_name(str_cat(base, "_", k));
        taken.insert(n);
        return n;
    };
    int changed = 0;

    // Constant halves become f32 in place (exact), except one that is itself a graph output.
    for (auto &kv : g.initializers) {
        if (!dtype_is_half(kv.second.dtype()) || outputs.count(kv.first)) continue;
        kv.second = kv.second.cast(DType::F32);
        g.value(kv.first).dtype = DType::F32;
        changed++;
    }

    std::vector<Node> nodes;
    std::map<std::string, std::string> as_f32;  // a half value kept as it is -> its f32 widening
    std::map<std::string, std::string> renamed; // a half graph output -> the f32 value computing it
    auto cast_node = [&](const std::string &from, const std::string &to, DType t) {
        Node c;
        c.name = fresh(to);
        c.op = "Cast";
        c.inputs = {from};
        c.outputs = {to};
        c.attrs["to"] = std::string(dtype_name(t));
        return c;
    };
    for (Node &n : g.nodes) {
        for (auto &in : n.inputs) {
            if (in.empty()) continue;
            auto r = renamed.find(in);
            if (r != renamed.end()) in = r->second;
            if (n.op == "Cast" || !dtype_is_half(g.value(in).dtype)) continue;
            auto w = as_f32.find(in);
            if (w == as_f32.end()) {
                std::string wide = fresh(in + "_f32");
                ValueInfo vi = g.value(in);
                vi.name = wide;
                vi.dtype = DType::F32;
                g.values[wide] = vi;
                nodes.push_back(cast_node(in, wide, DType::F32));
                w = as_f32.emplace(in, wide).first;
                changed++;
            }
            in = w->second;
        }
        std::vector<Node> after;
        if (n.op != "Cast")
            for (auto &o : n.outputs) {
                if (o.empty() || !dtype_is_half(g.value(o).dtype)) continue;
                changed++;
                if (!outputs.count(o)) {
                    g.value(o).dtype = DType::F32;
                    continue;
                }
                // A graph output keeps its type: the node computes an f32 value, a Cast rounds it.
                const DType t = g.value(o).dtype;
                std::string wide = fresh(o + "_f32");
                ValueInfo vi = g.value(o);
                vi.name = wide;
                vi.dtype = DType::F32;
                g.values[wide] = vi;
                renamed[o] = wide;
                after.push_back(cast_node(wide, o, t));
                o = wide;
            }
        nodes.push_back(std::move(n));
        for (auto &c : after) nodes.push_back(std::move(c));
    }
    g.nodes = std::move(nodes);
    return changed;
}

}  // namespace loom
