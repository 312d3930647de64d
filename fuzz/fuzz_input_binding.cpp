/// \file
/// libFuzzer target: bytes -> `--input` bindings (one per line, parse_input_binding) -> bound to
/// tests/data/dynamic_mlp.onnx (symbolic batch) and to sincos.onnx -> prepare_graph, so that the
/// dims a user can type reach shape inference and folding. Seeds: fuzz/corpus/input_binding.
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/input_binding.h"
#include "frontends/onnx/onnx_import.h"
#include "fuzz/fuzz_common.h"
#include "graph/passes.h"
#include "reference/folding.h"
#include "support/error.h"

namespace {
loom::Graph dynamic_mlp, sincos;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    loom_fuzz_init();
    dynamic_mlp = loom::import_onnx(LOOM_SOURCE_DIR "/tests/data/dynamic_mlp.onnx");
    sincos = loom::import_onnx(LOOM_SOURCE_DIR "/tests/data/sincos.onnx");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;  // a command line, not a file
    std::istringstream lines(std::string(reinterpret_cast<const char *>(data), size));
    loom::PrepareOptions opts;
    try {
        for (std::string line; std::getline(lines, line);) loom::parse_input_binding(line, opts.bindings);
    } catch (const loom::UserError &) {
        return 0;
    }
    for (const loom::Graph *model : {&dynamic_mlp, &sincos}) {
        loom::Graph g = *model;
        try {
            loom::prepare_graph(g, opts);
        } catch (const loom::UserError &) {
        }
    }
    return 0;
}
