// Gather: the index tensor may be a runtime input, so every index is wrapped (negative counts from
// the end, as ONNX says) and clamped into the data's extent: an out-of-range index reads the edge
// instead of faulting.
#include "support/error.h"
#include "ops/ops_internal.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

void lower_gather(LowerContext &ctx, const Node &node) {
    internal_check(node.op == "Gather", node.describe(), ": no gather lowering for op ", node.op);
    const std::string &data = node.inputs.at(0), &indices = node.inputs.at(1);
    const std::string &out = node.outputs.at(0);
    const Shape &ds = ctx.shape(data), &is = ctx.shape(indices), &os = ctx.shape(out);
    const int axis = (int)node.need_int("axis");
    const int ri = (int)is.size(), rd = (int)ds.size();
    internal_check((int)os.size() == rd - 1 + ri, node.describe(), ": output rank ", os.size(),
                   " is not data rank - 1 + indices rank");
    const int rank = (int)os.size();
    Func f = ctx.make_func(node, "", rank);
    std::vector<Var> vs = ctx.vars(rank);
    std::vector<Expr> idx(vs.begin(), vs.end());

    // out[o..., j..., t...] = data[o..., wrap(indices[j...]), t...]
    std::vector<Expr> jidx(idx.begin() + axis, idx.begin() + axis + ri);
    Expr k = Halide::cast(Halide::Int(32), ctx.at(indices, jidx));
    const Expr n = ctx.extent(data, axis), last = ctx.size(ctx.sym(data)[axis] - 1);
    k = Halide::clamp(Halide::select(k < 0, k + n, k), 0, last);
    std::vector<Expr> src;
    for (int d = 0; d < axis; d++) src.push_back(idx[d]);
    src.push_back(k);
    for (int d = axis + 1; d < rd; d++) src.push_back(idx[d - 1 + ri]);
    ctx.define(f, vs, ctx.at(data, src));
    ctx.note_cost(f, false, 3);  // a data-dependent read: not pointwise in its data input
    ctx.bind_output(out, f);
}

}  // namespace loom
