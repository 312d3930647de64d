// Paired timing of LayerNorm rows (2048 x 4096, f32, scale and shift) on the CPU: Loom's host
// artifacts of several schedules and hand-written AVX-512 references, interleaved call by call in
// one process, so that the build VM's drifting memory bandwidth (1.5-2x between minutes) moves every
// column alike. Built and run by bench/layernorm_paired.sh; results in bench/RESULTS.md. Any artifact
// of one 2048 x 4096 f32 input and output of that shape can be timed beside them (softmax_rows).
//
//   layernorm_paired ARTIFACT_DIR... : prints the median and minimum ms of each, over 150 rounds
//
// The same shared object loaded from another path runs 3-10% faster or slower, the same each time
// (twelfth session: four copies of one artifact, 1.19-1.35 ms); the script therefore loads each
// schedule from several copies (<dir>.1, <dir>.2, ...) and this prints the mean of their medians.
//
// The references, each parallel over rows with OpenMP (static halves, as one task per core):
//   copy      x -> y with ordinary stores (the write-allocate reads y's lines first)
//   copy_nt   x -> y with streaming stores (no read for ownership)
//   ln        LayerNorm without scale and shift: mean, variance (two passes over the row from L1),
//             output; ordinary stores
//   ln_affine the same with scale and shift (what the suite's workload computes)
//   ln_nt_pf  ln with streaming stores, prefetching the next row while it writes this one
#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kRows = 2048, kCols = 4096, kRounds = 150;
alignas(64) float g_scale[kCols], g_shift[kCols];

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void copy_rows(const float *x, float *y, bool streaming) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < kRows; r++) {
        const float *a = x + (size_t)r * kCols;
        float *b = y + (size_t)r * kCols;
        for (int j = 0; j < kCols; j += 16) {
            __m512 v = _mm512_load_ps(a + j);
            if (streaming) _mm512_stream_ps(b + j, v);
            else _mm512_store_ps(b + j, v);
        }
    }
    _mm_sfence();
}

void layer_norm(const float *x, float *y, bool affine, bool streaming_prefetch) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < kRows; r++) {
        const float *a = x + (size_t)r * kCols;
        float *b = y + (size_t)r * kCols;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        for (int j = 0; j < kCols; j += 32) {
            s0 = _mm512_add_ps(s0, _mm512_load_ps(a + j));
            s1 = _mm512_add_ps(s1, _mm512_load_ps(a + j + 16));
        }
        const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / kCols);
        s0 = s1 = _mm512_setzero_ps();
        for (int j = 0; j < kCols; j += 32) {
            __m512 d0 = _mm512_sub_ps(_mm512_load_ps(a + j), mean), d1 = _mm512_sub_ps(_mm512_load_ps(a + j + 16), mean);
            s0 = _mm512_fmadd_ps(d0, d0, s0);
            s1 = _mm512_fmadd_ps(d1, d1, s1);
        }
        const float var = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / kCols;
        const __m512 inv = _mm512_set1_ps(1.0f / std::sqrt(var + 1e-5f));
        const float *next = a + kCols;
        for (int j = 0; j < kCols; j += 16) {
            if (streaming_prefetch && r + 1 < kRows) _mm_prefetch((const char *)(next + j), _MM_HINT_T0);
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_load_ps(a + j), mean), inv);
            if (affine) v = _mm512_fmadd_ps(v, _mm512_load_ps(g_scale + j), _mm512_load_ps(g_shift + j));
            if (streaming_prefetch) _mm512_stream_ps(b + j, v);
            else _mm512_store_ps(b + j, v);
        }
    }
    _mm_sfence();
}

using CreateFn = void *(*)();
using RunFn = int (*)(void *, const void *const *, void *const *);
using ThreadingFn = int (*)(int);

struct Artifact {
    std::string dir;
    void *model = nullptr;
    RunFn run = nullptr;
};

/// The artifact in \p dir: its model name from manifest.txt ("name <model>"), its library loaded.
Artifact load(const std::string &dir) {
    Artifact a{dir};
    std::string model;
    if (FILE *f = fopen((dir + "/manifest.txt").c_str(), "r")) {
        char key[64], value[256];
        while (fscanf(f, "%63s %255s", key, value) == 2)
            if (std::string(key) == "name") model = value;
        fclose(f);
    }
    void *lib = model.empty() ? nullptr : dlopen((dir + "/lib" + model + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "layernorm_paired: no artifact in %s (build it with bench/layernorm_paired.sh)\n", dir.c_str());
        exit(2);
    }
    // OpenMP for the artifact's parallel loops too: Halide's own pool and an OpenMP team that spins
    // after the references' loops would fight over the 2 cores (2.4 instead of 1.26 ms).
    ((ThreadingFn)dlsym(lib, (model + "_set_threading").c_str()))(1);
    a.run = (RunFn)dlsym(lib, (model + "_run_host").c_str());
    a.model = ((CreateFn)dlsym(lib, (model + "_create").c_str()))();
    if (!a.run || !a.model) {
        fprintf(stderr, "layernorm_paired: %s has no C API for %s\n", dir.c_str(), model.c_str());
        exit(2);
    }
    return a;
}

}  // namespace

int main(int argc, char **argv) {
    const size_t n = (size_t)kRows * kCols;
    // Eight input sets (256 MiB), as `loom bench` rotates them: with two, the 32 MiB L3 kept part of
    // each set between its turns (its replacement is not LRU) and every row read partly from cache.
    std::vector<float *> inputs(8);
    unsigned seed = 1;
    for (auto &p : inputs) {
        p = (float *)aligned_alloc(64, n * 4);
        for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(&seed) / RAND_MAX * 2 - 1;
    }
    for (int j = 0; j < kCols; j++) g_scale[j] = 0.5f + (float)rand_r(&seed) / RAND_MAX, g_shift[j] = 0.1f;
    float *out = (float *)aligned_alloc(64, n * 4);
    memset(out, 0, n * 4);

    std::vector<std::string> names = {"copy", "copy_nt", "ln", "ln_affine", "ln_nt_pf"};
    const int refs = (int)names.size();
    std::vector<Artifact> arts;
    for (int k = 1; k < argc; k++) {
        arts.push_back(load(argv[k]));
        names.push_back(argv[k]);
    }
    std::vector<std::vector<double>> ms(names.size());
    // Each round starts one place further along the list: what runs right after a given row
    // (eager leaves the caches full of its own buffers) changes from round to round, instead of
    // always handicapping the same one (3-4% in the twelfth session).
    for (int round = 0; round < kRounds; round++)
        for (size_t step = 0; step < names.size(); step++) {
            const size_t k = (step + round) % names.size();
            const float *x = inputs[round % inputs.size()];
            double t0 = now();
            switch (k) {
            case 0: copy_rows(x, out, false); break;
            case 1: copy_rows(x, out, true); break;
            case 2: layer_norm(x, out, false, false); break;
            case 3: layer_norm(x, out, true, false); break;
            case 4: layer_norm(x, out, false, true); break;
            default: {
                const void *in[1] = {x};
                void *o[1] = {out};
                if (arts[k - refs].run(arts[k - refs].model, in, o) != 0) {
                    fprintf(stderr, "layernorm_paired: %s failed\n", names[k].c_str());
                    return 1;
                }
            }
            }
            ms[k].push_back((now() - t0) * 1e3);
        }
    printf("%-40s %9s %9s %9s\n", "", "median ms", "min ms", "GB/s");
    std::vector<std::pair<std::string, std::vector<double>>> groups;  // copies of one artifact
    for (size_t k = 0; k < names.size(); k++) {
        std::sort(ms[k].begin(), ms[k].end());
        double med = ms[k][ms[k].size() / 2];
        printf("%-40s %9.3f %9.3f %9.1f\n", names[k].c_str(), med, ms[k][0], 2.0 * n * 4 / med / 1e6);
        std::string g = names[k];
        size_t dot = g.find_last_of('.');
        if (dot != std::string::npos && dot + 1 < g.size() && g.find_first_not_of("0123456789", dot + 1) == std::string::npos)
            g = g.substr(0, dot);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto &e) { return e.first == g; });
        if (it == groups.end()) it = groups.insert(groups.end(), {g, {}});
        it->second.push_back(med);
    }
    printf("\nmean of the copies' medians:\n");
    for (const auto &[g, meds] : groups) {
        double sum = 0;
        for (double m : meds) sum += m;
        printf("%-40s %9.3f ms  (%zu copies)\n", g.c_str(), sum / meds.size(), meds.size());
    }
    return 0;
}
