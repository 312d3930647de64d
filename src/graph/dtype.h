/// \file
/// Element types of tensors, with their names, sizes and the ONNX enum mapping.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

/// An element type. Names (f32, i64, bool …) are what the CLI and messages print.
/// BF16 is bfloat16 (8 exponent bits, 7 stored mantissa bits); Halide Funcs hold it as its 16 bits
/// (lower/lowered.h halide_type).
enum class DType { F32, F16, F64, I64, I32, I16, I8, U8, Bool, BF16 };

/// Short name: "f32", "i64", "bool" …
const char *dtype_name(DType t);
/// Parses a short name; throws UserError listing the valid names.
DType dtype_from_name(const std::string &name);
/// Bytes per element (bool is one byte).
int dtype_size(DType t);
/// True for f16/bf16/f32/f64.
bool dtype_is_float(DType t);
/// True for the 16-bit floats (f16, bf16), which Loom stores but computes in f32
/// (graph/half_precision.h).
bool dtype_is_half(DType t);
/// Maps ONNX's TensorProto::DataType number; throws UserError for types Loom does not support.
DType dtype_from_onnx(int onnx_type);
/// The ONNX TensorProto::DataType number of \p t.
int dtype_to_onnx(DType t);

}  // namespace loom
