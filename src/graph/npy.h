/// \file
/// NumPy `.npy` files to and from Tensors: how test fixtures, `loom run --input x=x.npy` and
/// benchmark outputs carry data. Supported: format versions 1.0, 2.0 and 3.0, little-endian (or
/// byte-order-free) dtypes `f4 f2 f8 i8 i4 i2 i1 u1 b1`, C order. Anything else (big-endian,
/// Fortran order, object arrays, other dtypes) is a UserError naming the file and the problem.
#pragma once

#include <string>

#include "graph/tensor.h"

namespace loom {

/// Reads the .npy file at \p path. UserError naming the file when it is missing, truncated, not an
/// .npy file, Fortran-ordered, big-endian, or of a dtype Loom does not support.
Tensor read_npy(const std::string &path);

/// Parses the bytes of an .npy file; \p origin names it in messages.
Tensor parse_npy(const std::string &bytes, const std::string &origin);

/// Writes \p t to \p path as an .npy file (version 1.0, C order, little-endian). The data goes to a
/// temporary file next to \p path that is then renamed, so no reader ever sees a half-written file.
/// UserError naming the path when it cannot be written.
void write_npy(const std::string &path, const Tensor &t);

/// The complete bytes of an .npy file holding \p t (what write_npy writes); bf16, which NumPy
/// lacks, is written as float32 (exact).
std::string serialize_npy(const Tensor &t);

}  // namespace loom
