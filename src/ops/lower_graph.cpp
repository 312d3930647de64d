#include "ops/lower_graph.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "graph/op_catalog.h"
#include "ops/ops_internal.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

namespace {

/// Halide region of a tensor shape: dims reversed (dim 0 innermost), all starting at 0.
Halide::Region region_of(const Shape &s) {
    Halide::Region r;
    for (int d = (int)s.size() - 1; d >= 0; d--) r.push_back(Halide::Range(0, (int)s[d]));
    return r;
}

/// Constrains a buffer to the static dense shape \p s, so Halide can specialise on it, and
/// declares its alignment (LowerOptions::buffer_alignment; 0: none). With dynamic shapes, the dims
/// of \p sym that move are constrained to their Exprs over the size Params instead (estimates
/// stay at the representative \p s).
void constrain_dense(const LowerContext &ctx, Halide::OutputImageParam p, const Shape &s, int alignment,
                     const SymShape &sym = {}) {
    if (sym.empty() || sym_shape_static(sym)) {
        int64_t stride = 1;
        for (int k = 0; k < (int)s.size(); k++) {
            int64_t ext = s[s.size() - 1 - k];
            p.dim(k).set_bounds(0, (int)ext).set_stride((int)stride).set_estimate(0, (int)ext);
            stride *= ext;
        }
    } else {
        Expr stride = 1;
        for (int k = 0; k < (int)s.size(); k++) {
            Expr ext = ctx.size(sym[s.size() - 1 - k]);
            p.dim(k).set_bounds(0, ext).set_stride(stride).set_estimate(0, (int)s[s.size() - 1 - k]);
            stride = stride * ext;
        }
    }
    if (alignment > 0) p.set_host_alignment(alignment);
}

void lower_node(LowerContext &ctx, const Node &node) {
    switch (op_kind(node.op)) {
    case OpKind::Elementwise: return lower_elementwise(ctx, node);
    case OpKind::Reduce: return lower_reduce(ctx, node);
    case OpKind::MatMul: return lower_matmul(ctx, node);
    case OpKind::Conv: return lower_conv(ctx, node);
    case OpKind::Pool: return lower_pool(ctx, node);
    case OpKind::Norm: return lower_norm(ctx, node);
    case OpKind::Layout: return lower_layout(ctx, node);
    case OpKind::Gather: return lower_gather(ctx, node);
    case OpKind::Resize: return lower_resize(ctx, node);
    case OpKind::Folded: break;
    }
    throw InternalError(str_cat(node.describe(), " should have been folded or removed before "
                                "lowering (run prepare_graph first)"));
}

/// Orders funcs so producers come before consumers, keeping the creation order otherwise.
void sort_funcs(LoweredPipeline &p) {
    std::vector<LoweredFunc> sorted;
    std::set<std::string> done;
    std::vector<bool> taken(p.funcs.size(), false);
    while (sorted.size() < p.funcs.size()) {
        bool progress = false;
        for (size_t k = 0; k < p.funcs.size(); k++) {
            if (taken[k]) continue;
            bool ready = true;
            for (const auto &pr : p.funcs[k].producers) ready &= done.count(pr) > 0;
            if (!ready) continue;
            taken[k] = true;
            done.insert(p.funcs[k].name);
            sorted.push_back(p.funcs[k]);
            progress = true;
            break;
        }
        internal_check(progress, "lowered Funcs form a cycle");
    }
    p.funcs = std::move(sorted);
}

}  // namespace

LoweredPipeline lower_graph(const Graph &g, const LowerOptions &options) {
    LoweredPipeline out;
    LowerContext ctx(g, out);
    ctx.options = options;

    if (g.dynamic.active()) {
        user_check(!options.gemm_extern && !options.conv_extern, "dynamic shapes: library stages (cuBLAS, "
                   "cuDNN) need fixed sizes; bind the dims with --input, or compile for the host");
        out.dynamic = g.dynamic;
        for (const auto &sym : g.dynamic.symbols) {
            Halide::Param<int32_t> p(ctx.reserve_name("size_" + sanitize_name(sym)));
            const DimRange &r = g.dynamic.ranges.at(sym);
            // Only the lower end reaches Halide: with the upper one (2^30 when undeclared), Halide
            // 14's interval arithmetic over N*H*W overflowed int64, proved false bounds (wrong
            // results) or recursed without end; DynamicDims::check refuses sizes past it at run time.
            p.set_min_value((int)r.lo);
            p.set_estimate((int)g.dynamic.representative.at(sym));
            out.size_params.emplace(sym, p);
        }
    }
    for (const auto &name : g.inputs) {
        const ValueInfo &vi = g.value(name);
        user_check(vi.has_shape, "graph input '", name, "' has no static shape; bind it with ",
                   "--input ", name, "=<dims>");
        std::string pname = ctx.reserve_name(sanitize_name(name));
        ctx.reserve_name(pname + "_im");
        Halide::ImageParam p(LowerContext::halide_type(vi.dtype), (int)vi.shape.size(), pname);
        constrain_dense(ctx, p, vi.shape, options.buffer_alignment, vi.sym);
        out.input_funcs.push_back(ctx.add_input(name, p, ctx.reserve_name(pname + "_read")));
        out.inputs.push_back(p);
        out.input_names.push_back(name);
        out.input_shapes.push_back(vi.shape);
        out.input_dtypes.push_back(vi.dtype);
        out.input_syms.push_back(vi.sym);
    }
    // Node Funcs take their own names before any helper can.
    for (const auto &node : g.nodes) ctx.func_base(node);

    for (const auto &node : g.nodes) {
        if (Func f = ctx.fused_into(node.name); f.defined()) {  // its work is done by an extern stage
            ctx.bind_output(node.outputs.at(0), f);
            continue;
        }
        try {
            lower_node(ctx, node);
        } catch (const Halide::Error &e) {
            throw InternalError(str_cat("lowering ", node.describe(), ": Halide: ", e.what()));
        } catch (const UserError &e) {
            throw UserError(str_cat("lowering ", node.describe(), ": ", e.what()));
        }
        for (const auto &o : node.outputs)
            internal_check(o.empty() || ctx.has_value(o), "lowering ", node.describe(),
                           " left output '", o, "' undefined");
    }

    std::set<std::string> used_funcs;
    for (const auto &oname : g.outputs) {
        const ValueInfo &vi = g.value(oname);
        Func f = ctx.value(oname);
        LoweredFunc *lf = out.find(f.name());
        if (lf == nullptr || used_funcs.count(f.name())) {
            // An output that is an input, a constant, or a Func already feeding another output
            // gets its own copy Func (a Halide Pipeline needs distinct output Funcs).
            Node copy;
            copy.name = oname;
            copy.op = "Output";
            copy.outputs = {oname};
            Func c = ctx.make_func(copy, "", vi.shape);
            std::vector<Var> vs = ctx.vars((int)vi.shape.size());
            std::vector<Expr> idx(vs.begin(), vs.end());
            ctx.define(c, vs, LowerContext::call(f, idx));
            ctx.note_cost(c, true, 0);
            ctx.record(c).dtype = vi.dtype;
            f = c;
            lf = out.find(f.name());
        }
        used_funcs.insert(f.name());
        lf->is_output = true;
        f.set_estimates(region_of(vi.shape));
        constrain_dense(ctx, f.output_buffer(), vi.shape, options.buffer_alignment, vi.sym);
        out.output_names.push_back(oname);
        out.output_funcs.push_back(f.name());
        out.output_shapes.push_back(vi.shape);
        out.output_dtypes.push_back(vi.dtype);
        out.output_syms.push_back(vi.sym);
    }

    // Producers, consumers and input reads from the Halide definitions themselves, so they are
    // right whatever the op code did.
    const auto &wrappers = ctx.wrapper_values();
    std::set<std::string> graph_inputs(g.inputs.begin(), g.inputs.end());
    for (auto &lf : out.funcs) {
        if (!lf.func.defined()) continue;
        if (lf.is_extern) {
            // Only its Func arguments (Halide's call finder also reports what those Funcs call).
            for (const auto &arg : lf.func.function().extern_arguments())
                if (arg.is_func()) {
                    std::string callee = Halide::Internal::Function(arg.func).name();
                    if (out.find(callee)) lf.producers.push_back(callee);
                } else if (arg.is_image_param()) {
                    for (size_t k = 0; k < out.inputs.size(); k++)
                        if (out.inputs[k].name() == arg.image_param.name()) lf.input_reads.push_back(out.input_names[k]);
                }
            continue;
        }
        for (const auto &kv : Halide::Internal::find_direct_calls(lf.func.function())) {
            const std::string &callee = kv.first;
            if (callee == lf.name) continue;
            if (out.find(callee)) {
                lf.producers.push_back(callee);
            } else if (auto w = wrappers.find(callee); w != wrappers.end()) {
                if (graph_inputs.count(w->second)) lf.input_reads.push_back(w->second);
            }
        }
    }
    for (auto &lf : out.funcs)
        for (const auto &pr : lf.producers) out.find(pr)->consumers.push_back(lf.name);
    for (auto &lf : out.funcs) internal_check(lf.func.defined(), "Func '", lf.name, "' has no definition");
    sort_funcs(out);
    return out;
}

}  // namespace loom
