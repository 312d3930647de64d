#include "cli/commands.h"

#include "schedule/size_specialization.h"

namespace loom::cli {

const std::string kThreadingHelp =
    "Who runs parallel loops: auto (OpenMP above 4 threads, else Halide's pool) | spin (Loom's pool: HL_NUM_THREADS, "
    "else every core; idle threads spin briefly before they sleep) | openmp (OpenMP's team: HL_NUM_THREADS, else "
    "OMP_NUM_THREADS, else every core) | halide (Halide's thread pool)";

void add_tail_copies_option(CLI::App *c) {
    c->add_option("--tail-copies", tail_remainder_copies(),
                  "Dynamic shapes: copies of a stage whose rows the schedule tiles with GuardWithIf, each folding the "
                  "last tile's guards at one remainder or small size (the planned size's remainder, then batch 1, 2 "
                  "…; 0: none; each costs compile time; bench/DECISIONS.md#d128)")
        ->default_val(tail_remainder_copies())
        ->check([](const std::string &v) {
            return v.empty() || v[0] == '-' ? "'" + v + "' is negative; give 0 (no copies) or more, e.g. --tail-copies 2"
                                            : std::string();
        });
}

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
