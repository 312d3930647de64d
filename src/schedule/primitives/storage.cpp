/// \file
/// The storage family: a Func's buffer, its bounds (bound, align_bounds), layout
/// (reorder_storage), memory (store_in), the prefetches that fill caches ahead of its loops
/// (prefetch) and Loom's non-temporal stores into it (stream_stores), which Halide 14 cannot
/// express and codegen honours (codegen/streaming_stores.h).

#include <algorithm>
#include <map>
#include <set>

#include "schedule/primitives/call_context.h"
#include "schedule/primitives/families.h"
#include "support/error.h"

namespace loom::sched_internal {
namespace {

// Argument \p i as a pure var of the Func (bounds and storage are the Func's, not a stage's).
std::string pure_var(CallCheck &k, size_t i) {
    const FuncModel &f = k.f;
    std::string v = k.ident(i, "a pure var of " + f.name);
    if (std::find(f.vars.begin(), f.vars.end(), v) == f.vars.end())
        k.fail("'" + v + "' is not a pure var of " + f.name + did_you_mean(v, f.vars) + " valid: " + join(f.vars),
               &k.c.args[i].loc);
    return v;
}

Halide::MemoryType memory_of(const ScheduleArg &a) {
    static const std::map<std::string, Halide::MemoryType> m = {
        {"Auto", Halide::MemoryType::Auto},         {"Heap", Halide::MemoryType::Heap},
        {"Stack", Halide::MemoryType::Stack},       {"Register", Halide::MemoryType::Register},
        {"GPUShared", Halide::MemoryType::GPUShared}, {"GPUTexture", Halide::MemoryType::GPUTexture},
        {"LockedCache", Halide::MemoryType::LockedCache}, {"VTCM", Halide::MemoryType::VTCM},
        {"AMXTile", Halide::MemoryType::AMXTile}};
    return m.at(a.name);
}

}  // namespace

void validate_bound(CallCheck &k) {
    pure_var(k, 0);
    k.integer(1, "min");
    k.positive(2, "extent");
}

void validate_align_bounds(CallCheck &k) {
    pure_var(k, 0);
    k.positive(1, "modulus");
    if (k.n > 2) k.integer(2, "remainder");
}

void validate_reorder_storage(CallCheck &k) {
    std::set<std::string> seen;
    for (size_t i = 0; i < k.n; i++) {
        std::string v = pure_var(k, i);
        if (!seen.insert(v).second) k.fail("'" + v + "' appears twice", &k.c.args[i].loc);
    }
}

void validate_store_in(CallCheck &k) {
    const ScheduleArg &a = k.c.args[0];
    const auto &names = memory_type_names();
    bool ok = (a.kind == ScheduleArg::Kind::Memory || a.is_ident()) &&
              std::find(names.begin(), names.end(), a.name) != names.end();
    if (!ok) k.fail("'" + a.str() + "' is not a MemoryType" + did_you_mean(a.name, names) + " valid: " + join(names), &a.loc);
    if ((a.name == "GPUShared" || a.name == "GPUTexture") && !k.has_gpu()) k.gpu_check();
}

void validate_prefetch(CallCheck &k) {
    Model &m = k.m;
    std::string src = k.ident(0, "a func or input");
    if (!m.find(src) && std::find(m.inputs.begin(), m.inputs.end(), src) == m.inputs.end()) {
        auto all = m.names();
        all.insert(all.end(), m.inputs.begin(), m.inputs.end());
        k.fail("unknown func or input '" + src + "'" + did_you_mean(src, all), &k.c.args[0].loc);
    }
    k.dim(1);
    k.dim(2);
    if (k.n > 3) k.integer(3, "offset");
    if (k.n > 4) {
        static const std::vector<std::string> strategies = {"Clamp", "GuardWithIf", "NonFaulting"};
        const ScheduleArg &a = k.c.args[4];
        if (!a.is_ident() || std::find(strategies.begin(), strategies.end(), a.name) == strategies.end())
            k.fail("'" + a.str() + "' is not a PrefetchBoundStrategy; valid: " + join(strategies), &a.loc);
    }
}

void validate_stream_stores(CallCheck &k) {
    if (k.has_gpu() || k.m.target.arch != Halide::Target::X86)
        k.fail("stream_stores makes x86 non-temporal vector stores (movntps); target " + k.m.target.to_string() +
               " is not an x86 CPU target: leave it out there");
    if (k.f.stages.size() > 1)
        k.fail(k.f.name + " has update stages, which read back what it stores, and a streamed store leaves the cache, "
                          "so every such read would go to memory; stream a Func with a pure definition only (the "
                          "pointwise Func that reads this one, or a copy made with in())");
}

void finish_stream_stores(CallCheck &k) {
    const FuncModel &f = k.f;
    if (!f.is_output && f.place.kind != Placement::Root)
        k.fail(k.st.func +
               (f.place.kind == Placement::At ? " is computed at " + f.place.func + "." + f.place.var
                                              : std::string(" is inlined")) +
               ": only a Func with a buffer of its own at root has stores to stream, and one that a consumer re-reads "
               "from cache should not be streamed; compute_root() it first, or stream the output that reads it");
}

void apply_bound(CallApply &a) { a.f.bound(Halide::Var(a.c.args[0].name), a.expr(1), a.expr(2)); }

void apply_align_bounds(CallApply &a) {
    a.f.align_bounds(Halide::Var(a.c.args[0].name), a.expr(1), a.n > 2 ? a.expr(2) : Halide::Expr(0));
}

void apply_reorder_storage(CallApply &a) {
    std::vector<Halide::Var> vs;
    for (const auto &x : a.c.args) vs.emplace_back(x.name);
    a.f.reorder_storage(vs);
}

void apply_store_in(CallApply &a) { a.f.store_in(memory_of(a.c.args[0])); }

void apply_prefetch(CallApply &a) {
    const std::string &src = a.c.args[0].name;
    Halide::Expr offset = a.n > 3 ? a.expr(3) : Halide::Expr(1);
    Halide::PrefetchBoundStrategy strategy = Halide::PrefetchBoundStrategy::GuardWithIf;
    if (a.n > 4) {
        const std::string &s = a.c.args[4].name;
        strategy = s == "Clamp"         ? Halide::PrefetchBoundStrategy::Clamp
                   : s == "NonFaulting" ? Halide::PrefetchBoundStrategy::NonFaulting
                                        : Halide::PrefetchBoundStrategy::GuardWithIf;
    }
    auto it = a.out.funcs.find(src);
    if (it != a.out.funcs.end()) {
        a.stage.prefetch(it->second, a.var(1), a.var(2), offset, strategy);
    } else {
        for (const auto &in : a.p.inputs)
            if (in.name() == src) a.stage.prefetch(in, a.var(1), a.var(2), offset, strategy);
    }
}

void apply_stream_stores(CallApply &a) {
    a.p.streaming_stores->insert(a.f.name());  // for code generation
    // A vector store is streamed only where Halide can prove it aligned: declare the output's host
    // pointer aligned to a vector (Loom's Tensors are 64-byte aligned; a caller's misaligned buffer
    // fails Halide's check with a message instead).
    if (a.before.is_output)
        a.f.output_buffer().set_host_alignment(
            std::max(a.f.output_buffer().host_alignment(), a.m.target.natural_vector_size(Halide::Float(32)) * 4));
}

}  // namespace loom::sched_internal
