#include "codegen/spin_pool.h"

#include <chrono>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace loom {

namespace {

// Set while this thread runs a task of the pool: a loop it starts runs on it alone.
thread_local bool t_in_task = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Denormals flushed for a worker's whole life (codegen/denormals.h says why): the workers are the
// pool's own and run nothing but model tasks.
void flush_denormals_forever() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

}  // namespace

SpinPool &SpinPool::instance(int threads) {
    static SpinPool pool(threads);
    return pool;
}

SpinPool::SpinPool(int threads) {
    for (int k = 1; k < threads; k++) workers_.emplace_back([this] { worker(); });
}

SpinPool::~SpinPool() {
    {
        std::lock_guard<std::mutex> lock(sleep_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto &w : workers_) w.join();
}

void SpinPool::work_on(Loop &loop) {
    t_in_task = true;
    for (;;) {
        int i = loop.next.fetch_add(1, std::memory_order_relaxed);
        if (i >= loop.extent) break;
        if (loop.error.load(std::memory_order_relaxed) == 0) {
            int r = loop.task(loop.ctx, loop.min + i, loop.closure);
            if (r != 0) {
                int none = 0;
                loop.error.compare_exchange_strong(none, r);
            }
        }
        loop.finished.fetch_add(1, std::memory_order_release);
    }
    t_in_task = false;
}

void SpinPool::worker() {
    flush_denormals_forever();
    // Not the generation at the thread's start: a loop published before it ran must not be missed.
    uint64_t seen = 0;
    for (;;) {
        // Spin for the next loop, then sleep until one is published.
        auto give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
        for (int k = 1; generation_.load(std::memory_order_acquire) == seen; k++) {
            if (stop_.load(std::memory_order_relaxed)) return;
            cpu_relax();
            if (k % 256 == 0 && std::chrono::steady_clock::now() > give_up) {
                std::unique_lock<std::mutex> lock(sleep_);
                sleeping_++;
                wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
                sleeping_--;
            }
        }
        seen = generation_.load(std::memory_order_acquire);
        // Announce itself before reading the loop: its caller waits for inside_ to fall to zero
        // before the loop (on its stack) goes away.
        inside_.fetch_add(1, std::memory_order_seq_cst);
        if (Loop *loop = current_.load(std::memory_order_seq_cst)) work_on(*loop);
        inside_.fetch_sub(1, std::memory_order_seq_cst);
    }
}

int SpinPool::run(void *ctx, Task task, int min, int extent, uint8_t *closure) {
    if (extent <= 0) return 0;
    std::unique_lock<std::mutex> one_loop(running_, std::try_to_lock);
    if (workers_.empty() || extent == 1 || t_in_task || !one_loop.owns_lock()) {
        for (int i = min; i < min + extent; i++)
            if (int r = task(ctx, i, closure)) return r;
        return 0;
    }
    Loop loop{ctx, task, min, extent, closure};
    current_.store(&loop, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(sleep_);  // no worker between its check and its wait
        wake_.notify_all();
    }
    loops_shared_.fetch_add(1, std::memory_order_relaxed);
    work_on(loop);
    // Wait for the iterations workers have claimed, then for the workers to leave the loop.
    for (int k = 1; loop.finished.load(std::memory_order_acquire) < extent; k++)
        k % 1024 ? cpu_relax() : std::this_thread::yield();
    current_.store(nullptr, std::memory_order_seq_cst);
    for (int k = 1; inside_.load(std::memory_order_seq_cst) != 0; k++) k % 1024 ? cpu_relax() : std::this_thread::yield();
    return loop.error.load();
}

}  // namespace loom
