/// \file
/// The machine the auto-scheduler plans for: cores, SIMD width and register count (from the Halide
/// target), cache sizes (from sysfs), and optionally the measured copy bandwidth and FLOP rate that
/// `loom bench` caches in `~/.cache/loom/machine.txt` (key=value lines: copy_gbps, gflops, cores,
/// l1_bytes, l2_bytes, llc_bytes, simd, cpu; measure/machine_probe.h measures it, and this file
/// alone reads and writes it). Every field can be overridden
/// (`--machine key=value` on the CLI), so a schedule can be planned for another machine.
///
/// Named fixed machines (`machines::avx2_2core()` …, `--machine avx2_2core` on the CLI) pair a
/// model with the Halide target its code is compiled for: a schedule planned for one reads the same
/// on every host, which is what tests of the cost model's decisions and lessons that print them need.
#pragma once

#include <Halide.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace loom {

/// What the cost model knows about the machine. Deterministic: nothing here is timed.
struct MachineModel {
    int cores = 1;                 ///< threads Halide's pool will use
    int vector_bytes = 16;         ///< SIMD register width in bytes (64 AVX-512, 32 AVX2, 16 SSE/NEON)
    int vector_registers = 16;     ///< SIMD registers (32 with AVX-512)
    int64_t l1_bytes = 32 << 10;   ///< per-core L1 data cache
    int64_t l2_bytes = 1 << 20;    ///< per-core L2
    int64_t llc_bytes = 8 << 20;   ///< last-level cache (shared)
    double copy_gbps = 0;          ///< all-core copy bandwidth (bytes read + written), GB/s
    double gflops = 0;             ///< all-core f32 FMA rate (2 FLOPs per FMA lane), GFLOP/s
    bool measured = false;         ///< copy_gbps/gflops came from the cache file, not estimates
    double probe_cpu_share = 1;    ///< share of its cores the probe had (under 0.85: busy, the rates read low)
    std::string source;            ///< where the numbers came from, for the schedule header
    std::string preset;            ///< the fixed machine it started from ("" for this machine's model)
    std::string cpu;               ///< the CPU's model name, when probed
    std::string simd;              ///< "avx512", "avx2" or "sse", when probed

    /// SIMD lanes for elements of \p t (at least 1).
    int lanes(DType t) const;
    /// Lanes for \p bytes-wide elements.
    int lanes_for_bytes(int bytes) const;
    /// Rate of plain (non-FMA) vector arithmetic, FLOP/s: what pointwise code reaches.
    double pointwise_flops_per_s() const;
    /// Memory bandwidth, bytes/s.
    double bytes_per_s() const;
    /// Lower bound on the time (ms) of work moving \p bytes and doing \p flops at copy_gbps and
    /// gflops (a rate of 0 bounds nothing).
    double roofline_ms(double bytes, double flops) const;
    /// One line: "2 cores, 64-byte vectors (32 regs), L1 48 KiB, L2 2 MiB, LLC 504 MiB, copy 22.6 GB/s
    /// (measured), 150 GFLOP/s (estimated)"; a preset's starts with its name and overrides
    /// ("avx2_2core preset + cores=4: 4 cores, …").
    std::string describe() const;
};

/// The model of this machine for \p target: cores from the OS (HL_NUM_THREADS overrides), vector
/// width and registers from the target's features, caches from
/// /sys/devices/system/cpu/cpu0/cache, bandwidth/FLOP rate from \p cache_file when it exists
/// (default: machine_cache_path()), else estimates from cores and vector width.
MachineModel detect_machine(const Halide::Target &target, const std::string &cache_file = "");

/// A fixed model (no sysfs, no cache file) derived from \p target and \p cores alone: what the
/// tests use so that schedules do not depend on the machine running them.
MachineModel reference_machine(const Halide::Target &target, int cores = 2);

/// A fixed machine to plan for: its model (no sysfs, no cache file) and the Halide target its code
/// is compiled for, which sets the vector width the model assumes.
struct FixedMachine {
    std::string name;         ///< what `--machine` takes: "avx512_2core"
    std::string description;  ///< one line for listings
    Halide::Target target;
    MachineModel model;
};

/// The named fixed machines. Each is reference_machine(target, cores): L1 48 KiB, L2 2 MiB per
/// core, LLC 32 MiB, bandwidth and FLOP rate estimated from cores and vector width (11 GB/s of
/// copy per core; 2 FMA ports at 2.5 GHz).
namespace machines {
/// 2 cores of AVX2 (x86-64-linux-avx-avx2-f16c-fma-sse41): 32-byte vectors, 16 registers; 8 f32
/// lanes. A small cloud VM of a Zen or Haswell-to-Skylake-client class CPU.
FixedMachine avx2_2core();
/// 2 cores of AVX-512 (…-avx512-avx512_skylake-…): 64-byte vectors, 32 registers; 16 f32 lanes.
/// A small cloud VM of a Xeon (Skylake-SP or later).
FixedMachine avx512_2core();
/// 16 cores of AVX-512, as avx512_2core otherwise: a Xeon socket's worth of threads.
FixedMachine avx512_16core();
/// Every preset, in the order listings show them.
std::vector<FixedMachine> all();
/// The names of all(), comma-separated: "avx2_2core, avx512_2core, avx512_16core".
std::string names();
/// The preset called \p name; UserError naming it and listing the presets.
FixedMachine by_name(const std::string &name);
}  // namespace machines

/// `$LOOM_CACHE_DIR/machine.txt`, else `$XDG_CACHE_HOME/loom/machine.txt`, else
/// `~/.cache/loom/machine.txt` (the file `loom bench` writes).
std::string machine_cache_path();

/// Reads the key=value lines of a machine file into \p m (keys as write_machine_cache writes them;
/// unknown keys and non-positive numbers ignored); true when it gave copy_gbps or gflops.
bool read_machine_cache(const std::string &path, MachineModel &m);

/// Writes \p m's measured fields as key=value lines (temporary file, then rename), creating the
/// folder; a cache that cannot be written is no error (it is measured again next time).
void write_machine_cache(const std::string &path, const MachineModel &m);

/// Sets \p m's L1, L2 and last-level cache sizes from sysfs where it reports them.
void read_sysfs_caches(MachineModel &m);

/// Applies one `key=value` override (keys: cores, vector_bytes, vector_registers, l1_bytes,
/// l2_bytes, llc_bytes, copy_gbps, gflops; sizes accept K/M/G suffixes). UserError naming the key
/// and listing valid ones.
void override_machine(MachineModel &m, const std::string &key_value);

/// The `--machine` values of the CLI: a preset's name, only as the first value, then key=value
/// overrides to apply on top of the preset's model (or of this machine's, without a preset).
struct MachineOptions {
    std::optional<FixedMachine> preset;
    std::vector<std::string> overrides;
};

/// Splits \p values into a preset and overrides (checked by override_machine when applied).
/// UserError for a name that is no preset (listing them) or a preset that is not the first value.
MachineOptions parse_machine_options(const std::vector<std::string> &values);

}  // namespace loom
