/// \file
/// Loom's thread pool for Halide's parallel loops (Threading::Spin, codegen/openmp_threading.h).
/// A network runs a hundred small kernels one after another, each a parallel loop of a few tasks.
/// Halide's pool puts an idle thread to sleep at once, so every loop pays a wake-up; on a virtual
/// machine that costs as much as a small kernel's work, and the loop is done by the calling thread
/// before the woken one arrives. Here an idle worker spins for a short while (kSpinMicros) before
/// it sleeps, so the next kernel's loop finds it running; and, as in Halide's pool, the calling
/// thread claims tasks itself and never waits for a worker that has not started one, so a worker
/// descheduled by another tenant costs no more than it would there
/// (bench/DECISIONS.md#d134-spinning-thread-pool).
///
/// The pool depends on the C++ standard library only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace loom {

/// How long an idle worker spins for the next loop before it sleeps.
constexpr int kSpinMicros = 200;

/// A process-wide pool of `threads - 1` workers beside the calling thread.
class SpinPool {
public:
    /// One task of a loop: Halide's task function (its user context, the iteration, the closure).
    using Task = int (*)(void *ctx, int index, uint8_t *closure);

    /// The pool of the process, with \p threads threads in all (the first call decides; at least 1).
    static SpinPool &instance(int threads);

    /// Runs task(ctx, i, closure) for i in [min, min + extent), each once, on the calling thread
    /// and the workers; returns the first nonzero result (the tasks after it are skipped), else 0.
    /// A loop started inside a task, or while another thread's loop runs, runs on its calling
    /// thread alone.
    int run(void *ctx, Task task, int min, int extent, uint8_t *closure);

    /// Threads in all (workers + the calling thread).
    int threads() const { return (int)workers_.size() + 1; }

    /// Loops that ran on more than the calling thread (a test sees the routing work).
    uint64_t loops_shared() const { return loops_shared_; }

    /// A pool of its own (tests; models use instance()): \p threads - 1 workers start now.
    explicit SpinPool(int threads);
    ~SpinPool();
    SpinPool(const SpinPool &) = delete;
    SpinPool &operator=(const SpinPool &) = delete;

private:
    struct Loop {
        void *ctx;
        Task task;
        int min, extent;
        uint8_t *closure;
        std::atomic<int> next{0};      // the next iteration to claim (relative to min)
        std::atomic<int> finished{0};  // iterations done or skipped
        std::atomic<int> error{0};
    };

    static void work_on(Loop &loop);
    void worker();

    std::vector<std::thread> workers_;
    std::mutex running_;                 // one loop at a time
    std::atomic<Loop *> current_{nullptr};
    std::atomic<uint64_t> generation_{0};  // bumped for every published loop
    std::atomic<int> inside_{0};           // workers between reading current_ and leaving its loop
    std::atomic<bool> stop_{false};
    std::mutex sleep_;
    std::condition_variable wake_;
    std::atomic<int> sleeping_{0};
    std::atomic<uint64_t> loops_shared_{0};
};

}  // namespace loom
