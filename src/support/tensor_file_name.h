/// \file
/// The file that holds a tensor's values: `<stem>.npy`, the stem being the tensor's name. Exporters
/// name tensors like paths (`/features/features.1/Add_output_0`), so '/', '\\', '%' and control
/// characters are written as `%XX`: the file stays in its folder (no name reaches `..` or a
/// subfolder), and distinct tensors keep distinct files. Header-only: `tools/loom_run`, which
/// links nothing of Loom, reads artifact data by the same names.
#pragma once

#include <cstdio>
#include <string>

namespace loom {

/// \p tensor as a file name stem: itself, with '/', '\\', '%' and bytes below 0x20 or 0x7f as %XX.
inline std::string tensor_file_stem(const std::string &tensor) {
    std::string out;
    for (unsigned char ch : tensor) {
        if (ch == '/' || ch == '\\' || ch == '%' || ch < 0x20 || ch == 0x7f) {
            char hex[4];
            std::snprintf(hex, sizeof hex, "%%%02X", ch);
            out += hex;
        } else {
            out += (char)ch;
        }
    }
    return out;
}

}  // namespace loom
