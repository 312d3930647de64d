/// \file
/// libFuzzer target: bytes -> parse_schedule; what parses must print and parse back to an equal
/// Schedule (the printer's contract). Seeds: schedules/*.sched (fuzz/corpus/schedule_parser).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_common.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    loom_fuzz_init();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string text(reinterpret_cast<const char *>(data), size);
    loom::Schedule s;
    try {
        s = loom::parse_schedule(text, "fuzz.sched");
    } catch (const loom::UserError &) {
        return 0;
    }
    std::string printed = loom::print_schedule(s);
    loom::Schedule back;
    try {
        back = loom::parse_schedule(printed, "printed.sched");
    } catch (const loom::UserError &e) {
        std::fprintf(stderr, "printed schedule does not parse: %s\n%s\n", e.what(), printed.c_str());
        std::abort();
    }
    if (!(back == s)) {
        std::fprintf(stderr, "print/parse round trip changed the schedule:\n%s\n", printed.c_str());
        std::abort();
    }
    return 0;
}
