#include "codegen/jit.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <chrono>
#include <ctime>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>

#include "codegen/denormals.h"
#include "codegen/openmp_threading.h"
#include "codegen/streaming_stores.h"
#include "graph/symbolic_shapes.h"
#include "support/error.h"
#include "support/debug_output.h"

namespace loom {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

/// A Halide buffer over a Tensor's own bytes (Halide dim 0 = innermost tensor dim): no copy.
/// Halide never writes to an input, so wrapping a const Tensor is safe.
Halide::Buffer<> wrap(const Tensor &t, const std::string &name) {
    std::vector<int> sizes;
    for (int d = t.rank() - 1; d >= 0; d--) sizes.push_back((int)t.shape()[d]);
    return Halide::Buffer<>(halide_type(t.dtype()), const_cast<void *>(t.data()), sizes, name);
}

/// Where append_print writes during one realize_into (the runtime prints on the calling thread:
/// the profiler's report runs after the pipeline returns).
thread_local std::string *t_print_sink = nullptr;

void append_print(Halide::JITUserContext *, const char *text) {
    if (t_print_sink) *t_print_sink += text;
    else std::cerr << text;
}

/// Halide 14 writes compile-time warnings straight to std::cerr. When a schedule makes a runtime
/// bounds check fail for certain (a split running past the data), lowering prints "Warning: This
/// pipeline is guaranteed to fail an assertion at runtime:" and the failing
/// `halide_error_constraint_violated(...)` call for every such check, every time it lowers: a burst
/// of lines ahead of the one error the run then reports. While Halide compiles, std::cerr goes to
/// a buffer; those warnings are dropped (the run's own error says what failed) and any other text
/// is passed on unchanged. (Halide's CompileTimeErrorReporter would also take over its errors, losing
/// their kind, and aborts if the reporter returns.) Segments compile on several threads, so the
/// buffer takes one writer at a time.
class HalideWarningFilter {
public:
    HalideWarningFilter() : saved_(std::cerr.rdbuf(&buf_)) {}
    ~HalideWarningFilter() {
        std::cerr.rdbuf(saved_);
        std::cerr << kept(buf_.str()) << std::flush;
    }
    HalideWarningFilter(const HalideWarningFilter &) = delete;
    HalideWarningFilter &operator=(const HalideWarningFilter &) = delete;

    /// \p text less every "Warning: …guaranteed to fail an assertion at runtime: " line and the
    /// line after it (the assertion, which Halide prints on a line of its own).
    static std::string kept(const std::string &text) {
        std::string out;
        int drop = 0;
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("Warning:", 0) == 0 &&
                line.find("guaranteed to fail an assertion at runtime") != std::string::npos)
                drop = 2;
            if (drop > 0) drop--;
            else out += line + "\n";
        }
        return out;
    }

private:
    class LockedStringBuf : public std::stringbuf {
    protected:
        std::streamsize xsputn(const char *s, std::streamsize n) override {
            std::lock_guard<std::recursive_mutex> lock(mutex_);
            return std::stringbuf::xsputn(s, n);
        }
        int_type overflow(int_type c) override {
            std::lock_guard<std::recursive_mutex> lock(mutex_);
            return std::stringbuf::overflow(c);
        }

    private:
        std::recursive_mutex mutex_;  // the base xsputn calls overflow
    };
    LockedStringBuf buf_;
    std::streambuf *saved_;
};

/// Runs \p f, turning Halide's exceptions into Loom's: a compile error is the schedule's (the
/// user's) fault, a runtime error usually bad inputs; anything else is ours.
template <typename F>
void halide_guard(const std::string &what, F &&f) {
    try {
        f();
    } catch (const Halide::CompileError &e) {
        throw UserError(str_cat(what, ": Halide rejected the pipeline: ", e.what()));
    } catch (const Halide::RuntimeError &e) {
        std::string msg = e.what();
        // The usual cause: a split or vectorize whose factor does not divide the extent rounds the
        // loop up (RoundUp), or exceeds it (ShiftInwards cannot shift a loop shorter than the
        // factor), so a producer is asked for points past the end of a weight or an input.
        if (msg.find("is accessed at") != std::string::npos)
            msg += "\n  hint: a split/vectorize/tile factor that does not divide its loop's extent (RoundUp) or "
                   "exceeds it (ShiftInwards) runs the loop past the data; give it TailStrategy::GuardWithIf, "
                   "e.g. vectorize(j, 8, GuardWithIf), or pick a factor that divides the extent "
                   "(`loom inspect M --funcs` lists the extents)";
        throw UserError(str_cat(what, ": Halide runtime error: ", msg));
    } catch (const Halide::InternalError &e) {
        throw InternalError(str_cat(what, ": Halide internal error: ", e.what()));
    } catch (const Halide::Error &e) {
        throw UserError(str_cat(what, ": Halide: ", e.what()));
    }
}

}  // namespace

Halide::Target runnable_here(Halide::Target t) {
#if defined(__x86_64__) || defined(__i386__)
    // Halide 14 takes AMD Zen 4 (AVX-512 with BF16 and VP2INTERSECT) for Sapphire Rapids, whose
    // LLVM CPU has AVX512-FP16: the code then dies of SIGILL on Zen 4 (bool/int casts in the
    // tests did). Keep the feature only where CPUID says AVX512-FP16 (leaf 7, EDX bit 23).
    if (t.has_feature(Halide::Target::AVX512_SapphireRapids)) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        bool fp16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u);
        if (!fp16) t = t.without_feature(Halide::Target::AVX512_SapphireRapids);
    }
#endif
    return t;
}

Halide::Target host_target() { return runnable_here(Halide::get_jit_target_from_environment()); }

JitModel::JitModel(LoweredPipeline lowered, const Halide::Target &target, int max_segments)
    : lowered_(std::move(lowered)), target_(target) {
    auto t0 = Clock::now();
    compile(max_segments);
    compile_s_ = ms_since(t0) / 1000.0;
}

void JitModel::compile(int max_segments) {
    HalideWarningFilter quiet;  // lowering is where Halide warns
    halide_guard("JIT compile for " + target_.to_string(),
                 [&] { segmented_ = segment_pipeline(lowered_, target_, max_segments); });
    auto &segs = segmented_.segments;
    streaming_.clear();
    streaming_.resize(segs.size());
    std::vector<double> cpu_s(segs.size());
    run_in_parallel(segs.size(), [&](size_t k) {
        timespec c0{}, c1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        struct Stamp {
            timespec &c0, &c1;
            double &out;
            ~Stamp() {
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
                out = double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec);
            }
        } stamp{c0, c1, cpu_s[k]};
        halide_guard("JIT compile for " + target_.to_string(), [&] {
            // Halide's JIT cannot stream stores: a pipeline that does compiles through Loom's.
            std::set<std::string> marked = streaming_funcs_in(segs[k].pipeline, *lowered_.streaming_stores);
            // (Its arguments are buffers only: a model compiled for every size, whose pipelines
            // also take the size Params, compiles through Halide's, without streaming.)
            if (marked.empty() || target_.has_gpu_feature() || lowered_.dynamic.active())
                return segs[k].pipeline.compile_jit(target_);
            std::vector<Halide::ImageParam> params = lowered_.inputs;
            for (int b : segs[k].reads) params.push_back(segmented_.boundaries[b].param);
            streaming_[k] = std::make_unique<StreamingJit>(segs[k].pipeline, params, target_, marked);
        });
    }, segment_costs(segmented_));
    compile_cpu_s_ = 0;
    for (double c : cpu_s) compile_cpu_s_ += c;
    if (debug_output()) {
        std::cerr << "loom: CPU s per pipeline:";
        for (double c : cpu_s) std::cerr << " " << c;
        std::cerr << "\n";
    }
    allocate_boundaries();
}

int JitModel::streamed_stores() const {
    int n = 0;
    for (const auto &s : streaming_)
        if (s) n += s->marks().marked;
    return n;
}

void JitModel::allocate_boundaries() {
    boundary_buffers_.clear();
    boundary_buffers_.resize(segmented_.boundaries.size());
    size_boundaries();
}

void JitModel::size_boundaries() {
    for (size_t b = 0; b < segmented_.boundaries.size(); b++) {
        auto &bd = segmented_.boundaries[b];
        // A graph output read by a later segment is read from the caller's output buffer, bound
        // at each run.
        if (bd.graph_output >= 0 || (!bd.sym_extents.empty() && sizes_.empty())) continue;  // sized at the first run
        std::vector<int> extents, strides;
        bd.shape_at(sizes_, extents, strides);
        Halide::Buffer<> &buf = boundary_buffers_[b];
        bool same = buf.defined() && buf.dimensions() == (int)extents.size();
        for (size_t d = 0; same && d < extents.size(); d++) same = buf.dim((int)d).extent() == extents[d];
        if (same) continue;  // kept from run to run while the sizes repeat (as for a fixed shape)
        buf = Halide::Buffer<>(bd.type, extents, bd.storage_order, bd.func);
        bd.param.set(buf);
    }
}

void JitModel::bind_sizes(const std::map<std::string, Tensor> &inputs) {
    output_shapes_ = lowered_.output_shapes;
    sizes_.clear();
    if (!lowered_.dynamic.active()) return;
    std::map<std::string, Shape> shapes;
    for (const auto &kv : inputs) shapes[kv.first] = kv.second.shape();
    for (const auto &name : lowered_.input_names)
        if (!shapes.count(name)) return;  // bind_inputs names the missing one
    std::map<std::string, int64_t> sizes =
        bind_dynamic_sizes(lowered_.dynamic, lowered_.input_names, lowered_.input_syms, shapes);
    for (auto &kv : lowered_.size_params) kv.second.set((int32_t)sizes.at(kv.first));
    sizes_ = sizes;
    for (size_t k = 0; k < output_shapes_.size(); k++)
        if (!lowered_.output_syms[k].empty()) output_shapes_[k] = eval_shape(lowered_.output_syms[k], sizes);
    for (size_t k = 0; k < output_shapes_.size(); k++)
        checked_tensor_bytes(lowered_.output_dtypes[k], output_shapes_[k], "output '" + lowered_.output_names[k] + "'");
}

void JitModel::bind_inputs(const std::map<std::string, Tensor> &inputs, std::vector<Tensor> &keep) {
    bind_sizes(inputs);
    keep.clear();
    keep.reserve(lowered_.inputs.size());  // no reallocation: buffers point into keep
    for (size_t k = 0; k < lowered_.inputs.size(); k++) {
        const std::string &name = lowered_.input_names[k];
        auto it = inputs.find(name);
        if (it == inputs.end()) {
            std::string given;
            for (const auto &kv : inputs) given += (given.empty() ? "'" : ", '") + kv.first + "'";
            throw UserError(str_cat("missing input '", name, "' (inputs given: ",
                                    given.empty() ? std::string("none") : given, ")"));
        }
        const Tensor &t = it->second;
        user_check(lowered_.dynamic.active() || t.shape() == lowered_.input_shapes[k], "input '", name, "' has shape ",
                   shape_str(t.shape()), " but the model was compiled for ",
                   shape_str(lowered_.input_shapes[k]));
        // Halide reads the caller's bytes directly unless the dtype needs converting.
        const Tensor *src = &t;
        if (t.dtype() != lowered_.input_dtypes[k]) {
            keep.push_back(t.cast(lowered_.input_dtypes[k]));
            src = &keep.back();
        }
        lowered_.inputs[k].set(wrap(*src, name));
    }
}

void JitModel::allocate_poisoned(std::vector<Tensor> &outs) const {
    outs.clear();
    for (size_t k = 0; k < lowered_.output_names.size(); k++) {
        outs.emplace_back(lowered_.output_dtypes[k], output_shapes_[k]);
        Tensor &t = outs.back();
        // All-ones bytes are NaN in every float format; 0x5A elsewhere.
        std::memset(t.data(), dtype_is_float(t.dtype()) ? 0xFF : 0x5A, t.bytes().size());
    }
}

void JitModel::realize_into(std::vector<Tensor> &outs) {
    std::vector<Halide::Buffer<>> bufs;
    for (size_t k = 0; k < outs.size(); k++) bufs.push_back(wrap(outs[k], lowered_.output_names[k]));
    auto par_for = jit_do_par_for(jit_threading());
    auto print = print_sink_ ? append_print : nullptr;
    t_print_sink = print_sink_;
    if (lowered_.dynamic.active()) size_boundaries();
    auto t0 = Clock::now();
    auto run_segments = [&] {
        FlushDenormals flush;
        for (size_t s = 0; s < segmented_.segments.size(); s++) {
            auto &seg = segmented_.segments[s];
            std::vector<Halide::Buffer<>> into;
            for (size_t k = 0; k < seg.outputs.size(); k++) {
                int b = seg.boundary_of_output[k], g = seg.graph_output_of_output[k];
                if (g >= 0) {
                    into.push_back(bufs[g]);
                    if (b >= 0) segmented_.boundaries[b].param.set(bufs[g]);
                } else {
                    into.push_back(boundary_buffers_[b]);
                }
            }
            // Read at every run, so a cached model follows set_jit_threading.
            if (streaming_[s]) {
                streaming_[s]->realize(into, par_for, print);
                continue;
            }
            seg.pipeline.jit_handlers().custom_do_par_for = par_for;
            seg.pipeline.jit_handlers().custom_do_task = flushing_do_task;
            seg.pipeline.jit_handlers().custom_print = print;
            seg.pipeline.realize(Halide::Realization(into), target_);
        }
    };
    try {
        halide_guard("running the model", run_segments);
    } catch (const UserError &) {
        // A safety net: a Func read or written past its extents across a cut. The plan keeps the
        // known cause (a split that rounds a loop up) from crossing a cut (jit_segments.cpp,
        // computes_past_extents), so no schedule Loom makes or tests reaches this now. Whatever it
        // was, the uncut model decides: it runs, or its error is the one reported.
        if (segments() == 1) throw;
        std::cerr << "loom: the model cut into " << segments()
                  << " pipelines failed to run; compiling it as one pipeline\n";
        compile(1);
        t0 = Clock::now();
        halide_guard("running the model", run_segments);
    }
    last_run_ms_ = ms_since(t0);
    if (target_.has_gpu_feature()) {
        for (auto &b : bufs) {
            b.copy_to_host();
            b.device_free();
        }
    }
}

void JitModel::serve_short_sizes_with(std::unique_ptr<JitModel> short_sizes, Halide::Expr long_enough) {
    short_ = std::move(short_sizes);
    long_enough_ = std::move(long_enough);
    picked_sizes_.clear();
    picked_short_ = ran_short_ = false;
}

JitModel &JitModel::model_for(const std::map<std::string, Tensor> &inputs) {
    if (!short_) return *this;
    std::map<std::string, Shape> shapes;
    for (const auto &kv : inputs) shapes[kv.first] = kv.second.shape();
    for (const auto &name : lowered_.input_names)
        if (!shapes.count(name)) return *this;  // bind_inputs names the missing one
    std::map<std::string, int64_t> sizes =
        bind_dynamic_sizes(lowered_.dynamic, lowered_.input_names, lowered_.input_syms, shapes);
    if (!picked_sizes_.empty() && sizes == picked_sizes_) return picked_short_ ? *short_ : *this;
    std::map<std::string, Halide::Expr> values;
    for (const auto &[sym, param] : lowered_.size_params) values[param.name()] = Halide::Expr((int32_t)sizes.at(sym));
    Halide::Expr holds = Halide::Internal::simplify(Halide::Internal::substitute(values, long_enough_));
    internal_check(Halide::Internal::is_const(holds),
                   "jit: the long-enough condition did not fold to a constant at the run's sizes");
    picked_short_ = !Halide::Internal::is_const_one(holds);
    picked_sizes_ = sizes;
    return picked_short_ ? *short_ : *this;
}

std::map<std::string, Tensor> JitModel::run(const std::map<std::string, Tensor> &inputs) {
    JitModel &m = model_for(inputs);
    ran_short_ = &m != this;
    if (ran_short_) return m.run(inputs);
    std::vector<Tensor> keep, outs;
    bind_inputs(inputs, keep);
    allocate_poisoned(outs);
    realize_into(outs);
    for (auto &p : lowered_.inputs) p.reset();
    std::map<std::string, Tensor> result;
    for (size_t k = 0; k < outs.size(); k++) result[lowered_.output_names[k]] = std::move(outs[k]);
    return result;
}

double JitModel::time_run(const std::map<std::string, Tensor> &inputs) {
    JitModel &m = model_for(inputs);
    ran_short_ = &m != this;
    if (ran_short_) return m.time_run(inputs);
    std::vector<Tensor> keep;
    bind_inputs(inputs, keep);
    // Poisoned once, when first allocated, not before every run: a 0xFF memset of the outputs just
    // before the timed call leaves them dirty in the caches, and every run then paid to write that
    // poison back to memory, which the timing then counted
    // (bench/DECISIONS.md#d53-timed-outputs-poisoned-once). A model served in a loop writes into
    // memory it wrote last time; validation runs (run()) still poison each time.
    bool same_shapes = timing_outputs_.size() == output_shapes_.size();
    for (size_t k = 0; same_shapes && k < output_shapes_.size(); k++) same_shapes = timing_outputs_[k].shape() == output_shapes_[k];
    if (!same_shapes) allocate_poisoned(timing_outputs_);
    realize_into(timing_outputs_);
    for (auto &p : lowered_.inputs) p.reset();
    return last_run_ms_;
}

std::vector<double> JitModel::time_runs(const std::map<std::string, Tensor> &inputs, int reps) {
    std::vector<double> times;
    time_run(inputs);  // warm-up: thread pool, page faults, first-touch
    for (int k = 0; k < reps; k++) times.push_back(time_run(inputs));
    return times;
}

namespace {

struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void bytes(const void *p, size_t n) {
        auto *c = (const unsigned char *)p;
        for (size_t k = 0; k < n; k++) h = (h ^ c[k]) * 1099511628211ull;
    }
    void str(const std::string &s) {
        uint64_t n = s.size();
        bytes(&n, sizeof n);
        bytes(s.data(), s.size());
    }
    void i64(int64_t v) { bytes(&v, sizeof v); }
    void f64(double v) { bytes(&v, sizeof v); }
    void tensor(const Tensor &t) {
        i64((int64_t)t.dtype());
        i64(t.rank());
        for (auto d : t.shape()) i64(d);
        bytes(t.data(), t.bytes().size());
    }
};

}  // namespace

std::string graph_fingerprint(const Graph &g) {
    Fnv f;
    f.i64(g.opset);
    for (const auto &n : g.inputs) f.str(n);
    f.str("|");
    for (const auto &n : g.outputs) f.str(n);
    for (const auto &[name, vi] : g.values) {
        f.str(name);
        f.i64((int64_t)vi.dtype);
        for (auto d : vi.shape) f.i64(d);
        f.i64(vi.has_shape);
        if (!vi.sym.empty()) f.str(sym_shape_str(vi.sym));  // nothing for a static value: keys stay
    }
    for (const auto &s : g.dynamic.symbols) {
        f.str(s);
        f.i64(g.dynamic.ranges.at(s).lo);
        f.i64(g.dynamic.ranges.at(s).hi);
    }
    for (const auto &[name, t] : g.initializers) {
        f.str(name);
        f.tensor(t);
    }
    for (const auto &node : g.nodes) {
        f.str(node.name);
        f.str(node.op);
        for (const auto &s : node.inputs) f.str(s);
        f.str("->");
        for (const auto &s : node.outputs) f.str(s);
        for (const auto &[a, v] : node.attrs) {
            f.str(a);
            f.i64((int64_t)v.index());
            std::visit(
                [&](const auto &x) {
                    using T = std::decay_t<decltype(x)>;
                    if constexpr (std::is_same_v<T, int64_t>) f.i64(x);
                    else if constexpr (std::is_same_v<T, double>) f.f64(x);
                    else if constexpr (std::is_same_v<T, std::string>) f.str(x);
                    else if constexpr (std::is_same_v<T, Tensor>) f.tensor(x);
                    else {
                        f.i64((int64_t)x.size());
                        for (const auto &e : x) {
                            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, std::string>) f.str(e);
                            else f.bytes(&e, sizeof e);
                        }
                    }
                },
                v);
        }
    }
    char buf[17];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)f.h);
    return buf;
}

namespace {
std::mutex cache_mutex;
std::map<JitKey, std::unique_ptr<JitModel>> &cache() {
    static std::map<JitKey, std::unique_ptr<JitModel>> c;
    return c;
}
}  // namespace

JitModel &jit_cache_get(const JitKey &key, const std::function<std::unique_ptr<JitModel>()> &build) {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache().find(key);
    if (it != cache().end()) return *it->second;
    std::unique_ptr<JitModel> m = build();
    internal_check(m != nullptr, "JIT cache builder returned no model");
    return *(cache()[key] = std::move(m));
}

size_t jit_cache_size() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    return cache().size();
}

void jit_cache_clear() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    cache().clear();
}

}  // namespace loom
