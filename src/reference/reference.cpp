#include "reference/reference.h"

#include <cstring>

#include "reference/reference_internal.h"

namespace loom {
namespace ref {

const Tensor &OpArgs::input(int i) const {
    const Tensor *t = optional(i);
    if (!t) fail("input ", i, " is missing; this op needs it");
    return *t;
}

int OpArgs::num_inputs() const {
    int n = (int)in.size();
    while (n > 0 && in[n - 1] == nullptr) n--;
    return n;
}

Tensor OpArgs::new_output(int i) const {
    check(i < (int)out.size(), "output ", i, " has no type information");
    const ValueInfo &vi = out[i];
    for (int64_t d : vi.shape)
        check(d >= 0, "output '", vi.name, "' has unknown shape ", shape_str(vi.shape),
              "; run shape inference (prepare_graph) first");
    return Tensor(dtype_is_float(vi.dtype) ? DType::F64 : vi.dtype, vi.shape);
}

std::vector<double> to_f64(const Tensor &t) {
    std::vector<double> v(t.numel());
    if (t.dtype() == DType::F64) {
        if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(double));
    } else if (t.dtype() == DType::F32) {
        const float *p = static_cast<const float *>(t.data());
        for (size_t i = 0; i < v.size(); i++) v[i] = p[i];
    } else {
        for (size_t i = 0; i < v.size(); i++) v[i] = t.get((int64_t)i);
    }
    return v;
}

double *f64_data(Tensor &t) {
    internal_check(t.dtype() == DType::F64, "f64_data on a ", dtype_name(t.dtype()), " tensor");
    return static_cast<double *>(t.data());
}

Tensor f64_tensor(const Shape &shape, const std::vector<double> &v) {
    Tensor t(DType::F64, shape);
    internal_check((int64_t)v.size() == t.numel(), "f64_tensor: size mismatch");
    if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(double));
    return t;
}

Tensor output_from(const OpArgs &a, const std::vector<double> &v, int i) {
    Tensor out = a.new_output(i);
    internal_check((int64_t)v.size() == out.numel(), a.node.describe(), ": output ", i, " has ",
                   out.numel(), " elements, computed ", v.size());
    if (out.dtype() == DType::F64) {
        if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(double));
    } else {
        for (size_t k = 0; k < v.size(); k++) out.set((int64_t)k, v[k]);
    }
    return out;
}

Shape broadcast_shapes(const OpArgs &a, const std::vector<Shape> &shapes) {
    size_t rank = 0;
    for (const auto &s : shapes) rank = std::max(rank, s.size());
    Shape out(rank, 1);
    for (const auto &s : shapes) {
        for (size_t k = 0; k < s.size(); k++) {
            int64_t &o = out[rank - s.size() + k];
            int64_t d = s[k];
            if (d == o || d == 1) continue;
            if (o == 1) {
                o = d;
                continue;
            }
            std::string all;
            for (const auto &t : shapes) all += (all.empty() ? "" : ", ") + shape_str(t);
            a.fail("input shapes ", all, " do not broadcast (NumPy rules)");
        }
    }
    return out;
}

Broadcaster::Broadcaster(const Shape &out, const std::vector<Shape> &ins) : out_(out) {
    for (const auto &s : ins) {
        internal_check(s.size() <= out.size(), "broadcast of rank ", s.size(), " to rank ", out.size());
        std::vector<int64_t> st(out.size(), 0);
        std::vector<int64_t> own = shape_strides(s);
        size_t lead = out.size() - s.size();
        for (size_t k = 0; k < s.size(); k++) {
            internal_check(s[k] == out[lead + k] || s[k] == 1, "cannot broadcast ", shape_str(s),
                           " to ", shape_str(out));
            st[lead + k] = s[k] == 1 ? 0 : own[k];
        }
        strides_.push_back(st);
        identity_.push_back(s == out);
    }
}

Tensor gather_elements(const Tensor &in, const std::vector<int64_t> &src, const ValueInfo &info,
                       double fill) {
    internal_check(shape_numel(info.shape) == (int64_t)src.size(), "gather_elements: ",
                   shape_str(info.shape), " vs ", src.size(), " indices");
    const int64_t n = (int64_t)src.size();
    if (dtype_is_float(in.dtype())) {
        Tensor out(DType::F64, info.shape);
        std::vector<double> v = to_f64(in);
        double *o = f64_data(out);
#pragma omp parallel for if (n > kParallelMin)
        for (int64_t i = 0; i < n; i++) o[i] = src[i] < 0 ? fill : v[src[i]];
        return out;
    }
    // Integer data keeps the input's dtype (layout ops do not convert).
    Tensor out(in.dtype(), info.shape);
    std::vector<int64_t> v = in.to_ints();
    for (int64_t i = 0; i < n; i++) out.set_int(i, src[i] < 0 ? (int64_t)fill : v[src[i]]);
    return out;
}

std::vector<int64_t> unflatten(int64_t i, const Shape &shape) {
    std::vector<int64_t> idx(shape.size());
    for (int d = (int)shape.size() - 1; d >= 0; d--) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    return idx;
}

std::vector<int64_t> ints_or(const OpArgs &a, const char *attr, size_t n, int64_t def) {
    std::vector<int64_t> v = a.node.get_ints(attr);
    if (v.empty()) return std::vector<int64_t>(n, def);
    a.check(v.size() == n, "attribute '", attr, "' has ", v.size(), " entries, expected ", n);
    return v;
}

namespace {
const OpTable &op_table() {
    static const OpTable t = [] {
        OpTable r;
        register_elementwise_ops(r);
        register_linalg_ops(r);
        register_pool_norm_ops(r);
        register_reduce_ops(r);
        register_layout_ops(r);
        register_resize_ops(r);
        return r;
    }();
    return t;
}
}  // namespace

}  // namespace ref

std::vector<Tensor> evaluate_node(const Node &node, const std::vector<const Tensor *> &inputs,
                                  const std::vector<ValueInfo> &outputs) {
    const auto &table = ref::op_table();
    auto it = table.find(node.op);
    if (it == table.end()) {
        std::vector<std::string> names;
        for (const auto &kv : table) names.push_back(kv.first);
        throw UserError(str_cat(node.describe(), ": the reference interpreter does not implement op '",
                                node.op, "'", did_you_mean(node.op, names)));
    }
    internal_check(outputs.size() >= node.outputs.size(), node.describe(), ": ", node.outputs.size(),
                   " outputs but type information for ", outputs.size());
    ref::OpArgs args{node, inputs, outputs};
    std::vector<Tensor> r = it->second(args);
    r.resize(node.outputs.size());
    for (size_t i = 0; i < r.size(); i++) {
        if (node.outputs[i].empty()) continue;
        internal_check(r[i].shape() == outputs[i].shape, node.describe(), ": output ", i, " is ",
                       shape_str(r[i].shape()), " but ", shape_str(outputs[i].shape), " was declared");
    }
    return r;
}

std::map<std::string, Tensor> run_reference(const Graph &g,
                                            const std::map<std::string, Tensor> &inputs) {
    std::map<std::string, const Tensor *> env;
    std::map<std::string, Tensor> owned;  // node results
    std::vector<std::string> given;
    for (const auto &kv : inputs) given.push_back(kv.first);
    for (const auto &name : g.inputs) {
        auto it = inputs.find(name);
        user_check(it != inputs.end(), "graph input '", name, "' was not given",
                   did_you_mean(name, given), "; expected ", dtype_name(g.value(name).dtype), " ",
                   shape_str(g.value(name).shape));
        const ValueInfo &vi = g.value(name);
        user_check(it->second.shape() == vi.shape, "graph input '", name, "' has shape ",
                   shape_str(it->second.shape()), "; expected ", shape_str(vi.shape));
        user_check(it->second.dtype() == vi.dtype, "graph input '", name, "' has dtype ",
                   dtype_name(it->second.dtype()), "; expected ", dtype_name(vi.dtype));
        env[name] = &it->second;
    }
    for (const auto &kv : g.initializers) env[kv.first] = &kv.second;

    // Free each intermediate after its last reader, so large models fit in memory.
    std::map<std::string, size_t> last_use;
    for (size_t i = 0; i < g.nodes.size(); i++)
        for (const auto &in : g.nodes[i].inputs) last_use[in] = i;
    for (const auto &o : g.outputs) last_use[o] = g.nodes.size();

    for (size_t ni = 0; ni < g.nodes.size(); ni++) {
        const Node &n = g.nodes[ni];
        std::vector<const Tensor *> ins;
        for (const auto &in : n.inputs) {
            if (in.empty()) {
                ins.push_back(nullptr);
                continue;
            }
            auto it = env.find(in);
            internal_check(it != env.end(), n.describe(), " reads '", in,
                           "' before it is computed (graph not topologically sorted?)");
            ins.push_back(it->second);
        }
        std::vector<ValueInfo> infos;
        for (const auto &o : n.outputs) infos.push_back(o.empty() ? ValueInfo{} : g.value(o));
        std::vector<Tensor> res = evaluate_node(n, ins, infos);
        for (size_t k = 0; k < n.outputs.size(); k++) {
            if (n.outputs[k].empty()) continue;
            owned[n.outputs[k]] = std::move(res[k]);
            env[n.outputs[k]] = &owned[n.outputs[k]];
        }
        for (const auto &in : n.inputs) {
            auto lu = last_use.find(in);
            if (!in.empty() && lu != last_use.end() && lu->second == ni && owned.count(in)) {
                env.erase(in);
                owned.erase(in);
            }
        }
    }

    std::map<std::string, Tensor> result;
    for (const auto &o : g.outputs) {
        auto it = env.find(o);
        internal_check(it != env.end(), "graph output '", o, "' was never computed");
        const Tensor &t = *it->second;
        result[o] = dtype_is_float(t.dtype()) && t.dtype() != DType::F64 ? t.cast(DType::F64) : t;
    }
    return result;
}

std::map<std::string, Tensor> random_inputs(const Graph &g, uint64_t seed) {
    std::map<std::string, Tensor> r;
    uint64_t k = 0;
    for (const auto &name : g.inputs) {
        const ValueInfo &vi = g.value(name);
        for (size_t d = 0; d < vi.shape.size(); d++) {
            std::string sym = d < vi.symbols.size() ? vi.symbols[d] : "";
            user_check(vi.shape[d] >= 0, "graph input '", name, "' dim ", d,
                       sym.empty() ? std::string(" is unknown") : " ('" + sym + "') is unbound",
                       "; bind it with --input ", sym.empty() ? name + "=<dims>" : sym + "=<size>");
        }
        Tensor t(vi.dtype, vi.shape);
        // Distinct, well-mixed seeds per input so two same-shaped inputs differ.
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + (++k) * 0xBF58476D1CE4E5B9ull;
        if (dtype_is_float(vi.dtype)) fill_random(t, s, -1.0, 1.0);
        else if (vi.dtype == DType::Bool) fill_random(t, s, 0.0, 2.0);
        else fill_random(t, s, 0.0, 10.0);
        r[name] = std::move(t);
    }
    return r;
}

}  // namespace loom
