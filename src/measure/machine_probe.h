/// \file
/// What this machine can do at best, for rooflines and the cost model: a copy-bandwidth probe and a
/// FLOP-rate probe, run once per machine and cached (autoschedule/machine_model.h reads and writes
/// the cache file, `~/.cache/loom/machine.txt`), so `loom bench` and the autoscheduler see one
/// machine model.
#pragma once

#include <string>

#include "autoschedule/machine_model.h"

namespace loom {

/// Below this share the probes ran on busy cores and read low: probe_machine measures again, and
/// when the cores stay busy it caches the rates as provisional (with their share), to be measured
/// again once the file is kReprobeBusyAfterS old (a cache written under load made every later plan
/// on that host assume a machine half as fast, and probing on every run would cost seconds each).
constexpr double kMinProbeCpuShare = 0.85;
constexpr double kReprobeBusyAfterS = 600;
/// Tries of the two probes, a second apart, while the cores are busy.
constexpr int kProbeAttempts = 3;

/// This machine's model from the cache at \p path when it holds copy_gbps and gflops; otherwise
/// probes (a few seconds: cores, sysfs caches, CPU name, SIMD level, copy and FMA rates), writes
/// \p path and returns the result. \p force re-probes even when the file exists. Vector width and
/// registers are left at their defaults (the probe knows no Halide target). On busy cores the
/// probes run up to \p attempts times (kMinProbeCpuShare).
MachineModel probe_machine(bool force = false, const std::string &path = machine_cache_path(),
                           int attempts = kProbeAttempts);

/// Runs only the probes (no cache): copy bandwidth in GB/s and FMA rate in GFLOP/s, the best of a
/// few repetitions. \p cpu_share, when given, receives the largest share of the \p threads cores
/// the process had during a repetition (probe_cpu_share).
double probe_copy_gbps(int threads, double *cpu_share = nullptr);
double probe_gflops(int threads, double *cpu_share = nullptr);

/// The share of \p threads cores that a process using \p cpu_s seconds of CPU over \p wall_s
/// seconds had: near 1 on idle cores, lower when other processes ran on them.
double probe_cpu_share(double cpu_s, double wall_s, int threads);


}  // namespace loom
