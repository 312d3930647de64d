#include "codegen/buffer_cache.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace loom {

namespace {

constexpr std::size_t kAlign = 128;
/// Room after the block's requested end that loads may touch (a 64-byte vector, rounded up).
constexpr std::size_t kSlack = 64;

/// Stored in the kAlign bytes in front of each block handed out.
struct Header {
    void *base;            ///< what std::malloc returned
    std::size_t capacity;  ///< bytes usable from the aligned pointer (less kSlack)
};

struct Cache {
    std::mutex mutex;
    std::multimap<std::size_t, void *> free_blocks;  ///< capacity -> aligned pointer
    BufferCacheCounts counts;
    ~Cache() {
        for (auto &kv : free_blocks) std::free(reinterpret_cast<Header *>(kv.second)[-1].base);
    }
};

Cache &cache() {
    static Cache *c = [] {
        if (std::getenv("LOOM_BUFFER_CACHE_STATS"))
            std::atexit([] { auto n = buffer_cache_counts(); std::fprintf(stderr, "buffer cache: %llu requests, %llu reused\n", (unsigned long long)n.requests, (unsigned long long)n.reused); });
        return new Cache;
    }();  // never destroyed: pool threads may free after main returns
    return *c;
}

/// The capacity a new block for \p bytes gets: rounded up to an eighth of its power of two, so
/// that requests that differ a little share blocks.
std::size_t rounded_capacity(std::size_t bytes) {
    std::size_t step = 64;
    while (step * 16 <= bytes) step *= 2;
    return (bytes + step - 1) / step * step;
}

}  // namespace

void *cached_buffer_malloc(std::size_t bytes) {
    Cache &c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        c.counts.requests++;
        auto it = c.free_blocks.lower_bound(bytes);
        if (it != c.free_blocks.end() && it->first <= bytes + bytes / 2 + 4096) {
            void *p = it->second;
            c.counts.cached_bytes -= it->first;
            c.free_blocks.erase(it);
            c.counts.reused++;
            return p;
        }
    }
    std::size_t capacity = rounded_capacity(bytes);
    void *base = std::malloc(capacity + kSlack + 2 * kAlign);
    if (!base) return nullptr;
    auto addr = (reinterpret_cast<std::uintptr_t>(base) + sizeof(Header) + kAlign - 1) / kAlign * kAlign;
    void *p = reinterpret_cast<void *>(addr);
    reinterpret_cast<Header *>(p)[-1] = {base, capacity};
    return p;
}

void cached_buffer_free(void *p) {
    if (!p) return;
    Header h = reinterpret_cast<Header *>(p)[-1];
    Cache &c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        if (c.counts.cached_bytes + h.capacity <= kMaxCachedBytes) {
            c.free_blocks.emplace(h.capacity, p);
            c.counts.cached_bytes += h.capacity;
            return;
        }
    }
    std::free(h.base);
}

BufferCacheCounts buffer_cache_counts() {
    Cache &c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    return c.counts;
}

void release_buffer_cache() {
    Cache &c = cache();
    std::multimap<std::size_t, void *> blocks;
    {
        std::lock_guard<std::mutex> lock(c.mutex);
        blocks.swap(c.free_blocks);
        c.counts.cached_bytes = 0;
    }
    for (auto &kv : blocks) std::free(reinterpret_cast<Header *>(kv.second)[-1].base);
}

}  // namespace loom
