/// \file
/// What the fuzz targets share: a UserError is the expected answer to bad input, so it is caught;
/// anything else that escapes (InternalError, std::bad_alloc, std::out_of_range...) is a bug and is
/// left to abort, which libFuzzer reports as a crash. Tensor allocations are capped low so that a
/// model claiming a huge tensor is a UserError well below libFuzzer's -malloc_limit_mb.
#pragma once

#include <cstdlib>

/// Called from LLVMFuzzerInitialize: caps each tensor at 64 MiB and runs OpenMP on one thread.
inline void loom_fuzz_init() {
    setenv("LOOM_MAX_TENSOR_BYTES", "67108864", 0);
    setenv("OMP_NUM_THREADS", "1", 0);
}
