/// \file
/// GPU auto-scheduling (CUDA): a heuristic that writes an ordinary Schedule (printable, editable)
/// from the structure of a lowered pipeline, one kernel per fusion group.
///
/// - Pure Funcs that are not outputs are inlined into their consumers (pointwise chains fuse).
/// - A pure kernel Func: its innermost var split by 4 and vectorized (wide loads), the rest mapped
///   onto blocks of 128 threads (gpu_blocks/gpu_threads over splits of the two innermost vars,
///   outer vars fused into a third block dim).
/// - A row reduction consumed only by one row-shaped kernel (softmax, layernorm: the reduction's
///   pure extents are the kernel's outer extents) is computed inside that kernel, one block per
///   row: the row is split over T threads × 4-wide vectors (16 elements per thread, T ≤ 512), and
///   each reduction is split by T and rfactor'ed twice: T threads accumulate coalesced partials
///   (unrolled by up to 8: loads in flight), 32 threads combine those, one thread the last 32.
/// - A reduction that is its own kernel: one block per output when there are many outputs (same
///   block scheme), a split reduction when there are few (rfactor into ~2048 block partials, each
///   reduced by a block as above, combined by float atomics).
/// - Anything else (GEMMs, reductions over several rvars) keeps the default GPU mapping of
///   schedule_builtin.h. No shared-memory GEMM tiling or cuBLAS extern stages yet.
#pragma once

#include <Halide.h>

#include "lower/lowered.h"
#include "schedule/schedule.h"

namespace loom {

/// The GPU schedule of \p p for \p target (a target with a GPU feature).
Schedule gpu_auto_schedule(const LoweredPipeline &p, const Halide::Target &target);

}  // namespace loom
