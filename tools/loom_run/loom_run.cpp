// loom_run: loads a `loom compile` artifact (its lib<name>.so, by dlopen), checks it against the
// reference outputs saved next to its inputs, and times it. Links no libHalide and no LLVM: only
// libdl and, when built with LOOM_RUN_CUDA, the CUDA runtime (libcudart).
//
//   loom_run <artifact dir> [--reps N] [--warmup N] [--tol 1e-5] [--mode host|device] [--json FILE]
//            [--no-graphs] [--input NAME=DIMS ...]
//
// --input runs a model compiled for every size (`loom compile --dim`/`--dynamic`) at those input
// shapes (others planned) on seeded random inputs, checks its outputs for NaN and times it.
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

#include "support/tensor_file_name.h"  // header-only: the data files' names, as `loom compile` writes them

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
        if (dtype == "f16" || dtype == "bf16" || dtype == "i16") return 2;
        return 1;
    }
    size_t bytes() const { return numel() * elem_size(); }
};

struct Manifest {
    std::string name, target, library;
    bool cuda = false;
    std::vector<Port> inputs, outputs;
    std::vector<std::string> dims;                      ///< "height 32..2048": a model compiled for every size
    std::vector<std::pair<std::string, std::string>> input_dims;  ///< input -> "batchx3xheightxwidth"
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
        else if (key == "dim") {
            std::string d, lo, hi;
            is >> d >> lo >> hi;
            m.dims.push_back(d + " " + lo + ".." + hi);
        } else if (key == "input_dims") {
            std::string in, text;
            is >> in >> text;
            m.input_dims.push_back({in, text});
        }
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

// IEEE half and bfloat16 bits as float (Loom's f16 and bf16 ports; bf16 .npy files hold float32).
float half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v = exp == 0 ? std::ldexp((float)man, -24) : exp == 31 ? (man ? NAN : INFINITY)
                                                               : std::ldexp((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}
float bf16_bits_to_float(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t float_to_bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

// Element k of raw data of npy descr \p d, as double.
double elem(const std::string &raw, const std::string &d, size_t k) {
    const char *p = raw.data();
    if (d == "<f2") return half_bits_to_float(((const uint16_t *)p)[k]);
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
    if (dt == "f16") return half_bits_to_float(((const uint16_t *)p)[k]);
    if (dt == "bf16") return bf16_bits_to_float(((const uint16_t *)p)[k]);
    if (dt == "i64") return (double)((const int64_t *)p)[k];
    if (dt == "i32") return ((const int32_t *)p)[k];
    if (dt == "u8" || dt == "bool") return ((const uint8_t *)p)[k];
    if (dt == "i8") return ((const int8_t *)p)[k];
    die("unsupported output dtype " + dt);
}

const char *npy_descr_of(const std::string &dt) {
    if (dt == "f32") return "<f4";
    if (dt == "f64") return "<f8";
    if (dt == "f16") return "<f2";
    if (dt == "bf16") return "<f4";  // NumPy has no bfloat16: Loom writes its float32 widening
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

/// "1x3x480x640" as dims; an empty vector when it is not that.
std::vector<int64_t> parse_dims(const std::string &t) {
    std::vector<int64_t> d;
    std::istringstream ss(t);
    std::string tok;
    while (std::getline(ss, tok, 'x')) {
        if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 12) return {};
        d.push_back(std::stoll(tok));
    }
    return d;
}

std::string dims_str(const std::vector<int64_t> &d) {
    std::string r;
    for (size_t k = 0; k < d.size(); k++) r += (k ? "x" : "") + std::to_string(d[k]);
    return r;
}

/// Runs a model compiled for every size at the shapes of \p flags (`x=1x3x480x640`, others planned):
/// random inputs (seeded), outputs poisoned, their shapes from the artifact; checked for NaN (no
/// reference at this size: `loom run M --artifact DIR --input ... --check` compares), then timed.
int run_shaped(const std::string &dir, const Manifest &m, void *lib, const std::vector<std::string> &flags, int reps,
               int warmup) {
    const std::string &n = m.name;
    std::vector<std::vector<int64_t>> shapes;
    for (const auto &p : m.inputs) shapes.push_back(p.shape);
    auto symbolic = [&](const std::string &in) {
        for (const auto &[name, text] : m.input_dims)
            if (name == in) return text;
        for (const auto &p : m.inputs)
            if (p.name == in) return dims_str(p.shape);
        return std::string();
    };
    for (const auto &f : flags) {
        auto eq = f.find('=');
        std::vector<int64_t> d = eq == std::string::npos ? std::vector<int64_t>() : parse_dims(f.substr(eq + 1));
        if (d.empty()) die("bad --input '" + f + "'; expected NAME=DIMS, e.g. x=1x3x480x640");
        std::string name = f.substr(0, eq);
        size_t k = 0;
        while (k < m.inputs.size() && m.inputs[k].name != name) k++;
        if (k == m.inputs.size()) {
            std::string all;
            for (const auto &p : m.inputs) all += (all.empty() ? "" : ", ") + p.name;
            die("--input " + f + ": the model has no input '" + name + "'; its inputs: " + all);
        }
        if (d.size() != m.inputs[k].shape.size())
            die("--input " + f + " gives " + std::to_string(d.size()) + " dims, but input '" + name + "' has " +
                std::to_string(m.inputs[k].shape.size()) + " (" + symbolic(name) + "); give all of them, e.g. " + name +
                "=" + dims_str(m.inputs[k].shape));
        shapes[k] = d;
    }
    if (m.dims.empty())
        for (size_t k = 0; k < m.inputs.size(); k++)
            if (shapes[k] != m.inputs[k].shape)
                die("this artifact was compiled for one size (" + m.inputs[k].name + "=" + dims_str(m.inputs[k].shape) +
                    "); compile the model with --dim NAME=LO..HI or --dynamic to run other sizes");
    auto run_shaped_fn = sym<int (*)(void *, const int64_t *const *, const void *const *, void *const *)>(
        lib, n + "_run_host_shaped");
    auto shape_for = sym<int (*)(const int64_t *const *, int, int64_t *)>(lib, n + "_output_shape_for");
    auto last_error = sym<const char *(*)()>(lib, n + "_last_error");
    std::vector<const int64_t *> in_shapes;
    for (auto &sh : shapes) in_shapes.push_back(sh.data());
    std::vector<Port> outs_p = m.outputs;
    for (size_t k = 0; k < outs_p.size(); k++) {
        outs_p[k].shape.assign(outs_p[k].shape.size(), 0);
        if (shape_for(in_shapes.data(), (int)k, outs_p[k].shape.data()) != 0) die(std::string(last_error()));
    }
    std::vector<AlignedBuffer> ins, outs;
    uint64_t state = 1;
    for (size_t k = 0; k < m.inputs.size(); k++) {
        Port p = m.inputs[k];
        p.shape = shapes[k];
        ins.emplace_back(p.bytes());
        for (size_t e = 0; e < p.numel(); e++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            double v = (double)(state >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
            if (p.dtype == "f32") ((float *)ins.back().data())[e] = (float)v;
            else if (p.dtype == "f64") ((double *)ins.back().data())[e] = v;
            else memset(ins.back().data(), 0, p.bytes());
        }
    }
    for (const auto &p : outs_p) {
        outs.emplace_back(p.bytes());
        memset(outs.back().data(), 0xFF, p.bytes());
    }
    std::vector<const void *> hin;
    std::vector<void *> hout;
    for (auto &d : ins) hin.push_back(d.data());
    for (auto &o : outs) hout.push_back(o.data());
    void *model = sym<void *(*)()>(lib, n + "_create")();
    if (!model) die("create failed");
    if (run_shaped_fn(model, in_shapes.data(), hin.data(), hout.data()) != 0) die(std::string(last_error()));
    bool ok = true;
    std::string at;
    for (size_t k = 0; k < m.inputs.size(); k++) at += (k ? " " : "") + m.inputs[k].name + "=" + dims_str(shapes[k]);
    for (size_t k = 0; k < outs_p.size(); k++) {
        size_t nan = 0;
        for (size_t e = 0; e < outs_p[k].numel(); e++) nan += std::isnan(as_double(outs[k].data(), outs_p[k].dtype, e));
        ok = ok && nan == 0;
        printf("output %s at %s: %s, %zu NaN -> %s (no reference at this size; `loom run MODEL --artifact %s --input "
               "... --check` compares)\n", outs_p[k].name.c_str(), at.c_str(), dims_str(outs_p[k].shape).c_str(), nan,
               nan ? "FAIL" : "ok", dir.c_str());
    }
    std::vector<double> times;
    for (int r = 0; r < warmup; r++) run_shaped_fn(model, in_shapes.data(), hin.data(), hout.data());
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        if (run_shaped_fn(model, in_shapes.data(), hin.data(), hout.data()) != 0) die(std::string(last_error()));
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    sym<void (*)(void *)>(lib, n + "_destroy")(model);
    double med = times.empty() ? 0 : median(times);
    printf("RESULT %s mode=host ok=%d median_ms=%.5f reps=%d at %s\n", n.c_str(), ok ? 1 : 0, med, (int)times.size(),
           at.c_str());
    return ok ? 0 : 3;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2)
        die("usage: loom_run <artifact dir> [--reps N] [--warmup N] [--tol T] [--mode host|device] [--json FILE] "
            "[--no-graphs] [--input NAME=DIMS ...]");
    std::string dir = argv[1], mode, json;
    int reps = 100, warmup = 10;
    bool graphs = true;
    double tol = -1;  // --tol; else data/tolerance.txt, else 1e-5
    std::vector<std::string> shaped;  // --input NAME=DIMS: run a model compiled for every size at them
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
        else if (a == "--input") shaped.push_back(next());
        else die("unknown option " + a);
    }
    Manifest m = read_manifest(dir);
    if (mode.empty()) mode = m.cuda ? "device" : "host";
#ifndef LOOM_RUN_CUDA
    if (mode == "device") die("this loom_run was built without CUDA (LOOM_RUN_CUDA); use --mode host");
#endif
    void *lib = dlopen((dir + "/" + m.library).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) die(std::string("cannot load the artifact: ") + dlerror());
    if (!shaped.empty()) {
        if (mode != "host") die("--input runs host artifacts (a CUDA artifact takes the sizes it was compiled for)");
        return run_shaped(dir, m, lib, shaped, reps, warmup);
    }
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
        in_data.push_back(read_npy(dir + "/data/" + loom::tensor_file_stem(p.name) + ".npy", d, sh));
        if (sh != p.shape || d != npy_descr_of(p.dtype)) die("data/" + loom::tensor_file_stem(p.name) + ".npy: shape or dtype differs from the manifest");
        if (p.dtype == "bf16") {  // the artifact takes bf16 bits
            std::string bits(p.bytes(), '\0');
            for (size_t e = 0; e < p.numel(); e++) ((uint16_t *)&bits[0])[e] = float_to_bf16_bits(((const float *)in_data.back().data())[e]);
            in_data.back() = bits;
        }
    }
    for (const auto &p : m.outputs) {
        std::string d;
        std::vector<int64_t> sh;
        ref_data.push_back(read_npy(dir + "/data/expected_" + loom::tensor_file_stem(p.name) + ".npy", d, sh));
        ref_descr.push_back(d);
        if (sh != p.shape) die("data/expected_" + loom::tensor_file_stem(p.name) + ".npy: shape differs from the manifest");
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
