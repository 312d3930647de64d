// On the GPU machine: LayerNorm rows (8192 x 4096 FP32, the seed suite's layernorm_rows) against
// copies of the same bytes, in the suite's timing loop (256 MB memset flushing L2 before every
// launch, CUDA events, median of 200 after 20 warm-ups), all in one process, the list timed twice
// (forward, then backward). Variants:
//   memcpy / copy kernels: cudaMemcpyAsync of the 134 MB input, and the 1 GiB copy behind the
//     "device copy" figure; a float4 copy kernel (128 threads a block, one vector a thread).
//   loom: Loom's own kernel, its PTX (argv[1], extracted from the artifact's _halide.o) JIT-compiled
//     with its .maxnreg 32, as the artifact loads it.
//   shfl<T,V,N>: one block of T threads per row, N vectors of V floats a thread (the row in
//     registers), each statistic summed by warp shuffles, one shared slot per warp, one barrier,
//     then every thread adds the warps' partials: one barrier per statistic where Loom's shared
//     tree (512 -> 32 -> 1) takes three.
//   ln_mode: plain or streaming loads, one-pass moments; ln_shfl<…, true>: each warp's vectors adjacent;
//   ln_cluster: a row over a thread-block cluster (distributed shared memory); ln_pipe: persistent
//     blocks, the next row's loads issued before the current row's statistics;
//   row_copy / copy_blocks / copy_wc: copies laid out as the row kernels are (a thread's loads
//     before its stores), to separate the access structure from the statistics.
// bench/DECISIONS.md#d207-layernorm-row-against-copy-structures has the figures.
// Every LayerNorm output is poisoned first and checked against a double-precision reference on 64
// rows. Build: nvcc -O3 -arch=sm_90a -lcuda layernorm_probe.cu -o /tmp/ln_probe; run: /tmp/ln_probe ln.ptx
#include <cuda.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                              \
    do {                                                                                   \
        auto s_ = (x);                                                                     \
        if ((int)s_ != 0) {                                                                \
            std::printf("%s failed: %d (line %d)\n", #x, (int)s_, __LINE__);               \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

constexpr int R = 8192, C = 4096;
constexpr float kEps = 1e-5f;

template <int V> struct Vec;
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

// Sum over the block: shuffles within each warp, one slot per warp in shared, one barrier.
template <int T> __device__ __forceinline__ float block_sum(float s, float *slots) {
    constexpr int W = T / 32;
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = s;
    __syncthreads();
    float t = 0.f;
#pragma unroll
    for (int w = 0; w < W; w++) t += slots[w];
    return t;
}

// WarpContig: a warp's N vectors adjacent in memory (vector k of lane l in warp w at
// ((w * N + k) * 32 + l)), so that a warp's requests follow one another as a one-vector-a-thread
// copy's do; otherwise vector k of thread t at k * T + t.
template <int T, int V, int N, bool WarpContig = false>
__global__ void __launch_bounds__(T) ln_shfl(const float *__restrict__ x, const float *__restrict__ g,
                                             const float *__restrict__ b, float *__restrict__ y) {
    static_assert(T * V * N == C, "row split");
    using VT = typename Vec<V>::T;
    __shared__ float slots[2][T / 32];
    const int row = blockIdx.x;
    const float *xr = x + (size_t)row * C;
    auto at = [](int k) {
        return WarpContig ? ((int)(threadIdx.x >> 5) * N + k) * 32 + (int)(threadIdx.x & 31) : k * T + (int)threadIdx.x;
    };
    float v[N][V];
#pragma unroll
    for (int k = 0; k < N; k++) {
        VT q = __ldg(reinterpret_cast<const VT *>(xr) + at(k));
        const float *f = reinterpret_cast<const float *>(&q);
#pragma unroll
        for (int e = 0; e < V; e++) v[k][e] = f[e];
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < N; k++)
#pragma unroll
        for (int e = 0; e < V; e++) s += v[k][e];
    const float mean = block_sum<T>(s, slots[0]) * (1.f / C);
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < N; k++)
#pragma unroll
        for (int e = 0; e < V; e++) {
            float d = v[k][e] - mean;
            q += d * d;
        }
    const float var = block_sum<T>(q, slots[1]) * (1.f / C);
    const float rs = 1.f / sqrtf(var + kEps);
    float *yr = y + (size_t)row * C;
#pragma unroll
    for (int k = 0; k < N; k++) {
        VT gq = __ldg(reinterpret_cast<const VT *>(g) + at(k));
        VT bq = __ldg(reinterpret_cast<const VT *>(b) + at(k));
        const float *gf = reinterpret_cast<const float *>(&gq), *bf = reinterpret_cast<const float *>(&bq);
        VT o;
        float *of = reinterpret_cast<float *>(&o);
#pragma unroll
        for (int e = 0; e < V; e++) of[e] = gf[e] * ((v[k][e] - mean) * rs) + bf[e];
        reinterpret_cast<VT *>(yr)[at(k)] = o;
    }
}

// Structure probes (timing only, not LayerNorm): a row read whole by T threads x N float2, then
// written back, with (Sync) or without a barrier between; and a copy of 8 floats a thread, all
// loads before the stores.
template <int T, int N, bool Sync>
__global__ void __launch_bounds__(T) row_copy(const float *__restrict__ x, float *__restrict__ y) {
    const float2 *xr = reinterpret_cast<const float2 *>(x + (size_t)blockIdx.x * C);
    float2 *yr = reinterpret_cast<float2 *>(y + (size_t)blockIdx.x * C);
    float2 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __ldg(xr + k * T + threadIdx.x);
    if (Sync) __syncthreads();
#pragma unroll
    for (int k = 0; k < N; k++) yr[k * T + threadIdx.x] = v[k];
}

// LayerNorm, T threads x N float2, with a cache policy: Mode 0 plain loads (no .nc), 1 streaming
// loads and stores (__ldcs/__stcs), 2 one-pass moments shifted by the row's first element (one
// block sum of two values: one barrier for both statistics).
template <int T, int N, int Mode>
__global__ void __launch_bounds__(T) ln_mode(const float *__restrict__ x, const float *__restrict__ g,
                                             const float *__restrict__ b, float *__restrict__ y) {
    __shared__ float slots[2][T / 32];
    const float2 *xr = reinterpret_cast<const float2 *>(x + (size_t)blockIdx.x * C);
    float2 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = Mode == 1 ? __ldcs(xr + k * T + threadIdx.x) : Mode == 0 ? xr[k * T + threadIdx.x] : __ldg(xr + k * T + threadIdx.x);
    float mean, var;
    if (Mode == 2) {
        const float K = __ldg(x + (size_t)blockIdx.x * C);
        float s = 0.f, q = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            float a = v[k].x - K, c = v[k].y - K;
            s += a + c;
            q += a * a + c * c;
        }
        s = warp_sum(s);
        q = warp_sum(q);
        if ((threadIdx.x & 31) == 0) slots[0][threadIdx.x >> 5] = s, slots[1][threadIdx.x >> 5] = q;
        __syncthreads();
        float ts = 0.f, tq = 0.f;
#pragma unroll
        for (int w = 0; w < T / 32; w++) ts += slots[0][w], tq += slots[1][w];
        const float ms = ts * (1.f / C);
        mean = K + ms;
        var = fmaxf(tq * (1.f / C) - ms * ms, 0.f);
    } else {
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) s += v[k].x + v[k].y;
        mean = block_sum<T>(s, slots[0]) * (1.f / C);
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            float a = v[k].x - mean, c = v[k].y - mean;
            q += a * a + c * c;
        }
        var = block_sum<T>(q, slots[1]) * (1.f / C);
    }
    const float rs = 1.f / sqrtf(var + kEps);
    float2 *yr = reinterpret_cast<float2 *>(y + (size_t)blockIdx.x * C);
#pragma unroll
    for (int k = 0; k < N; k++) {
        float2 gq = __ldg(reinterpret_cast<const float2 *>(g) + k * T + threadIdx.x);
        float2 bq = __ldg(reinterpret_cast<const float2 *>(b) + k * T + threadIdx.x);
        float2 o = make_float2(gq.x * ((v[k].x - mean) * rs) + bq.x, gq.y * ((v[k].y - mean) * rs) + bq.y);
        if (Mode == 1) __stcs(yr + k * T + threadIdx.x, o);
        else yr[k * T + threadIdx.x] = o;
    }
}

// Copies of the same bytes in blocks of T threads x N float4, each thread's loads before its
// stores: 2 KB to 16 KB a block (the granularity of the work a block holds).
template <int T, int N>
__global__ void __launch_bounds__(T) copy_blocks(const float4 *__restrict__ x, float4 *__restrict__ y) {
    const size_t base = (size_t)blockIdx.x * T * N;
    float4 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __ldg(x + base + k * T + threadIdx.x);
#pragma unroll
    for (int k = 0; k < N; k++) y[base + k * T + threadIdx.x] = v[k];
}

// LayerNorm with each row split over a cluster of CS blocks (Hopper distributed shared memory):
// each block holds C / CS floats of the row (T threads x N float4), its warps' partials in its
// shared slots, read by every block of the cluster after a cluster barrier.
template <int CS, int T, int N>
__global__ void __launch_bounds__(T) ln_cluster(const float *__restrict__ x, const float *__restrict__ g,
                                                const float *__restrict__ b, float *__restrict__ y) {
    static_assert(CS * T * N * 4 == C, "row split");
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    __shared__ float slots[2][T / 32];
    const int rank = (int)cl.block_rank(), row = blockIdx.x / CS;
    const float4 *xr = reinterpret_cast<const float4 *>(x + (size_t)row * C) + rank * T * N;
    float4 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __ldg(xr + k * T + threadIdx.x);
    auto cluster_sum = [&](float s, float *mine, int which) {
        s = warp_sum(s);
        if ((threadIdx.x & 31) == 0) mine[threadIdx.x >> 5] = s;
        cl.sync();
        float t = 0.f;
#pragma unroll
        for (int r = 0; r < CS; r++) {
            const float *theirs = cl.map_shared_rank(&slots[which][0], r);
#pragma unroll
            for (int w = 0; w < T / 32; w++) t += theirs[w];
        }
        return t;
    };
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < N; k++) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    const float mean = cluster_sum(s, slots[0], 0) * (1.f / C);
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < N; k++) {
        float a = v[k].x - mean, c = v[k].y - mean, d = v[k].z - mean, e = v[k].w - mean;
        q += a * a + c * c + d * d + e * e;
    }
    const float rs = 1.f / sqrtf(cluster_sum(q, slots[1], 1) * (1.f / C) + kEps);
    const float4 *gr = reinterpret_cast<const float4 *>(g) + rank * T * N, *br = reinterpret_cast<const float4 *>(b) + rank * T * N;
    float4 *yr = reinterpret_cast<float4 *>(y + (size_t)row * C) + rank * T * N;
#pragma unroll
    for (int k = 0; k < N; k++) {
        float4 gq = __ldg(gr + k * T + threadIdx.x), bq = __ldg(br + k * T + threadIdx.x);
        yr[k * T + threadIdx.x] = make_float4(gq.x * ((v[k].x - mean) * rs) + bq.x, gq.y * ((v[k].y - mean) * rs) + bq.y,
                                              gq.z * ((v[k].z - mean) * rs) + bq.z, gq.w * ((v[k].w - mean) * rs) + bq.w);
    }
    cl.sync();  // no block leaves while another may still read its slots
}

template <int CS, int T, int N> void launch_cluster(const float *x, const float *g, const float *b, float *y) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(R * CS);
    cfg.blockDim = dim3(T);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, ln_cluster<CS, T, N>, x, g, b, y));
}

// Warp-contiguous layouts: a warp's N vectors are adjacent (vector k of lane l in warp w at
// ((w * N + k) * 32 + l)), so that the requests of a warp follow one another in memory as a
// one-vector-a-thread copy's do; Thread-contiguous: a thread's N vectors adjacent.
template <int T, int N, bool ThreadContig>
__global__ void __launch_bounds__(T) copy_wc(const float4 *__restrict__ x, float4 *__restrict__ y) {
    const size_t base = (size_t)blockIdx.x * T * N;
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    float4 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = __ldg(x + base + (ThreadContig ? threadIdx.x * N + k : (w * N + k) * 32 + l));
#pragma unroll
    for (int k = 0; k < N; k++) y[base + (ThreadContig ? threadIdx.x * N + k : (w * N + k) * 32 + l)] = v[k];
}

// Persistent and pipelined: gridDim.x blocks of 256 threads, 16 floats a thread; row r+1's loads
// are issued before row r's statistics. Rows static (row += gridDim.x) or taken from a counter
// that is never reset (each launch adds R + gridDim.x to it; base is its value at the launch).
template <bool Dynamic>
__global__ void __launch_bounds__(256, 4) ln_pipe(const float *__restrict__ x, const float *__restrict__ g,
                                                  const float *__restrict__ b, float *__restrict__ y,
                                                  unsigned long long *ctr, unsigned long long base) {
    constexpr int T = 256, N = 4;
    __shared__ float slots[2][2][T / 32];
    __shared__ int next_row[2];
    auto take = [&](int slot) {
        if (threadIdx.x == 0) next_row[slot] = (int)(atomicAdd(ctr, 1ull) - base);
        __syncthreads();
        return next_row[slot];
    };
    int row = Dynamic ? take(0) : blockIdx.x;
    float4 cur[N], nxt[N];
    if (row < R)
#pragma unroll
        for (int k = 0; k < N; k++) cur[k] = __ldg(reinterpret_cast<const float4 *>(x + (size_t)row * C) + k * T + threadIdx.x);
    for (int it = 1; row < R; it ^= 1) {
        const int next = Dynamic ? take(it) : row + gridDim.x;
        if (next < R)
#pragma unroll
            for (int k = 0; k < N; k++)
                nxt[k] = __ldg(reinterpret_cast<const float4 *>(x + (size_t)next * C) + k * T + threadIdx.x);
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) s += (cur[k].x + cur[k].y) + (cur[k].z + cur[k].w);
        const float mean = block_sum<T>(s, slots[it][0]) * (1.f / C);
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < N; k++) {
            float a = cur[k].x - mean, c = cur[k].y - mean, d = cur[k].z - mean, e = cur[k].w - mean;
            q += a * a + c * c + d * d + e * e;
        }
        const float rs = 1.f / sqrtf(block_sum<T>(q, slots[it][1]) * (1.f / C) + kEps);
#pragma unroll
        for (int k = 0; k < N; k++) {
            float4 gq = __ldg(reinterpret_cast<const float4 *>(g) + k * T + threadIdx.x);
            float4 bq = __ldg(reinterpret_cast<const float4 *>(b) + k * T + threadIdx.x);
            reinterpret_cast<float4 *>(y + (size_t)row * C)[k * T + threadIdx.x] =
                make_float4(gq.x * ((cur[k].x - mean) * rs) + bq.x, gq.y * ((cur[k].y - mean) * rs) + bq.y,
                            gq.z * ((cur[k].z - mean) * rs) + bq.z, gq.w * ((cur[k].w - mean) * rs) + bq.w);
            cur[k] = nxt[k];
        }
        row = next;
    }
}

__global__ void copy4(const float4 *__restrict__ x, float4 *__restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

static float median(std::vector<float> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main(int argc, char **argv) {
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    const size_t nx = (size_t)R * C, bytes = nx * 4;
    std::vector<float> hx(nx), hg(C), hb(C);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < nx; i++) hx[i] = 3.f + 2.f * nd(rng);
    for (int i = 0; i < C; i++) hg[i] = 1.f + 0.5f * nd(rng), hb[i] = nd(rng);
    float *x, *g, *b, *y;
    char *flush, *big_a, *big_b;
    const size_t flush_bytes = 256u << 20, big = 1u << 30;
    CK(cudaMalloc(&x, bytes));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMalloc(&g, C * 4));
    CK(cudaMalloc(&b, C * 4));
    CK(cudaMalloc(&flush, flush_bytes));
    CK(cudaMalloc(&big_a, big));
    CK(cudaMalloc(&big_b, big));
    CK(cudaMemset(big_a, 1, big));
    CK(cudaMemcpy(x, hx.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g, hg.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb.data(), C * 4, cudaMemcpyHostToDevice));

    // Loom's kernel from its PTX, with the artifact's register cap.
    CUfunction loom = nullptr;
    if (argc > 1) {
        std::ifstream f(argv[1]);
        std::stringstream ss;
        ss << f.rdbuf();
        std::string ptx = ss.str();
        size_t e = ptx.find(".entry "), close = ptx.find(')', e);
        ptx.insert(close + 1, "\n.maxnreg 32");
        CUmodule mod;
        char log[8192] = {0};
        CUjit_option o[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *ov[] = {log, (void *)(size_t)sizeof(log)};
        if (cuModuleLoadDataEx(&mod, ptx.c_str(), 2, o, ov) != CUDA_SUCCESS) {
            std::printf("PTX load failed: %s\n", log);
            return 1;
        }
        CK(cuModuleGetFunction(&loom, mod, "_kernel_ln_add_1_s0_i___block_id_x"));
        int regs = 0;
        CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, loom));
        std::printf("loom kernel: %d registers\n", regs);
    }
    // Loom's launch: 8192 blocks of 512 threads, 4224 B of dynamic shared memory (Halide's).
    auto launch_loom = [&]() {
        void *args[] = {&b, &g, &y, &x};
        CK(cuLaunchKernel(loom, R, 1, 1, 512, 1, 1, 4224, 0, args, nullptr));
    };

    struct Variant {
        std::string name;
        double bytes;
        bool ln;
        std::function<void()> run;
    };
    std::vector<Variant> vs;
    vs.push_back({"memcpy 1 GiB (device copy)", 2.0 * big, false,
                  [&] { CK(cudaMemcpyAsync(big_b, big_a, big, cudaMemcpyDeviceToDevice)); }});
    vs.push_back({"memcpy own size", 2.0 * bytes, false, [&] { CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice)); }});
    vs.push_back({"copy4 kernel own size", 2.0 * bytes, false,
                  [&] { copy4<<<(int)(nx / 4 / 128), 128>>>((const float4 *)x, (float4 *)y, (int)(nx / 4)); }});
    if (loom) vs.push_back({"loom ptx 512x(2x4)", 2.0 * bytes, true, launch_loom});
    vs.push_back({"shfl 512x(2x4)", 2.0 * bytes, true, [&] { ln_shfl<512, 2, 4><<<R, 512>>>(x, g, b, y); }});
    vs.push_back({"shfl 512x(4x2)", 2.0 * bytes, true, [&] { ln_shfl<512, 4, 2><<<R, 512>>>(x, g, b, y); }});
    vs.push_back({"shfl 256x(4x4)", 2.0 * bytes, true, [&] { ln_shfl<256, 4, 4><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"shfl 256x(2x8)", 2.0 * bytes, true, [&] { ln_shfl<256, 2, 8><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"shfl 1024x(4x1)", 2.0 * bytes, true, [&] { ln_shfl<1024, 4, 1><<<R, 1024>>>(x, g, b, y); }});
    vs.push_back({"shfl 128x(4x8)", 2.0 * bytes, true, [&] { ln_shfl<128, 4, 8><<<R, 128>>>(x, g, b, y); }});
    vs.push_back({"shfl 512x(2x4) 2/SM", 2.0 * bytes, true, [&] { ln_shfl<512, 2, 4><<<R, 512, 80 * 1024>>>(x, g, b, y); }});
    vs.push_back({"shfl 512x(2x4) 3/SM", 2.0 * bytes, true, [&] { ln_shfl<512, 2, 4><<<R, 512, 60 * 1024>>>(x, g, b, y); }});
    vs.push_back({"ln plain ld 256x(2x8)", 2.0 * bytes, true, [&] { ln_mode<256, 8, 0><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"ln streaming 256x(2x8)", 2.0 * bytes, true, [&] { ln_mode<256, 8, 1><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"ln one-pass 256x(2x8)", 2.0 * bytes, true, [&] { ln_mode<256, 8, 2><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"ln one-pass 512x(2x4)", 2.0 * bytes, true, [&] { ln_mode<512, 4, 2><<<R, 512>>>(x, g, b, y); }});
    vs.push_back({"ln wc 512x(4x2)", 2.0 * bytes, true, [&] { ln_shfl<512, 4, 2, true><<<R, 512>>>(x, g, b, y); }});
    vs.push_back({"ln wc 512x(2x4)", 2.0 * bytes, true, [&] { ln_shfl<512, 2, 4, true><<<R, 512>>>(x, g, b, y); }});
    vs.push_back({"ln wc 256x(4x4)", 2.0 * bytes, true, [&] { ln_shfl<256, 4, 4, true><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"ln wc 256x(2x8)", 2.0 * bytes, true, [&] { ln_shfl<256, 2, 8, true><<<R, 256>>>(x, g, b, y); }});
    vs.push_back({"ln wc 128x(4x8)", 2.0 * bytes, true, [&] { ln_shfl<128, 4, 8, true><<<R, 128>>>(x, g, b, y); }});
    vs.push_back({"ln cluster2 256x(4x2)", 2.0 * bytes, true, [&] { launch_cluster<2, 256, 2>(x, g, b, y); }});
    vs.push_back({"ln cluster4 256x(4x1)", 2.0 * bytes, true, [&] { launch_cluster<4, 256, 1>(x, g, b, y); }});
    vs.push_back({"ln cluster4 128x(4x2)", 2.0 * bytes, true, [&] { launch_cluster<4, 128, 2>(x, g, b, y); }});
    vs.push_back({"ln cluster8 128x(4x1)", 2.0 * bytes, true, [&] { launch_cluster<8, 128, 1>(x, g, b, y); }});
    vs.push_back({"ln cluster2 128x(4x4)", 2.0 * bytes, true, [&] { launch_cluster<2, 128, 4>(x, g, b, y); }});
    vs.push_back({"rowcopy 256x(2x8) sync", 2.0 * bytes, false, [&] { row_copy<256, 8, true><<<R, 256>>>(x, y); }});
    vs.push_back({"rowcopy 256x(2x8) nosync", 2.0 * bytes, false, [&] { row_copy<256, 8, false><<<R, 256>>>(x, y); }});
    vs.push_back({"rowcopy 512x(2x4) nosync", 2.0 * bytes, false, [&] { row_copy<512, 4, false><<<R, 512>>>(x, y); }});
    vs.push_back({"rowcopy 128x(2x16) nosync", 2.0 * bytes, false, [&] { row_copy<128, 16, false><<<R, 128>>>(x, y); }});
    vs.push_back({"copy 128x(4x4) 8KB", 2.0 * bytes, false, [&] { copy_blocks<128, 4><<<(int)(nx / 4 / 512), 128>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy 128x(4x8) 16KB", 2.0 * bytes, false, [&] { copy_blocks<128, 8><<<(int)(nx / 4 / 1024), 128>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy 512x(4x1) 8KB", 2.0 * bytes, false, [&] { copy_blocks<512, 1><<<(int)(nx / 4 / 512), 512>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy 256x(4x2) 8KB", 2.0 * bytes, false, [&] { copy_blocks<256, 2><<<(int)(nx / 4 / 512), 256>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy 256x(4x4) 16KB", 2.0 * bytes, false, [&] { copy_blocks<256, 4><<<(int)(nx / 4 / 1024), 256>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy 256x(4x1) 4KB", 2.0 * bytes, false, [&] { copy_blocks<256, 1><<<(int)(nx / 4 / 256), 256>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy wc 256x(4x2) 8KB", 2.0 * bytes, false, [&] { copy_wc<256, 2, false><<<(int)(nx / 4 / 512), 256>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy wc 256x(4x4) 16KB", 2.0 * bytes, false, [&] { copy_wc<256, 4, false><<<(int)(nx / 4 / 1024), 256>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy wc 512x(4x2) 16KB", 2.0 * bytes, false, [&] { copy_wc<512, 2, false><<<(int)(nx / 4 / 1024), 512>>>((const float4 *)x, (float4 *)y); }});
    vs.push_back({"copy tc 256x(4x4) 16KB", 2.0 * bytes, false, [&] { copy_wc<256, 4, true><<<(int)(nx / 4 / 1024), 256>>>((const float4 *)x, (float4 *)y); }});
    unsigned long long *ctr, launches = 0;
    CK(cudaMalloc(&ctr, 8));
    CK(cudaMemset(ctr, 0, 8));
    for (int k : {2, 3, 4}) {
        const int grid = k * prop.multiProcessorCount;
        vs.push_back({"ln pipe static " + std::to_string(k) + "/SM", 2.0 * bytes, true,
                      [&, grid] { ln_pipe<false><<<grid, 256>>>(x, g, b, y, ctr, 0); }});
        vs.push_back({"ln pipe dynamic " + std::to_string(k) + "/SM", 2.0 * bytes, true, [&, grid] {
                          ln_pipe<true><<<grid, 256>>>(x, g, b, y, ctr, launches);
                          launches += R + grid;
                      }});
    }

    CK(cudaFuncSetAttribute(ln_shfl<512, 2, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));


    // Check every LayerNorm variant (poisoned output, 64 rows against double).
    std::vector<float> hy(nx);
    for (auto &v : vs) {
        if (!v.ln) continue;
        CK(cudaMemset(y, 0xFF, bytes));
        v.run();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hy.data(), y, bytes, cudaMemcpyDeviceToHost));
        double err = 0, ref2 = 0;
        bool nan = false;
        for (size_t i = 0; i < nx; i++) nan |= !std::isfinite(hy[i]);
        for (int r = 0; r < R; r += R / 64) {
            double m = 0, q = 0;
            for (int c = 0; c < C; c++) m += hx[(size_t)r * C + c];
            m /= C;
            for (int c = 0; c < C; c++) q += (hx[(size_t)r * C + c] - m) * (hx[(size_t)r * C + c] - m);
            double rs = 1.0 / std::sqrt(q / C + kEps);
            for (int c = 0; c < C; c++) {
                double ref = hg[c] * (hx[(size_t)r * C + c] - m) * rs + hb[c];
                err += (hy[(size_t)r * C + c] - ref) * (hy[(size_t)r * C + c] - ref);
                ref2 += ref * ref;
            }
        }
        std::printf("check %-26s rel err %.2e %s\n", v.name.c_str(), std::sqrt(err / ref2),
                    (!nan && std::sqrt(err / ref2) < 1e-5) ? "ok" : "FAIL");
    }

    const int reps = 200, warm = 20;
    std::vector<cudaEvent_t> ea(reps), eb(reps);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventCreate(&ea[r]));
        CK(cudaEventCreate(&eb[r]));
    }
    std::vector<std::vector<float>> med(vs.size());
    for (int round = 0; round < 2; round++)
        for (size_t k0 = 0; k0 < vs.size(); k0++) {
            size_t k = round == 0 ? k0 : vs.size() - 1 - k0;
            for (int r = 0; r < warm; r++) vs[k].run();
            CK(cudaDeviceSynchronize());
            for (int r = 0; r < reps; r++) {
                CK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes));
                CK(cudaEventRecord(ea[r]));
                vs[k].run();
                CK(cudaEventRecord(eb[r]));
            }
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            std::vector<float> t(reps);
            for (int r = 0; r < reps; r++) CK(cudaEventElapsedTime(&t[r], ea[r], eb[r]));
            med[k].push_back(median(t));
        }
    const double dev = vs[0].bytes / (std::min(med[0][0], med[0][1]) * 1e6);  // GB/s
    std::printf("\n%-28s %10s %10s %8s %8s\n", "variant", "ms fwd", "ms bwd", "GB/s", "% copy");
    for (size_t k = 0; k < vs.size(); k++) {
        double ms = std::min(med[k][0], med[k][1]), gbs = vs[k].bytes / (ms * 1e6);
        std::printf("%-28s %10.4f %10.4f %8.0f %7.1f%%\n", vs[k].name.c_str(), med[k][0], med[k][1], gbs, 100 * gbs / dev);
    }
    return 0;
}
