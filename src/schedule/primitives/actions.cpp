#include "schedule/primitives/families.h"

#include <string>

namespace loom::sched_internal {

// One row per primitive of the language table (schedule.cpp), by name: validate, finish, apply.
static const struct {
    const char *name;
    PrimitiveActions actions;
} kActions[] = {
    {"compute_root", {nullptr, nullptr, apply_compute_root}},
    {"compute_inline", {validate_compute_inline, nullptr, apply_compute_inline}},
    {"compute_at", {validate_compute_at, finish_compute_at, apply_compute_at}},
    {"store_at", {validate_compute_at, finish_compute_at, apply_store_at}},
    {"store_root", {nullptr, nullptr, apply_store_root}},
    {"split", {validate_split, nullptr, apply_split}},
    {"fuse", {validate_fuse, nullptr, apply_fuse}},
    {"reorder", {validate_reorder, nullptr, apply_reorder}},
    {"tile", {validate_tile, nullptr, apply_tile}},
    {"vectorize", {validate_loop_type, nullptr, apply_vectorize}},
    {"unroll", {validate_loop_type, nullptr, apply_unroll}},
    {"parallel", {validate_loop_type, nullptr, apply_parallel}},
    {"gpu_tile", {validate_gpu_tile, nullptr, apply_gpu_tile}},
    {"gpu_blocks", {validate_gpu_loops, nullptr, apply_gpu_blocks}},
    {"gpu_threads", {validate_gpu_loops, nullptr, apply_gpu_threads}},
    {"gpu_lanes", {validate_gpu_loops, nullptr, apply_gpu_lanes}},
    {"gpu_single_thread", {validate_gpu_single_thread, nullptr, apply_gpu_single_thread}},
    {"gpu_max_registers", {validate_gpu_max_registers, nullptr, apply_gpu_max_registers}},
    {"stream_stores", {validate_stream_stores, finish_stream_stores, apply_stream_stores}},
    {"rfactor", {validate_rfactor, nullptr, apply_rfactor}},
    {"atomic", {validate_atomic, nullptr, apply_atomic}},
    {"unscheduled", {validate_unscheduled, nullptr, apply_unscheduled}},
    {"bound", {validate_bound, nullptr, apply_bound}},
    {"align_bounds", {validate_align_bounds, nullptr, apply_align_bounds}},
    {"reorder_storage", {validate_reorder_storage, nullptr, apply_reorder_storage}},
    {"store_in", {validate_store_in, nullptr, apply_store_in}},
    {"compute_with", {validate_compute_with, finish_compute_with, apply_compute_with}},
    {"prefetch", {validate_prefetch, nullptr, apply_prefetch}},
    {"in", {validate_in, nullptr, apply_in}},
};

const PrimitiveActions *find_primitive_actions(const std::string &name) {
    for (const auto &row : kActions)
        if (name == row.name) return &row.actions;
    return nullptr;
}

}  // namespace loom::sched_internal
