// fuse_horizontal_slices (passes.h): K isomorphic chains over the equal slices of one Split along
// the last axis, joined again by a Concat along that axis, become one chain over the input viewed
// as [..., K, n]. Per-chain constants (LayerNorm scales, biases) are stacked into [K, n] tensors.
//
// Why at the graph level: siblings that do the same work on neighbouring slices are one loop nest
// once they are one op, on every target and under every scheduler (Halide's Funcs cannot be
// merged after lowering), and the statistics become one reduction with K outputs per row.
#include <algorithm>
#include <map>
#include <set>

#include "graph/passes.h"

namespace loom {

namespace {

// Ops whose batched form is the same op on rank + 1 tensors (broadcasting does the rest).
const std::set<std::string> kPointwise = {
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Reciprocal", "Relu", "Sigmoid",
    "Tanh", "Erf", "Softplus", "HardSwish", "Swish", "Sin", "Cos", "LeakyRelu", "Elu", "HardSigmoid", "Gelu", "Clip"};
const std::set<std::string> kReduce = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};

// Where a chain node's input comes from.
struct InputRef {
    enum Kind { Slice, Chain, External } kind = External;
    int node = -1, output = 0;  // Chain: index within the chain, output index
    std::string name;           // External: the value
};

struct Chain {
    std::vector<int> nodes;     // graph node indices, topological
    std::string result;         // the value the Concat reads
};

// The rank of a value's shape once leading 1s are dropped.
int squeezed_rank(const Shape &s) {
    size_t k = 0;
    while (k < s.size() && s[k] == 1) k++;
    return (int)(s.size() - k);
}

class SliceFuser {
public:
    explicit SliceFuser(Graph &g) : g_(g) {}

    // One Split at a time (indices change after a rewrite); true when one was rewritten.
    bool fuse_one() {
        for (int si = 0; si < (int)g_.nodes.size(); si++)
            if (try_split(si)) return true;
        return false;
    }

private:
    Graph &g_;
    std::set<std::string> taken_;  // node names handed out in this rewrite (not in g_.nodes yet)

    std::string node_name(const std::string &want) {
        std::string n = g_.unique_name(want);
        for (int k = 1; taken_.count(n); k++) n = g_.unique_name(want + "_" + std::to_string(k));
        taken_.insert(n);
        return n;
    }

    bool try_split(int si) {
        const Node &split = g_.nodes[si];
        if (split.op != "Split" || split.outputs.size() < 2) return false;
        const Shape &xs = g_.value(split.inputs[0]).shape;
        int r = (int)xs.size();
        if (r < 1 || split.get_int("axis", -1) != r - 1) return false;
        std::vector<int64_t> sizes = split.get_ints("split");
        int K = (int)split.outputs.size();
        if ((int)sizes.size() != K) return false;
        for (auto s : sizes)
            if (s != sizes[0]) return false;
        // Chains: everything reachable from each slice up to one Concat.
        std::vector<Chain> chains(K);
        int concat = -1;
        for (int k = 0; k < K; k++)
            if (!collect(split.outputs[k], chains[k], concat)) return false;
        if (concat < 0) return false;
        const Node &cat = g_.nodes[concat];
        if (cat.op != "Concat" || cat.get_int("axis", -1) != r - 1 || (int)cat.inputs.size() != K) return false;
        for (int k = 0; k < K; k++)
            if (cat.inputs[k] != chains[k].result || chains[k].nodes.empty()) return false;
        // The template (chain 0) and the others must match node by node.
        std::vector<std::vector<std::vector<InputRef>>> all(K);
        for (int k = 0; k < K; k++)
            if (!describe(chains[k], split.outputs[k], all[k]) || (k > 0 && !same_shape(chains[0], chains[k], all[0], all[k])))
                return false;
        return rewrite(si, concat, chains, all, r, K, sizes[0]);
    }

    // The chain hanging off \p slice: nodes whose every input is the slice, a chain value or
    // outside the Split's reach; stops at the Concat (one per graph rewrite).
    bool collect(const std::string &slice, Chain &c, int &concat) {
        std::set<std::string> values = {slice};
        std::set<int> in_chain;
        std::vector<std::string> work = {slice};
        while (!work.empty()) {
            std::string v = work.back();
            work.pop_back();
            if (g_.is_output(v)) return false;
            for (int ci : g_.consumers(v)) {
                const Node &n = g_.nodes[ci];
                if (n.op == "Concat") {
                    if (concat >= 0 && concat != ci) return false;
                    concat = ci;
                    if (c.result.empty()) c.result = v;
                    else if (c.result != v) return false;
                    continue;
                }
                if (in_chain.insert(ci).second)
                    for (const auto &o : n.outputs) {
                        values.insert(o);
                        work.push_back(o);
                    }
            }
        }
        c.nodes.assign(in_chain.begin(), in_chain.end());  // node indices are topological
        // Only the result may leave the chain, and only into the Concat.
        for (int ni : c.nodes)
            for (const auto &o : g_.nodes[ni].outputs)
                for (int ci : g_.consumers(o))
                    if (!in_chain.count(ci) && !(ci == concat && o == c.result)) return false;
        return !c.result.empty();
    }

    bool describe(const Chain &c, const std::string &slice, std::vector<std::vector<InputRef>> &refs) {
        std::map<std::string, std::pair<int, int>> produced;
        for (int i = 0; i < (int)c.nodes.size(); i++) {
            const Node &n = g_.nodes[c.nodes[i]];
            if (!kPointwise.count(n.op) && !kReduce.count(n.op) && n.op != "LayerNormalization" && n.op != "Softmax")
                return false;
            std::vector<InputRef> in;
            for (const auto &v : n.inputs) {
                InputRef ref;
                if (v == slice) ref.kind = InputRef::Slice;
                else if (auto it = produced.find(v); it != produced.end()) {
                    ref.kind = InputRef::Chain;
                    ref.node = it->second.first;
                    ref.output = it->second.second;
                } else ref.name = v;
                in.push_back(ref);
            }
            refs.push_back(in);
            for (int o = 0; o < (int)n.outputs.size(); o++) produced[n.outputs[o]] = {i, o};
        }
        return true;
    }

    // Chain \p b has chain \p a's structure: ops, attributes, wiring; externals either the same
    // value, or constants of one shape that stacking can batch.
    bool same_shape(const Chain &a, const Chain &b, const std::vector<std::vector<InputRef>> &ra,
                    const std::vector<std::vector<InputRef>> &rb) {
        if (a.nodes.size() != b.nodes.size()) return false;
        for (size_t i = 0; i < a.nodes.size(); i++) {
            const Node &na = g_.nodes[a.nodes[i]], &nb = g_.nodes[b.nodes[i]];
            if (na.op != nb.op || na.outputs.size() != nb.outputs.size() || ra[i].size() != rb[i].size()) return false;
            if (na.attrs.size() != nb.attrs.size()) return false;
            for (const auto &[k, v] : na.attrs)
                if (!nb.attrs.count(k) || attr_str(nb.attrs.at(k)) != attr_str(v)) return false;
            for (size_t j = 0; j < ra[i].size(); j++) {
                const InputRef &x = ra[i][j], &y = rb[i][j];
                if (x.kind != y.kind || x.node != y.node || x.output != y.output) return false;
                if (x.kind != InputRef::External || x.name == y.name) continue;
                const Tensor *cx = g_.constant(x.name), *cy = g_.constant(y.name);
                if (!cx || !cy || cx->shape() != cy->shape() || cx->dtype() != cy->dtype()) return false;
            }
            if (na.outputs.size() != 1 || g_.value(na.outputs[0]).shape != g_.value(nb.outputs[0]).shape) return false;
        }
        return true;
    }

    // The batched shape of a chain value [..., m]: [..., K, m].
    static Shape batched(Shape s, int K) {
        s.insert(s.end() - 1, K);
        return s;
    }

    bool rewrite(int si, int concat, const std::vector<Chain> &chains,
                 const std::vector<std::vector<std::vector<InputRef>>> &refs, int r, int K, int64_t n) {
        const Node split = g_.nodes[si];
        const Node cat = g_.nodes[concat];
        std::vector<Node> added;
        std::string base = split.name + "/hfused";
        auto new_value = [&](const std::string &want, DType dt, const Shape &s) {
            std::string v = g_.unique_name(want);
            g_.values[v] = ValueInfo{v, dt, s, {}, true, {}};
            return v;
        };
        DType xdt = g_.value(split.inputs[0]).dtype;
        Shape xs = g_.value(split.inputs[0]).shape;
        Shape xs3 = xs;
        xs3.back() = n;
        xs3 = batched(xs3, K);
        Node view;
        view.name = node_name(base + "/Reshape");
        view.op = "Reshape";
        view.inputs = {split.inputs[0]};
        view.outputs = {new_value(base + "/x", xdt, xs3)};
        view.attrs["shape"] = std::vector<int64_t>(xs3.begin(), xs3.end());
        added.push_back(view);
        std::vector<std::string> out_of(chains[0].nodes.size());
        bool ok = true;
        for (size_t i = 0; i < chains[0].nodes.size() && ok; i++) {
            const Node &t = g_.nodes[chains[0].nodes[i]];
            Node m;
            m.name = node_name(base + "/" + t.op);
            m.op = t.op;
            m.attrs = t.attrs;
            for (size_t j = 0; j < t.inputs.size(); j++) {
                const InputRef &ref = refs[0][i][j];
                if (ref.kind == InputRef::Slice) m.inputs.push_back(view.outputs[0]);
                else if (ref.kind == InputRef::Chain) m.inputs.push_back(out_of[ref.node]);
                else m.inputs.push_back(external(refs, i, j, K, n, ok));
            }
            const ValueInfo &to = g_.value(t.outputs[0]);
            if (kReduce.count(t.op)) {
                ok &= t.get_ints("axes") == std::vector<int64_t>{r - 1} && t.get_int("keepdims", 1) == 1;
                m.attrs["axes"] = std::vector<int64_t>{r};
            } else if (t.op == "Softmax") {
                ok &= t.get_int("axis", -1) == r - 1;
                m.attrs["axis"] = int64_t(r);
            } else if (t.op == "LayerNormalization") {
                // Normalised over the last axis only; a per-slice scale/bias becomes a Mul/Add by
                // the stacked [K, n] constant after a plain LayerNorm.
                ok &= t.get_int("axis", -1) == r - 1;
                m.attrs["axis"] = int64_t(r);
            }
            int64_t last = to.shape.empty() ? 1 : to.shape.back();
            ok &= !to.shape.empty() && (last == n || last == 1) && (int)to.shape.size() == r;
            m.outputs = {new_value(base + "/" + t.op + "_out", to.dtype, batched(to.shape, K))};
            out_of[i] = m.outputs[0];
            bool pushed = false;
            if (t.op == "LayerNormalization" && ok) ok &= split_affine(m, added, base, to.dtype, K, n, pushed);
            if (!pushed) added.push_back(m);
        }
        if (!ok) {
            for (const auto &a : added)
                for (const auto &o : a.outputs) g_.values.erase(o);
            return false;
        }
        Node back;
        back.name = node_name(base + "/Concat");
        back.op = "Reshape";
        back.inputs = {out_of[index_of(chains[0], chains[0].result)]};
        back.outputs = {cat.outputs[0]};
        const Shape &ys = g_.value(cat.outputs[0]).shape;
        back.attrs["shape"] = std::vector<int64_t>(ys.begin(), ys.end());
        added.push_back(back);
        std::set<int> drop = {si, concat};
        for (const auto &c : chains) drop.insert(c.nodes.begin(), c.nodes.end());
        std::vector<Node> kept;
        for (int i = 0; i < (int)g_.nodes.size(); i++)
            if (!drop.count(i)) kept.push_back(g_.nodes[i]);
        for (auto &a : added) kept.push_back(a);
        g_.nodes = std::move(kept);
        g_.topo_sort();
        return true;
    }

    int index_of(const Chain &c, const std::string &value) {
        for (int i = 0; i < (int)c.nodes.size(); i++)
            for (const auto &o : g_.nodes[c.nodes[i]].outputs)
                if (o == value) return i;
        return -1;
    }

    // Input j of chain node i, batched: the shared value itself (a scalar or an [n]/[1] vector
    // broadcasts the same against [..., K, m]), or the K per-chain constants stacked as [K, last].
    std::string external(const std::vector<std::vector<std::vector<InputRef>>> &refs, size_t i, size_t j, int K,
                         int64_t n, bool &ok) {
        const std::string &v0 = refs[0][i][j].name;
        if (v0.empty()) return v0;  // an omitted optional input
        const Shape &s0 = g_.value(v0).shape;
        bool shared = true;
        for (int k = 1; k < K; k++) shared &= refs[k][i][j].name == v0;
        if (squeezed_rank(s0) > 1) ok = false;  // [B, n] inputs would need their own view
        if (shared || !ok) return v0;
        int64_t last = s0.empty() ? 1 : s0.back();
        if (last != 1 && last != n) ok = false;
        std::vector<double> stacked;
        bool same_values = true;
        for (int k = 0; k < K; k++) {
            const Tensor *c = g_.constant(refs[k][i][j].name);
            if (!c || g_.value(refs[k][i][j].name).shape != s0) {
                ok = false;
                return v0;
            }
            auto d = c->to_doubles();
            same_values &= k == 0 || std::equal(d.begin(), d.end(), stacked.begin());
            stacked.insert(stacked.end(), d.begin(), d.end());
        }
        // Exporters give every slice its own copy of Pow's 2 and LayerNorm's epsilon: equal
        // constants stay one scalar, so Pow(x, 2) still lowers to x * x, not a libm pow.
        if (same_values) return v0;
        std::string name = g_.unique_name(v0 + "_stacked");
        g_.set_constant(name, Tensor::from_doubles(g_.value(v0).dtype, {K, last}, stacked));
        return name;
    }

    // m is a batched LayerNormalization whose inputs 1 and 2 (scale, bias) were stacked to
    // [K, n]: it normalises with ones/zeros of [n], then a Mul and an Add apply the stacks.
    bool split_affine(Node &m, std::vector<Node> &added, const std::string &base, DType dt, int K, int64_t n,
                      bool &pushed) {
        std::string scale = m.inputs.size() > 1 ? m.inputs[1] : "", bias = m.inputs.size() > 2 ? m.inputs[2] : "";
        auto stacked = [&](const std::string &v) { return !v.empty() && g_.value(v).shape == Shape{K, n}; };
        if (!stacked(scale) && !(bias.size() && stacked(bias))) return true;  // shared affine: as is
        if (!stacked(scale) || (!bias.empty() && !stacked(bias))) return false;
        std::string ones = g_.unique_name(base + "/ones"), y = m.outputs[0];
        g_.set_constant(ones, Tensor::from_doubles(dt, {n}, std::vector<double>(n, 1.0)));
        m.inputs = {m.inputs[0], ones};
        Shape ys = g_.value(y).shape;
        std::string normed = g_.unique_name(base + "/normed");
        g_.values[normed] = ValueInfo{normed, dt, ys, {}, true, {}};
        m.outputs = {normed};
        added.push_back(m);
        pushed = true;
        Node mul;
        mul.name = node_name(base + "/Mul");
        mul.op = "Mul";
        mul.inputs = {normed, scale};
        std::string scaled = bias.empty() ? y : g_.unique_name(base + "/scaled");
        if (!bias.empty()) g_.values[scaled] = ValueInfo{scaled, dt, ys, {}, true, {}};
        mul.outputs = {scaled};
        added.push_back(mul);
        if (!bias.empty()) {
            Node add;
            add.name = node_name(base + "/Add");
            add.op = "Add";
            add.inputs = {scaled, bias};
            add.outputs = {y};
            added.push_back(add);
        }
        return true;
    }
};

}  // namespace

void fuse_horizontal_slices(Graph &g) {
    SliceFuser f(g);
    while (f.fuse_one()) {
    }
}

}  // namespace loom
