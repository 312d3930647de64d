// Does cuBLASLt have a faster FP32 kernel with the RELU_BIAS epilogue than the eight its heuristic
// offers (what Loom's lt_matmul times)? This enumerates every algorithm id for FP32, every tile and
// stage configuration each supports (no split-K), checks each against the epilogue with
// cublasLtMatmulAlgoCheck, times the valid ones and prints the fastest next to the heuristic's
// best and to a plain cublasSgemm (no epilogue). Shapes: the suite's combined/split_stack GEMM
// (16384x1024 -> 256) and linear_relu's (8192x1024 -> 4096), laid out as Loom lays them out.
// On a GPU machine: nvcc -O2 -o /tmp/algo_probe bench/experiments/gpu/cublaslt_algo_probe.cpp -lcublasLt -lcublas
//                   && /tmp/algo_probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "probe_check.h"

namespace {

const size_t kWorkspace = 32u << 20;

// Median GPU time of \p enqueue over 20 runs after 3, in ms; -1 if it fails.
float time_ms(const std::function<bool()> &enqueue) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; i++)
        if (!enqueue()) return -1;
    std::vector<float> t;
    for (int i = 0; i < 20; i++) {
        cudaEventRecord(a);
        if (!enqueue()) return -1;
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <typename T>
std::vector<T> cap_list(const cublasLtMatmulAlgo_t &algo, cublasLtMatmulAlgoCapAttributes_t attr) {
    size_t bytes = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
        return {};
    std::vector<T> v(bytes / sizeof(T));
    cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes);
    return v;
}

struct Found {
    float ms;
    int id, tile, stages;
};

// Row-major a [M, K], b [K, N], y [M, N] = relu(a b + bias): column-major y^T (N x M) = b^T a^T.
int probe(cublasLtHandle_t lt, cublasHandle_t blas, int M, int N, int K, void *ws) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> ha((size_t)M * K), hb((size_t)K * N), hbias(N);
    for (auto &v : ha) v = u(rng);
    for (auto &v : hb) v = u(rng);
    for (auto &v : hbias) v = u(rng);
    float *a, *b, *bias, *y;
    CHECK(cudaMalloc(&a, ha.size() * 4));
    CHECK(cudaMalloc(&b, hb.size() * 4));
    CHECK(cudaMalloc(&bias, N * 4));
    CHECK(cudaMalloc(&y, (size_t)M * N * 4));
    CHECK(cudaMemcpy(a, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(bias, hbias.data(), N * 4, cudaMemcpyHostToDevice));
    cublasLtMatmulDesc_t op;
    CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t n = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof n));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    cublasLtMatrixLayout_t la, lb, ly;
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, K, N));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, M, K));
    CHECK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_32F, N, M, N));
    const float one = 1, zero = 0;
    auto run = [&](const cublasLtMatmulAlgo_t &algo) {
        return cublasLtMatmul(lt, op, &one, b, la, a, lb, &zero, y, ly, y, ly, &algo, ws, kWorkspace, nullptr) ==
               CUBLAS_STATUS_SUCCESS;
    };
    std::printf("GEMM M=%d N=%d K=%d (row-major y = relu(a b + bias)), %.1f GFLOP\n", M, N, K, 2.0 * M * N * K / 1e9);

    // The heuristic's eight, as lt_matmul times them.
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = kWorkspace;
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t h[8];
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ly, ly, pref, 8, h, &found));
    float heur = -1;
    for (int i = 0; i < found; i++) {
        float ms = time_ms([&] { return run(h[i].algo); });
        int id = 0;
        uint32_t tile = 0;
        size_t w;
        cublasLtMatmulAlgoConfigGetAttribute(&h[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
        cublasLtMatmulAlgoConfigGetAttribute(&h[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
        std::printf("  heuristic %d: algo %d tile %u  %.4f ms\n", i, id, tile, ms);
        if (ms > 0 && (heur < 0 || ms < heur)) heur = ms;
    }

    // Every algorithm id, tile and stage configuration.
    int ids[256], nids = 0;
    CHECK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   CUDA_R_32F, 256, ids, &nids));
    std::vector<Found> all;
    int checked = 0;
    for (int k = 0; k < nids; k++) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                                   CUDA_R_32F, ids[k], &algo) != CUBLAS_STATUS_SUCCESS)
            continue;
        auto tiles = cap_list<uint32_t>(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
        auto stages = cap_list<uint32_t>(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
        if (tiles.empty()) tiles = {CUBLASLT_MATMUL_TILE_UNDEFINED};
        if (stages.empty()) stages = {CUBLASLT_MATMUL_STAGES_UNDEFINED};
        for (uint32_t t : tiles)
            for (uint32_t s : stages) {
                cublasLtMatmulAlgo_t c = algo;
                cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &t, sizeof t);
                cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &s, sizeof s);
                cublasLtMatmulHeuristicResult_t r;
                if (cublasLtMatmulAlgoCheck(lt, op, la, lb, ly, ly, &c, &r) != CUBLAS_STATUS_SUCCESS ||
                    r.workspaceSize > kWorkspace)
                    continue;
                checked++;
                float ms = time_ms([&] { return run(c); });
                if (ms > 0) all.push_back({ms, ids[k], (int)t, (int)s});
            }
    }
    std::sort(all.begin(), all.end(), [](const Found &x, const Found &z) { return x.ms < z.ms; });
    std::printf("  %d algorithm ids, %d configurations valid with RELU_BIAS, %zu ran\n", nids, checked, all.size());
    for (size_t i = 0; i < all.size() && i < 6; i++)
        std::printf("  enumerated %zu: algo %d tile %d stages %d  %.4f ms\n", i, all[i].id, all[i].tile, all[i].stages,
                    all[i].ms);

    // Plain cublasSgemm, no epilogue (what PyTorch calls, bias and ReLU in another kernel).
    float plain = time_ms([&] {
        return cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, N, a, K, &zero, y, N) ==
               CUBLAS_STATUS_SUCCESS;
    });
    std::printf("  heuristic best %.4f ms, enumerated best %.4f ms, cublasSgemm without epilogue %.4f ms\n", heur,
                all.empty() ? -1.f : all[0].ms, plain);
    cudaFree(a);
    cudaFree(b);
    cudaFree(bias);
    cudaFree(y);
    return 0;
}

}  // namespace

int main() {
    cublasLtHandle_t lt;
    cublasHandle_t blas;
    CHECK(cublasLtCreate(&lt));
    CHECK(cublasCreate(&blas));
    void *ws;
    CHECK(cudaMalloc(&ws, kWorkspace));
    if (probe(lt, blas, 16384, 256, 1024, ws)) return 1;
    if (probe(lt, blas, 8192, 4096, 1024, ws)) return 1;
    return 0;
}
