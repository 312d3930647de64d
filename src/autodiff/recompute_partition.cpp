#include "autodiff/recompute_partition.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>

#include <algorithm>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "graph/op_catalog.h"
#include "support/error.h"

namespace loom {

namespace {

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_index_t, long,
                    boost::property<boost::vertex_color_t, boost::default_color_type,
                                    boost::property<boost::vertex_distance_t, long,
                                                    boost::property<boost::vertex_predecessor_t,
                                                                    FlowTraits::edge_descriptor>>>>,
    boost::property<boost::edge_capacity_t, int64_t,
                    boost::property<boost::edge_residual_capacity_t, int64_t,
                                    boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// Larger than any graph's bytes, small enough that sums of a few never overflow.
constexpr int64_t kInfinite = int64_t(1) << 55;

// A directed edge of capacity \p cap and its zero-capacity reverse, as max-flow wants them.
void add_flow_edge(FlowGraph &f, long u, long v, int64_t cap) {
    auto capacity = boost::get(boost::edge_capacity, f);
    auto reverse = boost::get(boost::edge_reverse, f);
    auto e = boost::add_edge(u, v, f).first, r = boost::add_edge(v, u, f).first;
    capacity[e] = cap;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
}

int64_t output_bytes(const Graph &g, const Node &n) {
    int64_t b = 0;
    for (const auto &o : n.outputs)
        if (!o.empty()) b += shape_numel(g.value(o).shape) * dtype_size(g.value(o).dtype);
    return b;
}

double output_elements(const Graph &g, const Node &n) {
    double e = 0;
    for (const auto &o : n.outputs)
        if (!o.empty()) e += (double)shape_numel(g.value(o).shape);
    return e;
}

// Forward nodes (by index) whose outputs a backward node reads.
std::set<int> read_by_backward(const Graph &g) {
    std::set<int> r;
    for (const Node &n : g.nodes) {
        if (!is_backward_node(n)) continue;
        for (const auto &v : n.inputs) {
            int p = v.empty() ? -1 : g.producer(v);
            if (p >= 0 && !is_backward_node(g.nodes[p])) r.insert(p);
        }
    }
    return r;
}

// Forward elementwise nodes whose copy in the backward would be stored anyway: a backward MatMul
// reads the value as an operand, directly or through layout ops, and GEMM operands are
// materialized, so recomputing it costs a kernel and a buffer as large as saving it
// (AOTAutograd's is_materialized_backwards ban). Layout nodes are not banned: a GEMM reads a
// transposed operand through its index math.
std::set<int> materialized_in_backward(const Graph &g) {
    std::map<std::string, std::vector<int>> readers;
    for (int k = 0; k < (int)g.nodes.size(); k++)
        for (const auto &v : g.nodes[k].inputs)
            if (!v.empty()) readers[v].push_back(k);
    std::set<int> banned;
    for (int i = 0; i < (int)g.nodes.size(); i++) {
        const Node &node = g.nodes[i];
        if (is_backward_node(node) || !is_supported_op(node.op) || op_kind(node.op) != OpKind::Elementwise) continue;
        std::vector<std::string> values(node.outputs.begin(), node.outputs.end());
        std::set<std::string> seen;
        while (!values.empty() && !banned.count(i)) {
            std::string v = values.back();
            values.pop_back();
            if (v.empty() || !seen.insert(v).second) continue;
            for (int r : readers[v]) {
                const Node &reader = g.nodes[r];
                if (!is_supported_op(reader.op)) continue;
                OpKind kind = op_kind(reader.op);
                if (kind == OpKind::MatMul && is_backward_node(reader)) banned.insert(i);
                if (kind == OpKind::Layout) values.insert(values.end(), reader.outputs.begin(), reader.outputs.end());
            }
        }
    }
    return banned;
}

}  // namespace

bool is_backward_node(const Node &n) { return n.name.rfind("grad_", 0) == 0 || n.name.rfind("update_", 0) == 0; }

bool is_recomputable_op(const std::string &op) {
    if (!is_supported_op(op)) return false;
    OpKind k = op_kind(op);
    return k == OpKind::Elementwise || k == OpKind::Layout;
}

RecomputePlan plan_recompute(const Graph &g, bool min_cut) {
    RecomputePlan plan;
    plan.min_cut = min_cut;
    const int n = (int)g.nodes.size();
    // Vertices: source 0, sink 1, then node i's "in" 2+2i and "out" 3+2i.
    FlowGraph f(2 + 2 * n);
    const long source = 0, sink = 1;
    auto in_v = [](int i) { return 2 + 2 * (long)i; };
    auto out_v = [](int i) { return 3 + 2 * (long)i; };
    std::set<int> needed = read_by_backward(g);
    std::set<int> banned = materialized_in_backward(g);
    for (int i = 0; i < n; i++) {
        const Node &node = g.nodes[i];
        if (is_backward_node(node)) continue;
        if (!is_recomputable_op(node.op) || banned.count(i)) add_flow_edge(f, source, in_v(i), kInfinite);
        add_flow_edge(f, in_v(i), out_v(i), std::max<int64_t>(1, output_bytes(g, node)));
        if (needed.count(i)) add_flow_edge(f, out_v(i), sink, kInfinite);
        std::set<int> producers;
        for (const auto &v : node.inputs) {
            int p = v.empty() ? -1 : g.producer(v);
            if (p >= 0) producers.insert(p);
        }
        for (int p : producers) add_flow_edge(f, out_v(p), in_v(i), kInfinite);
        if (needed.count(i)) plan.save_all_bytes += output_bytes(g, node);
    }
    if (!min_cut) {
        for (int i : needed) plan.saved.push_back(g.nodes[i].name);
        plan.saved_bytes = plan.save_all_bytes;
        plan.peak_bytes = plan.save_all_peak_bytes = peak_activation_bytes(g);
        return plan;
    }
    if (!needed.empty()) {
        int64_t flow = boost::boykov_kolmogorov_max_flow(f, source, sink);
        internal_check(flow < kInfinite, "recompute partition: no finite cut of ", g.name);
    }
    auto color = boost::get(boost::vertex_color, f);
    auto source_side = [&](long v) { return !needed.empty() && color[v] == boost::black_color; };

    // Saved: the cut's edges. Recomputed: sink-side forward nodes the backward reaches through
    // unsaved values.
    std::set<int> saved, recomputed;
    for (int i = 0; i < n; i++)
        if (!is_backward_node(g.nodes[i]) && source_side(in_v(i)) && !source_side(out_v(i))) saved.insert(i);
    std::vector<int> stack(needed.begin(), needed.end());
    while (!stack.empty()) {
        int i = stack.back();
        stack.pop_back();
        if (saved.count(i) || recomputed.count(i)) continue;
        internal_check(is_recomputable_op(g.nodes[i].op), "recompute partition: ", g.nodes[i].describe(),
                       " is needed by the backward, neither saved nor recomputable");
        recomputed.insert(i);
        for (const auto &v : g.nodes[i].inputs) {
            int p = v.empty() ? -1 : g.producer(v);
            if (p >= 0) stack.push_back(p);
        }
    }
    // Only a saved value something in the backward reads (directly or through a recomputed
    // node) is kept.
    std::set<int> kept;
    for (int i : needed)
        if (saved.count(i)) kept.insert(i);
    for (int i : recomputed)
        for (const auto &v : g.nodes[i].inputs) {
            int p = v.empty() ? -1 : g.producer(v);
            if (p >= 0 && saved.count(p)) kept.insert(p);
        }
    for (int i : kept) {
        plan.saved.push_back(g.nodes[i].name);
        plan.saved_bytes += output_bytes(g, g.nodes[i]);
    }
    for (int i : recomputed) {
        plan.recomputed.push_back(g.nodes[i].name);
        plan.recompute_flops += output_elements(g, g.nodes[i]);
    }
    plan.save_all_peak_bytes = peak_activation_bytes(g);
    Graph after = g;
    apply_recompute(after, plan);
    plan.peak_bytes = peak_activation_bytes(after);
    return plan;
}

void apply_recompute(Graph &g, const RecomputePlan &plan) {
    if (plan.recomputed.empty()) return;
    std::set<std::string> names(plan.recomputed.begin(), plan.recomputed.end());
    std::map<std::string, std::string> clone_of;  // forward value -> the backward's copy
    std::vector<Node> clones;
    for (const Node &n : g.nodes) {
        if (!names.count(n.name)) continue;
        Node c = n;
        c.name = g.unique_name("grad_recompute_" + n.name);
        for (auto &v : c.inputs)
            if (clone_of.count(v)) v = clone_of[v];
        for (auto &o : c.outputs) {
            if (o.empty()) continue;
            std::string copy = g.unique_name(o + ".recompute");
            ValueInfo vi = g.value(o);
            vi.name = copy;
            g.values[copy] = vi;
            clone_of[o] = copy;
            o = copy;
        }
        clones.push_back(std::move(c));
    }
    for (Node &n : g.nodes) {
        if (!is_backward_node(n)) continue;
        for (auto &v : n.inputs)
            if (clone_of.count(v)) v = clone_of[v];
    }
    // Each clone goes just before its first reader, so a recomputed value lives only while the
    // backward needs it.
    std::map<std::string, size_t> clone_producing;
    for (size_t k = 0; k < clones.size(); k++)
        for (const auto &o : clones[k].outputs) clone_producing[o] = k;
    std::vector<bool> placed(clones.size(), false);
    std::vector<Node> order;
    std::function<void(const Node &)> place_inputs = [&](const Node &n) {
        for (const auto &v : n.inputs) {
            auto it = clone_producing.find(v);
            if (it == clone_producing.end() || placed[it->second]) continue;
            placed[it->second] = true;
            place_inputs(clones[it->second]);
            order.push_back(clones[it->second]);
        }
    };
    for (const Node &n : g.nodes) {
        place_inputs(n);
        order.push_back(n);
    }
    g.nodes = std::move(order);
    g.topo_sort();
    g.validate();
}

int64_t peak_activation_bytes(const Graph &g) {
    std::map<std::string, int> last_use;
    for (int i = 0; i < (int)g.nodes.size(); i++)
        for (const auto &v : g.nodes[i].inputs)
            if (!v.empty()) last_use[v] = i;
    for (const auto &o : g.outputs) last_use[o] = (int)g.nodes.size();
    std::vector<std::vector<std::string>> dies(g.nodes.size() + 1);
    for (const auto &[v, i] : last_use)
        if (g.producer(v) >= 0) dies[i].push_back(v);
    int64_t live = 0, peak = 0;
    for (int i = 0; i < (int)g.nodes.size(); i++) {
        for (const auto &o : g.nodes[i].outputs)
            if (!o.empty()) live += shape_numel(g.value(o).shape) * dtype_size(g.value(o).dtype);
        peak = std::max(peak, live);
        for (const auto &v : dies[i]) live -= shape_numel(g.value(v).shape) * dtype_size(g.value(v).dtype);
        // An output nothing reads dies at once.
        for (const auto &o : g.nodes[i].outputs)
            if (!o.empty() && !last_use.count(o)) live -= shape_numel(g.value(o).shape) * dtype_size(g.value(o).dtype);
    }
    return peak;
}

std::string RecomputePlan::summary() const {
    std::ostringstream t;
    t << std::fixed << std::setprecision(1);
    t << (min_cut ? "min-cut partition" : "save-all partition") << " (save or recompute): " << saved.size() << " saved (" << saved_bytes / 1024.0 << " KiB), "
      << recomputed.size() << " recomputed in the backward (~" << recompute_flops / 1e3 << " KFLOP); saving every value "
      << "the backward reads would keep " << save_all_bytes / 1024.0 << " KiB\n"
      << "  peak activation bytes in graph order: " << peak_bytes / 1024.0 << " KiB (save-all: "
      << save_all_peak_bytes / 1024.0 << " KiB)\n";
    return t.str();
}

std::string RecomputePlan::describe() const {
    std::ostringstream t;
    t << summary();
    for (const auto &s : saved) t << "  save       " << s << "\n";
    for (const auto &r : recomputed) t << "  recompute  " << r << "\n";
    return t.str();
}

}  // namespace loom
