#include "autoschedule/machine_model.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "support/atomic_file.h"
#include "support/error.h"

namespace loom {

namespace {

int64_t parse_size(const std::string &key, std::string v) {
    while (!v.empty() && std::isspace((unsigned char)v.back())) v.pop_back();
    int64_t mult = 1;
    if (!v.empty()) {
        char c = (char)std::toupper((unsigned char)v.back());
        if (c == 'K' || c == 'M' || c == 'G') {
            mult = c == 'K' ? 1024 : c == 'M' ? (1 << 20) : (int64_t)1 << 30;
            v.pop_back();
        }
    }
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    user_check(!v.empty() && end && *end == 0 && d > 0, "machine option '", key, "': '", v,
               "' is not a positive size (e.g. 2M, 48K, 1048576)");
    return (int64_t)(d * (double)mult);
}

double parse_positive(const std::string &key, const std::string &v) {
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    user_check(!v.empty() && end && *end == 0 && d > 0, "machine option '", key, "': '", v,
               "' is not a positive number");
    return d;
}

// Reads one sysfs cache level: "48K" style size; 0 when missing.
int64_t sysfs_cache(int level, bool data) {
    for (int idx = 0; idx < 8; idx++) {
        std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
        std::ifstream lv(base + "level"), ty(base + "type"), sz(base + "size");
        if (!lv || !ty || !sz) continue;
        int l = 0;
        std::string type, size;
        lv >> l;
        ty >> type;
        sz >> size;
        if (l != level || (data && type == "Instruction")) continue;
        try {
            return parse_size("cache", size);
        } catch (const UserError &) {
            return 0;
        }
    }
    return 0;
}

void fill_estimates(MachineModel &m) {
    // Without measurements: ~11 GB/s of copy per core (a server core's share), and 2 FMA ports at
    // ~2.5 GHz over the vector lanes.
    if (m.copy_gbps <= 0) m.copy_gbps = 11.0 * m.cores;
    if (m.gflops <= 0) m.gflops = m.cores * 2.5 * 2 * 2 * (m.vector_bytes / 4);
}

void from_target(MachineModel &m, const Halide::Target &t) {
    if (t.has_feature(Halide::Target::AVX512)) {
        m.vector_bytes = 64;
        m.vector_registers = 32;
    } else if (t.has_feature(Halide::Target::AVX2) || t.has_feature(Halide::Target::AVX)) {
        m.vector_bytes = 32;
        m.vector_registers = 16;
    } else if (t.arch == Halide::Target::ARM && t.bits == 64) {
        m.vector_bytes = 16;
        m.vector_registers = 32;
    } else {
        m.vector_bytes = 16;
        m.vector_registers = 16;
    }
}

}  // namespace

int MachineModel::lanes_for_bytes(int bytes) const {
    return bytes <= 0 ? 1 : std::max(1, vector_bytes / bytes);
}

int MachineModel::lanes(DType t) const { return lanes_for_bytes(dtype_size(t)); }

double MachineModel::pointwise_flops_per_s() const {
    // Pointwise code issues separate adds/muls (no FMA pairs), on about one port: a quarter of
    // the FMA peak.
    return std::max(1.0, gflops) * 1e9 / 4;
}

double MachineModel::bytes_per_s() const { return std::max(0.1, copy_gbps) * 1e9; }

double MachineModel::roofline_ms(double bytes, double flops) const {
    double t_mem = copy_gbps > 0 ? bytes / (copy_gbps * 1e9) : 0;
    double t_flop = gflops > 0 ? flops / (gflops * 1e9) : 0;
    return std::max(t_mem, t_flop) * 1e3;
}

std::string MachineModel::describe() const {
    std::ostringstream os;
    if (!preset.empty()) os << source << ": ";
    auto kib = [](int64_t b) {
        std::ostringstream s;
        if (b >= (1 << 20) && b % (1 << 20) == 0) s << (b >> 20) << " MiB";
        else s << (b >> 10) << " KiB";
        return s.str();
    };
    os << cores << " cores, " << vector_bytes << "-byte vectors (" << vector_registers
       << " regs), L1 " << kib(l1_bytes) << ", L2 " << kib(l2_bytes) << ", LLC " << kib(llc_bytes)
       << std::fixed << std::setprecision(1) << ", copy " << copy_gbps << " GB/s, " << gflops
       << " GFLOP/s (" << (measured ? "measured" : "estimated") << ")";
    return os.str();
}

std::string machine_cache_path() {
    if (const char *d = std::getenv("LOOM_CACHE_DIR"); d && *d) return std::string(d) + "/machine.txt";
    if (const char *d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/loom/machine.txt";
    if (const char *h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/loom/machine.txt";
    return ".loom-machine.txt";
}

bool read_machine_cache(const std::string &path, MachineModel &m) {
    std::ifstream in(path);
    if (!in) return false;
    std::string line;
    bool any = false;
    while (std::getline(in, line)) {
        auto eq = line.find('=');
        if (eq == std::string::npos || line[0] == '#') continue;
        std::string k = line.substr(0, eq), v = line.substr(eq + 1);
        if (k == "cpu") m.cpu = v;
        if (k == "simd") m.simd = v;
        char *end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || !(d > 0) || d > 1e18) continue;
        if (k == "copy_gbps") m.copy_gbps = d, any = true;
        else if (k == "gflops") m.gflops = d, any = true;
        else if (k == "cores") m.cores = std::max(1, (int)std::min(d, 1e6));
        else if (k == "l2_bytes") m.l2_bytes = (int64_t)d;
        else if (k == "l1_bytes") m.l1_bytes = (int64_t)d;
        else if (k == "llc_bytes") m.llc_bytes = (int64_t)d;
        else if (k == "probe_cpu_share") m.probe_cpu_share = std::min(d, 1.0);
    }
    return any;
}

void write_machine_cache(const std::string &path, const MachineModel &m) {
    std::ostringstream f;
    f << "# loom machine model (autoschedule/machine_model.h, measured by measure/machine_probe.h); "
         "delete to re-probe\n"
      << "copy_gbps=" << m.copy_gbps << "\n"
      << "gflops=" << m.gflops << "\n"
      << "cores=" << m.cores << "\n"
      << "l1_bytes=" << m.l1_bytes << "\n"
      << "l2_bytes=" << m.l2_bytes << "\n"
      << "llc_bytes=" << m.llc_bytes << "\n"
      << "simd=" << m.simd << "\n"
      << "cpu=" << m.cpu << "\n";
    if (m.probe_cpu_share < 1) f << "probe_cpu_share=" << m.probe_cpu_share << "\n";
    try {
        std::filesystem::path parent = std::filesystem::path(path).parent_path();
        if (!parent.empty()) std::filesystem::create_directories(parent);
        write_file_atomically(path, f.str());
    } catch (const std::exception &) {
        // Not written: the next run measures again.
    }
}

void read_sysfs_caches(MachineModel &m) {
    if (int64_t v = sysfs_cache(1, true)) m.l1_bytes = v;
    if (int64_t v = sysfs_cache(2, true)) m.l2_bytes = v;
    if (int64_t v = sysfs_cache(3, true)) m.llc_bytes = v;
    else m.llc_bytes = m.l2_bytes * m.cores;
}

MachineModel reference_machine(const Halide::Target &target, int cores) {
    MachineModel m;
    m.cores = std::max(1, cores);
    from_target(m, target);
    m.l1_bytes = 48 << 10;
    m.l2_bytes = 2 << 20;
    m.llc_bytes = 32 << 20;
    fill_estimates(m);
    m.source = "reference machine";
    return m;
}

MachineModel detect_machine(const Halide::Target &target, const std::string &cache_file) {
    MachineModel m;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    m.cores = n > 0 ? (int)n : 1;
    if (const char *t = std::getenv("HL_NUM_THREADS"); t && std::atoi(t) > 0) m.cores = std::atoi(t);
    from_target(m, target);
    read_sysfs_caches(m);
    std::string path = cache_file.empty() ? machine_cache_path() : cache_file;
    // The plan is for the threads Halide's pool will use here, not the cores the cache recorded.
    int cores = m.cores;
    m.measured = read_machine_cache(path, m);
    m.cores = cores;
    m.source = m.measured ? "sysfs + " + path : "sysfs + estimates";
    fill_estimates(m);
    return m;
}

namespace machines {

namespace {

FixedMachine fixed(const std::string &name, const std::string &description, const std::string &target, int cores) {
    FixedMachine f;
    f.name = name;
    f.description = description;
    f.target = Halide::Target(target);
    f.model = reference_machine(f.target, cores);
    f.model.preset = name;
    f.model.source = name + " preset";
    return f;
}

const char *kAvx2Target = "x86-64-linux-avx-avx2-f16c-fma-sse41";
const char *kAvx512Target = "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41";

}  // namespace

FixedMachine avx2_2core() {
    return fixed("avx2_2core", "2 cores, AVX2 (8 f32 lanes, 16 registers)", kAvx2Target, 2);
}

FixedMachine avx512_2core() {
    return fixed("avx512_2core", "2 cores, AVX-512 (16 f32 lanes, 32 registers)", kAvx512Target, 2);
}

FixedMachine avx512_16core() {
    return fixed("avx512_16core", "16 cores, AVX-512 (16 f32 lanes, 32 registers)", kAvx512Target, 16);
}

std::vector<FixedMachine> all() { return {avx2_2core(), avx512_2core(), avx512_16core()}; }

std::string names() {
    std::string out;
    for (const auto &f : all()) out += (out.empty() ? "" : ", ") + f.name;
    return out;
}

FixedMachine by_name(const std::string &name) {
    std::vector<std::string> known;
    std::string listing;
    for (const auto &f : all()) {
        if (f.name == name) return f;
        known.push_back(f.name);
        listing += str_cat("\n  ", f.name, ": ", f.description, " (", f.target.to_string(), ")");
    }
    std::string hint = did_you_mean(name, known);
    throw UserError(str_cat("unknown machine preset '", name, "'", hint.empty() ? ";" : hint, " presets:", listing,
                            "\nor key=value overrides of this machine's model, e.g. --machine cores=4"));
}

}  // namespace machines

MachineOptions parse_machine_options(const std::vector<std::string> &values) {
    MachineOptions o;
    for (size_t i = 0; i < values.size(); i++) {
        const std::string &v = values[i];
        if (v.find('=') != std::string::npos) {
            o.overrides.push_back(v);
            continue;
        }
        user_check(i == 0, "machine preset '", v, "' after '", values[i - 1],
                   "': a preset goes first and only once, then key=value overrides (e.g. --machine ",
                   v, " cores=4)");
        o.preset = machines::by_name(v);
    }
    return o;
}

void override_machine(MachineModel &m, const std::string &kv) {
    auto eq = kv.find('=');
    static const char *valid =
        "cores, vector_bytes, vector_registers, l1_bytes, l2_bytes, llc_bytes, copy_gbps, gflops";
    user_check(eq != std::string::npos, "machine option '", kv, "' is not key=value; keys: ", valid,
               " (or, first, a preset: ", machines::names(), ")");
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "cores") m.cores = (int)parse_positive(k, v);
    else if (k == "vector_bytes") m.vector_bytes = (int)parse_positive(k, v);
    else if (k == "vector_registers") m.vector_registers = (int)parse_positive(k, v);
    else if (k == "l1_bytes") m.l1_bytes = parse_size(k, v);
    else if (k == "l2_bytes") m.l2_bytes = parse_size(k, v);
    else if (k == "llc_bytes") m.llc_bytes = parse_size(k, v);
    else if (k == "copy_gbps") m.copy_gbps = parse_positive(k, v);
    else if (k == "gflops") m.gflops = parse_positive(k, v);
    else
        throw UserError(str_cat("unknown machine option '", k, "'",
                                did_you_mean(k, {"cores", "vector_bytes", "vector_registers", "l1_bytes",
                                                 "l2_bytes", "llc_bytes", "copy_gbps", "gflops"}),
                                "; keys: ", valid));
    m.source += " + " + kv;
}

}  // namespace loom
