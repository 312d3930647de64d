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
///   row: the kernel's row is split over T threads × 4-wide vectors, and each reduction is split
///   by T and rfactor'ed so that T threads accumulate coalesced partials (in shared memory) that one
///   thread then combines.
/// - A reduction that is its own kernel: one block per output when there are many outputs (same
///   block scheme), a two-level split reduction when there are few (rfactor into ~1024 block
///   partials, each reduced by a block as above, then one thread combines them).
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
