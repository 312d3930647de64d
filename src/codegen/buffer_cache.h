/// \file
/// A cache of the heap buffers Halide allocates while a model compiled for every size runs.
///
/// A compile for one size knows each buffer's size, so Halide keeps the small ones on the stack;
/// compiled for every size, every buffer whose footprint follows a size Param (each root buffer,
/// and the pseudostack of each parallel task, lower/loop_scratch.h) is a `halide_malloc` and
/// `halide_free` per run. This allocator keeps freed blocks and hands them out again to a request
/// that fits, so a model run again at the same sizes allocates nothing from the C library
/// (bench/DECISIONS.md#d182). It is process-wide, guarded by a mutex (parallel tasks allocate
/// too), and holds at most kMaxCachedBytes of free blocks: what does not fit is freed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom {

/// A block of at least \p bytes, aligned to 128 bytes (Halide's own heap alignment) and readable
/// a little past its end (Halide's vector loads may read up to a vector beyond); a cached free
/// block when one fits (capacity at most 1.5x \p bytes plus 4 KiB), else a new one. nullptr when
/// the C library has no memory.
void *cached_buffer_malloc(std::size_t bytes);

/// Returns \p p (from cached_buffer_malloc; nullptr is ignored) to the cache, or to the C library
/// when the cache is full.
void cached_buffer_free(void *p);

/// Counters of the cache since the process started (for tests and diagnostics).
struct BufferCacheCounts {
    std::uint64_t requests = 0;  ///< cached_buffer_malloc calls
    std::uint64_t reused = 0;    ///< of those, served by a cached block
    std::uint64_t cached_bytes = 0;  ///< bytes of free blocks held now
};
BufferCacheCounts buffer_cache_counts();

/// Frees every cached block (tests; a process that is done with its models).
void release_buffer_cache();

/// The most bytes of free blocks the cache holds.
constexpr std::size_t kMaxCachedBytes = std::size_t(512) << 20;

}  // namespace loom
