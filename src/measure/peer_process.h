/// \file
/// A child process under watch, so that a foreign program's failure (Halide's Adams2019 growing to
/// tens of GB, a schedule that hangs the compiler or crashes at run time) ends in a reason instead of
/// taking the parent down. The child is a fresh exec (never a bare fork of a process whose thread
/// pools are running); it talks to the parent over one socket, line by line, on a file descriptor
/// it is told. The parent
///  - polls the child's anonymous resident memory (/proc/PID/status RssAnon) every 50 ms while it
///    waits for a line and kills the child (SIGKILL) over the cap; an RLIMIT_AS set in the child
///    before exec is the backstop for growth faster than the poll;
///  - kills it at a deadline;
///  - reaps it and words why it stopped: out of memory, timed out, crashed (signal), exited.
/// Nothing the child does makes the parent fail: writes use MSG_NOSIGNAL (no SIGPIPE), EOF and
/// errors become a PeerFailure. The child gets SIGKILL when the parent dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom {

/// What a child may use.
struct PeerLimits {
    uint64_t memory_bytes = 4ull << 30;  ///< anonymous resident memory (RssAnon)
    double timeout_s = 300;              ///< wall clock, per read_line wait (see there)
    std::string memory_flag;             ///< named in the out-of-memory message, e.g. "--peer-memory"
    std::string timeout_flag;            ///< named in the timed-out message, e.g. "--peer-timeout"
};

/// Why a child stopped serving.
struct PeerFailure {
    /// Machine-readable: "out_of_memory", "timed_out", "crashed" (killed by a signal Loom did not
    /// send), "exited" (ended without saying why), "protocol" (said something unreadable).
    std::string reason;
    /// One line for a person: "out of memory (cap 4 GiB, it held 4116 MiB) after 31 s (--peer-memory)",
    /// "timed out after 300 s (limit 300 s, --peer-timeout)", "crashed (signal 11, SIGSEGV) after 2.1 s".
    std::string message;
};

/// "4 GiB", "32 MiB", "1.5 GiB", "512 KiB": \p bytes in the largest binary unit that keeps it >= 1.
std::string format_bytes(uint64_t bytes);

/// Parses a memory size: a whole or decimal number with an optional unit K, M, G, T (binary:
/// 1024-based; an optional trailing "B" or "iB"), e.g. "4G", "512M", "1.5GiB", "1048576". Throws
/// UserError naming \p flag, the value and the valid form for anything else, zero, or negatives.
uint64_t parse_memory_size(const std::string &text, const std::string &flag);

/// One child process and its socket.
class PeerProcess {
public:
    /// Starts \p argv (argv[0] a path, e.g. /proc/self/exe) with the socket on file descriptor
    /// \p channel_fd of the child (it must be told, e.g. by an argument in \p argv), its stdin on
    /// /dev/null, its stdout on the parent's stderr (so a stray print cannot corrupt the channel),
    /// its stderr the parent's. Returns once the child has exec'd (before that it is a copy of this
    /// process, whose memory is not charged to it). Throws InternalError when the process cannot be
    /// started, naming argv[0] and the reason.
    PeerProcess(const std::vector<std::string> &argv, const PeerLimits &limits, int channel_fd = 3);
    /// Kills the child (when still running) and reaps it.
    ~PeerProcess();
    PeerProcess(const PeerProcess &) = delete;
    PeerProcess &operator=(const PeerProcess &) = delete;

    /// Sends \p line plus a newline. False (and failure() set) when the child is gone.
    bool send_line(const std::string &line);
    /// The child's next line (without the newline), waiting at most limits.timeout_s from this call
    /// (or until \p deadline when given), polling its memory meanwhile. nullopt when the child
    /// died, went over a limit (then it is killed) or closed the socket; failure() says why.
    std::optional<std::string> read_line(std::optional<std::chrono::steady_clock::time_point> deadline = {});
    /// Asks the child to end (closes the socket), gives it \p grace_s, then kills it; reaps it.
    void stop(double grace_s = 2.0);

    bool failed() const { return failure_.has_value(); }
    const PeerFailure &failure() const { return *failure_; }
    /// Seconds since the child started.
    double seconds() const;
    pid_t pid() const { return pid_; }
    /// Highest RssAnon seen, bytes.
    uint64_t peak_rss() const { return peak_rss_; }

private:
    void fail(const std::string &reason, const std::string &message);
    void kill_and_reap();
    /// Reaps the child if it has ended (blocking up to \p wait_s) and words the failure from its status.
    void reap_and_explain(double wait_s);
    /// Samples RssAnon/VmSize; kills the child over the cap. False when it did.
    bool check_memory();

    PeerLimits limits_;
    pid_t pid_ = -1;
    int fd_ = -1;
    bool reaped_ = false;
    bool killed_for_memory_ = false;
    std::chrono::steady_clock::time_point start_;
    std::string buffer_;
    uint64_t peak_rss_ = 0, last_vm_ = 0, address_limit_ = 0;
    std::optional<PeerFailure> failure_;
};

}  // namespace loom
