#include "measure/peer_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "support/error.h"

namespace loom {

namespace {

using Clock = std::chrono::steady_clock;

// How often the parent samples the child's memory while it waits.
constexpr int kPollMs = 50;

// AddressSanitizer reserves terabytes of address space for its shadow memory when a process
// starts, so under it an address-space limit would stop every worker before it ran; the RssAnon
// poll still holds such a worker to its cap.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The RLIMIT_AS backstop: the cap twice over plus room for what a process maps without using
// (libHalide and LLVM's code, thread stacks, malloc's per-thread arenas), which RssAnon leaves out.
uint64_t address_space_limit(uint64_t cap) {
    const uint64_t room = 8ull << 30;
    if (kAddressSanitizer) return RLIM_INFINITY;
    return cap > (UINT64_MAX - room) / 2 ? RLIM_INFINITY : 2 * cap + room;
}

std::string seconds_text(double s) {
    std::ostringstream os;
    if (s < 10) os.precision(2);
    else os.precision(0);
    os << std::fixed << s << " s";
    return os.str();
}

// "RssAnon:   12345 kB" → bytes; 0 when absent.
uint64_t status_field(const std::string &status, const char *key) {
    size_t p = status.find(key);
    if (p == std::string::npos) return 0;
    p += std::strlen(key);
    return std::strtoull(status.c_str() + p, nullptr, 10) * 1024;
}

// " (--flag)", or nothing without a flag.
std::string flag_note(const std::string &flag) { return flag.empty() ? "" : " (" + flag + ")"; }

std::string signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: {
        const char *d = strsignal(sig);
        return d ? d : "unknown";
    }
    }
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    std::ostringstream os;
    // Three significant digits, so that a value just over a round cap does not read as the cap.
    if (v >= 100) os << (uint64_t)std::round(v);
    else os << std::setprecision(3) << v;
    os << " " << units[u];
    return os.str();
}

uint64_t parse_memory_size(const std::string &text, const std::string &flag) {
    auto bad = [&]() {
        return UserError(str_cat(flag, " '", text, "': expected a positive size in bytes with an optional unit "
                                 "K, M, G or T (1024-based), e.g. ", flag, " 4G or ", flag, " 512M"));
    };
    size_t i = 0;
    while (i < text.size() && (std::isdigit((unsigned char)text[i]) || text[i] == '.')) i++;
    if (i == 0) throw bad();
    double v;
    try {
        size_t used;
        v = std::stod(text.substr(0, i), &used);
        if (used != i) throw bad();
    } catch (const std::logic_error &) {
        throw bad();
    }
    std::string unit;
    for (char c : text.substr(i)) unit += (char)std::toupper((unsigned char)c);
    double mult = 1;
    if (unit.empty() || unit == "B") mult = 1;
    else if (unit == "K" || unit == "KB" || unit == "KIB") mult = 1024.0;
    else if (unit == "M" || unit == "MB" || unit == "MIB") mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GB" || unit == "GIB") mult = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TB" || unit == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
    else throw bad();
    double bytes = v * mult;
    if (!(bytes >= 1) || bytes > 1e18) throw bad();
    return (uint64_t)bytes;
}

PeerProcess::PeerProcess(const std::vector<std::string> &argv, const PeerLimits &limits, int channel_fd)
    : limits_(limits) {
    internal_check(!argv.empty() && channel_fd > 2, "PeerProcess: empty argv or channel fd ", channel_fd);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw InternalError(str_cat("cannot create a socket pair for a worker process: ", std::strerror(errno)));
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    // Closes on a successful exec, or carries exec's errno: until then the child is a copy of this
    // process, whose memory is not the child's to be charged for.
    int exec_status[2];
    if (::pipe2(exec_status, O_CLOEXEC) != 0) {
        int e = errno;
        ::close(sv[0]);
        ::close(sv[1]);
        if (devnull >= 0) ::close(devnull);
        throw InternalError(str_cat("cannot create a pipe for a worker process: ", std::strerror(e)));
    }
    // Everything the child touches between fork and exec is prepared here: after a fork of a
    // threaded process only async-signal-safe calls are allowed.
    std::vector<char *> args;
    for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    address_limit_ = address_space_limit(limits_.memory_bytes);
    struct rlimit as_limit = {(rlim_t)address_limit_, (rlim_t)address_limit_};
    pid_t parent = ::getpid();
    start_ = Clock::now();
    pid_ = ::fork();
    if (pid_ < 0) {
        int e = errno;
        ::close(sv[0]);
        ::close(sv[1]);
        ::close(exec_status[0]);
        ::close(exec_status[1]);
        if (devnull >= 0) ::close(devnull);
        throw InternalError(str_cat("cannot start a worker process: ", std::strerror(e)));
    }
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        ::setrlimit(RLIMIT_AS, &as_limit);
        if (devnull >= 0) ::dup2(devnull, 0);
        ::dup2(2, 1);
        if (sv[1] == channel_fd) ::fcntl(channel_fd, F_SETFD, 0);  // dup2 onto itself keeps FD_CLOEXEC
        else if (::dup2(sv[1], channel_fd) < 0) ::_exit(127);
        ::signal(SIGPIPE, SIG_DFL);
        ::execv(args[0], args.data());
        int e = errno;
        ssize_t ignored = ::write(exec_status[1], &e, sizeof e);
        (void)ignored;
        ::_exit(127);
    }
    ::close(sv[1]);
    ::close(exec_status[1]);
    if (devnull >= 0) ::close(devnull);
    fd_ = sv[0];
    int exec_errno = 0;
    ssize_t n;
    while ((n = ::read(exec_status[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    ::close(exec_status[0]);
    if (n > 0) {
        kill_and_reap();
        ::close(fd_);
        throw InternalError(str_cat("cannot run ", argv[0], " as a worker process: ", std::strerror(exec_errno)));
    }
}

PeerProcess::~PeerProcess() {
    kill_and_reap();
    if (fd_ >= 0) ::close(fd_);
}

double PeerProcess::seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void PeerProcess::fail(const std::string &reason, const std::string &message) {
    if (!failure_) failure_ = PeerFailure{reason, message};
}

void PeerProcess::kill_and_reap() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
}

void PeerProcess::reap_and_explain(double wait_s) {
    if (pid_ <= 0 || reaped_) return;
    auto until = Clock::now() + std::chrono::duration<double>(wait_s);
    int status = 0;
    pid_t r;
    for (;;) {
        r = ::waitpid(pid_, &status, WNOHANG);
        if (r != 0 || Clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (r == 0) {
        // Closed its socket but did not end: it is of no further use.
        kill_and_reap();
        fail("exited", str_cat("stopped answering after ", seconds_text(seconds())));
        return;
    }
    reaped_ = true;
    if (r < 0) {
        fail("exited", str_cat("ended after ", seconds_text(seconds()), " (status unknown)"));
        return;
    }
    std::string after = " after " + seconds_text(seconds());
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        // A crash near the RLIMIT_AS backstop is an allocation that failed there.
        if (address_limit_ != RLIM_INFINITY && last_vm_ > address_limit_ / 10 * 9) {
            fail("out_of_memory", str_cat("out of memory (address space near its ", format_bytes(address_limit_),
                                          " limit; cap ", format_bytes(limits_.memory_bytes), ")", after,
                                          flag_note(limits_.memory_flag)));
            return;
        }
        if (sig == SIGKILL)
            fail("crashed", str_cat("killed (signal 9, SIGKILL, not sent by Loom: the kernel's OOM killer?)", after));
        else
            fail("crashed", str_cat("crashed (signal ", sig, ", ", signal_name(sig), ")", after));
    } else if (WIFEXITED(status)) {
        fail("exited", str_cat("worker exited with status ", WEXITSTATUS(status), " without a result", after));
    }
}

bool PeerProcess::check_memory() {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    if (!f) return true;
    std::string status((std::istreambuf_iterator<char>(f)), {});
    uint64_t rss = status_field(status, "RssAnon:");
    last_vm_ = status_field(status, "VmSize:");
    peak_rss_ = std::max(peak_rss_, rss);
    if (rss <= limits_.memory_bytes) return true;
    double t = seconds();
    kill_and_reap();
    // What it held in whole MiB, so that a value just over a round cap reads as more than the cap.
    fail("out_of_memory", str_cat("out of memory (cap ", format_bytes(limits_.memory_bytes), ", it held ",
                                  (rss + (1 << 20) - 1) >> 20, " MiB) after ", seconds_text(t), flag_note(limits_.memory_flag)));
    return false;
}

bool PeerProcess::send_line(const std::string &line) {
    if (failed() || fd_ < 0) return false;
    std::string data = line + "\n";
    size_t sent = 0;
    while (sent < data.size()) {
        ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            reap_and_explain(1.0);
            fail("exited", "the worker closed its channel");
            return false;
        }
        sent += (size_t)n;
    }
    return true;
}

std::optional<std::string> PeerProcess::read_line(std::optional<Clock::time_point> deadline) {
    if (failed()) return std::nullopt;
    Clock::time_point until =
        deadline ? *deadline : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(limits_.timeout_s));
    for (;;) {
        size_t nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        if (!check_memory()) return std::nullopt;
        if (Clock::now() >= until) {
            double t = seconds();
            kill_and_reap();
            fail("timed_out", str_cat("timed out after ", seconds_text(t), " (limit ", seconds_text(limits_.timeout_s),
                                      limits_.timeout_flag.empty() ? "" : ", " + limits_.timeout_flag, ")"));
            return std::nullopt;
        }
        struct pollfd p = {fd_, POLLIN, 0};
        int r = ::poll(&p, 1, kPollMs);
        if (r < 0 && errno != EINTR) {
            kill_and_reap();
            fail("exited", str_cat("cannot read from the worker: ", std::strerror(errno)));
            return std::nullopt;
        }
        if (r <= 0) continue;
        char buf[65536];
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
            reap_and_explain(5.0);
            fail("exited", "the worker closed its channel");
            return std::nullopt;
        }
        buffer_.append(buf, (size_t)n);
    }
}

void PeerProcess::stop(double grace_s) {
    if (fd_ >= 0) {
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        fd_ = -1;
    }
    if (pid_ <= 0 || reaped_) return;
    auto until = Clock::now() + std::chrono::duration<double>(grace_s);
    int status;
    while (Clock::now() < until) {
        if (::waitpid(pid_, &status, WNOHANG) != 0) {
            reaped_ = true;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_and_reap();
}

}  // namespace loom
