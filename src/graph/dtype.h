/// \file
/// Element types of tensors, with their names, sizes and the ONNX enum mapping.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

/// An element type. Names (f32, i64, bool …) are what the CLI and messages print.
enum class DType { F32, F16, F64, I64, I32, I16, I8, U8, Bool };

/// Short name: "f32", "i64", "bool" …
const char *dtype_name(DType t);
/// Parses a short name; throws UserError listing the valid names.
DType dtype_from_name(const std::string &name);
/// Bytes per element (bool is one byte).
int dtype_size(DType t);
/// True for f16/f32/f64.
bool dtype_is_float(DType t);
/// Maps ONNX's TensorProto::DataType number; throws UserError for types Loom does not support.
DType dtype_from_onnx(int onnx_type);
/// The ONNX TensorProto::DataType number of \p t.
int dtype_to_onnx(DType t);

}  // namespace loom
