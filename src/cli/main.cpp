// The `loom` command: a thin layer over the libraries. Exit codes: 0 ok, 1 user error, 2 internal.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "support/error.h"

int main(int argc, char **argv) {
    CLI::App app{"loom: a scheduling-language compiler for deep-learning graphs, built on Halide"};
    app.require_subcommand(1);
    // A single-value flag given twice is a mistake to name, not a choice to make silently (CLI11 keeps
    // the last by default); the subcommands inherit this.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    loom::cli::add_commands(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        // CLI11 prints help/usage itself; a bad flag is a user error (exit 1), --help is success.
        int rc = app.exit(e);
        return rc == 0 ? 0 : 1;
    } catch (const loom::UserError &e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    } catch (const loom::InternalError &e) {
        std::cerr << e.what() << "\n(this is a bug in Loom; please report it with the command line)\n";
        return 2;
    } catch (const std::exception &e) {
        std::cerr << "internal error: " << e.what() << "\n";
        return 2;
    }
    return 0;
}
