#include "codegen/runtime_glue.h"

#include <algorithm>
#include <set>
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

// \p d as a C expression over `s[i]`, the value of symbol i of \p syms.
std::string c_expr(const SymDim &d, const std::vector<std::string> &syms) { return sym_dim_c_expr(d, syms, "s"); }

std::string c_string(const std::string &t) {
    std::string r = "\"";
    for (char c : t) r += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return r + "\"";
}

std::string dims_text(const SymShape &sym, const Shape &shape) {
    return sym.empty() ? shape_str(shape) : sym_shape_str(sym);
}

// The sizes' tables and the declarations of what reads them (defined by emit_size_functions).
void emit_size_tables(std::ostringstream &os, const GlueSpec &g) {
    const auto &syms = g.dynamic.symbols;
    size_t n = syms.size();
    auto list = [&](const char *type, const char *name, auto value) {
        os << "const " << type << " " << name << "[] = {";
        for (size_t i = 0; i < n; i++) os << (i ? ", " : "") << value(syms[i]);
        os << (n ? "" : "0") << "};\n";
    };
    os << "constexpr int kNumSizes = " << n << ";\n";
    list("char *const", "k_size_names", [&](const std::string &x) { return c_string(x); });
    list("int64_t", "k_size_lo", [&](const std::string &x) { return std::to_string(g.dynamic.ranges.at(x).lo) + "LL"; });
    list("int64_t", "k_size_hi", [&](const std::string &x) { return std::to_string(g.dynamic.ranges.at(x).hi) + "LL"; });
    list("int64_t", "k_size_planned",
         [&](const std::string &x) { return std::to_string(g.dynamic.representative.at(x)) + "LL"; });
    for (const char *side : {"in", "out"}) {
        bool in = side[0] == 'i';
        const auto &names = in ? g.input_names : g.output_names;
        os << "const char *const k_" << side << "_dims_text[] = {";
        for (size_t k = 0; k < names.size(); k++) {
            const SymShape *sy = k < (in ? g.input_syms : g.output_syms).size() ? &(in ? g.input_syms : g.output_syms)[k] : nullptr;
            os << (k ? ", " : "") << c_string(dims_text(sy ? *sy : SymShape{}, (in ? g.input_shapes : g.output_shapes)[k]));
        }
        os << (names.empty() ? "nullptr" : "") << "};\n";
    }
    os << "int bind_sizes(const char *fn, const int64_t *const *in_shape, int64_t *s);\n"
       << "void output_shape_at(const int64_t *s, int k, int64_t *shape);\n"
       << "int check_buffer_sizes(const char *fn, const int64_t *const *in_shape, const int64_t *const *out_shape);\n";
}

// The model's size rules as C: the sizes read from the inputs' shapes and checked (ranges, static
// dims, the model's requirements), and each output's shape at them.
void emit_size_functions(std::ostringstream &os, const GlueSpec &g) {
    const auto &syms = g.dynamic.symbols;
    auto sym_of = [&](size_t k) { return k < g.input_syms.size() && !g.input_syms[k].empty() ? g.input_syms[k] : SymShape(); };
    os << "namespace {\n\n"
       << kFloorDiv64Source << "\n"
       << "int size_error(void) {\n"
       << "    fprintf(stderr, \"loom artifact %s: %s\\n\", LOOM_STR(LOOM_NAME), g_error);\n    return -1;\n}\n\n"
       << "int bind_sizes(const char *fn, const int64_t *const *in, int64_t *s) {\n"
       << "    if (!in) {\n"
       << "        snprintf(g_error, sizeof g_error, \"%s_%s: input_shapes is NULL; pass one int64_t array per input, \"\n"
       << "                 \"each of %s_input_rank(k) dims\", LOOM_STR(LOOM_NAME), fn, LOOM_STR(LOOM_NAME));\n"
       << "        return size_error();\n    }\n"
       << "    for (int k = 0; k < kNumIn; k++)\n"
       << "        if (!in[k]) {\n"
       << "            snprintf(g_error, sizeof g_error, \"%s_%s: the shape of input %d '%s' is NULL; pass its %d dims\",\n"
       << "                     LOOM_STR(LOOM_NAME), fn, k, k_in_names[k], k_in_rank[k]);\n"
       << "            return size_error();\n        }\n";
    // Each symbol from its first bare occurrence among the inputs' dims.
    std::set<std::string> bound;
    for (size_t k = 0; k < g.input_names.size(); k++) {
        SymShape sy = sym_of(k);
        for (size_t d = 0; d < sy.size(); d++)
            if (sy[d].kind() == SymDim::Kind::Symbol && bound.insert(sy[d].name()).second) {
                size_t i = std::find(syms.begin(), syms.end(), sy[d].name()) - syms.begin();
                os << "    s[" << i << "] = in[" << k << "][" << d << "];\n";
                os << "    if (s[" << i << "] < k_size_lo[" << i << "] || s[" << i << "] > k_size_hi[" << i << "]) {\n"
                   << "        snprintf(g_error, sizeof g_error, \"%s_%s: input '%s' dim " << d << " (%s) = %lld is outside \"\n"
                   << "                 \"the range %lld..%lld the model was compiled for; compile it again with \"\n"
                   << "                 \"--dim %s=LO..HI covering %lld\", LOOM_STR(LOOM_NAME), fn, k_in_names[" << k << "], \n"
                   << "                 k_size_names[" << i << "], (long long)s[" << i << "], (long long)k_size_lo[" << i
                   << "], (long long)k_size_hi[" << i << "], k_size_names[" << i << "], (long long)s[" << i << "]);\n"
                   << "        return size_error();\n    }\n";
            }
    }
    for (const auto &x : syms)
        user_check(bound.count(x), "loom compile: dim '", x, "' is no input's dim by itself, so the artifact cannot read "
                   "its size from the input shapes; bind it with --input");
    // Every input dim agrees with the sizes.
    for (size_t k = 0; k < g.input_names.size(); k++) {
        SymShape sy = sym_of(k);
        const Shape &st = g.input_shapes[k];
        for (size_t d = 0; d < st.size(); d++) {
            bool fixed = sy.empty() || sy[d].is_static();
            std::string want = fixed ? "INT64_C(" + std::to_string(st[d]) + ")" : c_expr(sy[d], syms);
            // A fixed dim says its number; a moving one its rule and value.
            std::string what = fixed ? std::to_string(st[d]) : sy[d].str() + " = %lld";
            os << "    if (in[" << k << "][" << d << "] != " << want << ") {\n"
               << "        snprintf(g_error, sizeof g_error, \"%s_%s: input '%s' dim " << d << " is %lld but the model \"\n"
               << "                 \"needs " << what << " there (its dims: %s)\", LOOM_STR(LOOM_NAME), fn, k_in_names["
               << k << "], (long long)in[" << k << "][" << d << "], "
               << (fixed ? std::string() : "(long long)(" + want + "), ") << "k_in_dims_text[" << k << "]);\n"
               << "        return size_error();\n    }\n";
        }
    }
    for (const auto &r : g.dynamic.requirements) {
        std::string a = c_expr(r.a, syms), b = c_expr(r.b, syms);
        os << "    if (!(" << a << (r.at_least ? " >= " : " == ") << b << ")) {\n"
           << "        snprintf(g_error, sizeof g_error, \"%s_%s: these input sizes break a rule of the model: %s \"\n"
           << "                 \"(" << r.a.str() << (r.at_least ? " >= " : " == ") << r.b.str() << "); give sizes that \"\n"
           << "                 \"keep it\", LOOM_STR(LOOM_NAME), fn, " << c_string(r.what) << ");\n"
           << "        return size_error();\n    }\n";
    }
    os << "    return 0;\n}\n\n";
    os << "void output_shape_at(const int64_t *s, int k, int64_t *shape) {\n    (void)s;\n    switch (k) {\n";
    for (size_t k = 0; k < g.output_names.size(); k++) {
        os << "    case " << k << ":\n";
        const SymShape *sy = k < g.output_syms.size() && !g.output_syms[k].empty() ? &g.output_syms[k] : nullptr;
        for (size_t d = 0; d < g.output_shapes[k].size(); d++)
            os << "        shape[" << d << "] = "
               << (sy ? c_expr((*sy)[d], syms) : "INT64_C(" + std::to_string(g.output_shapes[k][d]) + ")") << ";\n";
        os << "        break;\n";
    }
    os << "    }\n}\n\n";
    os << "int check_buffer_sizes(const char *fn, const int64_t *const *in_shape, const int64_t *const *out_shape) {\n"
       << "    for (int k = 0; k < kNumIn + kNumOut; k++) {\n"
       << "        const int64_t *sh = k < kNumIn ? in_shape[k] : out_shape[k - kNumIn];\n"
       << "        int rank = k < kNumIn ? k_in_rank[k] : k_out_rank[k - kNumIn];\n"
       << "        halide_type_t t = k < kNumIn ? k_in_type[k] : k_out_type[k - kNumIn];\n"
       << "        double bytes = t.bytes();\n"
       << "        for (int d = 0; d < rank; d++) bytes *= (double)sh[d];\n"
       << "        if (bytes > 2147483647.0) {\n"
       << "            snprintf(g_error, sizeof g_error, \"%s_%s: %s '%s' would take %.0f bytes at these sizes; the \"\n"
       << "                     \"model's buffers hold at most 2^31 - 1 bytes: give smaller sizes\", LOOM_STR(LOOM_NAME), fn,\n"
       << "                     k < kNumIn ? \"input\" : \"output\", buffer_name(k), bytes);\n"
       << "            return size_error();\n        }\n    }\n    return 0;\n}\n\n"
       << "}  // namespace\n";
}

// The model-independent part of the glue. NAME and HALIDE_FN are macros defined above it.
const char *kGlueBody = R"GLUE(
#define LOOM_CAT2(a, b) a##b
#define LOOM_CAT(a, b) LOOM_CAT2(a, b)
#define LOOM_API(suffix) LOOM_CAT(LOOM_NAME, suffix)

extern "C" int LOOM_CAT(LOOM_HALIDE_FN, _argv)(void **args);
#if LOOM_CUDA
// The cuBLAS extern stage's (codegen/cublas_gemm.h) where the artifact has one, else null (weak).
extern "C" int loom_cublaslt_private_workspace(uint64_t ptr, size_t bytes) __attribute__((weak));
#endif

namespace {

constexpr int kMaxRank = 16;
char g_error[4096] = "";

// Denormal floats flushed to zero while the model runs, in the calling thread and in each task of
// its parallel loops, as JIT runs do (codegen/denormals.h says why).
struct FlushDenormals {
#if !LOOM_CUDA && (defined(__x86_64__) || defined(__i386__))
    unsigned saved = _mm_getcsr();
    FlushDenormals() { _mm_setcsr(saved | 0x8040); }
    ~FlushDenormals() { _mm_setcsr(saved); }
#endif
};

#if !LOOM_CUDA
// One task of Halide's thread pool with denormals flushed (the pool's threads keep their own
// floating-point control).
int flushing_do_task(void *ctx, halide_task_t task, int idx, uint8_t *closure) {
    FlushDenormals flush;
    return task(ctx, idx, closure);
}

// A Halide parallel loop as an OpenMP parallel for, one task a chunk (set_threading(1)): the
// application's OpenMP team runs the model instead of a second pool of threads (as
// codegen/openmp_threading.h does for JIT runs). Returns the first nonzero task result.
int openmp_do_par_for(void *ctx, halide_task_t task, int min, int extent, uint8_t *closure) {
    int first_error = 0;
#pragma omp parallel
    {
        FlushDenormals flush;  // once per thread of the team, not per task
#pragma omp for schedule(dynamic, 1)
        for (int x = min; x < min + extent; x++) {
            if (__atomic_load_n(&first_error, __ATOMIC_RELAXED) != 0) continue;  // a task failed: skip the rest
            int r = task(ctx, x, closure);
            int none = 0;
            if (r != 0) __atomic_compare_exchange_n(&first_error, &none, r, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
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
    int32_t sizes[kNumSizes + 1];  // a model compiled for every size: its dims, Halide's scalar arguments
    void *args[kNumIn + kNumSizes + kNumOut + 1];
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

// Every buffer's dims at the given shapes, and the size arguments at \p sizes (a model compiled for
// every size; none otherwise).
void shape_buffers(Model &m, const int64_t *const *in_shape, const int64_t *const *out_shape, const int64_t *sizes) {
    for (int k = 0; k < kNumIn; k++) init_buffer(m.bufs[k], m.dims[k], k_in_type[k], k_in_rank[k], in_shape[k]);
    for (int k = 0; k < kNumOut; k++)
        init_buffer(m.bufs[kNumIn + k], m.dims[kNumIn + k], k_out_type[k], k_out_rank[k], out_shape[k]);
    for (int i = 0; i < kNumSizes; i++) m.sizes[i] = (int32_t)sizes[i];
}

int run_host_buffers(Model &m, const void *const *in, void *const *out);

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
#else
    halide_set_custom_do_task(flushing_do_task);
#endif
    Model *m = new (std::nothrow) Model;
    if (!m) return nullptr;
#if LOOM_CUDA
    if (!(m->graph = cuda_graph_new())) {
        delete m;
        return nullptr;
    }
#endif
    for (int k = 0; k < kNumIn; k++) m->args[k] = &m->bufs[k];
    for (int i = 0; i < kNumSizes; i++) m->args[kNumIn + i] = &m->sizes[i];
    for (int k = 0; k < kNumOut; k++) m->args[kNumIn + kNumSizes + k] = &m->bufs[kNumIn + k];
    shape_buffers(*m, k_in_shape, k_out_shape, k_size_planned);
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
    shape_buffers(m, k_in_shape, k_out_shape, k_size_planned);
    return run_host_buffers(m, in, out);
}

int LOOM_API(_run_host_shaped)(void *h, const int64_t *const *input_shapes, const void *const *in, void *const *out) {
    g_error[0] = 0;
    if (!model_of(h, "run_host_shaped")) return -1;
    Model &m = *(Model *)h;
    if (check_pointers("run_host_shaped", in, out, false)) return -1;
    int64_t sizes[kNumSizes + 1];
    const int64_t *out_shapes[kNumOut + 1];
    int64_t out_dims[kNumOut + 1][kMaxRank];
    if (bind_sizes("run_host_shaped", input_shapes, sizes)) return -1;
    for (int k = 0; k < kNumOut; k++) {
        output_shape_at(sizes, k, out_dims[k]);
        out_shapes[k] = out_dims[k];
    }
    if (check_buffer_sizes("run_host_shaped", input_shapes, out_shapes)) return -1;
    shape_buffers(m, input_shapes, out_shapes, sizes);
    return run_host_buffers(m, in, out);
}

int LOOM_API(_output_shape_for)(const int64_t *const *input_shapes, int k, int64_t *shape) {
    g_error[0] = 0;
    int64_t sizes[kNumSizes + 1];
    if (k < 0 || k >= kNumOut || !shape) {
        snprintf(g_error, sizeof g_error, "%s_output_shape_for: output %d does not exist or shape is NULL; pass "
                 "0..%d and an array of %s_output_rank(k) int64_t", LOOM_STR(LOOM_NAME), k, kNumOut - 1,
                 LOOM_STR(LOOM_NAME));
        return -1;
    }
    if (bind_sizes("output_shape_for", input_shapes, sizes)) return -1;
    output_shape_at(sizes, k, shape);
    return 0;
}

int LOOM_API(_num_sizes)(void) { return kNumSizes; }
const char *LOOM_API(_size_name)(int i) { return i >= 0 && i < kNumSizes ? k_size_names[i] : nullptr; }
int64_t LOOM_API(_size_min)(int i) { return i >= 0 && i < kNumSizes ? k_size_lo[i] : -1; }
int64_t LOOM_API(_size_max)(int i) { return i >= 0 && i < kNumSizes ? k_size_hi[i] : -1; }
const char *LOOM_API(_input_dims)(int k) { return k >= 0 && k < kNumIn ? k_in_dims_text[k] : nullptr; }
const char *LOOM_API(_output_dims)(int k) { return k >= 0 && k < kNumOut ? k_out_dims_text[k] : nullptr; }

}  // extern "C"

namespace {

int run_host_buffers(Model &m, const void *const *in, void *const *out) {
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
    int r;
    {
        FlushDenormals flush;
        r = LOOM_CAT(LOOM_HALIDE_FN, _argv)(m.args);
    }
    for (int k = 0; r == 0 && k < kNumOut; k++) r = halide_copy_to_host(nullptr, &m.bufs[kNumIn + k]);
    for (int k = 0; k < kNumIn + kNumOut; k++)
        if (m.bufs[k].device) halide_device_free(nullptr, &m.bufs[k]);
    for (int k = kNumIn; r == 0 && k < kNumIn + kNumOut; k++)
        if (staged[k]) memcpy(out[k - kNumIn], staged[k], byte_size(m.bufs[k]));
    for (int k = 0; k < kNumIn + kNumOut; k++) free(staged[k]);
    reset(m);
    return r;
}

}  // namespace

extern "C" {

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

const char *const kFloorDiv64Source =
    "int64_t floordiv64(int64_t a, int64_t b) {\n"
    "    if (b == 0) return 0;\n"
    "    int64_t q = a / b;\n"
    "    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;\n}\n";

std::string sym_dim_c_expr(const SymDim &d, const std::vector<std::string> &syms, const std::string &array) {
    switch (d.kind()) {
    case SymDim::Kind::Const: return "INT64_C(" + std::to_string(d.value()) + ")";
    case SymDim::Kind::Symbol: {
        size_t i = std::find(syms.begin(), syms.end(), d.name()) - syms.begin();
        internal_check(i < syms.size(), "glue: unknown size symbol ", d.name());
        return array + "[" + std::to_string(i) + "]";
    }
    case SymDim::Kind::Add: return "(" + sym_dim_c_expr(d.lhs(), syms, array) + " + " + sym_dim_c_expr(d.rhs(), syms, array) + ")";
    case SymDim::Kind::Sub: return "(" + sym_dim_c_expr(d.lhs(), syms, array) + " - " + sym_dim_c_expr(d.rhs(), syms, array) + ")";
    case SymDim::Kind::Mul: return "(" + sym_dim_c_expr(d.lhs(), syms, array) + " * " + sym_dim_c_expr(d.rhs(), syms, array) + ")";
    case SymDim::Kind::FloorDiv: return "floordiv64(" + sym_dim_c_expr(d.lhs(), syms, array) + ", " + sym_dim_c_expr(d.rhs(), syms, array) + ")";
    }
    return "0";
}

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
    case DType::BF16: return "halide_type_uint, 16";  // its bits, as lower/lowered.h halide_type holds it
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
       << "const char *" << n << "_input_dtype(int k);\nconst char *" << n << "_output_dtype(int k);\n"
       << "/* Any size (a model compiled for every size: loom compile --dim / --dynamic). input_shapes[k] holds input\n"
       << "   k's " << n << "_input_rank(k) dims; the sizes are read from them and checked (ranges, fixed dims,\n"
       << "   the model's rules), -1 with " << n << "_last_error() naming the input and dim otherwise. The shapes\n"
       << "   above are the planned ones, which " << n << "_run_host runs at. */\n"
       << "int " << n << "_run_host_shaped(void *model, const int64_t *const *input_shapes, const void *const *inputs,\n"
       << "        void *const *outputs);\n"
       << "int " << n << "_output_shape_for(const int64_t *const *input_shapes, int k, int64_t *shape);\n"
       << "int " << n << "_num_sizes(void);\nconst char *" << n << "_size_name(int i);\n"
       << "int64_t " << n << "_size_min(int i);\nint64_t " << n << "_size_max(int i);\n"
       << "const char *" << n << "_input_dims(int k);  /* \"batchx3xheightxwidth\" */\n"
       << "const char *" << n << "_output_dims(int k);\n\n"
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
    else os << "#include <omp.h>\n#if defined(__x86_64__) || defined(__i386__)\n#include <xmmintrin.h>\n#endif\n";
    os << "#define LOOM_NAME " << s.name << "\n#define LOOM_HALIDE_FN " << s.halide_fn << "\n"
       << "#define LOOM_STR2(x) #x\n#define LOOM_STR(x) LOOM_STR2(x)\n"
       << "#define LOOM_CUDA " << (s.cuda ? 1 : 0) << "\n#define LOOM_TARGET \"" << s.target << "\"\n"
       << "namespace {\n"
       << "constexpr int kNumIn = " << s.input_names.size() << ";\nconstexpr int kNumOut = " << s.output_names.size()
       << ";\n";
    emit_tables(os, "in", s.input_names, s.input_shapes, s.input_dtypes);
    emit_tables(os, "out", s.output_names, s.output_shapes, s.output_dtypes);
    emit_size_tables(os, s);
    os << "}  // namespace\n" << kGlueBody;
    if (s.cuda) os << cuda_graph_glue_source();
    os << kGlueApi;
    emit_size_functions(os, s);
    return os.str();
}

}  // namespace loom
