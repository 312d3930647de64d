#include "codegen/denormals.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define LOOM_HAS_MXCSR 1
#endif

namespace loom {

namespace {
#ifdef LOOM_HAS_MXCSR
constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
#endif
}  // namespace

FlushDenormals::FlushDenormals() {
#ifdef LOOM_HAS_MXCSR
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
#endif
}

FlushDenormals::~FlushDenormals() {
#ifdef LOOM_HAS_MXCSR
    _mm_setcsr(saved_);
#endif
}

int flushing_do_task(Halide::JITUserContext *ctx, int (*task)(Halide::JITUserContext *, int, uint8_t *), int idx,
                     uint8_t *closure) {
    FlushDenormals flush;
    return task(ctx, idx, closure);
}

}  // namespace loom
