#include "codegen/runtime_glue.h"

#include <sstream>

#include "codegen/cuda_graph_glue.h"
#include "support/error.h"

namespace loom {

namespace {

std::string shape_list(const Shape &s) {
    std::ostringstream os;
    os << "{";
    for (size_t k = 0; k < s.size(); k++) os << (k ? ", " : "") << s[k] << "LL";
    if (s.empty()) os << "0";
    os << "}";
    return os.str();
}

// Static tables of one side (inputs or outputs) of the model, as C++ source.
void emit_tables(std::ostringstream &os, const char *side, const std::vector<std::string> &names,
                 const std::vector<Shape> &shapes, const std::vector<DType> &dtypes) {
    size_t n = names.size();
    for (size_t k = 0; k < n; k++)
        os << "const int64_t k_" << side << "_shape_" << k << "[] = " << shape_list(shapes[k]) << ";\n";
    os << "const char *const k_" << side << "_names[] = {";
    for (size_t k = 0; k < n; k++) os << (k ? ", " : "") << "\"" << names[k] << "\"";
    os << (n ? "" : "nullptr") << "};\n";
    os << "const int k_" << side << "_rank[] = {";
    for (size_t k = 0; k < n; k++) os << (k ? ", " : "") << shapes[k].size();
    os << (n ? "" : "0") << "};\n";
    os << "const int64_t *const k_" << side << "_shape[] = {";
    for (size_t k = 0; k < n; k++) os << (k ? ", " : "") << "k_" << side << "_shape_" << k;
    os << (n ? "" : "nullptr") << "};\n";
    os << "const halide_type_t k_" << side << "_type[] = {";
    for (size_t k = 0; k < n; k++) os << (k ? ", " : "") << "halide_type_t(" << glue_halide_type(dtypes[k]) << ")";
    os << (n ? "" : "halide_type_t()") << "};\n";
    os << "const char *const k_" << side << "_dtype[] = {";
    for (size_t k = 0; k < n; k++) os << (k ? ", " : "") << "\"" << dtype_name(dtypes[k]) << "\"";
    os << (n ? "" : "nullptr") << "};\n";
}

// The model-independent part of the glue. NAME and HALIDE_FN are macros defined above it.
const char *kGlueBody = R"GLUE(
#define LOOM_CAT2(a, b) a##b
#define LOOM_CAT(a, b) LOOM_CAT2(a, b)
#define LOOM_API(suffix) LOOM_CAT(LOOM_NAME, suffix)

extern "C" int LOOM_CAT(LOOM_HALIDE_FN, _argv)(void **args);

namespace {

constexpr int kMaxRank = 16;
char g_error[4096] = "";

#if !LOOM_CUDA
// A Halide parallel loop as an OpenMP parallel for, one task a chunk (set_threading(1)): the
// application's OpenMP team runs the model instead of a second pool of threads (as
// codegen/openmp_threading.h does for JIT runs). Returns the first nonzero task result.
int openmp_do_par_for(void *ctx, halide_task_t task, int min, int extent, uint8_t *closure) {
    int first_error = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int x = min; x < min + extent; x++) {
        if (__atomic_load_n(&first_error, __ATOMIC_RELAXED) != 0) continue;  // a task failed: skip the rest
        int r = task(ctx, x, closure);
        int none = 0;
        if (r != 0) __atomic_compare_exchange_n(&first_error, &none, r, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return first_error;
}
#endif

#if LOOM_CUDA
// The stream this thread is capturing a model run on (null: not capturing); see cuda_graph_glue.h.
thread_local void *t_capture = nullptr;
struct GraphState;
#endif

void record_error(void *, const char *msg) {
    snprintf(g_error, sizeof g_error, "%s", msg);
#if LOOM_CUDA
    if (t_capture) return;  // a failed capture is retried as a direct run, which reports for itself
#endif
    fprintf(stderr, "loom artifact %s: %s\n", LOOM_STR(LOOM_NAME), msg);
}

struct Model {
    halide_dimension_t dims[kNumIn + kNumOut + 1][kMaxRank];
    halide_buffer_t bufs[kNumIn + kNumOut + 1];
    void *args[kNumIn + kNumOut + 1];
#if LOOM_CUDA
    GraphState *graph = nullptr;
#endif
};

void init_buffer(halide_buffer_t &b, halide_dimension_t *d, halide_type_t t, int rank, const int64_t *shape) {
    memset(&b, 0, sizeof b);
    b.type = t;
    b.dimensions = rank;
    b.dim = d;
    int32_t stride = 1;
    for (int k = 0; k < rank; k++) {  // Halide's dim 0 is the innermost (last) axis
        int64_t e = shape[rank - 1 - k];
        d[k].min = 0;
        d[k].extent = (int32_t)e;
        d[k].stride = stride;
        d[k].flags = 0;
        stride *= (int32_t)e;
    }
}

// The graph's name of buffer \p k (inputs first, then outputs), for messages.
const char *buffer_name(int k) { return k < kNumIn ? k_in_names[k] : k_out_names[k - kNumIn]; }

// CUDA artifacts declare their buffers 16-byte aligned (LowerOptions::buffer_alignment), and their
// kernels load 16 bytes at a time.
constexpr uintptr_t kAlign = 16;
// Host pointers handed to Halide: the widest vector (AVX-512) Halide's host code may move aligned.
constexpr uintptr_t kHostAlign = 64;

// 0, or -1 with g_error naming the first buffer whose pointer is null or, for \p device pointers,
// off the kAlign grid, and what would be valid.
int check_pointers(const char *fn, const void *const *in, void *const *out, bool device) {
    for (int k = 0; k < kNumIn + kNumOut; k++) {
        const void *const *side = k < kNumIn ? in : (const void *const *)out;
        const void *p = side ? side[k < kNumIn ? k : k - kNumIn] : nullptr;
        const char *kind = k < kNumIn ? "input" : "output";
        if (!p)
            snprintf(g_error, sizeof g_error, "%s_%s: %s %d '%s' is a null pointer; pass %d input and %d output "
                     "pointers, in graph order", LOOM_STR(LOOM_NAME), fn, kind, k < kNumIn ? k : k - kNumIn,
                     buffer_name(k), kNumIn, kNumOut);
        else if (device && (uintptr_t)p % kAlign != 0)
            snprintf(g_error, sizeof g_error,
                     "%s_%s: %s '%s' is at device address %p, which is not %d-byte aligned (the kernels access "
                     "memory 16 bytes at a time); pass memory that starts at a cudaMalloc'd address, e.g. a "
                     "contiguous copy of a tensor slice", LOOM_STR(LOOM_NAME), fn, kind, buffer_name(k), p, (int)kAlign);
        else
            continue;
        fprintf(stderr, "loom artifact %s: %s\n", LOOM_STR(LOOM_NAME), g_error);
        return -1;
    }
    return 0;
}

// \p h as a Model, or null with g_error saying what to pass (\p fn: the API call, for the message).
Model *model_of(void *h, const char *fn) {
    if (!h)
        snprintf(g_error, sizeof g_error, "%s_%s: the model handle is NULL; pass what %s_create returned",
                 LOOM_STR(LOOM_NAME), fn, LOOM_STR(LOOM_NAME));
    return (Model *)h;
}

size_t byte_size(const halide_buffer_t &b) {
    size_t n = b.type.bytes();
    for (int k = 0; k < b.dimensions; k++) n *= (size_t)b.dim[k].extent;
    return n;
}

void reset(Model &m) {
    for (int k = 0; k < kNumIn + kNumOut; k++) {
        halide_buffer_t &b = m.bufs[k];
        b.host = nullptr;
        b.device = 0;
        b.device_interface = nullptr;
        b.flags = 0;
    }
}

#if LOOM_CUDA
// --- the CUDA context the model runs in: the application's, not one of Halide's own ---
typedef int CUresult_;
typedef void *CUcontext_;
typedef int CUdevice_;
CUresult_ (*p_cuInit)(unsigned) = nullptr;
CUresult_ (*p_cuCtxGetCurrent)(CUcontext_ *) = nullptr;
CUresult_ (*p_cuDeviceGet)(CUdevice_ *, int) = nullptr;
CUresult_ (*p_cuDevicePrimaryCtxRetain)(CUcontext_ *, CUdevice_) = nullptr;
CUcontext_ g_primary = nullptr;
CUcontext_ g_last = nullptr;
std::mutex g_ctx_lock;
void *g_libcuda = nullptr;

bool load_driver() {
    if (p_cuCtxGetCurrent) return true;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return false;
    g_libcuda = lib;
    p_cuInit = (CUresult_(*)(unsigned))dlsym(lib, "cuInit");
    p_cuDeviceGet = (CUresult_(*)(CUdevice_ *, int))dlsym(lib, "cuDeviceGet");
    p_cuDevicePrimaryCtxRetain = (CUresult_(*)(CUcontext_ *, CUdevice_))dlsym(lib, "cuDevicePrimaryCtxRetain");
    p_cuCtxGetCurrent = (CUresult_(*)(CUcontext_ *))dlsym(lib, "cuCtxGetCurrent");
    return p_cuInit && p_cuDeviceGet && p_cuDevicePrimaryCtxRetain && p_cuCtxGetCurrent;
}

// Halide calls this around every device operation and pushes/pops the context it returns. Returning
// the caller's current context (else the primary context of Halide's chosen device, which is what
// cudaMalloc and cudaFree(0) use) makes the model share memory with the application.
int acquire_context(void *uc, void **ctx, bool create) {
    std::lock_guard<std::mutex> guard(g_ctx_lock);
    if (!load_driver()) {
        record_error(uc, "cannot load libcuda.so.1");
        return -1;
    }
    CUcontext_ c = nullptr;
    if (p_cuCtxGetCurrent(&c) != 0) c = nullptr;
    if (!c) {
        if (!g_primary) {
            if (!create) {
                *ctx = nullptr;
                return 0;
            }
            CUdevice_ dev = 0;
            int ordinal = halide_get_gpu_device(uc);
            if (p_cuInit(0) != 0 || p_cuDeviceGet(&dev, ordinal < 0 ? 0 : ordinal) != 0 ||
                p_cuDevicePrimaryCtxRetain(&g_primary, dev) != 0) {
                record_error(uc, "cannot retain the primary CUDA context");
                return -1;
            }
        }
        c = g_primary;
    }
    g_last = c;
    *ctx = c;
    return 0;
}

int release_context(void *) { return 0; }

// One run of the pipeline on device pointers (Halide enqueues its kernels on get_stream's stream).
int run_pipeline_device(Model &m, const void *const *in, void *const *out) {
    reset(m);
    int r = 0;
    for (int k = 0; r == 0 && k < kNumIn + kNumOut; k++) {
        const void *p = k < kNumIn ? in[k] : out[k - kNumIn];
        r = halide_cuda_wrap_device_ptr(nullptr, &m.bufs[k], (uint64_t)(uintptr_t)p);
    }
    if (r == 0) r = LOOM_CAT(LOOM_HALIDE_FN, _argv)(m.args);
    for (int k = 0; k < kNumIn + kNumOut; k++)
        if (m.bufs[k].device) halide_cuda_detach_device_ptr(nullptr, &m.bufs[k]);
    reset(m);
    return r;
}
)GLUE";

// The C API; after the graph part (cuda_graph_glue.h) for CUDA artifacts.
const char *kGlueApi = R"GLUE(
#endif

}  // namespace

extern "C" {

int LOOM_API(_num_inputs)(void) { return kNumIn; }
int LOOM_API(_num_outputs)(void) { return kNumOut; }
const char *LOOM_API(_input_name)(int k) { return k >= 0 && k < kNumIn ? k_in_names[k] : nullptr; }
const char *LOOM_API(_output_name)(int k) { return k >= 0 && k < kNumOut ? k_out_names[k] : nullptr; }
int LOOM_API(_input_rank)(int k) { return k >= 0 && k < kNumIn ? k_in_rank[k] : -1; }
int LOOM_API(_output_rank)(int k) { return k >= 0 && k < kNumOut ? k_out_rank[k] : -1; }
const int64_t *LOOM_API(_input_shape)(int k) { return k >= 0 && k < kNumIn ? k_in_shape[k] : nullptr; }
const int64_t *LOOM_API(_output_shape)(int k) { return k >= 0 && k < kNumOut ? k_out_shape[k] : nullptr; }
const char *LOOM_API(_input_dtype)(int k) { return k >= 0 && k < kNumIn ? k_in_dtype[k] : nullptr; }
const char *LOOM_API(_output_dtype)(int k) { return k >= 0 && k < kNumOut ? k_out_dtype[k] : nullptr; }
const char *LOOM_API(_target)(void) { return LOOM_TARGET; }
const char *LOOM_API(_last_error)(void) { return g_error; }

void *LOOM_API(_create)(void) {
    halide_set_error_handler(record_error);
#if LOOM_CUDA
    halide_set_cuda_acquire_context(acquire_context);
    halide_set_cuda_release_context(release_context);
    cuda_graph_setup();
    // Intermediate device buffers go back to Halide's free list instead of cuMemFree, which
    // synchronises the device: a network freeing dozens of buffers a run otherwise waits on the
    // GPU at each (LOOM_REUSE_DEVICE_ALLOCATIONS=0 turns it off).
    const char *reuse = getenv("LOOM_REUSE_DEVICE_ALLOCATIONS");
    if (!reuse || strcmp(reuse, "0") != 0) halide_reuse_device_allocations(nullptr, true);
#endif
    Model *m = new (std::nothrow) Model;
    if (!m) return nullptr;
#if LOOM_CUDA
    if (!(m->graph = cuda_graph_new())) {
        delete m;
        return nullptr;
    }
#endif
    for (int k = 0; k < kNumIn; k++)
        init_buffer(m->bufs[k], m->dims[k], k_in_type[k], k_in_rank[k], k_in_shape[k]);
    for (int k = 0; k < kNumOut; k++)
        init_buffer(m->bufs[kNumIn + k], m->dims[kNumIn + k], k_out_type[k], k_out_rank[k], k_out_shape[k]);
    for (int k = 0; k < kNumIn + kNumOut; k++) m->args[k] = &m->bufs[k];
    return m;
}

void LOOM_API(_destroy)(void *h) {
    if (!h) return;
#if LOOM_CUDA
    cuda_graph_delete(((Model *)h)->graph);
#endif
    delete (Model *)h;
}

int LOOM_API(_set_cuda_graphs)(void *h, int on) {
    if (!model_of(h, "set_cuda_graphs")) return -1;
#if LOOM_CUDA
    return cuda_graph_enable(*((Model *)h)->graph, on != 0);
#else
    (void)on;
    return 0;
#endif
}

int LOOM_API(_set_threading)(int openmp) {
#if LOOM_CUDA
    if (!openmp) return 0;
    snprintf(g_error, sizeof g_error, "%s_set_threading: OpenMP threading is for host artifacts; a CUDA model's "
             "loops run on the GPU (pass 0)", LOOM_STR(LOOM_NAME));
    return -1;
#else
    // Halide's own launcher, kept to switch back (the runtime has no "default" to restore).
    static halide_do_par_for_t halide_pool = nullptr;
    static std::mutex lock;
    std::lock_guard<std::mutex> guard(lock);
    if (openmp) {
        halide_do_par_for_t before = halide_set_custom_do_par_for(openmp_do_par_for);
        if (before == openmp_do_par_for) return 1;
        halide_pool = before;
        return 0;
    }
    if (!halide_pool) return 0;  // never switched to OpenMP
    return halide_set_custom_do_par_for(halide_pool) == openmp_do_par_for ? 1 : 0;
#endif
}

const char *LOOM_API(_cuda_graph_status)(void *h) {
    if (!model_of(h, "cuda_graph_status")) return g_error;
#if LOOM_CUDA
    return ((Model *)h)->graph->status;
#else
    return "off (no device)";
#endif
}

int LOOM_API(_run_host)(void *h, const void *const *in, void *const *out) {
    g_error[0] = 0;
    if (!model_of(h, "run_host")) return -1;
    Model &m = *(Model *)h;
    if (check_pointers("run_host", in, out, false)) return -1;
    reset(m);
    for (int k = 0; k < kNumIn; k++) {
        m.bufs[k].host = (uint8_t *)in[k];
        m.bufs[k].flags = 1;  // host dirty: Halide copies it to the device if it needs it there
    }
    for (int k = 0; k < kNumOut; k++) m.bufs[kNumIn + k].host = (uint8_t *)out[k];
    void *staged[kNumIn + kNumOut + 1] = {};
    // Halide rejects a host pointer below the declared alignment, and host code may store whole
    // 64-byte vectors with aligned instructions (a host sum_prologue's output 16 bytes off a
    // 64-byte boundary crashed in vmovaps); the application's pointers need not be aligned (a
    // slice of a bigger array): such a buffer goes through an aligned copy.
    for (int k = 0; k < kNumIn + kNumOut; k++) {
        uint8_t *p = m.bufs[k].host;
        if ((uintptr_t)p % kHostAlign == 0) continue;
        size_t n = byte_size(m.bufs[k]);
        staged[k] = aligned_alloc(kHostAlign, (n + kHostAlign - 1) / kHostAlign * kHostAlign);
        if (!staged[k]) {
            snprintf(g_error, sizeof g_error, "out of host memory staging %s (%zu bytes)", buffer_name(k), n);
            for (int q = 0; q < k; q++) free(staged[q]);
            reset(m);
            return -1;
        }
        if (k < kNumIn) memcpy(staged[k], p, n);
        m.bufs[k].host = (uint8_t *)staged[k];
    }
    int r = LOOM_CAT(LOOM_HALIDE_FN, _argv)(m.args);
    for (int k = 0; r == 0 && k < kNumOut; k++) r = halide_copy_to_host(nullptr, &m.bufs[kNumIn + k]);
    for (int k = 0; k < kNumIn + kNumOut; k++)
        if (m.bufs[k].device) halide_device_free(nullptr, &m.bufs[k]);
    for (int k = kNumIn; r == 0 && k < kNumIn + kNumOut; k++)
        if (staged[k]) memcpy(out[k - kNumIn], staged[k], byte_size(m.bufs[k]));
    for (int k = 0; k < kNumIn + kNumOut; k++) free(staged[k]);
    reset(m);
    return r;
}

int LOOM_API(_run_device)(void *h, const void *const *in, void *const *out) {
#if LOOM_CUDA
    g_error[0] = 0;
    if (!model_of(h, "run_device")) return -1;
    Model &m = *(Model *)h;
    if (check_pointers("run_device", in, out, true)) return -1;
    int r = 0;
    if (cuda_graph_run(m, in, out, &r)) return r;
    return run_pipeline_device(m, in, out);
#else
    snprintf(g_error, sizeof g_error, "%s was compiled for %s, which has no device", LOOM_STR(LOOM_NAME), LOOM_TARGET);
    return -1;
#endif
}

void *LOOM_API(_cuda_context)(void) {
#if LOOM_CUDA
    return g_last;
#else
    return nullptr;
#endif
}

}  // extern "C"
)GLUE";

}  // namespace

std::string glue_halide_type(DType t) {
    switch (t) {
    case DType::F32: return "halide_type_float, 32";
    case DType::F16: return "halide_type_float, 16";
    case DType::F64: return "halide_type_float, 64";
    case DType::I64: return "halide_type_int, 64";
    case DType::I32: return "halide_type_int, 32";
    case DType::I16: return "halide_type_int, 16";
    case DType::I8: return "halide_type_int, 8";
    case DType::U8: return "halide_type_uint, 8";
    case DType::Bool: return "halide_type_uint, 1";
    }
    throw InternalError("glue_halide_type: unknown dtype");
}

std::string glue_header(const GlueSpec &s) {
    const std::string &n = s.name;
    std::ostringstream os;
    os << "/* " << n << ".h: C API of the Loom model '" << n << "' (generated by `loom compile`).\n"
       << " * Inputs and outputs are dense row-major arrays in graph order and graph dtype:\n";
    for (size_t k = 0; k < s.input_names.size(); k++)
        os << " *   input  " << k << " " << s.input_names[k] << ": " << dtype_name(s.input_dtypes[k]) << " "
           << shape_str(s.input_shapes[k]) << "\n";
    for (size_t k = 0; k < s.output_names.size(); k++)
        os << " *   output " << k << " " << s.output_names[k] << ": " << dtype_name(s.output_dtypes[k]) << " "
           << shape_str(s.output_shapes[k]) << "\n";
    os << " * Functions return 0 on success, else a Halide error code (" << n << "_last_error() says why).\n";
    if (s.cuda)
        os << " * " << n << "_run_device takes CUDA device pointers of the calling thread's current context\n"
           << " * (else device 0's primary context), enqueues on the default stream and does not sync.\n"
           << " * The second call in a row with the same pointers captures the run as a CUDA graph, which\n"
           << " * later calls with those pointers launch (a few microseconds of host time a call).\n"
           << " * Device pointers must be 16-byte aligned (cudaMalloc's are); host pointers may be any.\n";
    os << " */\n#ifndef LOOM_MODEL_" << n << "_H\n#define LOOM_MODEL_" << n << "_H\n\n#include <stdint.h>\n\n"
       << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
       << "void *" << n << "_create(void);\n"
       << "int " << n << "_run_host(void *model, const void *const *inputs, void *const *outputs);\n"
       << "int " << n << "_run_device(void *model, const void *const *inputs, void *const *outputs);\n"
       << "void " << n << "_destroy(void *model);\n"
       << "const char *" << n << "_last_error(void);\n"
       << "void *" << n << "_cuda_context(void);\n"
       << "/* CUDA graphs: on by default (LOOM_CUDA_GRAPHS=0 turns them off); returns the previous setting, -1 for a NULL model. */\n"
       << "int " << n << "_set_cuda_graphs(void *model, int on);\n"
       << "const char *" << n << "_cuda_graph_status(void *model); /* \"graph\", or why a call runs directly */\n"
       << "/* Host artifacts: 1 runs the model's parallel loops on the application's OpenMP team instead of Halide's\n"
       << "   thread pool (link with -fopenmp when using the static library), 0 goes back; returns the previous\n"
       << "   setting (process-wide). CUDA artifacts: 0 is a no-op, 1 is refused (-1). */\n"
       << "int " << n << "_set_threading(int openmp);\n"
       << "const char *" << n << "_target(void);\n"
       << "int " << n << "_num_inputs(void);\nint " << n << "_num_outputs(void);\n"
       << "const char *" << n << "_input_name(int k);\nconst char *" << n << "_output_name(int k);\n"
       << "int " << n << "_input_rank(int k);\nint " << n << "_output_rank(int k);\n"
       << "const int64_t *" << n << "_input_shape(int k);\nconst int64_t *" << n << "_output_shape(int k);\n"
       << "const char *" << n << "_input_dtype(int k);\nconst char *" << n << "_output_dtype(int k);\n\n"
       << "#ifdef __cplusplus\n}\n#endif\n#endif\n";
    return os.str();
}

std::string glue_source(const GlueSpec &s) {
    internal_check(s.input_names.size() == s.input_shapes.size() && s.input_names.size() == s.input_dtypes.size(),
                   "glue_source: inconsistent inputs");
    internal_check(s.output_names.size() == s.output_shapes.size() && s.output_names.size() == s.output_dtypes.size(),
                   "glue_source: inconsistent outputs");
    for (const auto &sh : s.input_shapes) user_check(sh.size() <= 16, "an input of rank > 16 is not supported");
    for (const auto &sh : s.output_shapes) user_check(sh.size() <= 16, "an output of rank > 16 is not supported");
    std::ostringstream os;
    os << "// Glue of the Loom model '" << s.name << "' (generated by `loom compile`; see " << s.name << ".h).\n"
       << "#include <dlfcn.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <mutex>\n#include <new>\n#include <set>\n#include <vector>\n"
       << "#include \"HalideRuntime.h\"\n";
    if (s.cuda) os << "#include \"HalideRuntimeCuda.h\"\n";
    else os << "#include <omp.h>\n";
    os << "#define LOOM_NAME " << s.name << "\n#define LOOM_HALIDE_FN " << s.halide_fn << "\n"
       << "#define LOOM_STR2(x) #x\n#define LOOM_STR(x) LOOM_STR2(x)\n"
       << "#define LOOM_CUDA " << (s.cuda ? 1 : 0) << "\n#define LOOM_TARGET \"" << s.target << "\"\n"
       << "namespace {\n"
       << "constexpr int kNumIn = " << s.input_names.size() << ";\nconstexpr int kNumOut = " << s.output_names.size()
       << ";\n";
    emit_tables(os, "in", s.input_names, s.input_shapes, s.input_dtypes);
    emit_tables(os, "out", s.output_names, s.output_shapes, s.output_dtypes);
    os << "}  // namespace\n" << kGlueBody;
    if (s.cuda) os << cuda_graph_glue_source();
    os << kGlueApi;
    return os.str();
}

}  // namespace loom
