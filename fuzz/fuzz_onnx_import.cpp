/// \file
/// libFuzzer target: bytes -> a model file in a temp folder -> import_onnx -> prepare_graph.
/// Seeds: tests/data/*.onnx (fuzz/corpus/onnx_import); dictionary: fuzz/onnx.dict.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "frontends/onnx/onnx_import.h"
#include "fuzz/fuzz_common.h"
#include "graph/passes.h"
#include "reference/folding.h"
#include "support/error.h"

namespace {
std::string model_path;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    loom_fuzz_init();
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("loom_fuzz_onnx_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    model_path = (dir / "model.onnx").string();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    {
        std::ofstream out(model_path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char *>(data), (std::streamsize)size);
    }
    try {
        loom::Graph g = loom::import_onnx(model_path);
        loom::prepare_graph(g);
    } catch (const loom::UserError &) {
    }
    return 0;
}
