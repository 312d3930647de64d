#include "codegen/extern_stage_source.h"

namespace loom {

std::string extern_stage_prelude(const std::string &fn) {
    return R"SRC(#include <stdint.h>
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

}  // namespace
)SRC";
}

}  // namespace loom
