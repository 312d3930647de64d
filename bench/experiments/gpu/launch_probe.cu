// Launch-path probe (bench/experiments/gpu/launch_probe.py, RESULTS_GPU.md run 78): one float4 copy kernel
// launched by the runtime (<<<>>>), or by cudaLaunchKernelEx with or without a 1x1x1 cluster and
// the spread scheduling policy (what a cluster-aware launcher sets).
#include <cuda_runtime.h>
__global__ void copy4(const float4 *x, float4 *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" int launch_rt(const void *x, void *y, int n, int threads) {
    copy4<<<(n + threads - 1) / threads, threads>>>((const float4 *)x, (float4 *)y, n);
    return (int)cudaGetLastError();
}
extern "C" int launch_ex(const void *x, void *y, int n, int threads, int cluster) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((n + threads - 1) / threads);
    cfg.blockDim = dim3(threads);
    cudaLaunchAttribute a[2];
    int k = 0;
    if (cluster) {
        a[k].id = cudaLaunchAttributeClusterDimension;
        a[k].val.clusterDim.x = 1; a[k].val.clusterDim.y = 1; a[k].val.clusterDim.z = 1;
        k++;
        a[k].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
        a[k].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
        k++;
    }
    cfg.attrs = a;
    cfg.numAttrs = k;
    return (int)cudaLaunchKernelEx(&cfg, copy4, (const float4 *)x, (float4 *)y, n);
}
