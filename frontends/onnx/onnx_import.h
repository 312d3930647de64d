/// \file
/// The ONNX frontend: reads an ONNX model (protobuf, Debian's libonnx) into Loom's Graph IR.
///
/// The result is the *raw* graph: ops, inputs and attributes exactly as the file has them (ONNX
/// semantics of the model's opset, recorded in Graph::opset). Canonicalisation (auxiliary inputs
/// to attributes, defaults, shapes) is `infer_shapes_and_fold`'s job (graph/passes.h). What the
/// importer does do:
/// - attributes become AttrValues (INT → int64_t, FLOAT → double, STRING, INTS, FLOATS, STRINGS,
///   TENSOR → Tensor); initializers become Graph::initializers, and so do `Constant` nodes;
/// - graph inputs that are also initializers are constants, not runtime inputs;
/// - graph inputs and outputs get their declared dtype and shape, a symbolic dim (`dim_param`)
///   as shape -1 with its name in ValueInfo::symbols; every other node output gets a ValueInfo
///   with has_shape = false;
/// - unnamed nodes are named `<op>_<index>` (index in the file), duplicate names made unique;
/// - nodes are sorted topologically and the graph is validated.
///
/// Every problem is a UserError that starts with the model's name: missing or corrupt file, an op
/// Loom does not support (listing supported_ops()), an op from a non-default domain, external
/// tensor data, a value read but never defined, a graph output nobody produces.
#pragma once

#include <string>

#include "graph/graph.h"

namespace loom {

/// Imports the ONNX model at \p path. UserError naming the file and the problem.
Graph import_onnx(const std::string &path);

/// Imports an ONNX model from its serialized bytes; \p origin_name names it in messages.
Graph import_onnx_bytes(const std::string &bytes, const std::string &origin_name);

}  // namespace loom
