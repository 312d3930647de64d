#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lower/lower_context.h"
#include "support/error.h"

namespace loom {

using Halide::Expr;
using Halide::Func;
using Halide::Type;
using Halide::Var;

std::vector<Expr> exprs(const std::vector<Var> &vs) { return {vs.begin(), vs.end()}; }

Halide::FuncRef ref(Func f, const std::vector<Expr> &idx) {
    return f(std::vector<Expr>(idx.rbegin(), idx.rend()));
}

std::vector<std::string> rvar_names(const Halide::RDom &r) {
    std::vector<std::string> names;
    for (int d = 0; d < r.dimensions(); d++) {
        std::string n = r[d].name();
        auto p = n.find('$');
        if (p != std::string::npos) n[p] = '.';
        names.push_back(n);
    }
    return names;
}

Type LowerContext::halide_type(DType t) { return loom::halide_type(t); }

Type halide_type(DType t) {
    switch (t) {
    case DType::F32: return Halide::Float(32);
    case DType::F16: return Halide::Float(16);
    case DType::F64: return Halide::Float(64);
    case DType::I64: return Halide::Int(64);
    case DType::I32: return Halide::Int(32);
    case DType::I16: return Halide::Int(16);
    case DType::I8: return Halide::Int(8);
    case DType::U8: return Halide::UInt(8);
    case DType::Bool: return Halide::Bool();
    case DType::BF16: return Halide::UInt(16);
    }
    throw InternalError("unknown dtype");
}

Expr bf16_bits(Expr x) {
    Expr u = Halide::reinterpret(Halide::UInt(32), x);
    Expr rounded = Halide::cast(Halide::UInt(16), (u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    return Halide::select(Halide::is_nan(x), Halide::cast(Halide::UInt(16), (u >> 16) | 0x40), rounded);
}

Expr from_bf16_bits(Expr bits) {
    return Halide::reinterpret(Halide::Float(32), Halide::cast(Halide::UInt(32), bits) << 16);
}

Expr tf32_high(Expr x) {
    Expr u = Halide::reinterpret(Halide::UInt(32), x);
    Expr rounded = Halide::reinterpret(Halide::Float(32), (u + 0x1000) & Halide::Internal::make_const(Halide::UInt(32), (uint64_t)0xFFFFE000u));
    return Halide::select(Halide::is_finite(rounded), rounded, x);
}

Expr tf32_low(Expr x) { return Halide::select(Halide::is_inf(x), Halide::Internal::make_zero(x.type()), x - tf32_high(x)); }

float tf32_high(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x1000u) & 0xFFFFE000u;
    float rounded;
    std::memcpy(&rounded, &u, sizeof u);
    return std::isfinite(rounded) ? rounded : x;
}

float tf32_low(float x) { return std::isinf(x) ? 0.0f : x - tf32_high(x); }

Expr LowerContext::cast_to(DType t, Expr e) {
    Type ht = halide_type(t);
    if (e.type() == ht) return e;
    if (e.type() == Halide::UInt(16)) e = from_bf16_bits(e);
    if (t == DType::Bool) {
        if (e.type().is_bool()) return e;
        return e != Halide::Internal::make_zero(e.type());
    }
    if (t == DType::BF16) {
        if (e.type().is_bool()) e = Halide::select(e, 1.0f, 0.0f);
        return bf16_bits(Halide::cast(Halide::Float(32), e));
    }
    if (e.type() == ht) return e;
    if (e.type().is_bool()) return Halide::select(e, Halide::Internal::make_one(ht), Halide::Internal::make_zero(ht));
    return Halide::cast(ht, e);
}

Expr LowerContext::literal(DType t, double v) {
    switch (t) {
    case DType::F32:
        if (std::isinf(v)) return v > 0 ? Halide::Float(32).max() : Halide::Float(32).min();
        return Expr((float)v);
    case DType::F64: return Halide::cast(Halide::Float(64), Expr(v));
    case DType::F16: return Halide::cast(Halide::Float(16), Expr((float)v));
    case DType::BF16: return bf16_bits(Expr((float)v));
    case DType::Bool: return Halide::cast(Halide::Bool(), Expr(v != 0 ? 1 : 0));
    case DType::I64: return Halide::cast(Halide::Int(64), Expr((int64_t)v));
    default: return Halide::cast(halide_type(t), Expr((int64_t)v));
    }
}

std::string LowerContext::reserve_name(const std::string &name) {
    std::string n = name;
    for (int k = 2; used_names_.count(n); k++) n = name + "_" + std::to_string(k);
    used_names_.insert(n);
    return n;
}

Func LowerContext::add_input(const std::string &name, const Halide::ImageParam &p, const std::string &read_name) {
    Func f(read_name);
    std::vector<Var> v = vars(p.dimensions());
    define(f, v, LowerContext::call(p, exprs(v)));
    values_[name] = f;
    used_names_.insert(f.name());
    wrappers_[f.name()] = name;
    return f;
}

Func LowerContext::value(const std::string &name) {
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    const Tensor *c = graph.constant(name);
    internal_check(c != nullptr, "value '", name, "' is used before it is defined");
    // A constant becomes a Buffer (Halide order: dims reversed) behind a Func that is never
    // scheduled (so it is inlined) and is not listed in the LoweredPipeline.
    std::vector<int> sizes;
    for (int d = c->rank() - 1; d >= 0; d--) sizes.push_back((int)c->shape()[d]);
    DType dt = c->dtype();
    Type storage = dt == DType::Bool ? Halide::UInt(8) : halide_type(dt);
    std::string fname = reserve_name("c_" + sanitize_name(name));
    Halide::Buffer<> buf;
    const int64_t es = dtype_size(dt), row_bytes = c->rank() == 2 ? c->shape()[1] * es : 0;
    if (options.pad_constant_rows && c->rank() == 2 && row_bytes % 1024 == 0 && c->bytes().size() >= 32768) {
        // Rows padded by 64 bytes (LowerOptions::pad_constant_rows), the Buffer cropped to the matrix.
        std::vector<int> padded = sizes;
        padded[0] += (int)(64 / es);
        buf = Halide::Buffer<>(storage, padded, fname + "_buf");
        buf.crop(0, 0, sizes[0]);
        for (int64_t r = 0; r < c->shape()[0]; r++)
            std::memcpy((uint8_t *)buf.data() + r * buf.dim(1).stride() * es,
                        (const uint8_t *)c->data() + r * row_bytes, (size_t)row_bytes);
    } else {
        buf = Halide::Buffer<>(storage, sizes, fname + "_buf");
        std::memcpy(buf.data(), c->data(), c->bytes().size());
    }
    Func f{Halide::Internal::Function(fname)};
    std::vector<Var> vs;
    std::vector<Expr> args;
    for (int d = 0; d < c->rank(); d++) {
        vs.push_back(Var("d" + std::to_string(d)));
        args.push_back(vs.back());
    }
    Expr e = buf(args);
    if (dt == DType::Bool) e = e != 0;
    f(vs) = e;
    values_[name] = f;
    wrappers_[f.name()] = name;
    return f;
}

Func LowerContext::blocked_constant(const std::string &name, int dim, int block) {
    const Tensor *c = graph.constant(name);
    internal_check(c && dim < c->rank() && c->dtype() == DType::F32, "blocked_constant: '", name,
                   "' is not a float constant with a dim ", dim);
    const Shape &s = c->shape();
    const int rank = c->rank();
    int64_t inner = 1, outer = 1;  // elements after / before dim (ONNX order, row-major)
    for (int d = dim + 1; d < rank; d++) inner *= s[d];
    for (int d = 0; d < dim; d++) outer *= s[d];
    // Halide order (innermost first): the lane, the other dims (the last ONNX dim first), dim / block.
    std::vector<int> sizes = {block};
    for (int d = rank - 1; d >= 0; d--)
        if (d != dim) sizes.push_back((int)s[d]);
    sizes.push_back((int)((s[dim] + block - 1) / block));
    std::string fname = reserve_name("c_" + sanitize_name(name) + "_blocked");
    Halide::Buffer<float> buf(sizes, fname + "_buf");
    buf.fill(0.0f);  // a last, partial block reads zeros past the dim's end
    const float *src = reinterpret_cast<const float *>(c->data());
    float *dst = buf.data();
    const int64_t n = s[dim], rest = outer * inner;  // elements per block lane: the other dims
    for (int64_t o = 0; o < outer; o++)
        for (int64_t x = 0; x < n; x++)
            for (int64_t in = 0; in < inner; in++)
                dst[((x / block) * rest + o * inner + in) * block + x % block] = src[(o * n + x) * inner + in];
    Func f{Halide::Internal::Function(fname)};
    std::vector<Var> vs;
    for (int d = 0; d <= rank; d++) vs.push_back(Var("d" + std::to_string(d)));
    f(vs) = buf(std::vector<Expr>(vs.begin(), vs.end()));
    return f;
}

Expr LowerContext::at(const std::string &name, const std::vector<Expr> &idx) {
    const Shape &s = shape(name);
    int r = (int)s.size();
    internal_check(r <= (int)idx.size(), "value '", name, "' of rank ", r, " read with ", idx.size(),
                   " indices");
    if (const Tensor *c = graph.constant(name); c && c->numel() == 1) {
        return dtype_is_float(c->dtype()) ? literal(c->dtype(), c->get(0))
                                          : cast_to(c->dtype(), Halide::cast(Halide::Int(64), Expr(c->get_int(0))));
    }
    std::vector<Expr> own;
    int off = (int)idx.size() - r;
    // A size-1 dim broadcasts; a dim that moves with the input sizes is read as it is, whatever its
    // representative size.
    SymShape sy = sym(name);
    for (int d = 0; d < r; d++) own.push_back(s[d] == 1 && sy[d].is_static() ? Expr(0) : idx[off + d]);
    return call(value(name), own);
}

Expr LowerContext::size(const SymDim &d) const { return result.size_expr(d); }

int64_t LowerContext::static_extent(const Node &node, const std::string &name, int d) const {
    SymDim s = sym(name).at(d);
    user_check(s.is_static(), node.describe(), " needs dim ", d, " of '", name, "' as a fixed size, but it is ",
               s.str(), " (moves with the input sizes); bind it with --input to compile for one size");
    return s.value();
}

std::string LowerContext::func_base(const Node &node) {
    auto it = node_base_.find(node.name);
    if (it != node_base_.end()) return it->second;
    std::string base = node.name;
    if (base.empty()) {
        int index = 0;
        for (size_t k = 0; k < graph.nodes.size(); k++)
            if (&graph.nodes[k] == &node) index = (int)k;
        base = node.op + "_" + std::to_string(index);
    }
    std::string n = reserve_name(sanitize_name(base));
    node_base_[node.name] = n;
    return n;
}

std::vector<Var> LowerContext::vars(int rank) const {
    std::vector<Var> v;
    for (const auto &n : var_names_for_rank(rank)) v.push_back(Var(n));
    return v;
}

Func LowerContext::make_func(const Node &node, const std::string &suffix, int rank) {
    std::string base = func_base(node);
    std::string name;
    if (suffix.empty()) {
        name = base;
        // The node's own name was reserved by func_base; a second suffix-less Func (a
        // second output of Split, say) gets a fresh one.
        if (record_index_.count(name)) name = reserve_name(base);
    } else {
        name = reserve_name(sanitize_name(base + "_" + suffix));
    }
    Func f{Halide::Internal::Function(name)};  // exact name: Func(name) would add "$n" on reuse
    LoweredFunc lf;
    lf.name = name;
    lf.func = f;
    lf.node = node.name;
    lf.op = node.op;
    lf.vars = var_names_for_rank(rank);
    record_index_[name] = result.funcs.size();
    result.funcs.push_back(lf);
    return f;
}

Func LowerContext::make_func(const Node &node, const std::string &suffix, const Shape &shape) {
    Func f = make_func(node, suffix, (int)shape.size());
    LoweredFunc &lf = record(f);
    lf.extents = shape;
    if (graph.dynamic.active()) {
        // A helper's dims move where the node's output's or first input's dims of the same rank
        // do; a dim of a helper of another rank is taken to move.
        std::vector<bool> moving(shape.size(), false);
        std::vector<Expr> extents(shape.size());
        bool known = false;
        for (const std::string *v : {node.outputs.empty() ? nullptr : &node.outputs[0],
                                     node.inputs.empty() ? nullptr : &node.inputs[0]}) {
            if (!v || v->empty() || !graph.has_value(*v)) continue;
            SymShape s = sym(*v);
            if (s.size() != shape.size()) continue;
            known = true;
            for (size_t d = 0; d < s.size(); d++) {
                moving[d] = moving[d] || !s[d].is_static();
                // The value's dim is the helper's where their representative sizes agree.
                if (!s[d].is_static() && !extents[d].defined() && graph.value(*v).shape[d] == shape[d])
                    extents[d] = size(s[d]);
            }
        }
        if (!known) moving.assign(shape.size(), true);
        if (std::find(moving.begin(), moving.end(), true) != moving.end()) {
            lf.dynamic_vars = moving;
            for (size_t d = 0; d < moving.size(); d++)
                if (!moving[d]) extents[d] = Expr();
            lf.dynamic_extents = extents;
        }
    }
    return f;
}

void LowerContext::exact_extents(const Func &f, const SymShape &shape) {
    if (!sym_shape_static(shape)) record(f).sym_extents = shape;
}

bool LowerContext::extern_operand(const std::string &name, Halide::ExternFuncArgument &arg) {
    for (size_t k = 0; k < result.input_names.size(); k++)
        if (result.input_names[k] == name) {
            arg = result.inputs[k].parameter();
            return true;
        }
    if (!values_.count(name)) return false;
    Func f = value(name);
    LoweredFunc *producer = result.find(f.name());
    const Shape &s = shape(name);
    if (!producer || producer->vars.size() != s.size()) return false;
    for (size_t d = 0; d < s.size(); d++) f.bound(Halide::Var(producer->vars[d]), 0, (int)s[d]);
    producer->feeds_extern = true;
    arg = f;
    return true;
}

void LowerContext::note_extern_call(const std::string &fn, const Halide::Func &ext, const Shape &shape) {
    result.extern_shapes[ext.name()] = shape;
    auto &calls = result.extern_calls;
    if (std::find(calls.begin(), calls.end(), fn) == calls.end()) calls.push_back(fn);
}

const Node *LowerContext::sole_activation_consumer(const std::string &value,
                                                   const std::function<bool(const Node &)> &accept) const {
    if (!options.fuse_activation_epilogue) return nullptr;
    if (graph.is_output(value)) return nullptr;
    std::vector<int> users = graph.consumers(value);
    if (users.size() != 1 || !accept(graph.nodes[users[0]])) return nullptr;
    return &graph.nodes[users[0]];
}

void LowerContext::register_extern(Func ext, const Node &node, const Shape &shape) {
    LoweredFunc lf;
    lf.name = ext.name();
    lf.func = ext;
    lf.node = node.name;
    lf.op = node.op;
    lf.vars = var_names_for_rank((int)shape.size());
    lf.extents = shape;
    lf.is_extern = true;
    record_index_[lf.name] = result.funcs.size();
    result.funcs.push_back(lf);
}

LoweredFunc &LowerContext::record(const Func &f) {
    auto it = record_index_.find(f.name());
    internal_check(it != record_index_.end(), "Func '", f.name(), "' was not made by make_func");
    return result.funcs[it->second];
}

void LowerContext::define(Func f, const std::vector<Var> &vars_outer_first, Expr e) {
    std::vector<Var> v(vars_outer_first.rbegin(), vars_outer_first.rend());
    f(v) = e;
}

Expr LowerContext::call(Func f, const std::vector<Expr> &idx_outer_first) {
    std::vector<Expr> v(idx_outer_first.rbegin(), idx_outer_first.rend());
    return f(v);
}

void LowerContext::bind_output(const std::string &name, Func f) {
    internal_check(!values_.count(name), "value '", name, "' is bound twice");
    values_[name] = f;
    func_of_value_[name] = f.name();
    auto it = record_index_.find(f.name());
    if (it != record_index_.end()) {
        LoweredFunc &lf = result.funcs[it->second];
        lf.extents = shape(name);
        lf.dtype = dtype(name);
        lf.dynamic_vars.clear();
        lf.dynamic_extents.clear();
        lf.sym_extents.clear();
        SymShape sy = sym(name);
        if (!sym_shape_static(sy)) lf.sym_extents = sy;
        if (!sym_shape_static(sy))
            for (const auto &d : sy) {
                lf.dynamic_vars.push_back(!d.is_static());
                lf.dynamic_extents.push_back(d.is_static() ? Expr() : size(d));
            }
        internal_check(f.defined(), "Func '", f.name(), "' bound to '", name, "' has no definition");
        internal_check(f.output_types()[0] == halide_type(lf.dtype), "Func '", f.name(), "' has type ",
                       f.output_types()[0], " but value '", name, "' is ", dtype_name(lf.dtype));
    }
}

void LowerContext::note_update(Func f, const std::vector<std::string> &rvar_names) {
    record(f).update_rvars.push_back(rvar_names);
}

void LowerContext::note_cost(Func f, bool pointwise, double flops_per_point) {
    LoweredFunc &lf = record(f);
    lf.is_pointwise = pointwise;
    lf.flops_per_point = flops_per_point;
}

void LowerContext::note_inline_by_default(Func f) { record(f).inline_by_default = true; }

void LowerContext::note_padded_input(Func f) { record(f).padded_input = true; }

void LowerContext::rebind(const std::string &name, Func f) {
    internal_check(values_.count(name), "value '", name, "' is rebound before it is bound");
    values_[name] = f;
}

}  // namespace loom
