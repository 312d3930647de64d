#include "schedule/schedule.h"

namespace loom {

std::string SourceLoc::str() const {
    std::string s = file.empty() ? "<schedule>" : file;
    if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(col);
    return s;
}

ScheduleArg ScheduleArg::tail(const std::string &n) {
    ScheduleArg a(n);
    a.kind = Kind::Tail;
    return a;
}

ScheduleArg ScheduleArg::memory(const std::string &n) {
    ScheduleArg a(n);
    a.kind = Kind::Memory;
    return a;
}

std::string ScheduleArg::str() const {
    switch (kind) {
    case Kind::Int: return std::to_string(value);
    case Kind::Tail: return "TailStrategy::" + name;
    case Kind::Memory: return "MemoryType::" + name;
    default: return name;
    }
}

bool ScheduleArg::operator==(const ScheduleArg &o) const {
    if (kind != o.kind) return false;
    return kind == Kind::Int ? value == o.value : name == o.name;
}

std::string PrimitiveCall::str() const {
    std::string s = name + "(";
    for (size_t i = 0; i < args.size(); i++) s += (i ? ", " : "") + args[i].str();
    s += ")";
    if (!as_name.empty()) s += " as " + as_name;
    return s;
}

bool PrimitiveCall::operator==(const PrimitiveCall &o) const {
    return name == o.name && args == o.args && as_name == o.as_name;
}

ScheduleStatement &ScheduleStatement::add(const std::string &prim, std::vector<ScheduleArg> args,
                                          const std::string &as_name) {
    calls.emplace_back(prim, std::move(args), as_name);
    return *this;
}

std::string ScheduleStatement::stage_name() const {
    return stage < 0 ? func : func + ".update(" + std::to_string(stage) + ")";
}

bool ScheduleStatement::operator==(const ScheduleStatement &o) const {
    return func == o.func && stage == o.stage && calls == o.calls && comments == o.comments;
}

bool Schedule::has_header() const {
    return !model.empty() || !sha256.empty() || !target.empty() || !header_comments.empty();
}

std::vector<const ScheduleStatement *> Schedule::statements_for(const std::string &func) const {
    std::vector<const ScheduleStatement *> r;
    for (const auto &s : statements)
        if (s.func == func) r.push_back(&s);
    return r;
}

bool Schedule::operator==(const Schedule &o) const {
    return model == o.model && sha256 == o.sha256 && target == o.target &&
           header_comments == o.header_comments && statements == o.statements &&
           trailing_comments == o.trailing_comments;
}

// The language's primitives; what checks and applies each one is in schedule/primitives/
// (actions.cpp). The rows keep the order that "primitives are: …" lists.
// Func-level primitives (Halide `Func` methods, not `Stage`) are pure_only: they act on the whole
// Func, so they may not follow `.update(k)`.
static const PrimitiveInfo kPrimitives[] = {
    // name, min, max, signature, makes_func, gpu, pure_only
    {"compute_root", 0, 0, "compute_root()", false, false, true},
    {"compute_inline", 0, 0, "compute_inline()", false, false, true},
    {"compute_at", 2, 2, "compute_at(func, var)", false, false, true},
    {"store_at", 2, 2, "store_at(func, var)", false, false, true},
    {"store_root", 0, 0, "store_root()", false, false, true},
    {"split", 4, 5, "split(var, outer, inner, factor[, TailStrategy])", false, false, false},
    {"fuse", 3, 3, "fuse(inner, outer, fused)", false, false, false},
    {"reorder", 2, -1, "reorder(innermost, …, outermost)", false, false, false},
    {"tile", 6, 9,
     "tile(x, y, xo, yo, xi, yi, xfactor, yfactor[, TailStrategy]) or "
     "tile(x, y, xi, yi, xfactor, yfactor[, TailStrategy])",
     false, false, false},
    {"vectorize", 1, 3, "vectorize(var[, factor[, TailStrategy]])", false, false, false},
    {"unroll", 1, 3, "unroll(var[, factor[, TailStrategy]])", false, false, false},
    {"parallel", 1, 3, "parallel(var[, task_size[, TailStrategy]])", false, false, false},
    {"gpu_tile", 3, 13,
     "gpu_tile(x[, y[, z]], bx[, by[, bz]], tx[, ty[, tz]], xsize[, ysize[, zsize]]"
     "[, TailStrategy]) (bx… may be left out)",
     false, true, false},
    {"gpu_blocks", 1, 3, "gpu_blocks(x[, y[, z]])", false, true, false},
    {"gpu_threads", 1, 3, "gpu_threads(x[, y[, z]])", false, true, false},
    {"gpu_lanes", 1, 1, "gpu_lanes(var)", false, true, false},
    {"gpu_single_thread", 0, 0, "gpu_single_thread()", false, true, false},
    // Loom's: ptxas's register budget per thread for the Func's kernels (`.maxnreg`), so that more
    // blocks fit on an SM; Halide 14 has no schedule handle for it (its runtime's is a process-wide
    // environment variable).
    {"gpu_max_registers", 1, 1, "gpu_max_registers(registers per thread, 16..255)", false, true, true},
    // Loom's (upstream Halide has it since 2026, Halide 14 not): non-temporal stores into the
    // Func's buffer (codegen/streaming_stores.h), for a large output no one re-reads from cache.
    {"stream_stores", 0, 0, "stream_stores()", false, false, true},
    {"rfactor", 2, -1, "rfactor(rvar, var[, rvar, var …]) as <new func>", true, false, false},
    {"atomic", 0, 1, "atomic([override_associativity_test: 0|1])", false, false, false},
    // An update stage left at Halide's default order on purpose (a reduction too small to be worth
    // a parallel loop), which keeps Halide from warning that it was forgotten.
    {"unscheduled", 0, 0, "unscheduled()", false, false, false},
    {"bound", 3, 3, "bound(var, min, extent)", false, false, true},
    {"align_bounds", 2, 3, "align_bounds(var, modulus[, remainder])", false, false, true},
    {"reorder_storage", 2, -1, "reorder_storage(innermost, …, outermost)", false, false, true},
    {"store_in", 1, 1, "store_in(MemoryType)", false, false, true},
    {"compute_with", 2, 2, "compute_with(func, var)", false, false, false},
    {"prefetch", 3, 5, "prefetch(func_or_input, at, from[, offset[, Clamp|GuardWithIf|NonFaulting]])", false,
     false, false},
    {"in", 0, 1, "in([consumer]) as <new func>", true, false, true},
};

const PrimitiveInfo *find_primitive(const std::string &name) {
    for (const auto &p : kPrimitives)
        if (name == p.name) return &p;
    return nullptr;
}

std::vector<std::string> primitive_names() {
    std::vector<std::string> r;
    for (const auto &p : kPrimitives) r.push_back(p.name);
    return r;
}

const std::vector<std::string> &tail_strategy_names() {
    static const std::vector<std::string> v = {"RoundUp",        "GuardWithIf",     "Predicate",
                                               "PredicateLoads", "PredicateStores", "ShiftInwards",
                                               "Auto"};
    return v;
}

const std::vector<std::string> &memory_type_names() {
    static const std::vector<std::string> v = {"Auto",       "Heap",        "Stack",
                                               "Register",   "GPUShared",   "GPUTexture",
                                               "LockedCache", "VTCM",       "AMXTile"};
    return v;
}

}  // namespace loom
