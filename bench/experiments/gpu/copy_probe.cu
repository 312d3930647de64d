// On the GPU machine: the time of a plain copy kernel of LayerNorm rows' size (8192 x 4096 floats,
// one float4 per thread) in the suite's timing loop (256 MB memset to flush L2, CUDA events, median
// of 200), without and with 4224 B of dynamic shared memory per block (what Loom's LayerNorm row
// kernel uses). It tells what a ~70 us kernel can reach against the 1 GB copy of gpu_bench.py's
// "device copy" figure (RESULTS_GPU.md run 69):
//   nvcc -O2 -arch=sm_90 bench/experiments/gpu/copy_probe.cu -o /tmp/copy_probe && /tmp/copy_probe
#include <algorithm>
#include <cstdio>
#include <vector>

__global__ void copy_plain(const float4 *x, float4 *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

__global__ void copy_with_shared(const float4 *x, float4 *y, int n) {
    extern __shared__ float s[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = 1.f;
    __syncthreads();
    if (i < n) {
        float4 v = x[i];
        v.x *= s[(threadIdx.x + 1) % blockDim.x];
        y[i] = v;
    }
}

int main() {
    const int n = 8192 * 4096 / 4, threads = 512, reps = 200;
    const size_t flush_bytes = 256u << 20;
    float4 *x, *y;
    char *flush;
    cudaMalloc(&x, n * sizeof(float4));
    cudaMalloc(&y, n * sizeof(float4));
    cudaMalloc(&flush, flush_bytes);
    cudaMemset(x, 0, n * sizeof(float4));
    std::vector<cudaEvent_t> a(reps), b(reps);
    for (int r = 0; r < reps; r++) cudaEventCreate(&a[r]), cudaEventCreate(&b[r]);
    for (int shared : {0, 1}) {
        for (int r = 0; r < reps; r++) {
            cudaMemsetAsync(flush, r & 0xFF, flush_bytes);
            cudaEventRecord(a[r]);
            if (shared) copy_with_shared<<<n / threads, threads, 4224>>>(x, y, n);
            else copy_plain<<<n / threads, threads>>>(x, y, n);
            cudaEventRecord(b[r]);
        }
        cudaDeviceSynchronize();
        std::vector<float> t(reps);
        for (int r = 0; r < reps; r++) cudaEventElapsedTime(&t[r], a[r], b[r]);
        std::sort(t.begin(), t.end());
        double us = t[reps / 2] * 1e3;
        printf("%-26s median %.2f us  min %.2f us  %.0f GB/s\n", shared ? "copy, 4224 B shared/block" : "copy",
               us, t[0] * 1e3, 2.0 * n * sizeof(float4) / (us * 1e3));
    }
    cudaError_t e = cudaGetLastError();
    printf("%s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
