/// \file
/// Loom's two kinds of errors (after Halide's user_assert / internal_assert):
/// a UserError is the user's mistake (bad model, bad schedule, bad flag) and its message names the
/// culprit and the fix; an InternalError is a bug in Loom. The CLI maps them to exit codes 1 and 2.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom {

/// A mistake in what the user gave Loom. The message is for a person: where, what, what is valid.
class UserError : public std::runtime_error {
public:
    explicit UserError(const std::string &msg) : std::runtime_error(msg) {}
};

/// A broken invariant inside Loom: a bug to report, not something the user can fix.
class InternalError : public std::logic_error {
public:
    explicit InternalError(const std::string &msg) : std::logic_error("internal error: " + msg) {}
};

namespace detail {
inline void append(std::ostringstream &) {}
template <typename T, typename... Rest>
void append(std::ostringstream &os, const T &v, const Rest &...rest) {
    os << v;
    append(os, rest...);
}
}  // namespace detail

/// Concatenates its arguments with operator<< into a string.
template <typename... Args>
std::string str_cat(const Args &...args) {
    std::ostringstream os;
    detail::append(os, args...);
    return os.str();
}

/// Throws a UserError unless \p cond holds; the message is built only on failure.
template <typename... Args>
void user_check(bool cond, const Args &...args) {
    if (!cond) throw UserError(str_cat(args...));
}

/// Throws an InternalError unless \p cond holds.
template <typename... Args>
void internal_check(bool cond, const Args &...args) {
    if (!cond) throw InternalError(str_cat(args...));
}

/// The closest of \p candidates to \p name by edit distance, or "" if none is close enough
/// to be a plausible typo. Used for "did you mean" hints everywhere.
std::string closest_name(const std::string &name, const std::vector<std::string> &candidates);

/// " ; did you mean 'x'?" or "" — the hint suffix for an unknown name.
std::string did_you_mean(const std::string &name, const std::vector<std::string> &candidates);

}  // namespace loom
