// loom_run: loads a `loom compile` artifact (its lib<name>.so, by dlopen), checks it against the
// reference outputs saved next to its inputs, and times it. Links no libHalide and no LLVM: only
// libdl and, when built with LOOM_RUN_CUDA, the CUDA runtime (libcudart).
//
//   loom_run <artifact dir> [--reps N] [--warmup N] [--tol 1e-5] [--mode host|device] [--json FILE]
//            [--no-graphs]
//
// Host artifacts: run on host buffers, timed with a steady clock. CUDA artifacts: inputs and
// outputs are cudaMalloc'd in the application's primary context and passed to <name>_run_device
// (the artifact's Halide runtime uses that same context; the run checks it); each timed call is
// bracketed by CUDA events on the default stream, with the L2 flushed before it by writing a
// 256 MB buffer (as triton.testing.do_bench does); the median is reported. Outputs are poisoned
// (NaN bytes) before every checked run; the check is ||out - ref|| / ||ref|| < tol and no NaN, where
// tol is each output's line of data/tolerance.txt (written by `loom compile` by the rule of
// src/measure/output_tolerance.h: precision, depth, output scale), or --tol, or 1e-5 without either.
// From the second call with the same pointers on, a CUDA artifact replays its run as a CUDA graph
// (codegen/cuda_graph_glue.h): the run after timing, outputs poisoned again, checks the replay;
// --no-graphs times direct runs instead.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef LOOM_RUN_CUDA
#include <cuda_runtime.h>
#endif

namespace {

/// A host buffer aligned to 64 bytes (a cache line, an AVX-512 vector), freed with it.
class AlignedBuffer {
public:
    explicit AlignedBuffer(size_t bytes)
        : size_(bytes), p_((uint8_t *)std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64))) {
        if (!p_) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    AlignedBuffer(AlignedBuffer &&o) noexcept : size_(o.size_), p_(o.p_) { o.p_ = nullptr; }
    AlignedBuffer(const AlignedBuffer &) = delete;
    AlignedBuffer &operator=(const AlignedBuffer &) = delete;
    AlignedBuffer &operator=(AlignedBuffer &&) = delete;
    ~AlignedBuffer() { std::free(p_); }
    uint8_t *data() const { return p_; }
    size_t size() const { return size_; }

private:
    size_t size_;
    uint8_t *p_;
};

[[noreturn]] void die(const std::string &msg) {
    fprintf(stderr, "loom_run: %s\n", msg.c_str());
    exit(1);
}

#ifdef LOOM_RUN_CUDA
void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

struct Port {
    std::string name, dtype;
    std::vector<int64_t> shape;
    size_t numel() const {
        size_t n = 1;
        for (auto d : shape) n *= (size_t)d;
        return n;
    }
    size_t elem_size() const {
        if (dtype == "f64" || dtype == "i64") return 8;
        if (dtype == "f32" || dtype == "i32") return 4;
        if (dtype == "f16" || dtype == "i16") return 2;
        return 1;
    }
    size_t bytes() const { return numel() * elem_size(); }
};

struct Manifest {
    std::string name, target, library;
    bool cuda = false;
    std::vector<Port> inputs, outputs;
};

Manifest read_manifest(const std::string &dir) {
    std::ifstream f(dir + "/manifest.txt");
    if (!f) die("no manifest.txt in " + dir + " (is it a `loom compile` output folder?)");
    Manifest m;
    std::string line;
    while (std::getline(f, line)) {
        std::istringstream is(line);
        std::string key;
        is >> key;
        if (key == "name") is >> m.name;
        else if (key == "target") is >> m.target;
        else if (key == "library") is >> m.library;
        else if (key == "cuda") is >> m.cuda;
        else if (key == "input" || key == "output") {
            Port p;
            is >> p.name >> p.dtype;
            int64_t d;
            while (is >> d) p.shape.push_back(d);
            (key == "input" ? m.inputs : m.outputs).push_back(p);
        }
    }
    return m;
}

// A minimal .npy reader: little-endian, C order; returns the raw bytes and the dtype descr.
std::string read_npy(const std::string &path, std::string &descr, std::vector<int64_t> &shape) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die("cannot read " + path);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (all.size() < 10 || all.compare(0, 6, "\x93NUMPY") != 0) die(path + " is not an .npy file");
    int major = (unsigned char)all[6];
    size_t hl, off;
    if (major == 1) hl = (unsigned char)all[8] | ((unsigned char)all[9] << 8), off = 10;
    else hl = (unsigned char)all[8] | ((unsigned char)all[9] << 8) | ((size_t)(unsigned char)all[10] << 16) |
              ((size_t)(unsigned char)all[11] << 24), off = 12;
    std::string h = all.substr(off, hl);
    auto q = h.find("'descr'");
    auto a = h.find('\'', q + 7), b = h.find('\'', a + 1);
    descr = h.substr(a + 1, b - a - 1);
    if (h.find("'fortran_order': True") != std::string::npos) die(path + ": Fortran order is not supported");
    auto s0 = h.find('(', h.find("'shape'")), s1 = h.find(')', s0);
    std::string sh = h.substr(s0 + 1, s1 - s0 - 1);
    shape.clear();
    std::istringstream ss(sh);
    std::string tok;
    while (std::getline(ss, tok, ','))
        if (tok.find_first_of("0123456789") != std::string::npos) shape.push_back(std::stoll(tok));
    return all.substr(off + hl);
}

// Element k of raw data of npy descr \p d, as double.
double elem(const std::string &raw, const std::string &d, size_t k) {
    const char *p = raw.data();
    if (d == "<f8") return ((const double *)p)[k];
    if (d == "<f4") return ((const float *)p)[k];
    if (d == "<i8") return (double)((const int64_t *)p)[k];
    if (d == "<i4") return ((const int32_t *)p)[k];
    if (d == "|u1" || d == "|b1") return ((const uint8_t *)p)[k];
    if (d == "|i1") return ((const int8_t *)p)[k];
    die("unsupported .npy dtype " + d);
}

double as_double(const void *p, const std::string &dt, size_t k) {
    if (dt == "f32") return ((const float *)p)[k];
    if (dt == "f64") return ((const double *)p)[k];
    if (dt == "i64") return (double)((const int64_t *)p)[k];
    if (dt == "i32") return ((const int32_t *)p)[k];
    if (dt == "u8" || dt == "bool") return ((const uint8_t *)p)[k];
    if (dt == "i8") return ((const int8_t *)p)[k];
    die("unsupported output dtype " + dt);
}

const char *npy_descr_of(const std::string &dt) {
    if (dt == "f32") return "<f4";
    if (dt == "f64") return "<f8";
    if (dt == "i64") return "<i8";
    if (dt == "i32") return "<i4";
    if (dt == "u8") return "|u1";
    if (dt == "bool") return "|b1";
    if (dt == "i8") return "|i1";
    return "?";
}

struct Check {
    double rel = 0, max_abs = 0;
    size_t nan = 0;
};

Check compare(const void *out, const Port &p, const std::string &ref, const std::string &rd) {
    Check c;
    double num = 0, den = 0;
    for (size_t k = 0; k < p.numel(); k++) {
        double o = as_double(out, p.dtype, k), r = elem(ref, rd, k);
        if (std::isnan(o)) {
            c.nan++;
            continue;
        }
        num += (o - r) * (o - r);
        den += r * r;
        c.max_abs = std::max(c.max_abs, std::fabs(o - r));
    }
    c.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    return c;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <typename T>
T sym(void *lib, const std::string &n) {
    void *p = dlsym(lib, n.c_str());
    if (!p) die("the artifact has no symbol " + n);
    return (T)p;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2)
        die("usage: loom_run <artifact dir> [--reps N] [--warmup N] [--tol T] [--mode host|device] [--json FILE] "
            "[--no-graphs]");
    std::string dir = argv[1], mode, json;
    int reps = 100, warmup = 10;
    bool graphs = true;
    double tol = -1;  // --tol; else data/tolerance.txt, else 1e-5
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + a);
            return argv[++i];
        };
        if (a == "--reps") reps = std::stoi(next());
        else if (a == "--warmup") warmup = std::stoi(next());
        else if (a == "--tol") tol = std::stod(next());
        else if (a == "--mode") mode = next();
        else if (a == "--json") json = next();
        else if (a == "--no-graphs") graphs = false;
        else die("unknown option " + a);
    }
    Manifest m = read_manifest(dir);
    if (mode.empty()) mode = m.cuda ? "device" : "host";
#ifndef LOOM_RUN_CUDA
    if (mode == "device") die("this loom_run was built without CUDA (LOOM_RUN_CUDA); use --mode host");
#endif
    void *lib = dlopen((dir + "/" + m.library).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) die(std::string("cannot load the artifact: ") + dlerror());
    const std::string &n = m.name;
    auto create = sym<void *(*)()>(lib, n + "_create");
    auto run_host = sym<int (*)(void *, const void *const *, void *const *)>(lib, n + "_run_host");
    auto run_device = sym<int (*)(void *, const void *const *, void *const *)>(lib, n + "_run_device");
    auto last_error = sym<const char *(*)()>(lib, n + "_last_error");
    auto destroy = sym<void (*)(void *)>(lib, n + "_destroy");
    auto cuda_context = sym<void *(*)()>(lib, n + "_cuda_context");
    (void)cuda_context;
    (void)run_device;
    void *model = create();
    if (!model) die("create failed");
    // Optional entry points (artifacts of older Loom versions lack them).
    auto set_graphs = (int (*)(void *, int))dlsym(lib, (n + "_set_cuda_graphs").c_str());
    auto graph_status = (const char *(*)(void *))dlsym(lib, (n + "_cuda_graph_status").c_str());
    if (!graphs && set_graphs) set_graphs(model, 0);

    // Inputs and references.
    std::vector<std::string> in_data, ref_data, ref_descr;
    for (const auto &p : m.inputs) {
        std::string d;
        std::vector<int64_t> sh;
        in_data.push_back(read_npy(dir + "/data/" + p.name + ".npy", d, sh));
        if (sh != p.shape || d != npy_descr_of(p.dtype)) die("data/" + p.name + ".npy: shape or dtype differs from the manifest");
    }
    for (const auto &p : m.outputs) {
        std::string d;
        std::vector<int64_t> sh;
        ref_data.push_back(read_npy(dir + "/data/expected_" + p.name + ".npy", d, sh));
        ref_descr.push_back(d);
        if (sh != p.shape) die("data/expected_" + p.name + ".npy: shape differs from the manifest");
    }
    // Host buffers 64-byte aligned, as an application that cares would pass them: the C API
    // stages a misaligned pointer through an aligned copy on every call (runtime_glue), which a
    // std::vector's large allocation (16-byte aligned) hit, and the timing then measured the copies
    // (a depthwise conv 5.0 ms against 1.95 in `loom bench`; fifteenth session).
    std::vector<AlignedBuffer> ins, outs;
    for (const auto &d : in_data) {
        ins.emplace_back(d.size());
        memcpy(ins.back().data(), d.data(), d.size());
    }
    in_data.clear();  // the aligned copies serve the host and device paths
    for (const auto &p : m.outputs) outs.emplace_back(p.bytes());
    std::vector<const void *> hin;
    std::vector<void *> hout;
    for (auto &d : ins) hin.push_back(d.data());
    for (auto &o : outs) hout.push_back(o.data());

    size_t bytes = 0;
    for (const auto &p : m.inputs) bytes += p.bytes();
    for (const auto &p : m.outputs) bytes += p.bytes();

    // Each output's tolerance: --tol, else its line of data/tolerance.txt, else 1e-5.
    std::vector<double> tols(m.outputs.size(), tol > 0 ? tol : 1e-5);
    std::vector<std::string> tol_rules(m.outputs.size(), tol > 0 ? "--tol" : "default");
    if (tol <= 0) {
        std::ifstream tf(dir + "/data/tolerance.txt");
        std::string line;
        while (std::getline(tf, line)) {
            std::istringstream is(line);
            std::string name;
            double t;
            if (!(is >> name >> t) || !(t > 0)) die("data/tolerance.txt: bad line '" + line + "' (want: <output> <rtol> [rule])");
            std::string rule;
            std::getline(is, rule);
            for (size_t k = 0; k < m.outputs.size(); k++)
                if (m.outputs[k].name == name) tols[k] = t, tol_rules[k] = rule.empty() ? "data/tolerance.txt" : rule.substr(1);
        }
    }

    std::vector<double> times;
    std::string context_note = "n/a";
    auto check_all = [&](const char *what) {
        bool ok = true;
        for (size_t k = 0; k < m.outputs.size(); k++) {
            Check c = compare(outs[k].data(), m.outputs[k], ref_data[k], ref_descr[k]);
            bool pass = c.nan == 0 && c.rel < tols[k];
            ok = ok && pass;
            printf("check %s %s: rel %.3e max_abs %.3e nan %zu -> %s (tolerance %s)\n", what, m.outputs[k].name.c_str(),
                   c.rel, c.max_abs, c.nan, pass ? "ok" : "FAIL", tol_rules[k].c_str());
        }
        return ok;
    };

    bool ok = true;
    // Host path (for a CUDA artifact this copies in and out through Halide: checked, not timed).
    for (auto &o : outs) memset(o.data(), 0xFF, o.size());
    if (run_host(model, hin.data(), hout.data()) != 0) die(std::string("run_host failed: ") + last_error());
    ok = check_all("host") && ok;

    if (mode == "host") {
        for (int r = 0; r < warmup; r++) run_host(model, hin.data(), hout.data());
        for (int r = 0; r < reps; r++) {
            auto t0 = std::chrono::steady_clock::now();
            if (run_host(model, hin.data(), hout.data()) != 0) die(std::string("run_host failed: ") + last_error());
            times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
    }
#ifdef LOOM_RUN_CUDA
    if (mode == "device") {
        ck(cudaFree(0), "cudaFree(0)");  // the primary context, current on this thread
        std::vector<void *> din, dout;
        for (size_t k = 0; k < m.inputs.size(); k++) {
            void *p;
            ck(cudaMalloc(&p, std::max<size_t>(1, m.inputs[k].bytes())), "cudaMalloc");
            ck(cudaMemcpy(p, ins[k].data(), m.inputs[k].bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
            din.push_back(p);
        }
        for (size_t k = 0; k < m.outputs.size(); k++) {
            void *p;
            ck(cudaMalloc(&p, std::max<size_t>(1, m.outputs[k].bytes())), "cudaMalloc");
            ck(cudaMemset(p, 0xFF, m.outputs[k].bytes()), "poison");
            dout.push_back(p);
        }
        std::vector<const void *> cin(din.begin(), din.end());
        if (run_device(model, cin.data(), dout.data()) != 0) die(std::string("run_device failed: ") + last_error());
        ck(cudaDeviceSynchronize(), "sync after run_device");
        ck(cudaGetLastError(), "last error");
        // The context the artifact's Halide runtime used must be the one cudaMalloc used.
        void *cudalib = dlopen("libcuda.so.1", RTLD_NOW);
        typedef int (*GetCur)(void **);
        GetCur get_current = cudalib ? (GetCur)dlsym(cudalib, "cuCtxGetCurrent") : nullptr;
        void *mine = nullptr;
        if (get_current) get_current(&mine);
        bool same = mine && mine == cuda_context();
        context_note = same ? "shared (primary)" : "DIFFERENT";
        printf("context: application %p, artifact %p -> %s\n", mine, cuda_context(), same ? "shared" : "DIFFERENT");
        ok = ok && same;
        for (size_t k = 0; k < m.outputs.size(); k++)
            ck(cudaMemcpy(outs[k].data(), dout[k], m.outputs[k].bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        ok = check_all("device") && ok;

        // L2 flush before every timed run, as Triton's do_bench; LOOM_RUN_FLUSH_MB changes its size
        // (a diagnostic: a longer flush hides more of the host's per-call time).
        const char *flush_env = getenv("LOOM_RUN_FLUSH_MB");
        const int flush_mb = flush_env ? atoi(flush_env) : 256;
        if (flush_mb < 1 || flush_mb > 65536)
            die(std::string("LOOM_RUN_FLUSH_MB=") + flush_env + ": the L2 flush size in MB, 1 to 65536 (default 256)");
        const size_t flush_bytes = (size_t)flush_mb << 20;
        void *flush;
        ck(cudaMalloc(&flush, flush_bytes), "cudaMalloc flush");
        for (int r = 0; r < warmup; r++) run_device(model, cin.data(), dout.data());
        ck(cudaDeviceSynchronize(), "warm-up");
        std::vector<cudaEvent_t> ev(2 * reps);
        for (auto &e : ev) ck(cudaEventCreate(&e), "cudaEventCreate");
        std::vector<double> host_us;  // the host's time in each call (it returns before the GPU is done)
        for (int r = 0; r < reps; r++) {
            ck(cudaMemsetAsync(flush, r & 0xFF, flush_bytes), "flush L2");
            ck(cudaEventRecord(ev[2 * r]), "event");
            auto t0 = std::chrono::steady_clock::now();
            if (run_device(model, cin.data(), dout.data()) != 0) die(std::string("run_device failed: ") + last_error());
            host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
            ck(cudaEventRecord(ev[2 * r + 1]), "event");
        }
        printf("host time per run_device call: median %.1f us\n", median(host_us));
        ck(cudaDeviceSynchronize(), "sync after timing");
        ck(cudaGetLastError(), "last error after timing");
        for (int r = 0; r < reps; r++) {
            float ms;
            ck(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]), "cudaEventElapsedTime");
            times.push_back(ms);
        }
        // One more run on poisoned outputs: a replayed graph must write them all again.
        for (size_t k = 0; k < m.outputs.size(); k++) ck(cudaMemset(dout[k], 0xFF, m.outputs[k].bytes()), "poison");
        if (run_device(model, cin.data(), dout.data()) != 0) die(std::string("run_device failed: ") + last_error());
        ck(cudaDeviceSynchronize(), "sync after the last run");
        for (size_t k = 0; k < m.outputs.size(); k++)
            ck(cudaMemcpy(outs[k].data(), dout[k], m.outputs[k].bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        if (graph_status) printf("cuda graph: %s\n", graph_status(model));
        ok = check_all("device-after-timing") && ok;
        for (auto &e : ev) cudaEventDestroy(e);
        cudaFree(flush);
        for (auto p : din) cudaFree(p);
        for (auto p : dout) cudaFree(p);
    }
#endif
    double med = times.empty() ? 0 : median(times);
    double mn = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
    double gbs = med > 0 ? bytes / (med * 1e6) : 0;
    printf("RESULT %s mode=%s ok=%d median_ms=%.5f min_ms=%.5f bytes=%zu GB/s=%.1f reps=%d context=%s\n", n.c_str(),
           mode.c_str(), ok ? 1 : 0, med, mn, bytes, gbs, (int)times.size(), context_note.c_str());
    destroy(model);
    if (!json.empty()) {
        // A temporary name, then a rename: a reader never sees half a file (this tool links no Loom library).
        std::string tmp = json + ".tmp." + std::to_string(getpid());
        {
            std::ofstream j(tmp);
            j << "{\"name\": \"" << n << "\", \"mode\": \"" << mode << "\", \"ok\": " << (ok ? "true" : "false")
              << ", \"median_ms\": " << med << ", \"min_ms\": " << mn << ", \"bytes\": " << bytes
              << ", \"context\": \"" << context_note << "\"}\n";
            j.close();
            if (!j) {
                std::remove(tmp.c_str());
                fprintf(stderr, "error: cannot write %s\n", json.c_str());
                return 1;
            }
        }
        if (std::rename(tmp.c_str(), json.c_str()) != 0) {
            std::remove(tmp.c_str());
            fprintf(stderr, "error: cannot write %s\n", json.c_str());
            return 1;
        }
    }
    return ok ? 0 : 3;
}
