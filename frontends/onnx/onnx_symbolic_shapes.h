/// \file
/// Shapes of a model whose inputs have unbound dims (`batch`, `height`, an exporter's
/// `DynamicDimension.0`), as ONNX's own shape inference sees them: what `loom inspect` shows before
/// the user knows what to bind. Loom's canonical graph needs every dim bound (graph/passes.h); this
/// view does not, so it is computed from the file with libonnx, beside the importer.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace loom {

/// One value's type with its dims as text: a number ("3"), a symbol ("batch") or "?" (unknown).
struct SymbolicShape {
    std::string dtype;              ///< ONNX element type, lower case ("float", "int64"); "" unknown
    std::vector<std::string> dims;  ///< outermost first
    bool rank_known = false;        ///< false: nothing is known of the shape
};

/// "batchx3x?x?" ("scalar" for rank 0, "?" for an unknown rank).
std::string symbolic_shape_str(const SymbolicShape &s);

/// Every value of the model at \p path that ONNX shape inference (with data propagation, errors of
/// single nodes ignored) can type, by value name: graph inputs and outputs as declared, node outputs
/// as inferred. UserError naming the file when it cannot be read or parsed.
std::map<std::string, SymbolicShape> infer_symbolic_shapes(const std::string &path);

}  // namespace loom
