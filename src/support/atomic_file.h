/// \file
/// Every file Loom writes (schedules, `.npy`, JSON, CSV, machine files, artifacts' text) goes
/// through here: the bytes go to a temporary name in the same folder, are flushed to disk, and the
/// temporary is renamed over the target. A reader, or a run killed half-way, never sees half a file:
/// the target holds either its previous content or the new one.
#pragma once

#include <string>

namespace loom {

/// Writes \p bytes to \p path atomically (temporary `<path>.tmp.<pid>.<n>` in the same folder,
/// fsync, rename). UserError naming \p path when it exists and \p overwrite is false ("pass
/// --force"), or when it cannot be written (the temporary is removed).
void write_file_atomically(const std::string &path, const std::string &bytes, bool overwrite = true);

}  // namespace loom
