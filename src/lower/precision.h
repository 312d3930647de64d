/// \file
/// The arithmetic precision a CUDA artifact's GEMMs and convolutions run in (`loom compile
/// --precision`), the way PyTorch's autocast treats an FP32 model: the cuBLAS/cuDNN stages take
/// their operands in the low precision on tensor cores and accumulate in FP32; every Halide Func
/// (reductions, norms, pointwise work) and every output stays in the model's type.
#pragma once

#include <string>

namespace loom {

/// FP32: full FP32 math. TF32: tensor cores on FP32 operands rounded to 10 mantissa bits. BF16 /
/// FP16: operands converted to bfloat16 / half, products accumulated in FP32.
enum class Precision { FP32 = 0, TF32 = 1, BF16 = 2, FP16 = 3 };

/// "fp32", "tf32", "bf16", "fp16".
const char *precision_name(Precision p);

/// Parses a precision name (case-insensitive); UserError naming \p text and the valid names.
Precision parse_precision(const std::string &text);

/// The unit roundoff of the GEMM/conv operands in \p p: 2^-24 (fp32), 2^-11 (tf32 and fp16, 10
/// stored mantissa bits), 2^-8 (bf16, 7 stored bits).
double unit_roundoff(Precision p);

}  // namespace loom
