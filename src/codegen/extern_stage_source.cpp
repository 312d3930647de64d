#include "codegen/extern_stage_source.h"

namespace loom {

std::string extern_stage_prelude(const std::string &fn) {
    return R"SRC(#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

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

// The private stream that captures go on (a capture cannot be made on the legacy stream), or
// nullptr when it cannot be created.
cudaStream_t capture_stream() {
    static cudaStream_t stream = nullptr;
    if (!stream && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        stream = nullptr;
    }
    return stream;
}

// The GPU time in ms of five library calls, each enqueued on a stream by \p enqueue(stream)
// (true when it was), fastest of three rounds; -1 when a call fails. The calls are captured into a
// CUDA graph and the graph's replay is timed: cuDNN's host path costs 80-140 us a call, more than
// a batch-1 conv runs on the GPU, so timing direct calls back to back measured the host (ResNet-18
// on an H200: 12 of 20 convs chose the legacy implicit-GEMM kernel, 1.43 ms of convs a call against
// 0.75 timed this way). A call that cannot be captured is timed directly on the legacy stream.
template <typename Enqueue>
float gpu_time_ms(Enqueue enqueue) {
    const int calls = 5, rounds = 3;
    if (!enqueue(nullptr)) {  // warm-up, and a check that it runs at all
        cudaGetLastError();
        return -1;
    }
    cudaStream_t stream = capture_stream();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (stream && cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        bool ran = true;
        for (int k = 0; k < calls && ran; k++) ran = enqueue(stream);
        bool captured = cudaStreamEndCapture(stream, &graph) == cudaSuccess && ran;
        if (captured) captured = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
        if (captured) captured = cudaGraphLaunch(exec, stream) == cudaSuccess;  // warm
        if (!captured && exec) cudaGraphExecDestroy(exec);
        if (!captured) exec = nullptr;
    }
    cudaGetLastError();
    if (!exec) stream = nullptr;  // time direct calls on the legacy stream instead
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    float best = -1;
    bool ran = true;
    for (int round = 0; round < rounds && ran; round++) {
        float t = 0;
        cudaEventRecord(t0, stream);
        if (exec) ran = cudaGraphLaunch(exec, stream) == cudaSuccess;
        for (int k = 0; !exec && k < calls && ran; k++) ran = enqueue(nullptr);
        cudaEventRecord(t1, stream);
        ran = ran && cudaEventSynchronize(t1) == cudaSuccess && cudaEventElapsedTime(&t, t0, t1) == cudaSuccess;
        if (ran && (best < 0 || t < best)) best = t;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
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
