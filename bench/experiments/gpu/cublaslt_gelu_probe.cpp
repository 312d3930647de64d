// Which GELU does cuBLASLt's CUBLASLT_EPILOGUE_GELU_BIAS compute: the exact x·Φ(x) (ONNX's Erf
// decomposition, PyTorch's default) or the tanh approximation (PyTorch's approximate='tanh')?
// Loom can only hand a Gemm's GELU to that epilogue where the graph's form matches it to 1e-5.
// On a GPU machine: nvcc -O2 -o /tmp/gelu_probe bench/experiments/gpu/cublaslt_gelu_probe.cpp -lcublasLt && /tmp/gelu_probe
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "probe_check.h"

int main() {
    const int M = 256, N = 192, K = 64;  // column-major: Y (M × N) = A (M × K) · B (K × N) + bias (M)
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.5f, 1.5f);
    std::vector<float> a(M * K), b(K * N), bias(M), y(M * N);
    for (auto &v : a) v = u(rng);
    for (auto &v : b) v = u(rng);
    for (auto &v : bias) v = u(rng);
    float *da, *db, *dbias, *dy;
    CHECK(cudaMalloc(&da, a.size() * 4));
    CHECK(cudaMalloc(&db, b.size() * 4));
    CHECK(cudaMalloc(&dbias, bias.size() * 4));
    CHECK(cudaMalloc(&dy, y.size() * 4));
    CHECK(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dbias, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t op;
    CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    const void *pb = dbias;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pb, sizeof pb));
    cublasLtMatrixLayout_t la, lb, ly;
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K));
    CHECK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_32F, M, N, M));
    const float one = 1, zero = 0;
    CHECK(cublasLtMatmul(lt, op, &one, da, la, db, lb, &zero, dy, ly, dy, ly, nullptr, nullptr, 0, nullptr));
    CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    double err_erf = 0, err_tanh = 0, scale = 0;
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double z = bias[i];
            for (int k = 0; k < K; k++) z += (double)a[i + k * M] * b[k + j * K];
            double g_erf = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)));
            double g_tanh = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
            err_erf = std::fmax(err_erf, std::fabs(y[i + j * M] - g_erf));
            err_tanh = std::fmax(err_tanh, std::fabs(y[i + j * M] - g_tanh));
            scale = std::fmax(scale, std::fabs(g_erf));
        }
    std::printf("cuBLASLt GELU_BIAS (cuBLASLt %zu): max |y - erf GELU| = %.3g, max |y - tanh GELU| = %.3g "
                "(max |y| %.3g) -> %s\n",
                cublasLtGetVersion(), err_erf, err_tanh, scale,
                err_tanh < err_erf ? "the tanh approximation" : "the exact (erf) GELU");
    return 0;
}
