#include "graph/symbolic_shapes.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "graph/op_catalog.h"
#include "support/error.h"

namespace loom {

namespace {

using Sizes = std::map<std::string, int64_t>;

// The second preparation moves every open dim by a different multiple of 32, so that dims of two
// symbols never coincide and sizes that must be multiples of 32 (a detector's strides) stay so.
constexpr int64_t kCheckStep = 32;

/// What the symbolic inference of one graph knows: the two preparations and the sizes they had.
struct Inference {
    Graph &g;
    const Graph &g2;
    Sizes rep, rep2;
    DynamicDims &dyn;

    SymShape in(const Node &n, int k) const { return sym_shape_of(g.value(n.inputs.at(k))); }
    const Shape &shape(const std::string &v) const { return g.value(v).shape; }
    const Shape &shape2(const std::string &v) const { return g2.value(v).shape; }

    void require(const SymDim &a, const SymDim &b, const std::string &what, bool at_least = false) {
        if (a.is_static() && b.is_static()) return;
        if (!at_least && a == b) return;
        dyn.requirements.push_back({a, b, at_least, what});
    }
    [[noreturn]] void fail(const Node &n, const std::string &why) const {
        std::set<std::string> syms;
        for (const auto &kv : rep) syms.insert(kv.first);
        std::string names;
        for (const auto &s : syms) names += (names.empty() ? "" : ", ") + s;
        throw UserError(str_cat("dynamic shapes: ", n.describe(), " ", why, "; bind the dims (", names,
                                ") with --input to compile for one size"));
    }
};

/// NumPy broadcasting of symbolic shapes; dims that must agree become requirements.
SymShape broadcast(Inference &inf, const Node &n, const std::vector<SymShape> &shapes) {
    size_t rank = 0;
    for (const auto &s : shapes) rank = std::max(rank, s.size());
    SymShape out(rank, SymDim(1));
    for (size_t d = 0; d < rank; d++) {
        std::vector<SymDim> cands;
        for (const auto &s : shapes) {
            if (d + s.size() < rank) continue;
            const SymDim &x = s[d + s.size() - rank];
            if (x.is_static() && x.value() == 1) continue;
            cands.push_back(x);
        }
        if (cands.empty()) continue;
        // A static size wins (a symbolic dim broadcast against it must equal it).
        SymDim pick = cands[0];
        for (const auto &c : cands)
            if (c.is_static()) pick = c;
        for (const auto &c : cands)
            if (c != pick) inf.require(c, pick, str_cat(n.describe(), " broadcasts dim ", d, " of its inputs"));
        out[d] = pick;
    }
    return out;
}

/// The spatial output size of a Conv or pool window.
SymDim window_out(const SymDim &x, int64_t pb, int64_t pe, int64_t k, int64_t stride, int64_t dil, bool ceil_mode) {
    SymDim span = x + (pb + pe - ((k - 1) * dil + 1));
    return floordiv(ceil_mode ? span + (stride - 1) : span, stride) + 1;
}

/// Reshape: dims grouped where the element counts of input and output runs agree; an output dim
/// that moves with the size is its group's input product over the group's static output dims, or
/// the one input dim (or product of symbols) that matches it at both sizes.
SymShape reshape(Inference &inf, const Node &n) {
    SymShape x = inf.in(n, 0);
    const std::string &out = n.outputs[0];
    const Shape &o1 = inf.shape(out), &o2 = inf.shape2(out);
    const Shape &x1 = inf.shape(n.inputs[0]);
    SymShape y(o1.size());
    size_t i = 0, j = 0;
    while (j < o1.size() || i < x1.size()) {
        size_t i0 = i, j0 = j;
        int64_t pi = 1, pj = 1;
        // Take at least one dim each side (where left), then grow the smaller product.
        if (i < x1.size()) pi *= x1[i++];
        if (j < o1.size()) pj *= o1[j++];
        while (pi != pj) {
            if (pi < pj && i < x1.size()) pi *= x1[i++];
            else if (pj < pi && j < o1.size()) pj *= o1[j++];
            else break;
        }
        // Absorb trailing unit dims into this group.
        while (j < o1.size() && o1[j] == 1 && (i >= x1.size() || x1[i] != 1)) j++;
        SymDim in_prod = 1;
        for (size_t a = i0; a < i; a++) in_prod = in_prod * x[a];
        std::vector<size_t> moving;
        SymDim static_prod = 1;
        for (size_t b = j0; b < j; b++) {
            if (o1[b] == o2[b] && in_prod.is_static()) y[b] = o1[b];
            else if (o1[b] == o2[b]) { y[b] = o1[b]; static_prod = static_prod * o1[b]; }
            else moving.push_back(b);
            if (o1[b] == o2[b] && in_prod.is_static()) static_prod = static_prod * o1[b];
        }
        if (moving.size() == 1) {
            y[moving[0]] = floordiv(in_prod, static_prod);
        } else {
            for (size_t b : moving) {
                bool found = false;
                for (const auto &cand : x)
                    if (!cand.is_static() && cand.eval(inf.rep) == o1[b] && cand.eval(inf.rep2) == o2[b]) {
                        y[b] = cand, found = true;
                        break;
                    }
                if (!found) inf.fail(n, str_cat("splits a size-dependent dim into several (", shape_str(o1), ")"));
            }
        }
    }
    inf.require(sym_numel(y), sym_numel(x), str_cat(n.describe(), " keeps the element count"));
    return y;
}

/// The symbolic shape of output \p k of \p n, by the op's size rule.
SymShape infer_output(Inference &inf, const Node &n, size_t k) {
    const std::string &op = n.op;
    const std::string &out = n.outputs[k];
    const Shape &o1 = inf.shape(out), &o2 = inf.shape2(out);
    if (k > 0 && op != "Split") {
        // Auxiliary outputs (a LayerNorm's mean): static, or as the first output with unit dims.
        if (o1 == o2) return SymShape(o1.begin(), o1.end());
        SymShape x = inf.in(n, 0);
        SymShape y(o1.size());
        for (size_t d = 0; d < o1.size(); d++) y[d] = o1[d] == 1 && o2[d] == 1 ? SymDim(1) : x.at(d);
        return y;
    }
    if (is_elementwise_op(op)) {
        std::vector<SymShape> ins;
        for (int i = 0; i < n.num_inputs(); i++)
            if (n.has_input(i)) ins.push_back(inf.in(n, i));
        return broadcast(inf, n, ins);
    }
    if (op == "MatMul") {
        SymShape a = inf.in(n, 0), b = inf.in(n, 1);
        bool a1 = a.size() == 1, b1 = b.size() == 1;
        if (a1) a.insert(a.begin(), SymDim(1));
        if (b1) b.push_back(SymDim(1));
        inf.require(a.back(), b[b.size() - 2], str_cat(n.describe(), " multiplies matching inner dims"));
        SymShape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
        SymShape y = broadcast(inf, n, {ba, bb});
        if (!a1) y.push_back(a[a.size() - 2]);
        if (!b1) y.push_back(b.back());
        return y;
    }
    if (op == "Gemm") {
        SymShape a = inf.in(n, 0), b = inf.in(n, 1);
        bool ta = n.get_int("transA", 0), tb = n.get_int("transB", 0);
        inf.require(ta ? a[0] : a[1], tb ? b[1] : b[0], str_cat(n.describe(), " multiplies matching inner dims"));
        return {ta ? a[1] : a[0], tb ? b[0] : b[1]};
    }
    if (op == "Conv" || op == "MaxPool" || op == "AveragePool" || op == "ConvTranspose") {
        SymShape x = inf.in(n, 0);
        size_t sp = x.size() - 2;
        auto ks = n.get_ints("kernel_shape"), st = n.get_ints("strides"), dil = n.get_ints("dilations"),
             pads = n.get_ints("pads");
        SymShape y = {x[0], op == "Conv" || op == "ConvTranspose" ? SymDim(o1[1]) : x[1]};
        bool ceil_mode = n.get_int("ceil_mode", 0) != 0;
        for (size_t i = 0; i < sp; i++) {
            int64_t d = dil.empty() ? 1 : dil[i];
            if (op == "ConvTranspose") {
                auto op_pad = n.get_ints("output_padding");
                y.push_back((x[2 + i] - 1) * st[i] - pads[i] - pads[sp + i] + (ks[i] - 1) * d +
                            (op_pad.empty() ? 0 : op_pad[i]) + 1);
                continue;
            }
            SymDim o = window_out(x[2 + i], pads[i], pads[sp + i], ks[i], st[i], d, ceil_mode);
            inf.require(x[2 + i] + (pads[i] + pads[sp + i]), (ks[i] - 1) * d + 1,
                        str_cat(n.describe(), "'s window fits dim ", 2 + i), true);
            if (ceil_mode)  // the last window starts inside the input or its begin padding
                inf.require(x[2 + i] + pads[i] - (o - 1) * st[i], 1,
                            str_cat(n.describe(), "'s last window (ceil_mode) starts inside dim ", 2 + i), true);
            y.push_back(o);
        }
        return y;
    }
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
        SymShape x = inf.in(n, 0);
        SymShape y(x.size(), SymDim(1));
        y[0] = x[0], y[1] = x[1];
        return y;
    }
    if (op_kind(op) == OpKind::Norm) return inf.in(n, 0);
    if (op_kind(op) == OpKind::Reduce) {
        SymShape x = inf.in(n, 0);
        std::vector<int64_t> axes = n.has("axes") ? n.get_ints("axes") : std::vector<int64_t>{n.get_int("axis", 0)};
        bool keep = n.get_int("keepdims", 1) != 0;
        SymShape y;
        for (size_t d = 0; d < x.size(); d++) {
            bool reduced = std::find(axes.begin(), axes.end(), (int64_t)d) != axes.end();
            if (!reduced) y.push_back(x[d]);
            else if (keep) y.push_back(1);
        }
        return y;
    }
    if (op == "Reshape") return reshape(inf, n);
    if (op == "Transpose") {
        SymShape x = inf.in(n, 0), y;
        for (auto p : n.need_ints("perm")) y.push_back(x.at(p));
        return y;
    }
    if (op == "DepthToSpace") {
        SymShape x = inf.in(n, 0);
        int64_t bs = n.need_int("blocksize");
        if (!x[1].is_static()) inf.fail(n, "moves channels into space, and its channel count moves");
        return {x[0], SymDim(o1[1]), x[2] * bs, x[3] * bs};
    }
    if (op == "Concat") {
        int64_t axis = n.need_int("axis");
        SymShape y = inf.in(n, 0);
        SymDim total = 0;
        for (int i = 0; i < n.num_inputs(); i++) {
            SymShape s = inf.in(n, i);
            total = total + s[axis];
            for (size_t d = 0; d < y.size(); d++)
                if ((int64_t)d != axis && s[d] != y[d])
                    inf.require(s[d], y[d], str_cat(n.describe(), " joins inputs of equal dim ", d));
        }
        y[axis] = total;
        return y;
    }
    if (op == "Split") {
        SymShape x = inf.in(n, 0);
        int64_t axis = n.need_int("axis");
        if (!x[axis].is_static()) inf.fail(n, str_cat("splits along dim ", axis, ", whose size moves"));
        x[axis] = o1[axis];
        return x;
    }
    if (op == "Slice" || op == "Expand") {
        // A dim the op keeps whole moves with its input; any other must be static.
        SymShape x = inf.in(n, 0);
        SymShape y(o1.size());
        size_t off = o1.size() - x.size();
        for (size_t d = 0; d < o1.size(); d++) {
            const SymDim *xd = d >= off ? &x[d - off] : nullptr;
            if (xd && !xd->is_static() && xd->eval(inf.rep) == o1[d] && xd->eval(inf.rep2) == o2[d]) {
                y[d] = *xd;
                if (op == "Slice")
                    inf.require(SymDim(n.get_ints("starts").at(d)), 0, str_cat(n.describe(), " starts dim ", d, " at 0"));
            } else if (o1[d] == o2[d]) {
                y[d] = o1[d];
                if (xd && !xd->is_static() && op == "Slice") {
                    auto starts = n.get_ints("starts"), steps = n.get_ints("steps");
                    inf.require(*xd, starts.at(d) + (o1[d] - 1) * steps.at(d) + 1,
                                str_cat(n.describe(), " reads inside dim ", d), true);
                }
            } else {
                inf.fail(n, str_cat("cuts dim ", d, " at a size-dependent place"));
            }
        }
        return y;
    }
    if (op == "Pad") {
        SymShape x = inf.in(n, 0);
        auto pads = n.need_ints("pads");
        for (size_t d = 0; d < x.size(); d++) x[d] = x[d] + (pads[d] + pads[x.size() + d]);
        return x;
    }
    if (op == "Tile") {
        SymShape x = inf.in(n, 0);
        auto reps = n.need_ints("repeats");
        for (size_t d = 0; d < x.size(); d++) x[d] = x[d] * reps[d];
        return x;
    }
    if (op == "Resize") {
        SymShape x = inf.in(n, 0);
        auto scales = n.get_floats("scales");
        SymShape y(x.size());
        for (size_t d = 0; d < x.size(); d++) {
            double s = scales.at(d);
            if (x[d].is_static()) y[d] = o1[d];
            else if (s >= 1 && s == (double)(int64_t)s) y[d] = x[d] * (int64_t)s;
            else if (s < 1 && 1 / s == (double)(int64_t)(1 / s)) y[d] = floordiv(x[d], (int64_t)(1 / s));
            else inf.fail(n, str_cat("scales dim ", d, " by ", s, ", not a whole factor"));
        }
        return y;
    }
    if (op == "Gather") {
        SymShape x = inf.in(n, 0), idx = inf.in(n, 1);
        int64_t axis = n.get_int("axis", 0);
        SymShape y(x.begin(), x.begin() + axis);
        y.insert(y.end(), idx.begin(), idx.end());
        y.insert(y.end(), x.begin() + axis + 1, x.end());
        return y;
    }
    inf.fail(n, "has no symbolic size rule yet");
}

bool same_tensor(const Tensor &a, const Tensor &b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() && a.bytes().size() == b.bytes().size() &&
           std::memcmp(a.data(), b.data(), a.bytes().size()) == 0;
}

/// Infers every value's symbolic shape in \p inf.g, node by node, checking each against both
/// preparations.
void infer_all(Inference &inf) {
    Graph &g = inf.g;
    const Graph &g2 = inf.g2;
    auto differs = [&](const std::string &what) {
        throw UserError(str_cat("dynamic shapes: ", what,
                                " changes with the input size, so one compile cannot serve every size; bind the "
                                "dims with --input to compile for one size"));
    };
    if (g.nodes.size() != g2.nodes.size()) differs("the prepared graph (its node count)");
    for (size_t i = 0; i < g.nodes.size(); i++) {
        const Node &n = g.nodes[i], &n2 = g2.nodes[i];
        if (n.op != n2.op || n.name != n2.name || n.inputs != n2.inputs || n.outputs != n2.outputs)
            differs(str_cat("the prepared graph (at ", n.describe(), ")"));
        for (const auto &kv : n.attrs) {
            auto it = n2.attrs.find(kv.first);
            if (it != n2.attrs.end() && attr_str(it->second) == attr_str(kv.second)) continue;
            if ((n.op == "Reshape" || n.op == "Expand") && kv.first == "shape") continue;
            differs(str_cat(n.describe(), "'s attribute '", kv.first, "'"));
        }
        bool all_static = true;
        for (const auto &name : n.inputs) {
            if (name.empty()) continue;
            if (const Tensor *c = g.constant(name)) {
                const Tensor *c2 = g2.constant(name);
                if (c2 == nullptr || !same_tensor(*c, *c2))
                    differs(str_cat("the constant '", name, "' (read by ", n.describe(), ", folded from sizes)"));
                continue;
            }
            all_static &= sym_shape_static(sym_shape_of(g.value(name)));
        }
        for (size_t k = 0; k < n.outputs.size(); k++) {
            const std::string &o = n.outputs[k];
            if (o.empty()) continue;
            const Shape &s1 = g.value(o).shape, &s2 = g2.value(o).shape;
            SymShape y = all_static && s1 == s2 ? SymShape(s1.begin(), s1.end()) : infer_output(inf, n, k);
            bool ok = y.size() == s1.size() && eval_shape(y, inf.rep) == s1 && eval_shape(y, inf.rep2) == s2;
            if (!ok)
                inf.fail(n, str_cat("gives '", o, "' the shape ", shape_str(s1), " and ", shape_str(s2),
                                    " at the two sizes tried, which its size rule (", sym_shape_str(y),
                                    ") does not reproduce"));
            ValueInfo &vi = g.value(o);
            if (sym_shape_static(y)) {
                vi.sym.clear();
                continue;
            }
            vi.sym = y;
            for (const auto &d : y)
                if (!d.is_static()) inf.require(d, 1, str_cat("'", o, "' (", n.describe(), ") has dims of at least 1"), true);
        }
    }
    // Requirements repeat (every broadcast of one pair of dims): keep each once.
    std::set<std::string> seen;
    std::vector<DynamicDims::Requirement> unique;
    for (auto &q : inf.dyn.requirements)
        if (seen.insert(q.a.str() + (q.at_least ? ">=" : "==") + q.b.str()).second) unique.push_back(q);
    inf.dyn.requirements = unique;
}

int64_t range_middle(const DimRange &r) {
    int64_t step = 1;
    while (step < 32 && r.lo % (step * 2) == 0) step *= 2;
    int64_t mid = (r.lo + r.hi) / 2;
    return std::max(r.lo, mid / step * step);
}

}  // namespace

SymShape sym_shape_of(const ValueInfo &vi) {
    if (!vi.sym.empty()) return vi.sym;
    return SymShape(vi.shape.begin(), vi.shape.end());
}

void prepare_graph_dynamic(Graph &g, const NodeEvaluator &evaluate, const PrepareOptions &opts) {
    PrepareOptions fixed = opts;
    fixed.dynamic_dims.clear();
    fixed.dynamic_all = false;

    // The open dims of the inputs, by symbol (an unnamed one is called "<input>.<dim>").
    struct Open {
        std::string input;
        size_t dim;
        std::string symbol;
    };
    std::vector<Open> open;
    std::vector<std::string> known;
    for (const auto &in : g.inputs) {
        const ValueInfo &vi = g.value(in);
        for (size_t d = 0; d < vi.shape.size(); d++) {
            if (vi.shape[d] >= 0) continue;
            std::string sym = d < vi.symbols.size() && !vi.symbols[d].empty() ? vi.symbols[d] : str_cat(in, ".", d);
            open.push_back({in, d, sym});
            known.push_back(sym);
        }
    }
    for (const auto &kv : opts.dynamic_dims) {
        user_check(std::find(known.begin(), known.end(), kv.first) != known.end(), "--dim ", kv.first,
                   "=…: the model has no open dim named '", kv.first, "'",
                   known.empty() ? std::string(" (its inputs are static)") : did_you_mean(kv.first, known));
        user_check(kv.second.lo >= 1 && kv.second.lo <= kv.second.hi, "--dim ", kv.first, "=", kv.second.lo, "..",
                   kv.second.hi, ": the range must be LO..HI with 1 <= LO <= HI");
    }

    DynamicDims dyn;
    InputBindings b1 = opts.bindings, b2 = opts.bindings;
    for (const auto &o : open) {
        bool dynamic = opts.dynamic_all || opts.dynamic_dims.count(o.symbol);
        auto whole = opts.bindings.find(o.input);
        auto by_name = opts.bindings.find(o.symbol);
        int64_t hint = whole != opts.bindings.end() && o.dim < whole->second.size() ? whole->second[o.dim]
                       : by_name != opts.bindings.end() && by_name->second.size() == 1 ? by_name->second[0]
                                                                                       : -1;
        if (!dynamic) continue;
        DimRange range = opts.dynamic_dims.count(o.symbol) ? opts.dynamic_dims.at(o.symbol) : DimRange{};
        if (!dyn.ranges.count(o.symbol)) {
            if (hint < 0) {
                user_check(opts.dynamic_dims.count(o.symbol), "dim '", o.symbol, "' of input '", o.input,
                           "' has no size to plan for; give one with --input (a hint) or --dim ", o.symbol, "=LO..HI");
                hint = range_middle(range);
            }
            user_check(hint >= range.lo && hint <= range.hi, "--input: dim '", o.symbol, "' = ", hint,
                       " is outside its declared range ", range.lo, "..", range.hi, " (--dim ", o.symbol, ")");
            dyn.symbols.push_back(o.symbol);
            dyn.ranges[o.symbol] = range;
            dyn.representative[o.symbol] = hint;
        }
        int64_t rep = dyn.representative.at(o.symbol);
        int64_t index = std::find(dyn.symbols.begin(), dyn.symbols.end(), o.symbol) - dyn.symbols.begin();
        int64_t check = rep + kCheckStep * (index + 1);
        for (auto *b : {&b1, &b2}) {
            if (!b->count(o.input)) {
                Shape s = g.value(o.input).shape;  // other open dims: from their symbol's binding
                for (size_t d = 0; d < s.size(); d++)
                    if (s[d] < 0)
                        for (const auto &p : open)
                            if (p.input == o.input && p.dim == d && opts.bindings.count(p.symbol) &&
                                opts.bindings.at(p.symbol).size() == 1)
                                s[d] = opts.bindings.at(p.symbol)[0];
                (*b)[o.input] = s;
            }
            (*b)[o.input][o.dim] = b == &b1 ? rep : check;
        }
    }
    fixed.bindings = b1;
    Graph g1 = g;
    prepare_graph(g1, evaluate, fixed);
    if (!dyn.active()) {
        g = std::move(g1);
        return;
    }
    Sizes rep2;
    for (size_t k = 0; k < dyn.symbols.size(); k++)
        rep2[dyn.symbols[k]] = dyn.representative[dyn.symbols[k]] + kCheckStep * (int64_t)(k + 1);
    Graph g2 = g;
    fixed.bindings = b2;
    fixed.dump = false;
    try {
        prepare_graph(g2, evaluate, fixed);
    } catch (const UserError &e) {
        std::string sizes;
        for (const auto &kv : rep2) sizes += str_cat(sizes.empty() ? "" : ", ", kv.first, "=", kv.second);
        throw UserError(str_cat("dynamic shapes: the model does not prepare at a second size (", sizes,
                                ") that checks its size rules: ", e.what(),
                                "; bind the dims with --input to compile for one size"));
    }
    for (const auto &in : g1.inputs) {
        ValueInfo &vi = g1.value(in);
        vi.sym.clear();
        SymShape s(vi.shape.begin(), vi.shape.end());
        bool any = false;
        for (const auto &o : open)
            if (o.input == in && dyn.ranges.count(o.symbol)) s[o.dim] = SymDim::symbol(o.symbol), any = true;
        if (any) vi.sym = s;
    }
    Inference inf{g1, g2, dyn.representative, rep2, dyn};
    infer_all(inf);
    g1.dynamic = dyn;
    g = std::move(g1);
}

std::map<std::string, int64_t> bind_dynamic_sizes(const DynamicDims &dyn, const std::vector<std::string> &input_names,
                                                  const std::vector<SymShape> &input_syms,
                                                  const std::map<std::string, Shape> &shapes) {
    Sizes sizes;
    std::map<std::string, std::string> source;
    for (size_t i = 0; i < input_names.size(); i++) {
        const std::string &name = input_names[i];
        auto it = shapes.find(name);
        user_check(it != shapes.end(), "input '", name, "' is missing");
        const Shape &s = it->second;
        const SymShape &sym = input_syms[i];
        user_check(s.size() == sym.size(), "input '", name, "' has rank ", s.size(), " but the model's is ",
                   sym.size(), " (", sym_shape_str(sym), ")");
        for (size_t d = 0; d < s.size(); d++) {
            if (sym[d].is_static()) {
                user_check(s[d] == sym[d].value(), "input '", name, "' is ", shape_str(s), " but its dim ", d,
                           " is fixed at ", sym[d].value(), " (", sym_shape_str(sym), ")");
                continue;
            }
            const std::string &sn = sym[d].name();
            auto [at, fresh] = sizes.emplace(sn, s[d]);
            if (fresh) source[sn] = name;
            user_check(fresh || at->second == s[d], "dim '", sn, "' is ", at->second, " in input '", source[sn],
                       "' but ", s[d], " in input '", name, "'; give the inputs one size for it");
        }
    }
    dyn.check(sizes);
    return sizes;
}

}  // namespace loom
