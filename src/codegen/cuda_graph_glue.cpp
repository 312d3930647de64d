#include "codegen/cuda_graph_glue.h"

namespace loom {

namespace {

const char *kSource = R"GLUE(
// --- whole-model CUDA graphs (codegen/cuda_graph_glue.h) ---
typedef unsigned long long CUdeviceptr_;
typedef void *CUstream_;
typedef void *CUgraph_;
typedef void *CUgraphExec_;
constexpr int kCaptureThreadLocal = 1, kCaptureRelaxed = 2;  // CUstreamCaptureMode
constexpr unsigned kStreamNonBlocking = 1;
// A model whose pointers change after a capture recaptures at most this many times, then runs
// directly (a capture costs more than a direct run).
constexpr int kMaxRecaptures = 4;

typedef void *CUgraphNode_;
constexpr int kNodeMemset = 2;  // CU_GRAPH_NODE_TYPE_MEMSET
struct MemsetParams_ {          // CUDA_MEMSET_NODE_PARAMS
    CUdeviceptr_ dst;
    size_t pitch;
    unsigned value, element_size;
    size_t width, height;
};

struct GraphApi {
    CUresult_ (*mem_alloc)(CUdeviceptr_ *, size_t) = nullptr;
    CUresult_ (*mem_free)(CUdeviceptr_) = nullptr;
    CUresult_ (*stream_create)(CUstream_ *, unsigned) = nullptr;
    CUresult_ (*begin_capture)(CUstream_, int) = nullptr;
    CUresult_ (*end_capture)(CUstream_, CUgraph_ *) = nullptr;
    CUresult_ (*exchange_mode)(int *) = nullptr;
    CUresult_ (*graph_nodes)(CUgraph_, void **, size_t *) = nullptr;
    CUresult_ (*instantiate)(CUgraphExec_ *, CUgraph_, unsigned long long) = nullptr;
    CUresult_ (*launch)(CUgraphExec_, CUstream_) = nullptr;
    CUresult_ (*exec_destroy)(CUgraphExec_) = nullptr;
    CUresult_ (*graph_destroy)(CUgraph_) = nullptr;
    CUresult_ (*push)(CUcontext_) = nullptr;
    CUresult_ (*pop)(CUcontext_ *) = nullptr;
    CUresult_ (*ctx_synchronize)() = nullptr;
    bool ok = false;  // every entry point found (a driver without graphs: direct runs only)
    // For hoist_library_memsets; without them graphs keep the captured order.
    CUresult_ (*node_type)(CUgraphNode_, int *) = nullptr;
    CUresult_ (*memset_params)(CUgraphNode_, MemsetParams_ *) = nullptr;
    CUresult_ (*set_memset_params)(CUgraphNode_, const MemsetParams_ *) = nullptr;
    CUresult_ (*destroy_node)(CUgraphNode_) = nullptr;
    CUresult_ (*edges)(CUgraph_, CUgraphNode_ *, CUgraphNode_ *, size_t *) = nullptr;
    CUresult_ (*add_edges)(CUgraph_, const CUgraphNode_ *, const CUgraphNode_ *, size_t) = nullptr;
    CUresult_ (*remove_edges)(CUgraph_, const CUgraphNode_ *, const CUgraphNode_ *, size_t) = nullptr;
} g_api;

struct GraphState {
    CUgraphExec_ exec = nullptr;
    const void *key[kNumIn + kNumOut + 1] = {};  // the pointers (and context) of the last call
    int same = 0;                                 // consecutive calls with the last call's key
    int recaptures = 0;
    bool enabled = true;
    const char *status = "direct: not yet called twice with the same pointers";
    int hoisted = 0;  // library memsets of the graph merged into one off its chain of kernels
    char status_text[80] = "";
};

std::mutex g_capture_lock;           // one capture at a time: they share the capture stream
CUstream_ g_capture_stream = nullptr;
CUcontext_ g_capture_ctx = nullptr;  // the context the capture stream belongs to

// What the cuMemAlloc/cuMemFree hooks share. Never destroyed: Halide's runtime frees its cached
// device allocations through the hooks from its own exit-time destructor, which can run after this
// file's static objects are gone (a std::set destroyed first was read and written after free:
// heap corruption at exit, found by ASAN on MobileNetV2).
struct GraphMemory {
    std::mutex lock;                     // guards the three below
    std::set<CUdeviceptr_> allocated;    // allocated during a capture: graphs may use it
    std::vector<CUdeviceptr_> deferred;  // graph memory Halide freed while graphs were alive
    int live_graphs = 0;
};
GraphMemory &graph_memory() {
    static GraphMemory *m = new GraphMemory;
    return *m;
}

template <typename F>
CUresult_ relaxed(F call) {  // \p call made legal inside a thread-local capture
    int mode = kCaptureRelaxed;
    g_api.exchange_mode(&mode);
    CUresult_ r = call();
    g_api.exchange_mode(&mode);
    return r;
}

// Halide's cuMemAlloc: memory allocated while capturing belongs to graphs from then on.
CUresult_ graph_mem_alloc(CUdeviceptr_ *p, size_t n) {
    if (!t_capture) return g_api.mem_alloc(p, n);
    CUresult_ r = relaxed([&] { return g_api.mem_alloc(p, n); });
    if (r == 0) {
        GraphMemory &gm = graph_memory();
        std::lock_guard<std::mutex> guard(gm.lock);
        gm.allocated.insert(*p);
    }
    return r;
}

// Halide's cuMemFree: graph memory stays allocated while any graph is alive or being captured
// (Halide trims its free list mid-run: MobileNetV2's capture freed buffers its earlier kernels
// had used, and the replay faulted).
CUresult_ graph_mem_free(CUdeviceptr_ p) {
    {
        GraphMemory &gm = graph_memory();
        std::lock_guard<std::mutex> guard(gm.lock);
        if (gm.allocated.count(p)) {
            if (gm.live_graphs > 0 || t_capture) {
                gm.deferred.push_back(p);
                return 0;
            }
            gm.allocated.erase(p);
        }
    }
    return t_capture ? relaxed([&] { return g_api.mem_free(p); }) : g_api.mem_free(p);
}

void *get_library_symbol(void *lib, const char *name) {
    if (g_api.ok && strcmp(name, "cuMemAlloc_v2") == 0) return (void *)&graph_mem_alloc;
    if (g_api.ok && strcmp(name, "cuMemFree_v2") == 0) return (void *)&graph_mem_free;
    return halide_default_get_library_symbol(lib, name);
}

int get_stream(void *, void *, void **stream) {
    *stream = t_capture;  // null: the legacy default stream
    return 0;
}

// Loads the driver's graph API and installs Halide's hooks, once (before Halide loads libcuda).
void cuda_graph_setup() {
    static std::once_flag once;
    std::call_once(once, [] {
        {
            std::lock_guard<std::mutex> guard(g_ctx_lock);
            if (!load_driver()) return;
        }
        auto sym = [](const char *n) { return dlsym(g_libcuda, n); };
        g_api.mem_alloc = (CUresult_(*)(CUdeviceptr_ *, size_t))sym("cuMemAlloc_v2");
        g_api.mem_free = (CUresult_(*)(CUdeviceptr_))sym("cuMemFree_v2");
        g_api.stream_create = (CUresult_(*)(CUstream_ *, unsigned))sym("cuStreamCreate");
        g_api.begin_capture = (CUresult_(*)(CUstream_, int))sym("cuStreamBeginCapture_v2");
        g_api.end_capture = (CUresult_(*)(CUstream_, CUgraph_ *))sym("cuStreamEndCapture");
        g_api.exchange_mode = (CUresult_(*)(int *))sym("cuThreadExchangeStreamCaptureMode");
        g_api.graph_nodes = (CUresult_(*)(CUgraph_, void **, size_t *))sym("cuGraphGetNodes");
        g_api.instantiate = (CUresult_(*)(CUgraphExec_ *, CUgraph_, unsigned long long))sym("cuGraphInstantiateWithFlags");
        g_api.launch = (CUresult_(*)(CUgraphExec_, CUstream_))sym("cuGraphLaunch");
        g_api.exec_destroy = (CUresult_(*)(CUgraphExec_))sym("cuGraphExecDestroy");
        g_api.graph_destroy = (CUresult_(*)(CUgraph_))sym("cuGraphDestroy");
        g_api.push = (CUresult_(*)(CUcontext_))sym("cuCtxPushCurrent_v2");
        g_api.pop = (CUresult_(*)(CUcontext_ *))sym("cuCtxPopCurrent_v2");
        g_api.ctx_synchronize = (CUresult_(*)())sym("cuCtxSynchronize");
        g_api.node_type = (CUresult_(*)(CUgraphNode_, int *))sym("cuGraphNodeGetType");
        g_api.memset_params = (CUresult_(*)(CUgraphNode_, MemsetParams_ *))sym("cuGraphMemsetNodeGetParams");
        g_api.set_memset_params = (CUresult_(*)(CUgraphNode_, const MemsetParams_ *))sym("cuGraphMemsetNodeSetParams");
        g_api.destroy_node = (CUresult_(*)(CUgraphNode_))sym("cuGraphDestroyNode");
        g_api.edges = (CUresult_(*)(CUgraph_, CUgraphNode_ *, CUgraphNode_ *, size_t *))sym("cuGraphGetEdges");
        g_api.add_edges =
            (CUresult_(*)(CUgraph_, const CUgraphNode_ *, const CUgraphNode_ *, size_t))sym("cuGraphAddDependencies");
        g_api.remove_edges =
            (CUresult_(*)(CUgraph_, const CUgraphNode_ *, const CUgraphNode_ *, size_t))sym("cuGraphRemoveDependencies");
        g_api.ok = g_api.mem_alloc && g_api.mem_free && g_api.stream_create && g_api.begin_capture &&
                   g_api.end_capture && g_api.exchange_mode && g_api.graph_nodes && g_api.instantiate &&
                   g_api.launch && g_api.exec_destroy && g_api.graph_destroy && g_api.push && g_api.pop &&
                   g_api.ctx_synchronize;
    });
    halide_set_cuda_get_stream(get_stream);
    halide_set_custom_get_library_symbol(get_library_symbol);
}

GraphState *cuda_graph_new() {
    GraphState *g = new (std::nothrow) GraphState;
    if (g) {
        const char *env = getenv("LOOM_CUDA_GRAPHS");
        g->enabled = g_api.ok && !(env && strcmp(env, "0") == 0);
        if (!g->enabled) g->status = g_api.ok ? "off (LOOM_CUDA_GRAPHS=0)" : "off (no CUDA driver with the graph API)";
    }
    return g;
}

// Frees the graph memory Halide gave back while graphs were alive, once none is (\p dropped: one
// graph has just been destroyed).
void release_deferred(bool dropped) {
    std::vector<CUdeviceptr_> release;
    {
        GraphMemory &gm = graph_memory();
        std::lock_guard<std::mutex> guard(gm.lock);
        if (dropped) gm.live_graphs--;
        if (gm.live_graphs == 0) {
            release.swap(gm.deferred);
            for (CUdeviceptr_ p : release) gm.allocated.erase(p);
        }
    }
    for (CUdeviceptr_ p : release) g_api.mem_free(p);
}

void cuda_graph_drop(GraphState &g) {
    if (!g.exec) return;
    g_api.exec_destroy(g.exec);
    g.exec = nullptr;
    release_deferred(true);
}

// m_set_cuda_graphs: graphs off (the current one dropped), or on afresh (recapture budget reset)
// where the driver has the API; returns the previous setting.
int cuda_graph_enable(GraphState &g, bool on) {
    int was = g.enabled;
    if (!on) {
        cuda_graph_drop(g);
        g.enabled = false;
        g.status = "off (set_cuda_graphs)";
    } else if (!was && g_api.ok) {
        g = GraphState();
    }
    return was;
}

// The memset nodes of \p graph that zero a private cuBLASLt workspace slot
// (loom_cublaslt_private_workspace: only that call's kernel reads it) become one memset of the
// range they span, a root of the graph, which every such kernel waits for; each kernel's other
// predecessors are those of its memset. Hopper's TF32/BF16 GEMMs then follow the kernel before
// them directly instead of through a memset node (one each, on the critical path), and the one
// memset runs beside the first kernels. The slots of one capture are contiguous and its own
// (captures are serialized), so the range holds no other graph's. Returns how many memsets were
// merged: 0 when the driver or the artifact lacks the means, none is found, or two follow each
// other; -1 on a failed edit (the capture is then run directly).
int hoist_library_memsets(CUgraph_ graph) {
    if (!loom_cublaslt_private_workspace || !g_api.node_type || !g_api.memset_params || !g_api.set_memset_params ||
        !g_api.edges || !g_api.add_edges || !g_api.remove_edges || !g_api.destroy_node)
        return 0;
    size_t n = 0;
    if (g_api.edges(graph, nullptr, nullptr, &n) != 0 || n == 0) return 0;
    std::vector<CUgraphNode_> from(n), to(n);
    if (g_api.edges(graph, from.data(), to.data(), &n) != 0) return 0;
    size_t count = 0;
    if (g_api.graph_nodes(graph, nullptr, &count) != 0) return 0;
    std::vector<CUgraphNode_> nodes(count), memsets;
    if (g_api.graph_nodes(graph, nodes.data(), &count) != 0) return 0;
    CUdeviceptr_ lo = 0, hi = 0;
    for (CUgraphNode_ m : nodes) {
        int type = -1;
        MemsetParams_ p;
        if (g_api.node_type(m, &type) != 0 || type != kNodeMemset || g_api.memset_params(m, &p) != 0 ||
            p.height != 1 || p.value != 0)
            continue;
        const size_t bytes = p.width * p.element_size;
        if (!loom_cublaslt_private_workspace((uint64_t)p.dst, bytes)) continue;
        if (memsets.empty() || p.dst < lo) lo = p.dst;
        if (memsets.empty() || p.dst + bytes > hi) hi = p.dst + bytes;
        memsets.push_back(m);
    }
    // Two such memsets in a row (none seen so far) stay where they are: a merged one's
    // predecessors would have to be found through the other.
    std::set<CUgraphNode_> merged(memsets.begin(), memsets.end());
    for (size_t e = 0; e < n; e++)
        if (merged.count(from[e]) && merged.count(to[e])) return 0;
    if (memsets.empty()) return 0;
    std::set<std::pair<CUgraphNode_, CUgraphNode_>> edge_set;
    for (size_t e = 0; e < n; e++) edge_set.insert({from[e], to[e]});
    CUgraphNode_ keep = memsets[0];
    bool ok = true;
    for (CUgraphNode_ m : memsets) {
        std::vector<CUgraphNode_> preds, succs;
        for (size_t k = 0; k < n; k++) {
            if (to[k] == m) preds.push_back(from[k]);
            if (from[k] == m) succs.push_back(to[k]);
        }
        for (CUgraphNode_ su : succs) {
            for (CUgraphNode_ pr : preds)
                if (edge_set.insert({pr, su}).second) ok = ok && g_api.add_edges(graph, &pr, &su, 1) == 0;
            if (m != keep && edge_set.insert({keep, su}).second) ok = ok && g_api.add_edges(graph, &keep, &su, 1) == 0;
        }
        if (m == keep)
            for (CUgraphNode_ pr : preds) ok = ok && g_api.remove_edges(graph, &pr, &keep, 1) == 0;
        else
            ok = ok && g_api.destroy_node(m) == 0;  // its edges go with it
        if (!ok) return -1;
    }
    MemsetParams_ all = {lo, 0, 0, 1, (size_t)(hi - lo), 1};
    return g_api.set_memset_params(keep, &all) == 0 ? (int)memsets.size() : -1;
}

// Captures one run of \p m on the capture stream into g.exec; false (and no graph) when the run
// cannot be captured or holds fewer than two nodes.
bool cuda_graph_capture(Model &m, GraphState &g, const void *const *in, void *const *out, CUcontext_ ctx) {
    std::lock_guard<std::mutex> guard(g_capture_lock);
    if (g_capture_stream && g_capture_ctx != ctx) {
        g.status = "direct: the capture stream belongs to another CUDA context";
        return false;
    }
    if (g_api.push(ctx) != 0) {
        g.status = "direct: the CUDA context could not be made current";
        return false;
    }
    CUcontext_ popped = nullptr;
    if (!g_capture_stream) {
        if (g_api.stream_create(&g_capture_stream, kStreamNonBlocking) != 0) g_capture_stream = nullptr;
        g_capture_ctx = ctx;
    }
    // Earlier direct runs finish first: Halide may cuMemFree their buffers during the capture.
    bool ok = g_capture_stream && g_api.ctx_synchronize() == 0 &&
              g_api.begin_capture(g_capture_stream, kCaptureThreadLocal) == 0;
    CUgraph_ graph = nullptr;
    size_t nodes = 0;
    if (ok) {
        t_capture = g_capture_stream;
        int r = run_pipeline_device(m, in, out);
        t_capture = nullptr;
        ok = g_api.end_capture(g_capture_stream, &graph) == 0 && r == 0 && graph;
        ok = ok && g_api.graph_nodes(graph, nullptr, &nodes) == 0 && nodes >= 2;
        ok = ok && (g.hoisted = hoist_library_memsets(graph)) >= 0;
        ok = ok && g_api.instantiate(&g.exec, graph, 0) == 0;
        if (graph) g_api.graph_destroy(graph);
        g_error[0] = 0;  // a failed capture is not the call's error: the call runs directly
    }
    g_api.pop(&popped);
    if (!ok) {
        g.exec = nullptr;
        release_deferred(false);
        g.status = nodes == 1 ? "direct: one kernel (a graph gains nothing)" : "direct: the run could not be captured";
        return false;
    }
    GraphMemory &gm = graph_memory();
    std::lock_guard<std::mutex> mem(gm.lock);
    gm.live_graphs++;
    return true;
}

// Serves a run_device call from \p m's graph when it can (capturing it on the second call in a row
// with the same pointers): true with the call's result in *r, false to run directly.
bool cuda_graph_run(Model &m, const void *const *in, void *const *out, int *r) {
    GraphState &g = *m.graph;
    if (!g.enabled) return false;
    CUcontext_ ctx = nullptr;
    if (acquire_context(nullptr, &ctx, true) != 0 || !ctx) return false;
    const void *key[kNumIn + kNumOut + 1];
    for (int k = 0; k < kNumIn; k++) key[k] = in[k];
    for (int k = 0; k < kNumOut; k++) key[kNumIn + k] = out[k];
    key[kNumIn + kNumOut] = ctx;
    if (memcmp(key, g.key, sizeof key) != 0) {
        memcpy(g.key, key, sizeof key);
        g.same = 0;
        if (g.exec) {
            cuda_graph_drop(g);
            if (++g.recaptures > kMaxRecaptures) {
                g.enabled = false;
                g.status = "direct: the pointers keep changing";
                return false;
            }
        }
    } else {
        g.same++;
    }
    if (!g.exec) {
        if (g.same < 1) return false;
        if (!cuda_graph_capture(m, g, in, out, ctx)) {
            g.enabled = false;
            return false;
        }
        g.status = "graph";
        if (g.hoisted > 0) {
            snprintf(g.status_text, sizeof g.status_text, "graph (%d library memsets merged off the kernel chain)",
                     g.hoisted);
            g.status = g.status_text;
        }
    }
    CUcontext_ popped = nullptr;
    bool launched = g_api.push(ctx) == 0;
    launched = launched && g_api.launch(g.exec, nullptr) == 0;
    g_api.pop(&popped);
    if (!launched) {
        cuda_graph_drop(g);
        g.enabled = false;
        g.status = "direct: a graph launch failed";
        return false;
    }
    *r = 0;
    return true;
}

void cuda_graph_delete(GraphState *g) {
    if (!g) return;
    cuda_graph_drop(*g);
    delete g;
}
)GLUE";

}  // namespace

std::string cuda_graph_glue_source() { return kSource; }

}  // namespace loom
