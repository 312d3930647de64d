#include "cli/output_files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graph/error.h"

namespace loom::cli {

void write_file_atomically(const std::string &path, const std::string &text, bool force) {
    namespace fs = std::filesystem;
    user_check(force || !fs::exists(path), "'", path, "' exists; pass --force to overwrite it");
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        user_check((bool)out, "cannot write '", tmp, "'");
        out << text;
        out.close();
        user_check((bool)out, "cannot write '", tmp, "'");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp);
        throw UserError(str_cat("cannot write '", path, "': ", ec.message()));
    }
}

}  // namespace loom::cli
