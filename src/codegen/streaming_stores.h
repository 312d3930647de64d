/// \file
/// Non-temporal ("streaming") stores: the schedule's `stream_stores()` on a Func (x86 CPU targets).
///
/// A normal store to a line that is not in cache first reads the line from memory (a read for
/// ownership), so a kernel that writes a large output moves its bytes twice. A non-temporal store
/// (`vmovntps`) writes whole lines past the caches: LayerNorm 2048x4096 on the 2-core AVX-512
/// machine reads 32 MiB and writes 32 MiB, and with normal stores it also reads the 32 MiB it writes.
/// The price: the output is not in cache afterwards, so it pays only for outputs that a consumer
/// would not find there anyway (larger than the last-level cache).
///
/// Halide 14 has no such directive (upstream Halide added `stream_stores` in 2026), so Loom marks the
/// stores itself in the LLVM module that Halide makes, before LLVM compiles it:
///  - every vector store into a marked Func's buffer gets `!nontemporal` (Halide tags each store's
///    TBAA with the buffer's name, which is how they are found), when the store's alignment covers
///    the vector (an unaligned one would become eight scalar `movnti`s: it is left as it is);
///  - every function that holds such a store issues `sfence` before it returns, because
///    non-temporal stores are weakly ordered: a parallel task's results must be visible before the
///    thread pool says the task is done.
/// Both the JIT (StreamingJit) and artifacts (compile_streaming_object) compile through it; a
/// pipeline with no marked Func compiles the usual way.
#pragma once

#include <Halide.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace loom {

/// What mark_streaming_stores did (for tests and `LOOM_DEBUG` output).
struct StreamingStoreMarks {
    int marked = 0;      ///< vector stores made non-temporal
    int unaligned = 0;   ///< vector stores into a marked buffer left normal: alignment not known
    int fenced = 0;      ///< functions given an sfence before each return
};

/// Marks the vector stores of \p m into the buffers named \p buffers (Halide Func names) as
/// non-temporal when their alignment is at least min(store size, \p vector_bytes), and fences the
/// functions that hold them. \p m must target x86.
StreamingStoreMarks mark_streaming_stores(llvm::Module &m, const std::set<std::string> &buffers, int vector_bytes);

/// The Funcs of \p streaming that \p p computes (its outputs and the Funcs they reach).
std::set<std::string> streaming_funcs_in(const Halide::Pipeline &p, const std::set<std::string> &streaming);

/// Compiles \p p as `compile_to` with an object (and a C header when \p header is not empty)
/// would, with the stores into \p streaming non-temporal. Throws Halide's errors.
StreamingStoreMarks compile_streaming_object(const Halide::Pipeline &p, const std::vector<Halide::Argument> &args,
                                             const std::string &fn, const Halide::Target &target,
                                             const std::string &object, const std::string &header,
                                             const std::set<std::string> &streaming);

/// A pipeline JIT-compiled with streaming stores: what Pipeline::compile_jit and realize do for
/// Loom's pipelines (buffer arguments only; constant Buffers are embedded, as artifacts embed
/// them), with the LLVM module marked in between.
class StreamingJit {
public:
    /// Compiles \p p for \p target (a CPU target) with the ImageParams \p params as its arguments,
    /// in that order. Throws Halide's errors.
    StreamingJit(const Halide::Pipeline &p, const std::vector<Halide::ImageParam> &params,
                 const Halide::Target &target, const std::set<std::string> &streaming);
    ~StreamingJit();
    StreamingJit(const StreamingJit &) = delete;
    StreamingJit &operator=(const StreamingJit &) = delete;

    /// Runs on the buffers bound to the params now, into \p outputs (one per pipeline output).
    /// \p do_par_for, when set, runs the parallel loops (JITHandlers::custom_do_par_for); \p print,
    /// when set, takes the runtime's printing (JITHandlers::custom_print). With Target::Profile, the
    /// profiler's report is printed and its counts reset after the run, as Pipeline::realize does.
    /// Throws Halide::RuntimeError with the runtime's message when the pipeline fails.
    void realize(const std::vector<Halide::Buffer<>> &outputs,
                 int (*do_par_for)(Halide::JITUserContext *, int (*)(Halide::JITUserContext *, int, uint8_t *), int,
                                   int, uint8_t *) = nullptr,
                 void (*print)(Halide::JITUserContext *, const char *) = nullptr);

    const StreamingStoreMarks &marks() const { return marks_; }

private:
    std::unique_ptr<llvm::LLVMContext> context_;  ///< outlives the module the JITModule owns
    Halide::Internal::JITModule module_;
    std::vector<Halide::ImageParam> params_;
    StreamingStoreMarks marks_;
    /// With Target::Profile, the runtime's report and reset (Pipeline::realize calls them after a
    /// run); null otherwise.
    void (*profiler_report_)(Halide::JITUserContext *) = nullptr;
    void (*profiler_reset_)() = nullptr;
};

}  // namespace loom
