/// \file
/// libFuzzer target: bytes -> parse_npy (the reader of `loom run --inputs DIR` files).
/// Seeds: tests/data/*/*.npy (fuzz/corpus/npy).
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.h"
#include "graph/npy.h"
#include "support/error.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    loom_fuzz_init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        loom::parse_npy(std::string(reinterpret_cast<const char *>(data), size), "fuzz.npy");
    } catch (const loom::UserError &) {
    }
    return 0;
}
