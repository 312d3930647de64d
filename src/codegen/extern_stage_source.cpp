#include "codegen/extern_stage_source.h"

namespace loom {

std::string extern_stage_prelude(const std::string &fn) {
    return R"SRC(#include <stdint.h>
#include <stdio.h>

#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"

namespace {

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

}  // namespace
)SRC";
}

}  // namespace loom
