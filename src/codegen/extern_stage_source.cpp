#include "codegen/extern_stage_source.h"

namespace loom {

std::string extern_stage_prelude(const std::string &fn) {
    return R"SRC(#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <chrono>
#include <thread>

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"

// Halide 14's runtime defines it (it calls the glue's halide_set_cuda_get_stream hook) but its
// header does not declare it.
extern "C" int halide_cuda_get_stream(void *user_context, void *ctx, void **stream);

namespace {

// The stream Halide enqueues on: the capture stream while the glue captures the model's run as a
// CUDA graph (codegen/cuda_graph_glue.h), else null, the legacy default stream.
void *stage_stream() {
    void *s = nullptr;
    return halide_cuda_get_stream(nullptr, nullptr, &s) == 0 ? s : nullptr;
}

int fail(const char *what, int code) {
    char msg[320];
    snprintf(msg, sizeof msg, ")SRC" + fn + R"SRC(: %s (%d)", what, code);
    halide_error(nullptr, msg);
    return -1;
}

void set_dim(halide_buffer_t *b, int d, int min, int extent) {
    b->dim[d].min = min;
    b->dim[d].extent = extent;
}

// The \p n operands \p in (named \p names in messages; a null entry is skipped) copied to the
// device, and the output \p y allocated there. 0, or fail()'s -1 naming what went wrong.
int stage_on_device(halide_buffer_t *const *in, const char *const *names, int n, halide_buffer_t *y) {
    const halide_device_interface_t *cuda = halide_cuda_device_interface();
    char what[96];
    for (int k = 0; k < n; k++) {
        if (!in[k]) continue;
        if (int r = halide_copy_to_device(nullptr, in[k], cuda)) {
            snprintf(what, sizeof what, "copying %s to the device", names[k]);
            return fail(what, r);
        }
    }
    if (!y->device)
        if (int r = halide_device_malloc(nullptr, y, cuda)) return fail("allocating Y on the device", r);
    return 0;
}

// A host callback that holds its stream for the microseconds its argument gives: GPU work queued
// behind it waits until it returns.
void CUDART_CB hold_stream(void *us) { std::this_thread::sleep_for(std::chrono::microseconds((intptr_t)us)); }

// Library calls gpu_time_ms times back to back in each round: its result is their total.
const int kGpuTimeCalls = 5;

// The GPU time in ms of five library calls, each enqueued on the legacy default stream by
// \p enqueue() (true when it was), fastest of three rounds; -1 when a call fails. The calls queue
// up behind hold_stream, so the events time the GPU's work back to back: cuDNN's host path costs
// more a call than a batch-1 conv runs on the GPU, so timing direct calls measured the host
// (bench/DECISIONS.md#d47-cuda-conv-cudnn). Plain calls, no graph: a replayed CUDA graph of one
// cuBLASLt candidate never finished (#d46-cuda-gemm-cublaslt). A round whose calls took longer
// to enqueue than the hold lasted is timed again with a longer hold.
template <typename Enqueue>
float gpu_time_ms(Enqueue enqueue) {
    const int calls = kGpuTimeCalls, rounds = 3;
    if (!enqueue()) {  // warm-up, and a check that it runs at all
        cudaGetLastError();
        return -1;
    }
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    float best = -1;
    bool ran = true;
    intptr_t hold_us = 2000;
    for (int round = 0, retries = 0; round < rounds && ran; round++) {
        // Without the hold (host callbacks unavailable) the round is timed as direct calls.
        const bool held = cudaLaunchHostFunc(nullptr, hold_stream, (void *)hold_us) == cudaSuccess;
        if (!held) cudaGetLastError();
        auto start = std::chrono::steady_clock::now();
        cudaEventRecord(t0, nullptr);
        for (int k = 0; k < calls && ran; k++) ran = enqueue();
        cudaEventRecord(t1, nullptr);
        double queued_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        float t = 0;
        ran = ran && cudaEventSynchronize(t1) == cudaSuccess && cudaEventElapsedTime(&t, t0, t1) == cudaSuccess;
        if (ran && held && queued_us > 0.8 * (double)hold_us && retries < 3) {  // the GPU may have waited for the host
            hold_us *= 4;
            retries++;
            round--;
            continue;
        }
        if (ran && (best < 0 || t < best)) best = t;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (!ran) {
        cudaGetLastError();
        return -1;
    }
    return best;
}

}  // namespace
)SRC";
}

}  // namespace loom
