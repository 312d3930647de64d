/// \file
/// GPU auto-scheduling (CUDA): a heuristic that writes an ordinary Schedule (printable, editable)
/// from the structure of a lowered pipeline, one kernel per fusion group.
///
/// - Pure Funcs that are not outputs are inlined into their consumers (pointwise chains fuse).
/// - A pure kernel Func: its innermost var split by 4 and vectorized (wide loads), the rest mapped
///   onto blocks of 128 threads (gpu_blocks/gpu_threads over splits of the two innermost vars,
///   outer vars fused into a third block dim).
/// - A row reduction consumed only by one row-shaped kernel (softmax, layernorm: the reduction's
///   pure extents are the kernel's outer extents) is computed inside that kernel. Short rows (8
///   to 128 elements, a keepdims axis on each statistic) take one warp's lanes each, several rows
///   per block, their statistics summed by lane trees as short segments are (below). Otherwise
///   one block per row: the row is split over T threads × 4-wide vectors (16 elements per
///   thread, T ≤ 512), and each reduction is split by T and rfactor'ed twice: T threads accumulate coalesced partials
///   (unrolled by up to 8: loads in flight), 32 threads combine those, one thread the last 32.
/// - Statistics over segments of a row (LayerNorm over [B, 16, 64] read by a [B, 1024] kernel) are
///   computed inside that kernel, one block per row. Short segments (8 to 128 elements, a
///   keepdims axis on each statistic) take one warp's lanes each, 4 floats per lane, and each
///   statistic is a tree of rfactor'ed lane Funcs: a shuffle per level, no barrier. Longer ones
///   are summed per block: each piece of a segment by one thread (rfactor), then one thread per
///   segment adds its pieces.
/// - A Concat evaluates every input at every point (a select chain), so its costly inlined inputs
///   (reading a reduction, or ≥ 8 ops per point) are computed per row of the Concat over their own
///   slice only (shared memory) and their statistics fused into the same row kernel.
/// - A reduction that is its own kernel: one block per output when there are many outputs (same
///   block scheme), a split reduction when there are few (rfactor into 8192-element block partials,
///   each reduced by a block as above inside the kernel of the output's update, which adds it by a
///   float atomic: one kernel besides the init).
/// - A rank-2 matrix product (one rvar, K % 4 == 0, M and N multiples of 64): 64×64 output tiles
///   per block, a 4×4 register tile per thread, k split into float4 lanes by rfactor (16-byte
///   operand loads); a single same-shaped pointwise consumer (bias/ReLU) is the kernel and the
///   product is computed inside its threads. Its pure producers are computed once (not inlined).
///   No shared-memory staging (graph inputs and weights cannot be wrapped with in()), so far
///   below cuBLAS (bench/DECISIONS.md#d44-gpu-gemm-and-conv-in-halide).
/// - A Func read by an extern stage (a cuBLAS GEMM or cuDNN conv, LowerOptions::gemm_extern /
///   conv_extern) is its own kernel; the extern is compute_root from lowering and never fused
///   across, its pointwise epilogue (bias, ReLU) is inlined into the next kernel like any pointwise
///   chain, unless the library applied it (an is_extern LoweredFunc: no statements at all).
/// - A 2-D conv whose only consumer is a same-shaped pointwise epilogue: register-tiled in Halide
///   (depthwise convs always; others with `--no-cudnn`, by default cuDNN extern stages,
///   LowerOptions::conv_extern, or cuBLAS GEMMs for 1x1 convs, gemm_extern).
/// - Anything else (reductions over several rvars) keeps the default GPU mapping of
///   schedule_builtin.h.
///
/// The implementation is split by kernel kind (gpu_schedule_internal.h lists the files): the kernel
/// plan first, then one emitter per kind.
#pragma once

#include <Halide.h>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// The GPU schedule of \p p for \p target (a target with a GPU feature).
Schedule gpu_auto_schedule(const LoweredPipeline &p, const Halide::Target &target);

}  // namespace loom
