#include "cli/output_files.h"

#include "support/atomic_file.h"

namespace loom::cli {

void write_file_atomically(const std::string &path, const std::string &text, bool force) {
    loom::write_file_atomically(path, text, force);
}

}  // namespace loom::cli
