/// \file
/// Halide 14's own autoschedulers (Mullapudi2016, Li2018, Adams2019) applied to the Funcs Loom
/// lowers a graph to: the peers Loom's cost model is measured against, on exactly the same Funcs.
/// The Debian plugins (`/usr/lib/x86_64-linux-gnu/halide14/libautoschedule_*.so`) are loaded with
/// Halide::load_plugin once per process; the estimates come from lowering (inputs' and outputs'
/// set_estimates). Adams2019 runs on its built-in baseline weights unless HL_WEIGHTS_DIR names
/// others; its search is configured by HL_BEAM_SIZE, HL_NUM_PASSES … as in Halide 14.
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

#include "lower/lowered.h"
#include "measure/machine_probe.h"

namespace loom {

/// The autoschedulers Loom knows, lower case, as the CLI names them:
/// {"mullapudi2016", "li2018", "adams2019"}.
const std::vector<std::string> &halide_autoscheduler_names();

/// Halide's registered name for \p name ("adams2019" → "Adams2019"); UserError listing the valid
/// names for an unknown one.
std::string halide_autoscheduler_registered_name(const std::string &name);

/// Folder the plugins are loaded from: $LOOM_HALIDE_PLUGIN_DIR, else Debian's
/// /usr/lib/x86_64-linux-gnu/halide14.
std::string halide_plugin_dir();

/// Loads the plugin of \p name once per process (thread-safe). UserError naming the file and the
/// loader's message when it cannot be loaded.
void load_halide_autoscheduler(const std::string &name);

/// The Halide MachineParams for \p m: (cores, per-core L2 bytes, balance 40), as TARGETS.md's
/// measurements of the three autoschedulers used.
Halide::MachineParams halide_machine_params(const MachineModel &m);

/// Runs autoscheduler \p name on \p lowered's pipeline for \p target; the schedule is applied to
/// the Funcs in place (so a JitModel built from \p lowered compiles it). Returns the schedule as
/// Halide prints it (C++ source). UserError carrying Halide's message when the autoscheduler fails.
std::string apply_halide_autoscheduler(LoweredPipeline &lowered, const std::string &name,
                                       const Halide::Target &target, const MachineModel &machine);

}  // namespace loom
