#include "measure/output_tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "graph/op_catalog.h"
#include "reference/reference.h"
#include "support/error.h"

namespace loom {

namespace {

constexpr double kFp32Base = 1e-5;
constexpr double kLowPrecisionUlps = 4;  // base = this many unit roundoffs of the operands
constexpr double kDepthFree = 4;         // accumulating ops that keep the base
constexpr double kMaxRtol = 0.1;

bool accumulates(const Node &n) {
    if (n.op == "MaxPool" || n.op == "GlobalMaxPool" || n.op == "ReduceMax" || n.op == "ReduceMin") return false;
    if (n.op == "Softmax" || n.op == "LogSoftmax") return true;
    if (!is_supported_op(n.op)) return false;
    switch (op_kind(n.op)) {
    case OpKind::Reduce:
    case OpKind::MatMul:
    case OpKind::Conv:
    case OpKind::Pool:
    case OpKind::Norm: return true;
    default: return false;
    }
}

// Accumulating steps of a node: the rounding it adds to its output.
int accumulations(const Node &n) {
    if (n.op == "FusedAttention") return 3;  // the product, the softmax and the product it fused
    return accumulates(n) ? 1 : 0;
}

double base_rtol(Precision p) { return p == Precision::FP32 ? kFp32Base : kLowPrecisionUlps * unit_roundoff(p); }

// The precision of the narrowest rounding to a 16-bit float among \p output's ancestors (the
// values nodes produce: a model's Cast to f16/bf16, or the Cast that rounds a half output), FP32
// when there is none. The reference rounds there too, but an f32 result on the other side of a
// rounding boundary from its f64 one lands one half-precision unit away.
Precision storage_precision(const Graph &g, const std::string &output) {
    Precision p = Precision::FP32;
    std::set<std::string> seen;
    std::vector<std::string> todo = {output};
    while (!todo.empty()) {
        std::string v = todo.back();
        todo.pop_back();
        if (v.empty() || !seen.insert(v).second) continue;
        int k = g.producer(v);
        if (k < 0) continue;
        DType t = g.value(v).dtype;
        if (t == DType::BF16) p = Precision::BF16;
        else if (t == DType::F16 && p == Precision::FP32) p = Precision::FP16;
        for (const auto &in : g.nodes[k].inputs) todo.push_back(in);
    }
    return p;
}

}  // namespace

std::string OutputTolerance::describe() const {
    char buf[256];
    if (fixed) {
        snprintf(buf, sizeof buf, "%.2e (given)", rtol);
        return buf;
    }
    // Up to kDepthFree the base stands alone; past it, the growth with depth is spelled out.
    if (depth <= kDepthFree)
        snprintf(buf, sizeof buf, "%.2e (%s, depth %d", rtol, precision_name(precision), depth);
    else
        snprintf(buf, sizeof buf, "%.2e (%s: %.3g x sqrt(%d/%g) for depth %d", rtol, precision_name(precision), base,
                 depth, kDepthFree, depth);
    std::string s = buf;
    if (storage != Precision::FP32) s += str_cat(", ", storage == Precision::BF16 ? "bf16" : "f16", " storage");
    if (!sensitive_op.empty()) {
        snprintf(buf, sizeof buf, " x %.3g, the rms of %s's input", sensitivity, sensitive_op.c_str());
        s += buf;
    }
    if (rtol >= kMaxRtol) s += ", capped";
    return s + ")";
}

int accumulation_depth(const Graph &g, const std::string &value) {
    std::map<std::string, int> depth;  // values not in the map (inputs, constants) are at 0
    for (const Node &n : g.nodes) {
        int d = 0;
        for (const auto &in : n.inputs)
            if (!in.empty()) {
                auto it = depth.find(in);
                if (it != depth.end()) d = std::max(d, it->second);
            }
        d += accumulations(n);
        for (const auto &out : n.outputs) depth[out] = d;
    }
    auto it = depth.find(value);
    return it == depth.end() ? 0 : it->second;
}

// Index of the Sigmoid/Exp/Softmax node that \p output is (through layout ops), or -1.
int sensitive_node(const Graph &g, const std::string &output) {
    std::string v = output;
    for (int steps = 0; steps < 16; steps++) {
        int p = g.producer(v);
        if (p < 0) return -1;
        const Node &n = g.nodes[p];
        if (n.op == "Sigmoid" || n.op == "Exp" || n.op == "Softmax") return p;
        if (n.op != "Reshape" && n.op != "Transpose" && n.op != "Slice") return -1;
        v = n.inputs[0];
    }
    return -1;
}

std::string sensitive_input(const Graph &g, const std::string &output) {
    int p = sensitive_node(g, output);
    return p < 0 ? "" : g.nodes[p].inputs[0];
}

OutputTolerance output_tolerance(const Graph &g, const std::string &output, Precision p,
                                 const Tensor *sensitive_value) {
    OutputTolerance t;
    t.precision = p;
    t.storage = storage_precision(g, output);
    t.base = std::max(base_rtol(p), base_rtol(t.storage));
    t.depth = accumulation_depth(g, output);
    if (!sensitive_input(g, output).empty() && sensitive_value && sensitive_value->numel() > 0) {
        double sum = 0;
        for (int64_t i = 0; i < sensitive_value->numel(); i++) sum += sensitive_value->get(i) * sensitive_value->get(i);
        double rms = std::sqrt(sum / (double)sensitive_value->numel());
        if (std::isfinite(rms) && rms > 1) {
            t.sensitivity = rms;
            t.sensitive_op = g.nodes[sensitive_node(g, output)].describe();
        }
    }
    t.rtol = std::min(kMaxRtol, t.base * std::sqrt(std::max(1.0, t.depth / kDepthFree)) * t.sensitivity);
    return t;
}

std::map<std::string, Tensor> run_reference_with_tolerances(const Graph &g,
                                                            const std::map<std::string, Tensor> &inputs,
                                                            Precision p,
                                                            std::map<std::string, OutputTolerance> &tolerances) {
    Graph with = g;
    std::set<std::string> outputs(g.outputs.begin(), g.outputs.end()), extra;
    for (const auto &o : g.outputs) {
        std::string s = sensitive_input(g, o);
        if (!s.empty() && !outputs.count(s) && !g.is_constant(s) &&
            !g.is_input(s) && extra.insert(s).second)
            with.outputs.push_back(s);
    }
    std::map<std::string, Tensor> all = run_reference(with, inputs), ref;
    for (const auto &o : g.outputs) {
        std::string s = sensitive_input(g, o);
        const Tensor *sv = nullptr;
        if (!s.empty()) {
            auto it = all.find(s);
            if (it != all.end()) sv = &it->second;
            else if (inputs.count(s)) sv = &inputs.at(s);
            else if (g.is_constant(s)) sv = g.constant(s);
        }
        tolerances[o] = output_tolerance(g, o, p, sv);
    }
    for (auto &[name, t] : all)
        if (outputs.count(name)) ref.emplace(name, std::move(t));
    return ref;
}

OutputError output_error(const Tensor &out, const Tensor &ref) {
    internal_check(out.shape() == ref.shape(), "output_error: shapes differ");
    OutputError e;
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); i++) {
        double a = out.get(i), b = ref.get(i), d = std::abs(a - b);
        if (!std::isfinite(a) && std::isfinite(b)) {
            e.non_finite++;
            continue;
        }
        if (std::isnan(d)) d = INFINITY;  // a NaN where the reference has one too never passes either
        num += d * d;
        den += b * b;
        if (d > e.max_abs || i == 0) e.max_abs = d, e.worst = i;
    }
    e.rel = std::sqrt(num / (den > 0 ? den : 1));
    if (std::isnan(e.rel)) e.rel = INFINITY;
    return e;
}

std::string tolerance_file_text(const std::map<std::string, OutputTolerance> &tolerances) {
    std::string s;
    char buf[64];
    for (const auto &[name, t] : tolerances) {
        snprintf(buf, sizeof buf, " %.6e ", t.rtol);
        s += name + buf + t.describe() + "\n";
    }
    return s;
}

}  // namespace loom
