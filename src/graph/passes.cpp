#include "graph/passes.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <set>

#include "graph/canonicalize_internal.h"
#include "graph/winograd_rewrite.h"
#include "graph/op_catalog.h"
#include "graph/symbolic_shapes.h"
#include "support/error.h"
#include "support/debug_output.h"

namespace loom {

void bind_input_shapes(Graph &g, const InputBindings &b) {
    std::set<std::string> known(g.inputs.begin(), g.inputs.end());
    for (const auto &in : g.inputs)
        for (const auto &sym : g.value(in).symbols)
            if (!sym.empty()) known.insert(sym);
    for (const auto &kv : b)
        user_check(known.count(kv.first), "--input ", kv.first, "=…: the model has no input or symbolic dim named '",
                   kv.first, "'", did_you_mean(kv.first, std::vector<std::string>(known.begin(), known.end())));
    for (const auto &in : g.inputs) {
        ValueInfo &vi = g.value(in);
        auto whole = b.find(in);
        if (whole != b.end()) {
            user_check(whole->second.size() == vi.shape.size(), "--input ", in, "=", shape_str(whole->second),
                       ": input '", in, "' has rank ", vi.shape.size());
            for (size_t d = 0; d < vi.shape.size(); d++)
                user_check(vi.shape[d] < 0 || vi.shape[d] == whole->second[d], "--input ", in, "=",
                           shape_str(whole->second), ": dim ", d, " of '", in, "' is fixed at ", vi.shape[d]);
            vi.shape = whole->second;
        }
        for (size_t d = 0; d < vi.shape.size(); d++) {
            if (vi.shape[d] >= 0) continue;
            std::string sym = d < vi.symbols.size() ? vi.symbols[d] : "";
            auto it = sym.empty() ? b.end() : b.find(sym);
            if (it != b.end()) {
                user_check(it->second.size() == 1, "--input ", sym, "=…: a symbolic dim takes one number");
                vi.shape[d] = it->second[0];
                continue;
            }
            Shape example = vi.shape;
            for (auto &e : example) e = e < 0 ? 1 : e;
            throw UserError(str_cat("input '", in, "' dim ", d, (sym.empty() ? "" : " ('" + sym + "')"),
                                    " is not bound; pass ", (sym.empty() ? "" : "--input " + sym + "=N or "),
                                    "--input ", in, "=", shape_str(example)));
        }
        checked_tensor_bytes(vi.dtype, vi.shape, str_cat("input '", in, "'"));
        vi.symbols.clear();
        vi.has_shape = true;
    }
}

// Folding keeps constants small: a big constant output (an Expand of a scalar, say) is cheaper
// to compute in the pipeline than to bake in.
static constexpr int64_t kMaxFoldedElements = 1 << 20;

void infer_shapes_and_fold(Graph &g, const NodeEvaluator &evaluate) {
    std::vector<Node> todo = std::move(g.nodes), done;
    g.nodes.clear();
    std::reverse(todo.begin(), todo.end());  // pop from the back in topological order
    while (!todo.empty()) {
        Node n = std::move(todo.back());
        todo.pop_back();
        canon::Result r = canon::canonicalize_node(g, n);
        if (!r.replacement.empty()) {
            // Replacements (Reshape, or Reshape–Softmax–Reshape) are canonicalised in turn; a
            // Reshape never asks for a replacement, so this terminates.
            for (auto it = r.replacement.rbegin(); it != r.replacement.rend(); ++it) todo.push_back(*it);
            continue;
        }
        bool all_outputs_const = true;
        for (const auto &o : n.outputs) all_outputs_const &= o.empty() || g.is_constant(o);
        if (all_outputs_const) continue;  // folded by canonicalisation (Shape, Constant …)
        bool all_inputs_const = true;
        for (const auto &in : n.inputs) all_inputs_const &= in.empty() || g.is_constant(in);
        int64_t out_elems = 0;
        for (const auto &o : n.outputs)
            if (!o.empty()) out_elems += shape_numel(g.value(o).shape);
        if (all_inputs_const && out_elems <= kMaxFoldedElements) {
            std::vector<const Tensor *> ins;
            for (const auto &in : n.inputs) ins.push_back(in.empty() ? nullptr : g.constant(in));
            std::vector<ValueInfo> outs;
            for (const auto &o : n.outputs) outs.push_back(o.empty() ? ValueInfo{} : g.value(o));
            std::vector<Tensor> res = evaluate(n, ins, outs);
            for (size_t i = 0; i < n.outputs.size(); i++) {
                if (n.outputs[i].empty()) continue;
                // A node may name more outputs than its op makes (a hostile file): nothing to fold there.
                user_check(i < res.size() && res[i].bytes().size() == (size_t)shape_numel(res[i].shape()) *
                                                                         (size_t)dtype_size(res[i].dtype()),
                           n.op, " '", n.name, "': output ", i, " ('", n.outputs[i], "') is not one that ", n.op,
                           " produces; remove it from the node's outputs");
                g.set_constant(n.outputs[i], res[i].cast(outs[i].dtype));
            }
            continue;
        }
        done.push_back(std::move(n));
    }
    g.nodes = std::move(done);
}

void remove_identities(Graph &g) {
    std::vector<Node> kept;
    for (auto &n : g.nodes) {
        bool removable = (n.op == "Identity" || n.op == "Dropout") && n.has_input(0) &&
                         !g.is_output(n.outputs[0]);
        if (n.op == "Dropout")
            for (size_t i = 1; i < n.outputs.size(); i++)
                removable &= n.outputs[i].empty() || g.consumers(n.outputs[i]).empty();
        if (removable) {
            std::string from = n.outputs[0], to = n.inputs[0];
            for (auto &m : g.nodes)
                for (auto &in : m.inputs)
                    if (in == from) in = to;
            g.values.erase(from);
            continue;
        }
        kept.push_back(std::move(n));
    }
    g.nodes = std::move(kept);
}

void eliminate_dead_code(Graph &g) {
    std::set<std::string> live(g.outputs.begin(), g.outputs.end());
    std::vector<bool> keep(g.nodes.size(), false);
    for (int i = (int)g.nodes.size() - 1; i >= 0; i--) {
        for (const auto &o : g.nodes[i].outputs) keep[i] = keep[i] || live.count(o);
        if (keep[i])
            for (const auto &in : g.nodes[i].inputs) live.insert(in);
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g.nodes.size(); i++)
        if (keep[i]) kept.push_back(std::move(g.nodes[i]));
        else
            for (const auto &o : g.nodes[i].outputs) g.values.erase(o);
    g.nodes = std::move(kept);
    for (auto it = g.initializers.begin(); it != g.initializers.end();) {
        if (!live.count(it->first)) {
            g.values.erase(it->first);
            it = g.initializers.erase(it);
        } else {
            ++it;
        }
    }
}

void fold_conv_batchnorm(Graph &g) {
    for (auto &bn : g.nodes) {
        if (bn.op != "BatchNormalization") continue;
        int pi = g.producer(bn.inputs[0]);
        if (pi < 0) continue;
        Node &conv = g.nodes[pi];
        const bool transposed = conv.op == "ConvTranspose";
        if ((conv.op != "Conv" && !transposed) || g.consumers(conv.outputs[0]).size() != 1 ||
            g.is_output(conv.outputs[0]))
            continue;
        const Tensor *w = g.constant(conv.inputs[1]);
        const Tensor *b = conv.has_input(2) ? g.constant(conv.inputs[2]) : nullptr;
        if (!w || (conv.has_input(2) && !b)) continue;
        std::vector<const Tensor *> p;
        for (int i = 1; i < 5; i++) p.push_back(g.constant(bn.inputs[i]));
        if (std::count(p.begin(), p.end(), nullptr)) continue;
        double eps = bn.get_float("epsilon", 1e-5);
        // Output channel of each weight: a Conv's weight is [M, C/group, k...]; a ConvTranspose's
        // [C, M/group, k...], input channel c feeding outputs (c / (C/group)) * (M/group) + j.
        const int64_t groups = conv.get_int("group", 1), taps = w->numel() / (w->shape()[0] * w->shape()[1]);
        const int64_t M = transposed ? w->shape()[1] * groups : w->shape()[0];
        auto out_channel = [&](int64_t e) {
            if (!transposed) return e / (w->numel() / M);
            const int64_t c = e / (w->shape()[1] * taps), j = (e / taps) % w->shape()[1];
            return (c / (w->shape()[0] / groups)) * w->shape()[1] + j;
        };
        std::vector<double> scale(M);
        Tensor nw(w->dtype(), w->shape()), nb(w->dtype(), {M});
        for (int64_t m = 0; m < M; m++) {
            // y = (conv - mean) * scale / sqrt(var + eps) + beta, folded exactly in double.
            scale[m] = p[0]->get(m) / std::sqrt(p[3]->get(m) + eps);
            nb.set(m, ((b ? b->get(m) : 0.0) - p[2]->get(m)) * scale[m] + p[1]->get(m));
        }
        for (int64_t e = 0; e < w->numel(); e++) nw.set(e, w->get(e) * scale[out_channel(e)]);
        std::string wn = g.unique_name(conv.name + "_bn_weight"), bnm = g.unique_name(conv.name + "_bn_bias");
        g.set_constant(wn, nw);
        g.set_constant(bnm, nb);
        conv.inputs = {conv.inputs[0], wn, bnm};
        // The conv now produces the BN's output; the BN node becomes dead.
        std::string old = conv.outputs[0];
        conv.outputs[0] = bn.outputs[0];
        g.value(bn.outputs[0]).dtype = g.value(old).dtype;
        g.values.erase(old);
        bn.op = "";
    }
    g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [](const Node &n) { return n.op.empty(); }),
                  g.nodes.end());
}

int absorb_relu_into_clip(Graph &g) {
    int rewired = 0;
    for (auto &clip : g.nodes) {
        if (clip.op != "Clip" || clip.get_float("min", -1.0) < 0) continue;
        int pi = g.producer(clip.inputs[0]);
        if (pi < 0 || g.nodes[pi].op != "Relu") continue;
        clip.inputs[0] = g.nodes[pi].inputs[0];
        rewired++;
    }
    return rewired;
}

void pretranspose_gemm_weights(Graph &g) {
    for (auto &n : g.nodes) {
        if (n.op != "Gemm" || n.get_int("transB", 0) == 0) continue;
        const Tensor *b = g.constant(n.inputs[1]);
        if (!b || b->rank() != 2) continue;
        int64_t N = b->shape()[0], K = b->shape()[1];
        Tensor t(b->dtype(), {K, N});
        int es = dtype_size(b->dtype());
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < K; k++)
                std::memcpy((uint8_t *)t.data() + (k * N + i) * es, (const uint8_t *)b->data() + (i * K + k) * es, es);
        std::string name = g.unique_name(n.inputs[1] + "_t");
        g.set_constant(name, std::move(t));
        n.inputs[1] = name;
        n.attrs["transB"] = int64_t(0);
    }
}

int transpose_gemm_value_weights(Graph &g) {
    std::map<size_t, Node> before;  // node index -> the Transpose inserted before it
    for (size_t k = 0; k < g.nodes.size(); k++) {
        Node &n = g.nodes[k];
        if (n.op != "Gemm" || n.get_int("transB", 0) == 0 || !n.has_input(1) || g.is_constant(n.inputs[1]) ||
            g.value(n.inputs[1]).shape.size() != 2)
            continue;
        const ValueInfo b = g.value(n.inputs[1]);
        std::string t = g.unique_name(n.inputs[1] + "_t");
        g.values[t] = ValueInfo{t, b.dtype, {b.shape[1], b.shape[0]}, {}, true};
        Node tr;
        tr.name = g.unique_name(n.name + "_weight_transpose");
        tr.op = "Transpose";
        tr.inputs = {n.inputs[1]};
        tr.outputs = {t};
        tr.attrs["perm"] = std::vector<int64_t>{1, 0};
        before[k] = std::move(tr);
        n.inputs[1] = t;
        n.attrs["transB"] = int64_t(0);
    }
    if (before.empty()) return 0;
    std::vector<Node> out;
    for (size_t k = 0; k < g.nodes.size(); k++) {
        if (auto it = before.find(k); it != before.end()) out.push_back(std::move(it->second));
        out.push_back(std::move(g.nodes[k]));
    }
    g.nodes = std::move(out);
    return (int)before.size();
}

void eliminate_common_subexpressions(Graph &g) {
    std::map<std::string, size_t> seen;  // node key -> index in kept
    std::map<std::string, std::string> renamed;
    std::vector<Node> kept;
    for (auto &n : g.nodes) {
        for (auto &in : n.inputs) {
            auto r = renamed.find(in);
            if (r != renamed.end()) in = r->second;
        }
        std::string key = n.op + "(";
        for (const auto &in : n.inputs) key += in + ",";
        key += ")";
        for (const auto &kv : n.attrs) key += kv.first + "=" + attr_str(kv.second) + ";";
        bool outputs_free = true;
        for (const auto &o : n.outputs) outputs_free &= !g.is_output(o);
        auto it = seen.find(key);
        if (it != seen.end() && outputs_free) {
            const Node &same = kept[it->second];
            for (size_t i = 0; i < n.outputs.size(); i++) {
                renamed[n.outputs[i]] = same.outputs[i];
                g.values.erase(n.outputs[i]);
            }
            continue;
        }
        seen[key] = kept.size();
        kept.push_back(std::move(n));
    }
    g.nodes = std::move(kept);
}

void print_graph(const Graph &g, std::ostream &os) {
    os << "graph " << g.name << " (opset " << g.opset << ")\n";
    for (const auto &in : g.inputs) {
        const auto &v = g.value(in);
        os << "  input " << in << ": " << dtype_name(v.dtype) << " " << (v.sym.empty() ? shape_str(v.shape) : sym_shape_str(v.sym)) << "\n";
    }
    for (const auto &n : g.nodes) {
        os << "  " << n.name << " = " << n.op << "(";
        for (size_t i = 0; i < n.inputs.size(); i++) os << (i ? ", " : "") << n.inputs[i];
        os << ") -> ";
        for (size_t i = 0; i < n.outputs.size(); i++) {
            const auto &v = g.value(n.outputs[i]);
            os << (i ? ", " : "") << n.outputs[i] << ":" << dtype_name(v.dtype) << " "
               << (v.has_shape ? (v.sym.empty() ? shape_str(v.shape) : sym_shape_str(v.sym)) : "?");
        }
        if (!n.attrs.empty()) {
            os << "  {";
            bool first = true;
            for (const auto &kv : n.attrs) os << (first ? "" : ", ") << kv.first << "=" << attr_str(kv.second), first = false;
            os << "}";
        }
        os << "\n";
    }
    for (const auto &o : g.outputs) os << "  output " << o << "\n";
}

void prepare_graph(Graph &g, const NodeEvaluator &evaluate, const PrepareOptions &opts) {
    bool dump = opts.dump || debug_output();
    auto step = [&](const char *name, const std::function<void()> &pass) {
        pass();
        if (dump) {
            std::cerr << "=== after " << name << " ===\n";
            print_graph(g, std::cerr);
        }
    };
    g.topo_sort();
    g.validate();
    if (opts.dynamic()) return prepare_graph_dynamic(g, evaluate, opts);
    step("bind_input_shapes", [&] { bind_input_shapes(g, opts.bindings); });
    step("remove_identities", [&] { remove_identities(g); });
    step("infer_shapes_and_fold", [&] { infer_shapes_and_fold(g, evaluate); });
    step("widen_half_precision", [&] { widen_half_precision(g); });
    if (opts.fold_conv_bn) step("fold_conv_batchnorm", [&] { fold_conv_batchnorm(g); });
    step("rewrite_upsampling_conv_transpose", [&] { rewrite_upsampling_conv_transpose(g); });
    if (opts.winograd) step("rewrite_winograd_convs", [&] { rewrite_winograd_convs(g); });
    step("absorb_relu_into_clip", [&] { absorb_relu_into_clip(g); });
    step("pretranspose_gemm_weights", [&] { pretranspose_gemm_weights(g); });
    step("recognize_gelu", [&] { recognize_gelu(g); });
    step("recognize_swish", [&] { recognize_swish(g); });
    step("recognize_group_norm", [&] { recognize_group_norm(g); });
    step("recognize_attention", [&] { recognize_attention(g, opts.attention); });
    if (opts.horizontal_fusion) step("fuse_horizontal_slices", [&] { fuse_horizontal_slices(g); });
    if (opts.cse) step("eliminate_common_subexpressions", [&] { eliminate_common_subexpressions(g); });
    step("eliminate_dead_code", [&] { eliminate_dead_code(g); });
    g.validate();
}

}  // namespace loom
