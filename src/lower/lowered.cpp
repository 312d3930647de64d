#include "lower/lowered.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "lower/flat_row_index.h"
#include "lower/loop_scratch.h"
#include "support/error.h"

namespace loom {

using Halide::Func;

std::string sanitize_name(const std::string &name) {
    std::string out;
    bool pending_sep = false;
    for (char ch : name) {
        unsigned char c = (unsigned char)ch;
        if (std::isalnum(c)) {
            if (pending_sep && !out.empty()) out += '_';
            pending_sep = false;
            out += (char)std::tolower(c);
        } else {
            pending_sep = true;
        }
    }
    if (out.empty() || std::isdigit((unsigned char)out[0])) out = "v" + out;
    return out;
}

std::vector<std::string> var_names_for_rank(int rank) {
    switch (rank) {
    case 0: return {};
    case 1: return {"i"};
    case 2: return {"i", "j"};
    case 3: return {"b", "i", "j"};
    case 4: return {"n", "c", "h", "w"};
    case 5: return {"n", "c", "d", "h", "w"};
    default: {
        std::vector<std::string> v;
        for (int k = 0; k < rank; k++) v.push_back("d" + std::to_string(k));
        return v;
    }
    }
}

namespace {

/// Replaces each scalar Param (a dynamic shape's size) by its estimate: the representative size.
class ParamsAtEstimates : public Halide::Internal::IRMutator {
    using IRMutator::visit;
    Halide::Expr visit(const Halide::Internal::Variable *v) override {
        if (v->param.defined() && !v->param.is_buffer() && v->param.estimate().defined()) return v->param.estimate();
        return v;
    }
};

}  // namespace

int64_t LoweredFunc::single_rvar_extent(int k) const {
    if (!func.defined() || k < 0 || k >= func.num_update_definitions()) return -1;
    const auto &rvs = func.function().update(k).schedule().rvars();
    if (rvs.size() != 1) return -1;
    return representative_extent(rvs[0].extent);
}

int64_t representative_extent(const Halide::Expr &e) {
    if (const int64_t *c = Halide::Internal::as_const_int(e)) return *c;
    Halide::Expr rep = Halide::Internal::simplify(ParamsAtEstimates().mutate(e));
    const int64_t *c = Halide::Internal::as_const_int(rep);
    return c ? *c : -1;
}

Halide::Expr LoweredPipeline::size_expr(const SymDim &d) const {
    switch (d.kind()) {
    case SymDim::Kind::Const:
        internal_check(d.value() <= std::numeric_limits<int32_t>::max(), "dim ", d.value(), " exceeds int32");
        return Halide::Expr((int)d.value());
    case SymDim::Kind::Symbol: {
        auto it = size_params.find(d.name());
        internal_check(it != size_params.end(), "no size Param for dim '", d.name(), "'");
        return it->second;
    }
    case SymDim::Kind::Add: return size_expr(d.lhs()) + size_expr(d.rhs());
    case SymDim::Kind::Sub: return size_expr(d.lhs()) - size_expr(d.rhs());
    case SymDim::Kind::Mul: return size_expr(d.lhs()) * size_expr(d.rhs());
    case SymDim::Kind::FloorDiv: return size_expr(d.lhs()) / size_expr(d.rhs());  // Halide's int division floors
    }
    return Halide::Expr();
}

const LoweredFunc *LoweredPipeline::find(const std::string &name) const {
    for (const auto &f : funcs)
        if (f.name == name) return &f;
    return nullptr;
}

LoweredFunc *LoweredPipeline::find(const std::string &name) {
    for (auto &f : funcs)
        if (f.name == name) return &f;
    return nullptr;
}

std::vector<std::string> LoweredPipeline::func_names() const {
    std::vector<std::string> v;
    for (const auto &f : funcs) v.push_back(f.name);
    return v;
}

Halide::Func LoweredPipeline::realized_output(size_t k) const {
    internal_check(k < output_funcs.size(), "no graph output ", k);
    const std::string &n = output_funcs[k];
    auto w = output_wrappers->find(n);
    if (w != output_wrappers->end()) return w->second;
    const LoweredFunc *f = find(n);
    internal_check(f != nullptr, "output Func '", n, "' is missing");
    return f->func;
}

bool LoweredPipeline::rows_extend_safely(const std::string &name) const {
    std::map<std::string, bool> memo;
    std::function<bool(const std::string &)> safe = [&](const std::string &f) {
        auto known = memo.find(f);
        if (known != memo.end()) return known->second;
        memo[f] = false;  // a DAG, but stay finite whatever it is
        const LoweredFunc *lf = find(f);
        if (!lf) return false;
        bool padded = lf->is_pointwise && (lf->op == "Conv" || lf->op == "ConvTranspose" || lf->op == "MaxPool" ||
                                           lf->op == "AveragePool");
        bool ok = padded || lf->input_reads.empty();
        if (!padded)
            for (const auto &pr : lf->producers) ok = ok && safe(pr);
        return memo[f] = ok;
    };
    return safe(name);
}

const LoweredFunc *LoweredPipeline::find_realized(const std::string &name) const {
    if (const LoweredFunc *f = find(name)) return f;
    for (const auto &[out, w] : *output_wrappers)
        if (w.name() == name) return find(out);
    return nullptr;
}

Halide::Pipeline LoweredPipeline::pipeline() const {
    std::vector<Func> outs;
    for (size_t k = 0; k < output_funcs.size(); k++) outs.push_back(realized_output(k));
    Halide::Pipeline pl(outs);
    if (dynamic.active()) keep_loop_scratch_on_pseudostack(pl);
    fold_flat_row_indices(pl);
    return pl;
}

}  // namespace loom
