/// \file
/// Writes a Schedule in the schedule language (DESIGN.md "Schedule files"), so that
/// `parse_schedule(print_schedule(s)) == s`: the header line and header comments, a blank line,
/// then one statement per Func chain, each preceded by its comment lines. A chain that fits in 100
/// columns stays on one line; otherwise each call after the first goes on its own line indented by
/// four spaces.
#pragma once

#include <string>

#include "schedule/schedule.h"

namespace loom {

/// The whole file.
std::string print_schedule(const Schedule &s);

/// One statement with its comments, ending in ";\n".
std::string print_statement(const ScheduleStatement &st);

/// Writes print_schedule(s) to \p path; throws UserError if it cannot be written.
void write_schedule_file(const std::string &path, const Schedule &s);

}  // namespace loom
