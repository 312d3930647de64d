#include "measure/machine_probe.h"

#include <immintrin.h>
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "support/cores.h"
#include "support/error.h"

namespace loom {

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds since \p path was last written (0 when it cannot be read).
double file_age_s(const std::string &path) {
    std::error_code ec;
    const auto written = std::filesystem::last_write_time(path, ec);
    if (ec) return 0;
    return std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - written).count();
}

// CPU seconds used by every thread of this process so far.
double process_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

std::string cpu_name() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            auto p = line.find(':');
            return p == std::string::npos ? line : line.substr(p + 2);
        }
    return "unknown";
}

// Independent FMA chains, enough to cover FMA latency × ports; each function is compiled for its
// ISA and only called when the CPU has it.
// The chains must live in registers: a rolled loop over them keeps them on the stack, and each FMA
// then waits on a store and a load (half the peak on a Zen 3 core), so the loop over chains is unrolled.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
    __m512 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm512_set1_ps(0.001f * c);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < kChains; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    __m512 s = acc[0];
    for (int c = 1; c < kChains; c++) s = _mm512_add_ps(s, acc[c]);
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0];
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm256_set1_ps(0.001f * c);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < kChains; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    __m256 s = acc[0];
    for (int c = 1; c < kChains; c++) s = _mm256_add_ps(s, acc[c]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

double fma_loop_sse(int64_t iters) {
    __m128 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = _mm_set1_ps(0.001f * c);
    const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < kChains; c++) acc[c] = _mm_add_ps(_mm_mul_ps(acc[c], a), b);
    __m128 s = acc[0];
    for (int c = 1; c < kChains; c++) s = _mm_add_ps(s, acc[c]);
    float out[4];
    _mm_storeu_ps(out, s);
    return out[0];
}

std::string simd_level() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
    return "sse";
}

}  // namespace

namespace {

// Copies \p n bytes of \p src to \p dst with vector loads and stores (both 64-byte aligned):
// \p stream selects non-temporal stores (no read for ownership of the destination), else ordinary
// ones.
__attribute__((target("avx512f"))) void copy_avx512(const char *src, char *dst, size_t n, bool stream) {
    const float *s = (const float *)src;
    float *d = (float *)dst;
    size_t v = n / 64;
    if (stream) {
        for (size_t i = 0; i < v; i++) _mm512_stream_ps(d + 16 * i, _mm512_load_ps(s + 16 * i));
        _mm_sfence();
    } else {
        for (size_t i = 0; i < v; i++) _mm512_store_ps(d + 16 * i, _mm512_load_ps(s + 16 * i));
    }
}

__attribute__((target("avx2"))) void copy_avx2(const char *src, char *dst, size_t n, bool stream) {
    const float *s = (const float *)src;
    float *d = (float *)dst;
    size_t v = n / 32;
    if (stream) {
        for (size_t i = 0; i < v; i++) _mm256_stream_ps(d + 8 * i, _mm256_load_ps(s + 8 * i));
        _mm_sfence();
    } else {
        for (size_t i = 0; i < v; i++) _mm256_store_ps(d + 8 * i, _mm256_load_ps(s + 8 * i));
    }
}

}  // namespace

double probe_cpu_share(double cpu_s, double wall_s, int threads) {
    if (!(wall_s > 0) || threads < 1) return 0;
    return std::clamp(cpu_s / (wall_s * threads), 0.0, 1.0);
}

double probe_copy_gbps(int threads, double *cpu_share) {
    // Far larger than any cache level that matters, but quick to touch: 256 MiB each way.
    const size_t bytes = size_t(256) << 20;
    // 64-byte aligned (the vector copies' aligned loads and stores), chunks a multiple of 4 KiB.
    auto alloc = [&] { return std::unique_ptr<char, decltype(&std::free)>((char *)std::aligned_alloc(4096, bytes), &std::free); };
    auto src = alloc(), dst = alloc();
    const std::string simd = simd_level();
    const int n_threads = std::max(1, threads);
    const size_t chunk = bytes / (size_t)n_threads / 4096 * 4096;
#pragma omp parallel num_threads(n_threads)
    {
        size_t lo = chunk * (size_t)omp_get_thread_num();
        // First touch by the thread that will copy this chunk.
        std::memset(src.get() + lo, omp_get_thread_num() + 1, chunk);
        std::memset(dst.get() + lo, 0, chunk);
    }
    // The best of three ways to copy, counting bytes read + written: glibc's memcpy (non-temporal
    // stores on some CPUs, which alone cannot saturate every memory system), and vector loops with
    // ordinary and with streaming stores. A probe below what kernels reach makes every "% of copy bandwidth" read high.
    double best = 0, share = 0;
    for (int method = 0; method < 3; method++) {
        if (method > 0 && simd == "sse") break;
        for (int rep = 0; rep < 4; rep++) {
            double t0 = now_s(), c0 = process_cpu_s();
#pragma omp parallel num_threads(n_threads)
            {
                size_t lo = chunk * (size_t)omp_get_thread_num();
                if (method == 0) std::memcpy(dst.get() + lo, src.get() + lo, chunk);
                else if (simd == "avx512") copy_avx512(src.get() + lo, dst.get() + lo, chunk, method == 2);
                else copy_avx2(src.get() + lo, dst.get() + lo, chunk, method == 2);
            }
            double dt = now_s() - t0;
            best = std::max(best, 2.0 * (double)chunk * n_threads / dt / 1e9);
            share = std::max(share, probe_cpu_share(process_cpu_s() - c0, dt, n_threads));
        }
    }
    volatile char sink = dst.get()[bytes / 3];
    (void)sink;
    if (cpu_share) *cpu_share = share;
    return best;
}

double probe_gflops(int threads, double *cpu_share) {
    std::string simd = simd_level();
    int lanes = simd == "avx512" ? 16 : simd == "avx2" ? 8 : 4;
    double flops_per_iter = kChains * lanes * (simd == "sse" ? 2.0 : 2.0);
    const int64_t iters = 20'000'000;
    double best = 0, share = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s(), c0 = process_cpu_s(), sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            if (simd == "avx512") sink += fma_loop_avx512(iters);
            else if (simd == "avx2") sink += fma_loop_avx2(iters);
            else sink += fma_loop_sse(iters);
        }
        double dt = now_s() - t0;
        if (sink == 12345.678) best += 0;  // keeps the loops alive
        best = std::max(best, flops_per_iter * iters * threads / dt / 1e9);
        share = std::max(share, probe_cpu_share(process_cpu_s() - c0, dt, threads));
    }
    if (cpu_share) *cpu_share = share;
    return best;
}

MachineModel probe_machine(bool force, const std::string &path, int attempts) {
    MachineModel m;
    m.cores = usable_cores();
    if (const char *n = std::getenv("HL_NUM_THREADS"); n && std::atoi(n) > 0) m.cores = std::atoi(n);
    read_sysfs_caches(m);
    m.source = path;
    MachineModel cached = m;
    if (!force && read_machine_cache(path, cached) && cached.copy_gbps > 0 && cached.gflops > 0 &&
        !(cached.probe_cpu_share < kMinProbeCpuShare && file_age_s(path) > kReprobeBusyAfterS)) {
        cached.measured = true;
        // The peak is for the threads this run uses (HL_NUM_THREADS), not those of the probe:
        // FMA throughput is per core, copy bandwidth is shared and stays.
        if (cached.cores > 0 && cached.cores != m.cores) cached.gflops *= (double)m.cores / cached.cores;
        cached.cores = m.cores;
        return cached;
    }
    m.cpu = cpu_name();
    m.simd = simd_level();
    // Other processes on these cores make both probes read low; a few tries a second apart, each
    // keeping the best rates seen.
    double copy_share = 0, fma_share = 0;
    for (int attempt = 0; attempt < std::max(1, attempts); attempt++) {
        if (attempt > 0) sleep(1);
        double cs = 0, fs = 0;
        m.copy_gbps = std::max(m.copy_gbps, probe_copy_gbps(m.cores, &cs));
        m.gflops = std::max(m.gflops, probe_gflops(m.cores, &fs));
        copy_share = std::max(copy_share, cs);
        fma_share = std::max(fma_share, fs);
        if (copy_share >= kMinProbeCpuShare && fma_share >= kMinProbeCpuShare) break;
    }
    m.measured = true;
    m.probe_cpu_share = std::min(copy_share, fma_share);
    if (m.probe_cpu_share < kMinProbeCpuShare)
        std::fprintf(stderr,
                     "loom: machine probe: other processes were using these %d cores (this process had %.0f%% of "
                     "them), so the measured copy bandwidth and FMA rate read low; %s caches them as provisional "
                     "and they are measured again after %.0f minutes, or now on an idle machine with `loom bench "
                     "--reprobe`.\n",
                     m.cores, 100 * m.probe_cpu_share, path.c_str(), kReprobeBusyAfterS / 60);
    write_machine_cache(path, m);
    return m;
}

}  // namespace loom
