// `loom schedule print FILE`: parse a schedule file and print it normalised (the printer's syntax).
#include <iostream>

#include "cli/commands.h"
#include "schedule/schedule_parser.h"
#include "schedule/schedule_printer.h"

namespace loom::cli {

void add_schedule_command(CLI::App &app) {
    CLI::App *c = app.add_subcommand("schedule", "Work with schedule files");
    c->require_subcommand(1);
    auto path = std::make_shared<std::string>();
    CLI::App *p = c->add_subcommand("print", "Parse a schedule file and print it normalised");
    p->add_option("file", *path, "Schedule file (.sched)")->required()->check(CLI::ExistingFile);
    p->callback([path] { std::cout << print_schedule(read_schedule_file(*path)); });
}

}  // namespace loom::cli
