#include "support/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "support/error.h"

namespace loom {

namespace {

// Writes all of \p bytes to \p fd, retrying short writes; false on an error (errno set).
bool write_all(int fd, const std::string &bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += (size_t)n;
    }
    return true;
}

}  // namespace

void write_file_atomically(const std::string &path, const std::string &bytes, bool overwrite) {
    namespace fs = std::filesystem;
    std::error_code ec;
    user_check(overwrite || !fs::exists(path, ec), "'", path, "' exists; pass --force to overwrite it");
    // A counter beside the pid keeps two threads of one process off each other's temporary.
    static std::atomic<unsigned> counter{0};
    std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", counter++);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    user_check(fd >= 0, "cannot write '", path, "': ", std::strerror(errno),
               " (check that the folder exists and is writable)");
    bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
    int err = errno;
    ok = ::close(fd) == 0 && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        throw UserError(str_cat("cannot write '", path, "': ", std::strerror(err ? err : errno), " (disk full?)"));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        err = errno;
        std::remove(tmp.c_str());
        throw UserError(str_cat("cannot write '", path, "': ", std::strerror(err)));
    }
}

}  // namespace loom
