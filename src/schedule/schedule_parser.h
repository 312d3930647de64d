/// \file
/// Reads the schedule language (DESIGN.md "Schedule files") into a Schedule:
/// `func[.update(k)].primitive(args)…;` chains over several lines, `#` and `//` comments, and the
/// header line `# loom schedule for <model> (sha256 <hex>) on <target>`.
///
/// Comments: the leading comment block of a file is its header when a blank line ends it or when it
/// holds a header line (a comment that ends with `loom schedule for <model> [(sha256 <hex>)]
/// [on <target>]`; the first one gives model, hash and target); any other comment belongs to the
/// next statement (comments inside a statement belong to it; those after the last statement are
/// trailing_comments).
///
/// The parser checks syntax and the form of each call (known primitive, arity, `as <name>` where a
/// primitive makes a Func, Func-level primitives not after `.update(k)`); names are checked against
/// a pipeline by validate_schedule (schedule_validate.h). Every error is a UserError
/// "file:line:col: what is wrong; what was expected".
#pragma once

#include <string>

#include "schedule/schedule.h"

namespace loom {

/// Parses schedule text; \p file names it in messages (and is stored in Schedule::file).
Schedule parse_schedule(const std::string &text, const std::string &file = "<schedule>");

/// True if \p comment (a comment's text, without `#`) is a header line as described above.
bool is_schedule_header_line(const std::string &comment);

/// Reads and parses the file at \p path; throws UserError if it cannot be read.
Schedule read_schedule_file(const std::string &path);

/// The form checks the parser makes on one call, reusable for schedules built in code: "" if
/// \p call is well formed on a stage (\p stage: -1 pure, k update), else what is wrong and valid
/// (no location prefix).
std::string check_call_form(const PrimitiveCall &call, int stage);

}  // namespace loom
