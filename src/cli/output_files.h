/// \file
/// Files the `loom` commands write: always through a temporary name in the same folder and a
/// rename, so a reader never sees half a file; an existing file is replaced only when asked.
#pragma once

#include <string>

namespace loom::cli {

/// Writes \p text to \p path atomically. UserError if \p path exists and \p force is false
/// ("pass --force"), or when it cannot be written.
void write_file_atomically(const std::string &path, const std::string &text, bool force = true);

}  // namespace loom::cli
