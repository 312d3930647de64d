/// \file
/// Registration of the `loom` subcommands, one file per command (cmd_<name>.cpp). Each callback
/// throws loom::UserError / InternalError; main() maps them to exit codes 1 / 2.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace loom::cli {

/// `--threading`'s help, the same for `loom run` and `loom bench`.
extern const std::string kThreadingHelp;

/// Adds `--tail-copies N` (dynamic shapes: schedule/size_specialization.h's tail_remainder_copies)
/// to \p c, refusing a negative N.
void add_tail_copies_option(CLI::App *c);

/// Registers every subcommand on \p app.
void add_commands(CLI::App &app);

void add_inspect_command(CLI::App &app);
void add_run_command(CLI::App &app);
void add_schedule_command(CLI::App &app);
void add_autoschedule_command(CLI::App &app);
void add_compile_command(CLI::App &app);
void add_bench_command(CLI::App &app);
/// `loom grad`: gradients through a loss (cmd_grad.cpp).
void add_grad_command(CLI::App &app);
/// `loom bench-peer`: hidden; the worker process of a `loom bench --halide` row.
void add_bench_peer_command(CLI::App &app);

}  // namespace loom::cli
