/// \file
/// Loom's auto-scheduler: a heuristic cost model over a LoweredPipeline that groups Funcs into
/// kernels (fusion is a schedule decision) and tiles each kernel for the machine, emitted as an
/// ordinary Schedule (schedule.h) that a person can read and edit.
///
/// Decisions, each scored by the time it saves (bytes not written and re-read, at DRAM or L2
/// bandwidth, against recomputed FLOPs and re-read inputs), after Inductor's score_fusion:
/// - inline a pure producer into its consumers when the score says so (a pointwise chain becomes
///   one loop nest; a reduction's prologue is inlined into the reduction; a costly producer read
///   many times is not);
/// - compute row statistics (LayerNorm mean/var, Softmax max/sum) at the row of the consumer, so a
///   row is read from cache, and vectorise their reductions with rfactor;
/// - compute a GEMM/conv at the tile of its pointwise epilogue (bias, activation, residual), with a
///   register-blocked micro-kernel sized from the vector width and register count;
/// - compute a GEMM's A operand (e.g. a LayerNorm + activation) and its row statistics per row
///   block of that tile loop, so the operand is read from L2 instead of written and re-read;
/// - split a reduction with too few outputs to fill the cores (rfactor over a parallel var);
/// - parallelise over enough outer work for every core, vectorise by the target's width; tails use
///   ShiftInwards only on pure stages and GuardWithIf elsewhere, so any size is correct.
/// The result is deterministic: the same pipeline and machine model give the same bytes.
#pragma once

#include <Halide.h>

#include <map>
#include <string>
#include <vector>

#include "autoschedule/machine_model.h"
#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// Where a Func is computed.
enum class Placement {
    Root,    ///< owns a kernel (loop nest)
    Inline,  ///< compute_inline into its consumers
    Row,     ///< compute_at the row loop of its kernel's root
    Tile,    ///< compute_at the output tile of its (epilogue) kernel root
    Block,   ///< compute_at the parallel row block of a GEMM's epilogue root: the GEMM's A operand
             ///< (a prologue) and its row statistics, computed where the GEMM reads them
};

/// The knobs of the CPU cost model that candidates.h varies for `loom autoschedule --tune`. The
/// defaults are the model's own choice (what `loom autoschedule` writes without --tune).
struct ScheduleKnobs {
    int gemm_mr = 0;           ///< GEMM micro-kernel rows (0: the model's choice, 8 where registers allow)
    int gemm_nr_vectors = 0;   ///< micro-kernel columns in vectors (0: the model's choice, 1 or 2)
    int gemm_tile_kernels = 0; ///< micro-kernels per epilogue tile along i and j (0: 8)
    int gemm_kc = 0;           ///< k chunk of an epilogue tile (0: the B strip fills 3/4 of L1)
    bool gemm_prologue = true; ///< compute a GEMM's A operand (and its row statistics) per row block
    bool row_stats = true;     ///< compute row statistics per row of their consumer (else own kernel)
    int task_elems = 0;        ///< elements per parallel task of pointwise/row kernels (0: kTaskElems, 256K)
    double min_parallel_us = 0;  ///< a kernel with less estimated one-core work runs serially (0: kMinParallelMicros per two cores)
    /// Unroll the 3x3 taps of a channel-tiled conv (a little faster); false keeps them loops, which
    /// halves the JIT compile time of a large CNN (bench/DECISIONS.md#d30-conv-channel-tiles).
    bool conv_unroll_taps = true;
    /// Non-temporal stores where the model streams a kernel's output (Ctx::stream_output); false:
    /// normal stores everywhere, for a machine where the tuner measures them faster.
    bool streaming_stores = true;
    /// A GEMM with no epilogue and a short k, and a conv that is a graph output, computed per tile
    /// of a wrapper (`<f>_out`: Ctx::gemm, Ctx::conv); false: at root, accumulating in its own buffer.
    bool tile_wrappers = true;
    /// A channel-tiled 1x1 conv over many input channels reads its input from a channels-innermost
    /// copy (Ctx::stage_channels_innermost), and a channel-tiled conv whose readers all take a
    /// pixel's channels together stores its output so (Ctx::output_channels_innermost); false:
    /// every conv output NCHW, read as stored.
    bool stage_conv_inputs = true;
    /// Short text of the non-default knobs: "gemm 4x2v, kc 128" ("model's choice" when none).
    std::string describe() const;
    bool operator==(const ScheduleKnobs &o) const;
};

/// The plan for one Func.
struct FuncDecision {
    std::string func;
    Placement placement = Placement::Root;
    std::string kernel;  ///< root Func of the kernel holding it
    int row_depth = 0;   ///< Placement::Row: the root's outer dims its row loop sits under
    std::string why;     ///< one line: the score or rule behind the decision
};

/// What a kernel computes: it picks the kernel's schedule emitter (tiling.cpp's emit_kernel).
enum class KernelKind {
    Pointwise,  ///< elementwise members only
    Rows,       ///< row statistics computed per row of the root (LayerNorm, Softmax)
    Reduction,  ///< a reduction root with no row members
    Gemm,       ///< a matmul, as root or in the tile of its epilogue
    Conv,       ///< a convolution, as root or in the tile of its epilogue
    Generic,    ///< anything else
};

/// The kind's word as the report and schedule comments print it: "pointwise", "rows", "reduction",
/// "gemm", "conv" or "generic".
const char *kernel_kind_name(KernelKind kind);

/// One kernel: a loop nest and the Funcs computed in it.
struct Kernel {
    std::string name;                ///< Inductor-style: "fused_add_mul_sum", or the op ("softmax")
    std::string root;                ///< the Func owning the loop nest
    KernelKind kind = KernelKind::Generic;  ///< which emitter schedules it
    std::vector<std::string> funcs;  ///< every Func in it (inlined ones too), producers first
    std::vector<std::string> nodes;  ///< graph nodes it holds, in order
    double bytes_read = 0, bytes_written = 0, flops = 0;
    double est_ms = 0;               ///< max(memory time, compute time) on the machine model
};

/// The grouping of a pipeline into kernels.
struct FusionPlan {
    std::vector<FuncDecision> decisions;  ///< one per Func, producers first
    std::vector<Kernel> kernels;          ///< in execution order
    const FuncDecision *decision(const std::string &func) const;
};

struct AutoScheduleResult;
/// Replaces the planned kernels of each FusedAttention (ops/attention.cpp) by one flash-style
/// kernel (autoschedule/attention_kernel.cpp): the statements for its Funcs, its plan entry and
/// its decisions; producers the plan inlined into them stay inlined.
void schedule_attention_kernels(const LoweredPipeline &p, const MachineModel &m, AutoScheduleResult &r);

/// Groups the Funcs of \p p into kernels (no tiling yet).
FusionPlan plan_fusion(const LoweredPipeline &p, const MachineModel &m, const ScheduleKnobs &knobs = {});

/// The tiling a kernel's emitter chose, as data (the schedule's comments say the same in words);
/// fields that do not apply to the kernel's path stay 0.
struct KernelTiling {
    /// "gemm.<path>", "conv.<path>", "reduction.split", "reduction.per_output", or the kernel kind's
    /// name (kernel_kind_name) for kernels with no tiled path.
    std::string path;
    bool serial_kernel = false;  ///< runs on one core: less work than waking the thread pool costs
    /// Row reductions vectorized by rfactor, per reduction Func: (vector partial sums, steps each;
    /// 0 steps: its reduction vars fused).
    std::map<std::string, std::pair<int, int64_t>> partial_sums;
    /// conv: where its padded input is computed: "task", "channel block", "row block", or "" (not
    /// in the kernel's loops).
    std::string pad_per;
    int vector_lanes = 0;     ///< lanes of the tile's vectors (0: not vectorised)
    bool wrapper = false;     ///< computed per tile of a fresh wrapper `<root>_out`
    int tile_w = 0, tile_rows = 0, tile_channels = 0;  ///< conv: output tile, width x rows x channels
    bool round_up = false;    ///< conv: a tile past the row's end computed into the allocation
    /// conv channel tile: the parallel tasks: "rows" (channel blocks inside), "channel_blocks" (row
    /// blocks inside) or "channel_and_row_blocks".
    std::string tasks;
    int tile_m = 0, tile_n = 0;  ///< gemm: micro-kernel rows x columns
    int64_t k_chunk = 0;      ///< gemm: k in chunks of this many (0: whole k)
    int64_t column_panel = 0; ///< gemm: columns per panel (0: one panel)
    int64_t partial_chunk = 0;  ///< split reduction: terms per partial result (0: not split that way)
    bool partials_vectorized = false;  ///< split reduction: partial results in vector lanes
    bool split_serial = false;  ///< split reduction: left serial (no even split)
};

/// A schedule and the plan it realises.
struct AutoScheduleResult {
    Schedule schedule;
    FusionPlan plan;
    std::map<std::string, KernelTiling> tiling;  ///< by kernel root, one per CPU kernel
    /// The tiling of the kernel rooted at \p root; a default KernelTiling when it has none.
    KernelTiling tiling_of(const std::string &root) const;
};

/// Plans and tiles \p p for \p target on machine \p m (with \p knobs away from the model's choice).
AutoScheduleResult auto_schedule_with_plan(const LoweredPipeline &p, const Halide::Target &target,
                                           const MachineModel &m, const ScheduleKnobs &knobs = {});

/// The schedule alone (what `loom run --auto` / `loom bench --auto` use).
Schedule auto_schedule(const LoweredPipeline &p, const Halide::Target &target, const MachineModel &m);

/// As above on this machine (detect_machine(target)): fits resolve_schedule's AutoscheduleFn.
Schedule auto_schedule(const LoweredPipeline &p, const Halide::Target &target);

/// The `--report` text: one block per kernel (name, loop nest as scheduled, the graph nodes and
/// Funcs it holds, estimated bytes/FLOPs/time), then totals. With \p measured (milliseconds per
/// run of each Func, from a profile: `--report --profile`), each kernel's measured time beside
/// its estimate, and how far the estimates were off.
std::string format_report(const LoweredPipeline &p, const AutoScheduleResult &r, const MachineModel &m,
                          const std::map<std::string, double> *measured = nullptr);

/// Graphviz text of the Func graph before fusion (\p after = false) or grouped into kernels.
std::string fusion_dot(const LoweredPipeline &p, const FusionPlan &plan, bool after);

}  // namespace loom
