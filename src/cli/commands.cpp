#include "cli/commands.h"

namespace loom::cli {

void add_commands(CLI::App &app) {
    add_inspect_command(app);
    add_run_command(app);
    add_schedule_command(app);
    add_autoschedule_command(app);
    add_compile_command(app);
    add_bench_command(app);
    add_grad_command(app);
    add_bench_peer_command(app);
}

}  // namespace loom::cli
