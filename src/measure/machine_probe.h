/// \file
/// What this machine can do at best, for rooflines: a copy-bandwidth probe and a FLOP-rate probe,
/// run once per machine and cached in `~/.cache/loom/machine.txt` as `key=value` lines
/// (`copy_gbps=… gflops=… cores=… l2_bytes=… llc_bytes=… cpu=…`). The autoscheduler reads the same
/// file (read_machine_file), so both see one machine model.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

/// The measured (or cached) capabilities of this machine.
struct MachineInfo {
    double copy_gbps = 0;   ///< bytes read + written per second by an all-core copy, in GB/s
    double gflops = 0;      ///< all-core f32 FMA rate (2 FLOPs per FMA lane), in GFLOP/s
    int cores = 1;          ///< hardware threads Halide's thread pool uses
    int64_t l2_bytes = 0;   ///< per-core L2 size (what the Halide autoschedulers get as "llc")
    int64_t llc_bytes = 0;  ///< size of the last cache level sysfs reports
    std::string cpu;        ///< the CPU's model name
    std::string simd;       ///< "avx512", "avx2" or "sse"

    /// Lower bound on the time (ms) of work moving \p bytes and doing \p flops on this machine.
    double roofline_ms(double bytes, double flops) const;
};

/// Default cache file: `$LOOM_CACHE_DIR/machine.txt`, else `$XDG_CACHE_HOME/loom/machine.txt`,
/// else `~/.cache/loom/machine.txt`.
std::string machine_cache_path();

/// The cached MachineInfo when \p path exists and has copy_gbps and gflops; otherwise probes
/// (a few seconds), writes \p path (creating its folder; failures to write are ignored) and
/// returns the result. \p force re-probes even when the file exists.
MachineInfo probe_machine(bool force = false, const std::string &path = machine_cache_path());

/// Parses a machine file; false when it cannot be read or lacks copy_gbps/gflops.
bool read_machine_file(const std::string &path, MachineInfo &out);
/// Writes \p m as key=value lines.
void write_machine_file(const std::string &path, const MachineInfo &m);

/// Runs only the probes (no cache): copy bandwidth in GB/s and FMA rate in GFLOP/s.
double probe_copy_gbps(int threads);
double probe_gflops(int threads);

}  // namespace loom
