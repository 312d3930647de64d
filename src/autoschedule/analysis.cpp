// What the cost model reads off a Func's Halide definition: call counts per stage, reduction
// extents, and which index of each read is innermost (contiguous) in memory.
#include <algorithm>

#include "autoschedule/autoschedule_internal.h"
#include "support/error.h"

namespace loom::autosched {

namespace {

using namespace Halide::Internal;

class UsesVar : public IRVisitor {
public:
    explicit UsesVar(const std::string &n) : name(n) {}
    const std::string &name;
    bool found = false;
    using IRVisitor::visit;
    void visit(const Variable *op) override { found |= op->name == name; }
};

bool uses(const Halide::Expr &e, const std::string &var) {
    if (!e.defined()) return false;
    UsesVar u(var);
    e.accept(&u);
    return u.found;
}

// Collects every Func/buffer read with its arguments.
class Reads : public IRVisitor {
public:
    std::vector<const Call *> calls;
    using IRVisitor::visit;
    void visit(const Call *op) override {
        if (op->call_type == Call::Halide || op->call_type == Call::Image) calls.push_back(op);
        IRVisitor::visit(op);
    }
};

Reads reads_of(const Definition &d) {
    Reads r;
    for (const auto &v : d.values()) v.accept(&r);
    for (const auto &a : d.args()) a.accept(&r);
    return r;
}

// A Func or graph input that a definition reads, as the schedule names it (a graph input by its
// own name, not its reader Func's, lower.cpp "<param>_read"); extents outermost first.
struct Producer {
    std::string name, inner_var;
    std::vector<int64_t> extents;  ///< empty when the call names neither
    DType dtype = DType::F32;
};

Producer producer_of(const LoweredPipeline &p, const std::string &call) {
    if (const LoweredFunc *f = p.find(call)) return {f->name, f->vars.empty() ? "" : f->vars.back(), f->extents, f->dtype};
    for (size_t q = 0; q < p.inputs.size(); q++)
        if (p.inputs[q].name() == call || (q < p.input_funcs.size() && p.input_funcs[q].name() == call)) {
            std::vector<std::string> vars = var_names_for_rank((int)p.input_shapes[q].size());
            return {p.inputs[q].name(), vars.empty() ? "" : vars.back(), p.input_shapes[q], p.input_dtypes[q]};
        }
    return {};
}

// Whether the read \p c indexes its innermost dims by \p rvs alone, one each, in order (Halide's
// innermost first), each but the last spanning its dim: fused, the RVars walk one dense block.
bool reads_rvar_block(const LoweredPipeline &p, const Call *c, const std::vector<ReductionVariable> &rvs) {
    if (rvs.size() < 2 || c->args.size() < rvs.size()) return false;
    const std::vector<int64_t> ext = producer_of(p, c->name).extents;
    if (ext.size() != c->args.size()) return false;
    for (size_t k = 0; k < rvs.size(); k++) {
        int64_t n = representative_extent(rvs[k].extent);
        const int64_t *mn = as_const_int(rvs[k].min);
        if (n < 0 || !mn || *mn != 0) return false;
        // Index k is RVar k itself, plus, for the outermost RVar alone, an offset that uses no
        // RVar (a group's first channel, `g * 8 + r.z`: the block starts there).
        Halide::Expr off = simplify(c->args[k] - Variable::make(c->args[k].type(), rvs[k].var));
        for (const auto &rv : rvs)
            if (uses(off, rv.var)) return false;
        if (k + 1 < rvs.size() && (!is_const_zero(off) || ext[ext.size() - 1 - k] != n)) return false;
    }
    return true;
}

// Whether a read uses none of the RVars (a statistic broadcast over the reduction, as the mean
// in a variance): it does not walk the reduction's block.
bool reads_no_rvar(const Call *c, const std::vector<ReductionVariable> &rvs) {
    for (const auto &a : c->args)
        for (const auto &rv : rvs)
            if (uses(a, rv.var)) return false;
    return true;
}

// Notes in \p fi a read \p c in \p fn's pure definition that walks its producer's innermost dim
// by an outer var of fn (a Transpose): the producer, that var, the producer's innermost var and row
// bytes. Only a read of as many points as fn has (a permutation, not a broadcast row or a weight).
void transposed_read(const LoweredPipeline &p, const Function &fn, const Call *c, FuncInfo &fi) {
    if (!fi.transposed_from.empty() || c->args.empty()) return;
    const Variable *v = c->args[0].as<Variable>();
    if (!v || std::find(fn.args().begin() + 1, fn.args().end(), v->name) == fn.args().end()) return;
    const Producer pr = producer_of(p, c->name);
    double n = 1;
    for (int64_t x : pr.extents) n *= (double)x;
    if (pr.extents.empty() || n != fi.points) return;
    fi.transposed_from = pr.name;
    fi.transposed_var = v->name;
    fi.transposed_inner_var = pr.inner_var;
    fi.transposed_row_bytes = pr.extents.back() * dtype_size(pr.dtype);
}

}  // namespace

std::string fresh(std::vector<std::string> &used, const std::string &base) {
    std::string n = base;
    for (int k = 2; std::find(used.begin(), used.end(), n) != used.end(); k++)
        n = base + std::to_string(k);
    used.push_back(n);
    return n;
}

std::map<std::string, FuncInfo> analyze(const LoweredPipeline &p) {
    std::map<std::string, FuncInfo> out;
    for (const auto &lf : p.funcs) {
        FuncInfo fi;
        fi.lf = &lf;
        for (int64_t e : lf.extents) fi.points *= (double)std::max<int64_t>(1, e);
        fi.esize = dtype_size(lf.dtype);
        fi.is_matmul = lf.op == "MatMul" || lf.op == "Gemm";
        fi.is_conv = lf.op == "Conv" || lf.op == "ConvTranspose";
        Function fn = lf.func.function();
        fi.has_update = !fn.updates().empty();
        auto count = [&](const Definition &d) {
            std::map<std::string, int> m;
            auto constant = [&](const Call *c) {
                if (c->call_type == Call::Image && c->image.defined())
                    fi.constant_bytes[c->name] = (double)c->image.size_in_bytes();
            };
            for (const Call *c : reads_of(d).calls) {
                if (c->name != lf.name) m[c->name]++;
                constant(c);
                // A constant is a Buffer behind a Func lowering made and never lists (`c_<name>`,
                // lower_context.cpp): count the Buffer it reads.
                if (c->call_type == Call::Halide && c->func.defined() && !p.find(c->name))
                    for (const Call *b : reads_of(Function(c->func).definition()).calls) constant(b);
            }
            return m;
        };
        fi.calls.push_back(count(fn.definition()));
        for (const auto &u : fn.updates()) {
            fi.calls.push_back(count(u));
            for (size_t a = 0; a < u.args().size(); a++) {
                const Variable *var = u.args()[a].as<Variable>();
                if (!var || a >= fn.args().size() || var->name != fn.args()[a]) fi.pure_lhs = false;
            }
            std::vector<int64_t> ext;
            double iters = fi.points;
            for (const auto &rv : u.schedule().rvars()) {
                int64_t e = representative_extent(rv.extent);
                int64_t x = e >= 0 ? e : 1;
                ext.push_back(x);
                iters *= (double)std::max<int64_t>(1, x);
            }
            if (fi.rvar_extents.empty() && !u.schedule().rvars().empty())
                fi.inner_rvar_moves = !Halide::Internal::as_const_int(u.schedule().rvars()[0].extent);
            fi.rvar_extents.push_back(ext);
            fi.update_iters.push_back(iters);
        }
        if (fi.has_update) {
            const Definition &u = fn.updates()[0];
            const auto &rvs = u.schedule().rvars();
            std::string inner_rvar = rvs.empty() ? "" : rvs[0].var;
            std::string inner_var = fn.args().empty() ? "" : fn.args()[0];  // Halide: innermost first
            bool block = rvs.size() >= 2, any = false;
            for (const Call *c : reads_of(u).calls) {
                if (c->name == lf.name || c->args.empty()) continue;
                if (!reads_no_rvar(c, rvs)) {
                    any = true;
                    block &= reads_rvar_block(p, c, rvs);
                }
                if (!inner_rvar.empty() && uses(c->args[0], inner_rvar)) fi.inner_rvar_contiguous = true;
                if (!inner_var.empty()) {
                    bool anywhere = false;
                    for (const auto &a : c->args) anywhere |= uses(a, inner_var);
                    if (anywhere && !uses(c->args[0], inner_var)) fi.inner_var_contiguous = false;
                }
            }
            fi.rvars_fuse_contiguous = block && any;
        }
        if (!fn.args().empty()) {
            const std::string outer = fn.args().back(), inner = fn.args()[0];  // Halide: innermost first
            std::vector<const Definition *> defs = {&fn.definition()};
            for (const auto &u : fn.updates()) defs.push_back(&u);
            for (const Definition *d : defs) {
                // Lets inlined, so an index computed once (a reshape's flat index) shows its vars.
                Reads rd;
                std::vector<Halide::Expr> keep;  // rd holds pointers into these
                for (const auto &v : d->values()) keep.push_back(substitute_in_all_lets(v));
                for (const auto &v : keep) v.accept(&rd);
                for (const Call *c : rd.calls) {
                    if (c->name == lf.name) continue;
                    // The pure definition's row-broadcast reads: indexed by the innermost var alone.
                    if (d == defs[0] && fn.args().size() >= 2) {
                        bool inner_used = false, other_used = false;
                        for (const auto &a : c->args) {
                            inner_used |= uses(a, inner);
                            for (size_t q = 1; q < fn.args().size(); q++) other_used |= uses(a, fn.args()[q]);
                        }
                        if (inner_used && !other_used) fi.row_broadcast_reads++;
                        transposed_read(p, fn, c, fi);
                    }
                    if (c->call_type != Call::Halide) continue;
                    bool rows = !c->args.empty() && uses(c->args.back(), outer);
                    auto it = fi.reads_rows.find(c->name);
                    fi.reads_rows[c->name] = rows && (it == fi.reads_rows.end() || it->second);
                }
            }
        }
        if (fi.is_matmul && fi.has_update && lf.vars.size() >= 2) {
            const std::string row = fn.args().size() >= 2 ? fn.args()[1] : lf.vars[lf.vars.size() - 2];
            for (const Call *c : reads_of(fn.updates()[0]).calls) {
                if (c->name == lf.name || c->call_type != Call::Halide) continue;
                bool by_row = false;
                for (const auto &a : c->args) by_row |= uses(a, row);
                if (by_row && fi.matmul_a.empty()) fi.matmul_a = c->name;
            }
        }
        out[lf.name] = fi;
    }
    return out;
}

}  // namespace loom::autosched
