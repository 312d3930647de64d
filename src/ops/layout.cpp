// Layout ops: pure index arithmetic, no copies of their own (a schedule may still compute_root
// them). Every input read is kept in bounds so Halide's bounds inference never asks an input for
// more than it has.
#include <numeric>

#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

struct OpFunc {
    Func f;
    std::vector<Var> vs;
    std::vector<Expr> idx;
};

OpFunc start(LowerContext &ctx, const Node &node, const std::string &out, const std::string &suffix) {
    OpFunc o;
    int rank = (int)ctx.shape(out).size();
    o.f = ctx.make_func(node, suffix, rank);
    o.vs = ctx.vars(rank);
    o.idx.assign(o.vs.begin(), o.vs.end());
    return o;
}

void finish(LowerContext &ctx, const std::string &out, OpFunc &o, Expr e, double flops = 0) {
    ctx.define(o.f, o.vs, e);
    ctx.note_cost(o.f, true, flops);
    ctx.bind_output(out, o.f);
}

std::vector<Expr> reshape_index(const LowerContext &ctx, const SymShape &in, const SymShape &out,
                                const std::vector<Expr> &idx) {
    // Only a reshape that keeps the innermost dims can keep them as plain vars (vectorisable);
    // the rest goes through a flat index. Dims compare symbolically (a dim that moves with the
    // input sizes equals only itself).
    auto unit = [](const SymDim &d) { return d.is_static() && d.value() == 1; };
    int ni = (int)in.size(), no = (int)out.size();
    int common = 0;
    while (common < ni && common < no && in[ni - 1 - common] == out[no - 1 - common]) common++;
    // Pure insertion/removal of size-1 dims maps dims one to one.
    SymShape in1, out1;
    for (const auto &d : in) if (!unit(d)) in1.push_back(d);
    for (const auto &d : out) if (!unit(d)) out1.push_back(d);
    std::vector<Expr> r(ni, Expr(0));
    if (in1 == out1) {
        std::vector<Expr> nz;
        for (int d = 0; d < no; d++) if (!unit(out[d])) nz.push_back(idx[d]);
        size_t k = 0;
        for (int d = 0; d < ni; d++) if (!unit(in[d])) r[d] = nz[k++];
        return r;
    }
    // Equal leading dims (the batch) map one to one too, and the outermost remaining input dim takes
    // the quotient without a modulo: a [B, 1024] -> [B, 16, 64] read is (b, j / 64, j % 64), whose
    // bounds over a tile of j stay tight (a schedule can compute a per-segment statistic per thread).
    int lead = 0;
    while (lead < ni - common && lead < no - common && in[lead] == out[lead]) lead++;
    Expr flat = 0;
    for (int d = lead; d < no - common; d++) flat = flat * ctx.size(out[d]) + idx[d];
    for (int d = ni - common - 1; d >= lead; d--) {
        r[d] = d == lead ? flat : flat % ctx.size(in[d]);
        if (d > lead) flat = flat / ctx.size(in[d]);
    }
    for (int d = 0; d < lead; d++) r[d] = idx[d];
    for (int k = 0; k < common; k++) r[ni - 1 - k] = idx[no - 1 - k];
    return r;
}

}  // namespace

void lower_layout(LowerContext &ctx, const Node &node) {
    const std::string &op = node.op;
    const std::string &x = node.inputs.at(0);
    const Shape &is = ctx.shape(x);
    const int ri = (int)is.size();

    if (op == "Split") {
        int axis = (int)node.need_int("axis");
        ctx.static_extent(node, x, axis);
        std::vector<int64_t> sizes = node.need_ints("split");
        internal_check(sizes.size() == node.outputs.size(), node.describe(), ": ", sizes.size(),
                       " split sizes for ", node.outputs.size(), " outputs");
        int64_t off = 0;
        for (size_t k = 0; k < node.outputs.size(); k++) {
            OpFunc o = start(ctx, node, node.outputs[k], node.outputs.size() == 1 ? "" : std::to_string(k));
            std::vector<Expr> src = o.idx;
            src[axis] = src[axis] + (int)off;
            finish(ctx, node.outputs[k], o, ctx.at(x, src));
            off += sizes[k];
        }
        return;
    }

    const std::string &out = node.outputs.at(0);
    const Shape &os = ctx.shape(out);
    const int ro = (int)os.size();
    OpFunc o = start(ctx, node, out, "");
    const std::vector<Expr> &idx = o.idx;

    if (op == "Reshape") {
        finish(ctx, out, o, ctx.at(x, reshape_index(ctx, ctx.sym(x), ctx.sym(out), idx)), 2);
    } else if (op == "Transpose") {
        std::vector<int64_t> perm = node.need_ints("perm");
        internal_check((int)perm.size() == ri, node.describe(), ": perm has ", perm.size(), " entries");
        std::vector<Expr> src(ri);
        for (int d = 0; d < ro; d++) src[perm[d]] = idx[d];
        finish(ctx, out, o, ctx.at(x, src));
    } else if (op == "DepthToSpace") {
        // Output [n, c, h*bs + a, w*bs + b] reads channel (a*bs + b)*C + c (DCR) or c*bs*bs + a*bs + b
        // (CRD) of input pixel (h, w).
        const int bs = (int)node.need_int("blocksize");
        const int C = (int)ctx.static_extent(node, out, 1);
        Expr ab = (idx[2] % bs) * bs + idx[3] % bs;
        Expr ch = node.get_string("mode", "DCR") == "DCR" ? ab * C + idx[1] : idx[1] * (bs * bs) + ab;
        finish(ctx, out, o, ctx.at(x, {idx[0], ch, idx[2] / bs, idx[3] / bs}), 2);
    } else if (op == "Concat") {
        int axis = (int)node.need_int("axis");
        // Select chain from the last input back; each read is clamped into its own input, since
        // Halide evaluates (and bounds-infers) every branch of a select.
        std::vector<std::pair<SymDim, std::string>> parts;
        SymDim off = 0;
        for (const auto &in : node.inputs) {
            if (in.empty()) continue;
            parts.push_back({off, in});
            off = off + ctx.sym(in)[axis];
        }
        Expr e;
        for (int k = (int)parts.size() - 1; k >= 0; k--) {
            const auto &[start_k, name] = parts[k];
            SymDim n = ctx.sym(name)[axis];
            if (n.is_static() && n.value() == 0) continue;
            std::vector<Expr> src = idx;
            src[axis] = Halide::clamp(idx[axis] - ctx.size(start_k), 0, ctx.size(n - 1));
            Expr v = ctx.at(name, src);
            e = e.defined() ? Halide::select(idx[axis] < ctx.size(start_k + n), v, e) : v;
        }
        finish(ctx, out, o, e, (double)parts.size());
    } else if (op == "Slice") {
        std::vector<int64_t> starts = node.need_ints("starts"), steps = node.need_ints("steps");
        std::vector<Expr> src(ri);
        for (int d = 0; d < ri; d++) {
            src[d] = steps[d] == 1 ? idx[d] + (int)starts[d] : idx[d] * (int)steps[d] + (int)starts[d];
            if (os[d] == 0) src[d] = 0;
        }
        finish(ctx, out, o, ctx.at(x, src));
    } else if (op == "Expand") {
        finish(ctx, out, o, ctx.at(x, idx));
    } else if (op == "Tile") {
        std::vector<Expr> src(ri);
        SymShape xs = ctx.sym(x);
        for (int d = 0; d < ri; d++) src[d] = is[d] == 1 && xs[d].is_static() ? Expr(0) : idx[d] % ctx.size(xs[d]);
        finish(ctx, out, o, ctx.at(x, src), 1);
    } else if (op == "Pad") {
        std::vector<int64_t> pads = node.need_ints("pads");
        std::string mode = node.get_string("mode", "constant");
        internal_check((int)pads.size() == 2 * ri, node.describe(), ": pads has ", pads.size(), " entries");
        std::vector<Expr> src(ri);
        Expr inside = Halide::cast(Halide::Bool(), 1);
        for (int d = 0; d < ri; d++) {
            Expr i = idx[d] - (int)pads[d];
            SymDim nd = ctx.sym(x)[d];
            Expr n = ctx.size(nd), last = ctx.size(nd - 1), twice_last = ctx.size((nd - 1) * 2);
            if (mode == "reflect") {
                i = Halide::select(i < 0, -i, i);
                i = Halide::select(i >= n, twice_last - i, i);
            } else if (mode == "constant") {
                inside = inside && i >= 0 && i < n;
            } else {
                user_check(mode == "edge", node.describe(), ": pad mode '", mode,
                           "' is not supported; valid: constant, reflect, edge");
            }
            src[d] = Halide::clamp(i, 0, last);
        }
        Expr v = ctx.at(x, src);
        if (mode == "constant")
            v = Halide::select(inside, v, LowerContext::literal(ctx.dtype(out), node.get_float("value", 0.0)));
        finish(ctx, out, o, v, 2);
    } else {
        throw InternalError(str_cat(node.describe(), ": no layout lowering for op ", op,
                                    " (Flatten/Squeeze/Unsqueeze should be Reshape by now)"));
    }
}

std::string transpose_source(const LowerContext &ctx, const std::string &value, const std::vector<int64_t> &perm) {
    int k = ctx.graph.producer(value);
    if (k < 0) return "";
    const Node &t = ctx.graph.nodes[k];
    if (t.op != "Transpose" || t.inputs.empty() || ctx.shape(t.inputs[0]).size() != perm.size()) return "";
    std::vector<int64_t> reversed(perm.size());
    for (size_t d = 0; d < perm.size(); d++) reversed[d] = (int64_t)(perm.size() - 1 - d);
    return t.get_ints("perm", reversed) == perm ? t.inputs[0] : "";
}

}  // namespace loom
