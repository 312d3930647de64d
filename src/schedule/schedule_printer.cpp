#include "schedule/schedule_printer.h"

#include <fstream>

#include "schedule/schedule_parser.h"
#include "support/atomic_file.h"
#include "support/error.h"

namespace loom {

static std::string comment_line(const std::string &text) {
    return text.empty() ? "#\n" : "# " + text + "\n";
}

std::string print_statement(const ScheduleStatement &st) {
    std::string out;
    for (const auto &c : st.comments) out += comment_line(c);
    std::string head = st.stage_name();
    std::string one_line = head;
    for (const auto &c : st.calls) one_line += "." + c.str();
    if (one_line.size() + 1 <= 100 || st.calls.size() <= 1) return out + one_line + ";\n";
    out += head + "." + st.calls[0].str();
    for (size_t i = 1; i < st.calls.size(); i++) out += "\n    ." + st.calls[i].str();
    return out + ";\n";
}

static bool any_header_line(const std::vector<std::string> &comments) {
    for (const auto &c : comments)
        if (is_schedule_header_line(c)) return true;
    return false;
}

std::string print_schedule(const Schedule &s) {
    std::string out;
    bool has_fields = !s.model.empty() || !s.sha256.empty() || !s.target.empty();
    // A header comment or a first statement's comment that reads as a header line would be parsed
    // back as the header; an explicit header line before it keeps it a comment.
    bool lookalike = any_header_line(s.header_comments) ||
                     (!s.has_header() && !s.statements.empty() && any_header_line(s.statements[0].comments));
    if (has_fields || lookalike) {
        out += "# loom schedule for " + (s.model.empty() ? std::string("<unknown>") : s.model);
        if (!s.sha256.empty()) out += " (sha256 " + s.sha256 + ")";
        if (!s.target.empty()) out += " on " + s.target;
        out += "\n";
    }
    for (const auto &c : s.header_comments) out += comment_line(c);
    // The blank line ends the header, so the first statement's comments stay with it.
    if (s.has_header() || lookalike) out += "\n";
    for (size_t i = 0; i < s.statements.size(); i++) {
        // A blank line before a commented statement keeps its comments visibly attached to it.
        if (i > 0 && !s.statements[i].comments.empty()) out += "\n";
        out += print_statement(s.statements[i]);
    }
    if (!s.trailing_comments.empty()) {
        out += "\n";
        for (const auto &c : s.trailing_comments) out += comment_line(c);
    }
    return out;
}

void write_schedule_file(const std::string &path, const Schedule &s) { write_file_atomically(path, print_schedule(s)); }

}  // namespace loom
