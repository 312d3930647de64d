/// \file
/// Private to src/autoschedule: the GPU (CUDA) auto scheduler of gpu_schedule.h, split by kernel
/// kind the way tiling_internal.h splits the CPU emitter. Scheduling runs in two steps:
///
/// - gpu_kernel_plan.cpp decides where every Func goes (KernelPlan: inlined, fused into a row
///   kernel, computed inside a GEMM or conv epilogue, a kernel of its own) before any statement is
///   written;
/// - GpuCtx then appends each kernel's statements, one member family per kernel kind:
///   gpu_pointwise.cpp (pure kernels), gpu_reduction.cpp (a reduction that is its own kernel),
///   gpu_block_reduction.cpp (the block-level partial sums that reductions and row kernels share),
///   gpu_row_kernels.cpp (row kernels with their fused statistics, block or warp) and
///   gpu_gemm_conv.cpp (register-tiled GEMM and conv with their epilogues).
///
/// gpu_schedule.cpp runs the two steps and dispatches each kernel to its emitter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <Halide.h>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom::gpu_autosched {

constexpr int kVec = 4;             ///< floats per thread access: 16-byte loads
constexpr int kPointThreads = 128;  ///< threads per block of a pointwise kernel
constexpr int64_t kMaxChannelsLastTaps = 64;  ///< taps of a reduction a channels-last kernel runs serially per thread
/// Most input rows of a channels-last global pool (each a thread of its block: channels_last_pool).
constexpr int64_t kMaxPoolRows = 32;
constexpr int64_t kMaxGridYZ = 65535;  ///< CUDA's limit on gridDim.y and .z (gridDim.x: 2^31 - 1)

/// A rank-4 reduction over every row and column of its input into one (a global pool), of at
/// most kMaxPoolRows rows (constant extents) and channels in 4-wide vectors: channels_last_pool's.
bool channels_last_global_pool(const LoweredFunc &r);

/// Product of the extents of \p f's outermost \p n vars (what fuse_outer makes one var of).
int64_t outer_extent(const LoweredFunc &f, int n);
constexpr int kRowThreads = 256;    ///< threads per row in a row kernel / block reduction
/// Floats per thread access in a plain row kernel (softmax, LayerNorm): 8 bytes. Halide's PTX backend
/// caps store alignment at 8 bytes, so a 16-byte vector store becomes two 8-byte stores of packed
/// halves; 8-byte vectors store directly (`st.global.v2.f32`; the buffers are declared 16-byte
/// aligned, LowerOptions::buffer_alignment; bench/DECISIONS.md#d37-gpu-row-kernel).
constexpr int kRowVec = 2;
constexpr int kGemmTile = 64;  ///< GEMM output tile per block (both dims)
/// Elements per block of a split (few-output) reduction: eight float4 loads per thread, one unrolled
/// group (bench/DECISIONS.md#d40-gpu-split-reduction-one-kernel).
constexpr int kSplitChunk = kVec * kRowThreads * 8;
/// Fewest flops per point of a pointwise Func that a short-row kernel keeps per lane rather than
/// inlining into its two readers (softmax's exp(x - max) counts 11).
constexpr double kBufferMinFlops = 8;
/// Tensors (kernels, library stages; not reductions) an inlined pure Func may read through its inlined
/// producers; past this it is a kernel of its own (a pre-norm transformer's residual stream).
constexpr size_t kMaxInlinedReads = 4;

// --- small helpers shared by every emitter ---

/// Update definitions of \p f.
inline int num_updates(const LoweredFunc &f) {
    return f.func.defined() ? f.func.num_update_definitions() : (int)f.update_rvars.size();
}

/// Product of \p v, each extent counted as at least 1.
inline int64_t product(const std::vector<int64_t> &v) {
    int64_t p = 1;
    for (auto e : v) p *= std::max<int64_t>(e, 1);
    return p;
}

/// Largest power of two <= \p v (1 when v < 2).
inline int pow2_floor(int64_t v) {
    int p = 1;
    while ((int64_t)p * 2 <= v) p *= 2;
    return p;
}

/// Extent of the single RVar of update 0, or -1.
inline int64_t rvar_extent(const LoweredFunc &f) {
    if (num_updates(f) != 1 || f.update_rvars.empty() || f.update_rvars[0].size() != 1) return -1;
    return f.single_rvar_extent(0);
}

/// A var name for a schedule: "r.x" → "r_x"; made unique against the Func's pure vars.
inline std::string ident(const LoweredFunc &f, std::string want) {
    std::replace(want.begin(), want.end(), '.', '_');
    while (std::find(f.vars.begin(), f.vars.end(), want) != f.vars.end()) want += "_";
    return want;
}

/// The leading extents with trailing 1s dropped (keepdims reductions: 64x1 ~ 64).
inline std::vector<int64_t> squeeze_tail(std::vector<int64_t> v) {
    while (!v.empty() && v.back() == 1) v.pop_back();
    return v;
}

/// Tail of a split of a pure var: RoundUp when it divides (no guards), else GuardWithIf.
inline ScheduleArg tail(bool exact) { return ScheduleArg::tail(exact ? "RoundUp" : "GuardWithIf"); }
/// Tail of a split of an RVar (Halide allows only Auto, GuardWithIf or Predicate there).
inline ScheduleArg rtail(bool exact) { return ScheduleArg::tail(exact ? "Auto" : "GuardWithIf"); }

/// \p v joined by ", " (the Func lists of kernel comments).
inline std::string join(const std::vector<std::string> &v) {
    std::string r;
    for (const auto &x : v) r += (r.empty() ? "" : ", ") + x;
    return r;
}

// --- the kernel plan (gpu_kernel_plan.cpp) ---

/// Where every Func goes, decided from the pipeline's structure before any statement is written.
/// A Func in none of these maps and not inlined is a kernel of its own.
struct KernelPlan {
    std::set<std::string> inlined;                                  ///< pure Funcs fused into their consumers
    std::map<std::string, std::string> owner;                       ///< Func computed inside another kernel → that kernel
    std::map<std::string, std::vector<std::string>> rows;           ///< row kernel → its reductions (pipeline order)
    std::map<std::string, std::string> gemm_of;                     ///< pointwise epilogue kernel → the GEMM inside it
    std::map<std::string, std::string> conv_of;                     ///< pointwise epilogue kernel → the 2-D conv inside it
    std::set<std::string> segment;                                  ///< fused reductions with several outputs per row
    std::map<std::string, std::vector<std::string>> branches;       ///< concat kernel → costly inputs computed per row
    std::map<std::string, std::vector<std::string>> buffered;       ///< short-row kernel → pointwise Funcs kept per lane
    /// Rank-4 kernels stored channels innermost: LoweredFunc::channels_last ones, and pure or
    /// small-reduction kernels (pools, depthwise convs) that read, through inlined Funcs, a buffer
    /// stored so (a BF16 cuDNN stage's output, a channels-last copy).
    std::set<std::string> channels_last;

    /// The reductions fused into row kernel \p c (empty when none).
    const std::vector<std::string> &stats_of(const std::string &c) const { return list(rows, c); }
    /// The Concat inputs computed per row of \p c (empty when none).
    const std::vector<std::string> &branches_of(const std::string &c) const { return list(branches, c); }
    /// The pointwise Funcs kept per lane in short-row kernel \p c (empty when none).
    const std::vector<std::string> &buffered_of(const std::string &c) const { return list(buffered, c); }

private:
    static const std::vector<std::string> &list(const std::map<std::string, std::vector<std::string>> &m,
                                                const std::string &k) {
        static const std::vector<std::string> none;
        auto it = m.find(k);
        return it == m.end() ? none : it->second;
    }
};

/// A row kernel whose statistics each sum a warp's lanes (GpuCtx::warp_row_kernel): segments of a
/// row, or whole short rows, `rows` of them per block (0: one row per block, cut into segments).
/// Each lane holds `groups` vectors of `vec` floats of its row, lanes × vec floats apart (whole
/// rows wider than a warp's vectors: a 512-wide softmax row is 32 lanes × 4 groups).
struct WarpRows {
    int lanes = 0, vec = 0, groups = 1;
    int64_t rows = 0;
};
/// Fewest and most vectors a lane holds of a whole row wider than a warp's vectors
/// (GpuCtx::warp_row_kernel): rows of 512 to 1024. Measured at 512 (attention's scores at S = 512,
/// bench/DECISIONS.md#d157-gpu-wide-softmax-rows-in-a-warp); rows of 256 keep the block kernel, unmeasured.
constexpr int kMinWarpGroups = 4, kMaxWarpGroups = 8;

/// Decides where every Func of \p p goes (the fusion rules of gpu_schedule.h).
KernelPlan plan_kernels(const LoweredPipeline &p);

/// A matrix product with a register-tiled schedule: rank 2, one rvar of extent K (K % 4 == 0),
/// M and N multiples of the block tile.
bool gemm_like(const LoweredFunc &f);

/// A reduction with several outputs per row of kernel \p cname (LayerNorm over [B, 16, 64]
/// feeding a [B, 1024] kernel): the var of \p r that runs over the row's segments, or "" when
/// r's outputs are not the kernel's rows times S segments (S ≤ 1024 dividing the row).
std::string segment_var(const LoweredPipeline &p, const std::string &cname, const LoweredFunc &r);

/// A pure var of the statistic \p r of extent 1 other than its segment var \p seg (ReduceMean's
/// keepdims axis), innermost first; "" if none.
std::string keepdims_var(const LoweredFunc &r, const std::string &seg);

/// The warp mapping of row kernel \p c, or lanes 0 when it has none.
WarpRows warp_rows(const LoweredPipeline &p, const KernelPlan &plan, const LoweredFunc &c);

// --- free statement builders (no pipeline facts needed) ---

/// Fuses vars [0, n) of f (outermost first) into one; returns its name (the var itself if n == 1).
std::string fuse_outer(ScheduleStatement &st, const LoweredFunc &f, int n);

/// gpu_blocks over \p first (innermost) and then r's innermost pure vars, three dims at most.
void add_blocks(ScheduleStatement &up, const LoweredFunc &r, std::vector<ScheduleArg> first = {});

/// How a block reduction loads and combines (GpuCtx::block_partials).
struct BlockCombine {
    int width = kVec;  ///< floats per vector load of the partials
    /// Each level summed in one thread's registers and stored once, through a block-level
    /// wrapper (`in()`) that the next level reads. A Func computed at the block lives in shared
    /// memory, where LLVM cannot keep an accumulator in a register: each step is a shared store,
    /// the next load waits behind it (32 dependent round trips for the last level), and the
    /// partials' init is a stage of its own with a barrier
    /// (bench/DECISIONS.md#d39-gpu-statistics-in-registers).
    bool registers = false;
};

// --- the emitter ---

/// Appends the statements of each kernel to `s`, one member family per kernel kind.
struct GpuCtx {
    const LoweredPipeline &p;      ///< the whole pipeline
    const Halide::Target &target;  ///< the compile target (a GPU one)
    const KernelPlan &plan;        ///< where every Func goes
    Schedule &s;                   ///< the schedule, appended to

    // gpu_pointwise.cpp

    /// A pure Func as its own kernel: 4-wide vectors, 2-D blocks of kPointThreads threads.
    void pointwise_kernel(const LoweredFunc &f);
    /// A pure rank-4 Func stored channels innermost (LoweredFunc::channels_last): reorder_storage
    /// to NHWC, 16-byte vectors and the threads along the channels, then along the columns.
    void channels_last_kernel(const LoweredFunc &f);
    /// A reduction over a few taps of NHWC data (a pool, a depthwise conv): a wrapper tiled as
    /// channels_last_kernel, each thread reducing its channels' taps in registers.
    void channels_last_reduction(const LoweredFunc &r);
    /// A global pool of NHWC data (channels_last_global_pool): a block per channel vectors of an
    /// image, a thread per vector and input row, the rows' partials summed in registers.
    void channels_last_pool(const LoweredFunc &r);

    // gpu_reduction.cpp

    /// A reduction that is its own kernel (or a GEMM, which gemm_kernel tiles).
    void reduction_kernel(const LoweredFunc &r);

    // gpu_block_reduction.cpp

    /// Reduction \p r computed at \p at.\p var (a block), its rvar split over \p threads threads.
    void block_reduction(const LoweredFunc &r, const std::string &at, const std::string &var, int threads,
                         bool place, BlockCombine how = {});
    /// Update 0 of \p f reduced over RVar \p rv (extent \p k) by \p threads threads of block
    /// \p at.\p var, through partials \p part (and \p part2 over 32 threads).
    void block_partials(const LoweredFunc &r, const std::string &f, const std::string &rv, int64_t k, int threads,
                        const std::string &at, const std::string &var, const std::string &part,
                        const std::string &part2, const std::vector<ScheduleStatement> &after_rfactor = {},
                        BlockCombine how = {});
    /// \p f through a wrapper computed at \p at.\p var, \p f itself inside one thread; returns the
    /// index of the wrapper's statement.
    size_t in_registers(const std::string &f, const std::string &at, const std::string &var,
                        const std::string &inner_var);
    /// in_registers whose wrapper loop is a thread loop too and whose Func lives in registers.
    void total_in_registers(const std::string &f, const std::string &at, const std::string &var,
                            const std::string &inner_var);

    // gpu_row_kernels.cpp

    /// Row kernel \p c with its fused statistics (and Concat inputs): a block per row, or warps.
    void row_kernel(const LoweredFunc &c);

    // gpu_gemm_conv.cpp

    /// Register-tiled GEMM \p g computed in kernel \p c (\p g itself or its pointwise epilogue).
    void gemm_kernel(const LoweredFunc &c, const LoweredFunc &g);
    /// Register-tiled 2-D conv \p g computed in its pointwise epilogue \p c.
    void conv_kernel(const LoweredFunc &c, const LoweredFunc &g);

private:
    // gpu_reduction.cpp: one emitter per way of reducing (reduction_kernel chooses).
    void short_reduction(const LoweredFunc &r);
    void block_per_output_reduction(const LoweredFunc &r);
    void split_reduction(const LoweredFunc &r);

    // gpu_row_kernels.cpp
    void block_row_kernel(const LoweredFunc &c);
    void warp_row_kernel(const LoweredFunc &c, const WarpRows &w);
    void warp_statistic(const LoweredFunc &r, const std::string &c, const std::string &at, const WarpRows &w);
    void lane_level(const std::string &f, const std::string &at, const std::string &var, const std::string &terms,
                    const std::string &lane, const std::string &groups = "");
    /// Splits row var \p j of \p f into a lane's vectors; the new vars, innermost (the vector) first.
    std::vector<ScheduleArg> lane_split(ScheduleStatement &st, const LoweredFunc &f, const std::string &j,
                                        const WarpRows &w);
    void segment_reduction(const LoweredFunc &r, const std::string &at, const std::string &row, int threads,
                           int piece);
};

}  // namespace loom::gpu_autosched
