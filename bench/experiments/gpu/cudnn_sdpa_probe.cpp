// Probe (build: g++ -std=c++17 -O2 -I$CUDA/include cudnn_sdpa_probe.cpp -lcudnn -lcudart):  cuDNN unified SDPA forward (backend API) in BF16 at BERT-base shapes: checks rows against a
// double reference, times with events, prints TFLOP/s.
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "cudnn_sdpa_core.h"

static uint16_t to_bf16(float x) { uint32_t u; memcpy(&u, &x, 4); return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); }
static float from_bf16(uint16_t b) { uint32_t u = (uint32_t)b << 16; float x; memcpy(&x, &u, 4); return x; }

int main() {
    printf("cuDNN runtime %zu\n", cudnnGetVersion());
    cudnnHandle_t h;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) { printf("cudnnCreate failed\n"); return 1; }
    struct Shape { int64_t b, s; };
    for (Shape sh : {Shape{16, 512}, Shape{4, 2048}, Shape{16, 2048}, Shape{2, 37}, Shape{1, 1}}) {
        const int64_t B = sh.b, H = 12, S = sh.s, D = 64, n = B * H * S * D;
        std::vector<uint16_t> hq(n), hk(n), hv(n), ho(n);
        std::mt19937 rng(7);
        std::normal_distribution<float> nd;
        for (auto *t : {&hq, &hk, &hv}) for (auto &x : *t) x = to_bf16(nd(rng));
        void *q, *k, *v, *o, *ws = nullptr;
        cudaMalloc(&q, n * 2); cudaMalloc(&k, n * 2); cudaMalloc(&v, n * 2); cudaMalloc(&o, n * 2);
        cudaMemcpy(q, hq.data(), n * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(k, hk.data(), n * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(v, hv.data(), n * 2, cudaMemcpyHostToDevice);
        sdpa::Plan p;
        if (!sdpa::make_plan(h, B, H, S, S, D, p)) { printf("B=%ld S=%ld plan failed: %s\n", B, S, sdpa::g_error); continue; }
        if (p.workspace) cudaMalloc(&ws, p.workspace);
        const float scale = 0.125f;
        if (!sdpa::execute(h, p, q, k, v, o, scale, ws)) { printf("execute failed: %s\n", sdpa::g_error); continue; }
        cudaDeviceSynchronize();
        cudaMemcpy(ho.data(), o, n * 2, cudaMemcpyDeviceToHost);
        // reference on a few rows
        double num = 0, den = 0;
        for (int64_t row : {(int64_t)0, B * H * S / 2, B * H * S - 1}) {
            int64_t bh = row / S, i = row % S;
            std::vector<double> s(S);
            double mx = -1e300;
            for (int64_t j = 0; j < S; j++) { double a = 0; for (int64_t c = 0; c < D; c++) a += (double)from_bf16(hq[(bh*S+i)*D+c]) * from_bf16(hk[(bh*S+j)*D+c]); s[j] = a * scale; mx = std::max(mx, s[j]); }
            double sum = 0; for (auto &x : s) sum += (x = std::exp(x - mx));
            for (int64_t c = 0; c < D; c++) { double a = 0; for (int64_t j = 0; j < S; j++) a += s[j] * from_bf16(hv[(bh*S+j)*D+c]); a /= sum; double g = from_bf16(ho[(bh*S+i)*D+c]); num += (g-a)*(g-a); den += a*a; }
        }
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        for (int w = 0; w < 5; w++) sdpa::execute(h, p, q, k, v, o, scale, ws);
        const int reps = 50;
        cudaEventRecord(e0);
        for (int r = 0; r < reps; r++) sdpa::execute(h, p, q, k, v, o, scale, ws);
        cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); ms /= reps;
        double tf = 4.0 * B * H * S * S * D / (ms * 1e-3) / 1e12;
        printf("B=%ld H=12 S=%ld d=64: %.3f ms, %.1f TFLOP/s, rel err %.2e (3 rows), workspace %ld\n", B, S, ms, tf, std::sqrt(num / den), p.workspace);
        cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); if (ws) cudaFree(ws);
    }
    return 0;
}
