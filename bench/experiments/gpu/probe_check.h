// CHECK(x) for the standalone GPU probes of bench/experiments/gpu (each built alone with nvcc on a GPU
// machine): a CUDA or cuBLAS call that returns nonzero prints the call and its line, and the
// enclosing function returns 1.
#pragma once

#include <cstdio>

#define CHECK(x)                                                             \
    do {                                                                     \
        auto s_ = (x);                                                       \
        if ((int)s_ != 0) {                                                  \
            std::printf("%s failed: %d (line %d)\n", #x, (int)s_, __LINE__); \
            return 1;                                                        \
        }                                                                    \
    } while (0)
