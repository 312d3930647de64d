/// \file
/// Private to src/schedule: the validate, finish and apply functions of every primitive, one
/// family a file (TVM's schedule/primitive/ is the model), and the table (actions.cpp) that names
/// them for each primitive of the language (schedule.cpp's table, which the parser alone needs, so
/// that parsing and printing do not depend on Halide). A validate function checks one call and updates the loop model
/// as Halide would; a finish function runs the checks that need every Func's final placement
/// (finish_checks); an apply function makes the Halide call. Not a public header.
#pragma once

#include <string>

namespace loom::sched_internal {

class CallCheck;
class CallApply;

/// The functions that check and apply one primitive.
struct PrimitiveActions {
    /// Checks one call (its form already checked) and updates the loop model as Halide would;
    /// nullptr: nothing to check.
    void (*validate)(CallCheck &);
    /// The checks that need every Func's final placement (after all statements); nullptr: none.
    void (*finish)(CallCheck &);
    /// Applies one validated call with Halide's API.
    void (*apply)(CallApply &);
};

/// The actions of the primitive called \p name (a name find_primitive knows), or nullptr.
const PrimitiveActions *find_primitive_actions(const std::string &name);

// placement.cpp: where a Func is computed and stored.
void validate_compute_inline(CallCheck &k);
void validate_compute_at(CallCheck &k);  ///< compute_at and store_at
void finish_compute_at(CallCheck &k);    ///< compute_at and store_at
void validate_compute_with(CallCheck &k);
void finish_compute_with(CallCheck &k);
void apply_compute_root(CallApply &a);
void apply_compute_inline(CallApply &a);
void apply_compute_at(CallApply &a);
void apply_store_root(CallApply &a);
void apply_store_at(CallApply &a);
void apply_compute_with(CallApply &a);

// loop.cpp: a stage's loops: splitting, fusing, ordering them and how each one runs.
void validate_split(CallCheck &k);
void validate_fuse(CallCheck &k);
void validate_reorder(CallCheck &k);
void validate_tile(CallCheck &k);
void validate_loop_type(CallCheck &k);  ///< vectorize, unroll and parallel
void apply_split(CallApply &a);
void apply_fuse(CallApply &a);
void apply_reorder(CallApply &a);
void apply_tile(CallApply &a);
void apply_vectorize(CallApply &a);
void apply_unroll(CallApply &a);
void apply_parallel(CallApply &a);

// gpu.cpp: loops mapped to GPU blocks, threads and lanes, and the kernels' register budget.
void validate_gpu_tile(CallCheck &k);
void validate_gpu_loops(CallCheck &k);  ///< gpu_blocks, gpu_threads and gpu_lanes
void validate_gpu_single_thread(CallCheck &k);
void validate_gpu_max_registers(CallCheck &k);
void apply_gpu_tile(CallApply &a);
void apply_gpu_blocks(CallApply &a);
void apply_gpu_threads(CallApply &a);
void apply_gpu_lanes(CallApply &a);
void apply_gpu_single_thread(CallApply &a);
void apply_gpu_max_registers(CallApply &a);

// reduction.cpp: how an update stage reduces.
void validate_rfactor(CallCheck &k);
void validate_atomic(CallCheck &k);
void validate_unscheduled(CallCheck &k);
void apply_rfactor(CallApply &a);
void apply_atomic(CallApply &a);
void apply_unscheduled(CallApply &a);

// storage.cpp: a Func's buffer: its bounds, layout, memory, prefetches and stores.
void validate_bound(CallCheck &k);
void validate_align_bounds(CallCheck &k);
void validate_reorder_storage(CallCheck &k);
void validate_store_in(CallCheck &k);
void validate_prefetch(CallCheck &k);
void validate_stream_stores(CallCheck &k);
void finish_stream_stores(CallCheck &k);
void apply_bound(CallApply &a);
void apply_align_bounds(CallApply &a);
void apply_reorder_storage(CallApply &a);
void apply_store_in(CallApply &a);
void apply_prefetch(CallApply &a);
void apply_stream_stores(CallApply &a);

// wrappers.cpp: new Funcs that wrap one (in).
void validate_in(CallCheck &k);
void apply_in(CallApply &a);

}  // namespace loom::sched_internal
