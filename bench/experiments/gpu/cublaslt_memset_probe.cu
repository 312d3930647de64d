// Which cuBLASLt configurations add a memset node to a captured CUDA graph, and what that costs
// (issue 30: BERT-base S512 TF32 ran 72 memsets a call, one per cublasLtMatmul). For each GEMM shape of
// BERT-base b16 (S512, S128) in FP32 and TF32, every candidate Loom's lt_matmul would time (the
// heuristic's 8 and up to 48 enumerated configurations) is timed as plain calls (5 back to back, best
// of 3), its workspace need read from cublasLtMatmulAlgoCheck, and one call captured into a graph whose
// nodes are counted by type. Then the fastest overall and the fastest with no memset node are timed as
// graphs of 12 calls, replayed.
// Build (GPU machine): nvcc -O2 -arch=sm_90 bench/experiments/gpu/cublaslt_memset_probe.cu -lcublasLt -o probe
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                             \
    do {                                                                                  \
        auto e_ = (x);                                                                    \
        if ((int)e_ != 0) {                                                               \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)e_);         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static cublasLtHandle_t lt;
static void *ws;
static const size_t kWs = 32u << 20;

struct Shape {
    const char *name;
    int M, N, K, tb, batch;
    long long sa, sb, sy;
};

struct Cand {
    cublasLtMatmulAlgo_t algo;
    size_t need;
    float ms = -1;
    int kernels = 0, memsets = 0, other = 0;
    int id = 0, tile = 0, stages = 0, splitk = 0, red = 0;
};

static void set_batch(cublasLtMatrixLayout_t l, int n, long long s) {
    int32_t c = n;
    int64_t st = s;
    CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c, sizeof c));
    CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
}

int main() {
    CK(cublasLtCreate(&lt));
    CK(cudaMalloc(&ws, kWs));
    const Shape shapes[] = {
        {"s512 qkv 8192x2304x768", 8192, 2304, 768, 0, 1, 0, 0, 0},
        {"s512 proj 8192x768x768", 8192, 768, 768, 0, 1, 0, 0, 0},
        {"s512 fc1 8192x3072x768", 8192, 3072, 768, 0, 1, 0, 0, 0},
        {"s512 fc2 8192x768x3072", 8192, 768, 3072, 0, 1, 0, 0, 0},
        {"s512 qk 192x512x512x64 tb", 512, 512, 64, 1, 192, 512 * 64, 512 * 64, 512 * 512},
        {"s512 pv 192x512x64x512", 512, 64, 512, 0, 192, 512 * 512, 512 * 64, 512 * 64},
        {"s128 qkv 2048x2304x768", 2048, 2304, 768, 0, 1, 0, 0, 0},
        {"s128 fc2 2048x768x3072", 2048, 768, 3072, 0, 1, 0, 0, 0},
        {"s128 qk 192x128x128x64 tb", 128, 128, 64, 1, 192, 128 * 64, 128 * 64, 128 * 128},
        {"s128 pv 192x128x64x128", 128, 64, 128, 0, 192, 128 * 128, 128 * 64, 128 * 64},
    };
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int prec = 0; prec < 2; prec++) {
        const cublasComputeType_t compute = prec ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        for (const Shape &s : shapes) {
            size_t na = (size_t)s.M * s.K * s.batch, nb = (size_t)s.K * s.N * s.batch, ny = (size_t)s.M * s.N * s.batch;
            float *a, *b, *y;
            CK(cudaMalloc(&a, na * 4));
            CK(cudaMalloc(&b, nb * 4));
            CK(cudaMalloc(&y, ny * 4));
            std::vector<float> h(na > nb ? na : nb);
            for (auto &v : h) v = (float)rand() / RAND_MAX - 0.5f;
            CK(cudaMemcpy(a, h.data(), na * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(b, h.data(), nb * 4, cudaMemcpyHostToDevice));
            // Loom's convention: column-major y^T (N x M) = op(b)^T a^T.
            cublasLtMatmulDesc_t op;
            cublasOperation_t opb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opa = CUBLAS_OP_N;
            CK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
            CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opb, sizeof opb));
            CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opa, sizeof opa));
            cublasLtMatrixLayout_t la, lb, ly;
            int ldb = s.tb ? s.K : s.N, lda = s.K, ldy = s.N;
            CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.tb ? s.K : s.N, s.tb ? s.N : s.K, ldb));
            CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, s.K, s.M, lda));
            CK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_32F, s.N, s.M, ldy));
            if (s.batch > 1) set_batch(la, s.batch, s.sb), set_batch(lb, s.batch, s.sa), set_batch(ly, s.batch, s.sy);
            cublasLtMatmulPreference_t pref;
            CK(cublasLtMatmulPreferenceCreate(&pref));
            size_t wsz = kWs;
            CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof wsz));
            cublasLtMatmulHeuristicResult_t hr[8];
            int found = 0;
            CK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ly, ly, pref, 8, hr, &found));
            std::vector<Cand> cands;
            for (int i = 0; i < found; i++)
                if (hr[i].state == CUBLAS_STATUS_SUCCESS) cands.push_back({hr[i].algo, hr[i].workspaceSize});
            // enumeration as lt_enumerate does (no split-K set)
            int ids[128], n = 0;
            cublasLtMatmulAlgoGetIds(lt, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 128, ids, &n);
            int enumerated = 0;
            for (int k = 0; k < n && enumerated < 48; k++) {
                cublasLtMatmulAlgo_t algo;
                if (cublasLtMatmulAlgoInit(lt, compute, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[k],
                                           &algo) != CUBLAS_STATUS_SUCCESS)
                    continue;
                auto caps = [&](cublasLtMatmulAlgoCapAttributes_t attr, uint32_t none) {
                    size_t bytes = 0;
                    std::vector<uint32_t> v;
                    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) == CUBLAS_STATUS_SUCCESS && bytes) {
                        v.resize(bytes / 4);
                        cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), bytes, &bytes);
                    }
                    if (v.empty()) v.push_back(none);
                    return v;
                };
                for (uint32_t tile : caps(CUBLASLT_ALGO_CAP_TILE_IDS, CUBLASLT_MATMUL_TILE_UNDEFINED))
                    for (uint32_t stg : caps(CUBLASLT_ALGO_CAP_STAGES_IDS, CUBLASLT_MATMUL_STAGES_UNDEFINED)) {
                        cublasLtMatmulAlgo_t c = algo;
                        cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                        cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stg, sizeof stg);
                        cublasLtMatmulHeuristicResult_t r;
                        if (enumerated < 48 && cublasLtMatmulAlgoCheck(lt, op, la, lb, ly, ly, &c, &r) == CUBLAS_STATUS_SUCCESS &&
                            r.workspaceSize <= kWs) {
                            cands.push_back({c, r.workspaceSize});
                            enumerated++;
                        }
                    }
            }
            const float one = 1.0f, zero = 0.0f;
            auto call = [&](const cublasLtMatmulAlgo_t &al, void *w, size_t wn, cudaStream_t sm) {
                return cublasLtMatmul(lt, op, &one, b, la, a, lb, &zero, y, ly, y, ly, &al, w, wn, sm);
            };
            for (Cand &c : cands) {
                size_t sz;
                cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_ID, &c.id, sizeof c.id, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof c.tile, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof c.stages, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk, sizeof c.splitk, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(&c.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.red, sizeof c.red, &sz);
                if (call(c.algo, ws, kWs, st) != CUBLAS_STATUS_SUCCESS) continue;
                CK(cudaStreamSynchronize(st));
                float best = -1;
                for (int r = 0; r < 3; r++) {
                    CK(cudaEventRecord(e0, st));
                    for (int k = 0; k < 5; k++) call(c.algo, ws, kWs, st);
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float t;
                    CK(cudaEventElapsedTime(&t, e0, e1));
                    if (best < 0 || t < best) best = t;
                }
                c.ms = best / 5;
                cudaGraph_t g;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                call(c.algo, ws, kWs, st);
                CK(cudaStreamEndCapture(st, &g));
                size_t nn = 0;
                CK(cudaGraphGetNodes(g, nullptr, &nn));
                std::vector<cudaGraphNode_t> nodes(nn);
                CK(cudaGraphGetNodes(g, nodes.data(), &nn));
                for (auto nd : nodes) {
                    cudaGraphNodeType t;
                    CK(cudaGraphNodeGetType(nd, &t));
                    if (t == cudaGraphNodeTypeKernel) c.kernels++;
                    else if (t == cudaGraphNodeTypeMemset) c.memsets++;
                    else c.other++;
                }
                CK(cudaGraphDestroy(g));
            }
            int best = -1, best0 = -1, nmem = 0;
            for (int i = 0; i < (int)cands.size(); i++) {
                const Cand &c = cands[i];
                if (c.ms < 0) continue;
                nmem += c.memsets > 0;
                if (best < 0 || c.ms < cands[best].ms) best = i;
                if (c.memsets == 0 && (best0 < 0 || c.ms < cands[best0].ms)) best0 = i;
            }
            printf("== %s %s: %zu candidates (%d heuristic), %d with a memset node\n", prec ? "tf32" : "fp32", s.name,
                   cands.size(), found, nmem);
            for (int i = 0; i < (int)cands.size(); i++) {
                const Cand &c = cands[i];
                if (i < found || i == best || i == best0)
                    printf("  %s%2d algo %3d tile %3d stages %3d splitk %d red %d ws %8zu  %.4f ms  nodes k%d m%d o%d\n",
                           i == best ? "*" : (i == best0 ? "0" : " "), i, c.id, c.tile, c.stages, c.splitk, c.red, c.need,
                           c.ms, c.kernels, c.memsets, c.other);
            }
            // graph replay of 12 calls: the pick against the best without a memset node, and the pick
            // with the workspace size cut to its need (0: no workspace)
            auto graph_ms = [&](int i, bool exact) {
                const Cand &c = cands[i];
                void *w = exact && c.need == 0 ? nullptr : ws;
                size_t wn = exact ? c.need : kWs;
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                for (int k = 0; k < 12; k++) call(c.algo, w, wn, st);
                CK(cudaStreamEndCapture(st, &g));
                size_t nn = 0;
                CK(cudaGraphGetNodes(g, nullptr, &nn));
                CK(cudaGraphInstantiate(&ge, g, 0));
                float bestt = -1;
                for (int r = 0; r < 5; r++) {
                    CK(cudaGraphLaunch(ge, st));
                    CK(cudaEventRecord(e0, st));
                    CK(cudaGraphLaunch(ge, st));
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float t;
                    CK(cudaEventElapsedTime(&t, e0, e1));
                    if (bestt < 0 || t < bestt) bestt = t;
                }
                CK(cudaGraphExecDestroy(ge));
                CK(cudaGraphDestroy(g));
                printf("  graph of 12 calls, candidate %d%s: %zu nodes, %.4f ms a call\n", i, exact ? " (exact workspace)" : "",
                       nn, bestt / 12);
            };
            if (best >= 0) graph_ms(best, false), graph_ms(best, true);
            if (best0 >= 0 && best0 != best) graph_ms(best0, false);
            fflush(stdout);
            CK(cudaFree(a));
            CK(cudaFree(b));
            CK(cudaFree(y));
        }
    }
    return 0;
}
