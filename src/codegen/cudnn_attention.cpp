#include "codegen/cudnn_attention.h"

#include "codegen/extern_stage_source.h"

namespace loom {

namespace {

// The plan code (cuDNN's backend API: tensors, the SDPA operation, its graph, the heuristic's engine
// configurations, the plan) then the extern function.
const char *const kPlanSource = R"SRC(#include <cudnn.h>
#include <string.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace sdpa {

struct Plan {
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t workspace = 0;
};

const char *g_error = "";

#define SDPA_CHECK(call, what)            \
    do {                                  \
        if ((call) != CUDNN_STATUS_SUCCESS) { \
            g_error = what;               \
            return false;                 \
        }                                 \
    } while (0)

// Descriptors made while planning, destroyed once the plan is finalized.
struct Made {
    std::vector<cudnnBackendDescriptor_t> all;
    ~Made() {
        for (auto d : all) cudnnBackendDestroyDescriptor(d);
    }
    bool create(cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d) {
        if (cudnnBackendCreateDescriptor(t, d) != CUDNN_STATUS_SUCCESS) return false;
        all.push_back(*d);
        return true;
    }
};

bool tensor(Made &m, cudnnBackendDescriptor_t *d, int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims,
            std::vector<int64_t> strides, bool by_value) {
    SDPA_CHECK(m.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED,
               "creating a tensor descriptor");
    int64_t align = by_value ? 4 : 16;
    SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt), "tensor type");
    SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)dims.size(), dims.data()),
               "tensor dims");
    SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)strides.size(),
                                        strides.data()),
               "tensor strides");
    SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), "tensor uid");
    SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align), "tensor alignment");
    if (by_value) {
        bool yes = true;
        SDPA_CHECK(cudnnBackendSetAttribute(*d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes), "tensor by value");
    }
    SDPA_CHECK(cudnnBackendFinalize(*d), "finalizing a tensor descriptor");
    return true;
}

enum : int64_t { kQ = 1, kK = 2, kV = 3, kO = 4, kScale = 5 };

// The plan of softmax(scale · q kᵀ) v for these sizes: the first of the heuristic's engine
// configurations that finalizes.
bool make_plan(cudnnHandle_t handle, int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, bool fp16, Plan &out) {
    Made m;
    const cudnnDataType_t dt = fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    cudnnBackendDescriptor_t q, k, v, o, scale, op, graph, heur;
    auto dense = [](int64_t b_, int64_t h_, int64_t s, int64_t d_) {
        return std::make_pair(std::vector<int64_t>{b_, h_, s, d_}, std::vector<int64_t>{h_ * s * d_, s * d_, d_, 1});
    };
    auto [dq, sq_] = dense(b, h, sq, d);
    auto [dk, sk_] = dense(b, h, sk, d);
    if (!tensor(m, &q, kQ, dt, dq, sq_, false) || !tensor(m, &k, kK, dt, dk, sk_, false) ||
        !tensor(m, &v, kV, dt, dk, sk_, false) || !tensor(m, &o, kO, dt, dq, sq_, false) ||
        !tensor(m, &scale, kScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, true))
        return false;
    SDPA_CHECK(m.create((cudnnBackendDescriptorType_t)CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &op)
                   ? CUDNN_STATUS_SUCCESS
                   : CUDNN_STATUS_NOT_SUPPORTED,
               "creating the SDPA operation (cuDNN >= 9.13.1 needed)");
    SDPA_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q), "Q");
    SDPA_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k), "K");
    SDPA_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v), "V");
    SDPA_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o), "O");
    SDPA_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &scale),
               "scale");
    SDPA_CHECK(cudnnBackendFinalize(op), "finalizing the SDPA operation");
    SDPA_CHECK(m.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED,
               "creating the operation graph");
    SDPA_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op), "graph ops");
    SDPA_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle), "graph handle");
    SDPA_CHECK(cudnnBackendFinalize(graph), "finalizing the operation graph");
    SDPA_CHECK(m.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED,
               "creating the heuristics");
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    SDPA_CHECK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph),
               "heuristics graph");
    SDPA_CHECK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode), "heuristics mode");
    SDPA_CHECK(cudnnBackendFinalize(heur), "finalizing the heuristics");
    int64_t n = 0;
    SDPA_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr),
               "counting engine configurations");
    if (n <= 0) {
        g_error = "no engine configuration for this attention";
        return false;
    }
    std::vector<cudnnBackendDescriptor_t> cfgs((size_t)n);
    for (auto &c : cfgs)
        SDPA_CHECK(m.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED,
                   "creating engine configurations");
    int64_t got = 0;
    SDPA_CHECK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfgs.data()),
               "reading engine configurations");
    for (int64_t i = 0; i < got; i++) {
        cudnnBackendDescriptor_t plan;
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) continue;
        if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle) ==
                CUDNN_STATUS_SUCCESS &&
            cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfgs[(size_t)i]) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
            int64_t ws = 0, cnt = 0;
            cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &cnt, &ws);
            out.plan = plan;
            out.workspace = ws;
            return true;
        }
        cudnnBackendDestroyDescriptor(plan);
    }
    g_error = "no engine configuration of this attention finalized";
    return false;
}

// Runs the plan on device pointers (q, k, v, o: BF16 or FP16, as planned) with \p workspace (at least plan.workspace bytes).
bool execute(cudnnHandle_t handle, const Plan &p, const void *q, const void *k, const void *v, void *o, float scale,
             void *workspace) {
    cudnnBackendDescriptor_t pack;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack) != CUDNN_STATUS_SUCCESS) {
        g_error = "creating the variant pack";
        return false;
    }
    int64_t uids[] = {kQ, kK, kV, kO, kScale};
    void *ptrs[] = {(void *)q, (void *)k, (void *)v, o, &scale};
    bool ok = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids) == CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, ptrs) ==
                  CUDNN_STATUS_SUCCESS &&
              cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace) ==
                  CUDNN_STATUS_SUCCESS &&
              cudnnBackendFinalize(pack) == CUDNN_STATUS_SUCCESS;
    if (!ok) g_error = "building the variant pack";
    if (ok && cudnnBackendExecute(handle, p.plan, pack) != CUDNN_STATUS_SUCCESS) {
        g_error = "cudnnBackendExecute";
        ok = false;
    }
    cudnnBackendDestroyDescriptor(pack);
    return ok;
}

}  // namespace sdpa
)SRC";

const char *const kExternSource = R"SRC(
namespace {
cudnnHandle_t g_handle = nullptr;
std::mutex g_lock;
std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int32_t>, sdpa::Plan> g_plans;
void *g_workspace = nullptr;
int64_t g_workspace_bytes = 0;
}  // namespace

// q, k, v, o: BF16 bits as uint16 (fp16 == 0) or FP16 (fp16 == 1), Halide dims (d, s, h, b), dense.
extern "C" int loom_cudnn_attention(halide_buffer_t *q, halide_buffer_t *k, halide_buffer_t *v, int32_t B, int32_t H,
                                    int32_t Sq, int32_t Sk, int32_t D, float scale, int32_t fp16, halide_buffer_t *o) {
    auto whole = [&](halide_buffer_t *t, int s) {
        set_dim(t, 0, 0, D);
        set_dim(t, 1, 0, s);
        set_dim(t, 2, 0, H);
        set_dim(t, 3, 0, B);
    };
    bool query = false;
    if (q->is_bounds_query()) query = true, whole(q, Sq);  // all of q, k and v, whatever part of o is asked for
    if (k->is_bounds_query()) query = true, whole(k, Sk);
    if (v->is_bounds_query()) query = true, whole(v, Sk);
    if (query || o->is_bounds_query()) return 0;
    for (int d = 0; d < 4; d++)
        if (o->dim[d].min != 0 || o->dim[d].extent != (d == 0 ? D : d == 1 ? Sq : d == 2 ? H : B))
            return fail("the output region must be the whole attention (compute the extern at root)", d);
    halide_buffer_t *const in[] = {q, k, v};
    const char *const names[] = {"Q", "K", "V"};
    for (halide_buffer_t *t : {q, k, v, o})
        if (t->dim[0].stride != 1 || t->dim[1].stride != D || t->dim[2].stride != (int64_t)D * t->dim[1].extent ||
            t->dim[3].stride != t->dim[2].stride * H)
            return fail("q, k, v and the output must be dense [b, h, s, d]", 0);
    if (int r = stage_on_device(in, names, 3, o)) return r;
    std::lock_guard<std::mutex> guard(g_lock);
    if (!g_handle && cudnnCreate(&g_handle) != CUDNN_STATUS_SUCCESS)
        return fail("cudnnCreate (is libcudnn.so.9 on LD_LIBRARY_PATH?)", 0);
    if (cudnnSetStream(g_handle, (cudaStream_t)stage_stream()) != CUDNN_STATUS_SUCCESS) return fail("cudnnSetStream", 0);
    auto key = std::make_tuple((int64_t)B, (int64_t)H, (int64_t)Sq, (int64_t)Sk, (int64_t)D, fp16);
    auto it = g_plans.find(key);
    if (it == g_plans.end()) {
        sdpa::Plan p;
        if (!sdpa::make_plan(g_handle, B, H, Sq, Sk, D, fp16 != 0, p)) return fail(sdpa::g_error, (int)cudnnGetVersion());
        it = g_plans.emplace(key, p).first;
    }
    if (it->second.workspace > g_workspace_bytes) {
        if (g_workspace) cudaFree(g_workspace);
        g_workspace = nullptr;
        if (cudaMalloc(&g_workspace, (size_t)it->second.workspace) != cudaSuccess) return fail("allocating the workspace", 0);
        g_workspace_bytes = it->second.workspace;
    }
    if (!sdpa::execute(g_handle, it->second, (const void *)(uintptr_t)q->device, (const void *)(uintptr_t)k->device,
                       (const void *)(uintptr_t)v->device, (void *)(uintptr_t)o->device, scale, g_workspace))
        return fail(sdpa::g_error, 0);
    o->set_device_dirty(true);
    return 0;
}
)SRC";

}  // namespace

std::string cudnn_attention_source() { return extern_stage_prelude(kCudnnAttention) + kPlanSource + kExternSource; }

}  // namespace loom
