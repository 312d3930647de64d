/// \file
/// What this machine can do at best, for rooflines and the cost model: a copy-bandwidth probe and a
/// FLOP-rate probe, run once per machine and cached (autoschedule/machine_model.h reads and writes
/// the cache file, `~/.cache/loom/machine.txt`), so `loom bench` and the autoscheduler see one
/// machine model.
#pragma once

#include <string>

#include "autoschedule/machine_model.h"

namespace loom {

/// This machine's model from the cache at \p path when it holds copy_gbps and gflops; otherwise
/// probes (a few seconds: cores, sysfs caches, CPU name, SIMD level, copy and FMA rates), writes
/// \p path and returns the result. \p force re-probes even when the file exists. Vector width and
/// registers are left at their defaults (the probe knows no Halide target).
MachineModel probe_machine(bool force = false, const std::string &path = machine_cache_path());

/// Runs only the probes (no cache): copy bandwidth in GB/s and FMA rate in GFLOP/s.
double probe_copy_gbps(int threads);
double probe_gflops(int threads);

}  // namespace loom
