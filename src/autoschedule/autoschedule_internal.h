/// \file
/// Private to src/autoschedule: what the cost model reads off each Func's Halide definition, and
/// the per-kernel schedule emitters (tiling.cpp, tiling_gemm.cpp, tiling_conv.cpp; tiling_internal.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "autoschedule/autoschedule.h"

namespace loom::autosched {

/// Facts about one Func, read from its LoweredFunc record and its Halide definition.
struct FuncInfo {
    const LoweredFunc *lf = nullptr;
    double points = 1;                    ///< product of extents
    int esize = 4;                        ///< bytes per element
    bool has_update = false;
    std::vector<double> update_iters;     ///< per update: points × reduction extent
    std::vector<std::vector<int64_t>> rvar_extents;  ///< per update, innermost first
    /// Update 0's innermost RVar has an extent that moves with the input sizes (dynamic shapes; its
    /// rvar_extents entry is the representative one).
    bool inner_rvar_moves = false;
    /// Calls of each producer Func per stage: [0] pure, [1+k] update k.
    std::vector<std::map<std::string, int>> calls;
    /// The constant Buffers (weights, biases) its definitions read, by name: their bytes. A kernel
    /// reads each once (Kernel::bytes_read); uncounted, a classifier's weights made its GEMV look
    /// too small to run in parallel (bench/DECISIONS.md#d5-weights-count-in-traffic).
    std::map<std::string, double> constant_bytes;
    /// Update 0: some read's innermost index uses the innermost RVar (a row reduction that
    /// vectorises by rfactor).
    bool inner_rvar_contiguous = false;
    /// Update 0 has several RVars and every read indexes its innermost dims by them, whole: fused,
    /// they walk one dense block (a global average pool's 14 x 14).
    bool rvars_fuse_contiguous = false;
    /// Update 0: every read that uses the innermost pure var has it innermost (vectorising that
    /// var in the update reads contiguous memory).
    bool inner_var_contiguous = true;
    bool is_matmul = false, is_conv = false;
    /// Every update writes f(pure vars) (a reduction, not a scan): its pure vars may be
    /// parallelised and vectorised.
    bool pure_lhs = true;
    /// A matmul: the Func read as its A operand (indexed by the output's row var), or "".
    std::string matmul_a;
    /// Per producer Func: every read of it indexes its outermost dim by an expression of this
    /// Func's outermost var (a block of rows here needs a block of rows there, not all of them).
    std::map<std::string, bool> reads_rows;
    /// Reads in the pure definition that index nothing but the innermost var (a LayerNorm's scale
    /// and shift): the same vector on every row, so a tile of rows can load it once.
    int row_broadcast_reads = 0;
    /// A read in the pure definition whose producer's innermost index is an outer var of this
    /// Func (a Transpose): the producer's schedule name ("" if none), that var, the producer's
    /// own innermost var, and the bytes of one of its innermost rows.
    std::string transposed_from, transposed_var, transposed_inner_var;
    int64_t transposed_row_bytes = 0;
};

/// The register and cache blocking of a GEMM (tiling_gemm.cpp's gemm emitter and the cost model's
/// estimates share it): micro-kernel MR x NR, column panels of NC (no epilogue), epilogue tiles of
/// MC x NCt with k in chunks of KC.
struct GemmTile {
    bool ok = false;         ///< the vectorised micro-kernel path applies (N >= a vector …)
    int V = 1, MR = 1, NR = 1;
    int64_t M = 0, N = 0, K = 0, NC = 0, KC = 0, MC = 0, NCt = 0;
};

/// Elements per parallel task of a kernel over rows (Ctx::rows_per_task), at most: 1 MB of f32, so
/// that each core streams long runs of contiguous rows (bench/DECISIONS.md#d7-task-size).
constexpr int64_t kTaskElems = 256 << 10;

/// A CPU kernel whose estimated work on one core is below this many microseconds per two threads
/// runs serially (ScheduleKnobs::min_parallel_us overrides it): waking Halide's thread pool costs a
/// few us, and more with more threads.
constexpr double kMinParallelMicros = 20;

/// Lanes of a GEMM's column vectors: \p V, halved while \p N columns do not fill one, down to
/// AVX2's 8 f32 lanes. A classifier's 10 outputs on AVX-512 (16 lanes) then take an 8-lane
/// micro-kernel and a guarded tail instead of the generic schedule, whose update loaded and stored
/// one accumulator vector per k step (bench/DECISIONS.md#d87-narrow-gemm-half-vectors).
int gemm_lanes(int V, int64_t N);

/// The blocking of matmul \p f (computed in an epilogue's tile when \p epilogue) for \p m.
GemmTile gemm_tile(const FuncInfo &f, bool epilogue, const MachineModel &m, const ScheduleKnobs &knobs);

/// Analyses every Func of \p p.
std::map<std::string, FuncInfo> analyze(const LoweredPipeline &p);

/// A fresh var/func name based on \p base not in \p used (which it extends).
std::string fresh(std::vector<std::string> &used, const std::string &base);

/// Appends the statements of kernel \p k to \p out.
void emit_kernel(const LoweredPipeline &p, const std::map<std::string, FuncInfo> &info,
                 const FusionPlan &plan, const Kernel &k, const Halide::Target &target,
                 const MachineModel &m, const ScheduleKnobs &knobs, std::vector<ScheduleStatement> &out,
                 std::vector<std::string> &func_names, KernelTiling &tiling);

}  // namespace loom::autosched
