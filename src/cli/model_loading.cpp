#include "cli/input_binding.h"
#include "cli/model_loading.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "frontends/onnx/onnx_import.h"
#include "graph/gelu_recognition.h"
#include "graph/npy.h"
#include "reference/folding.h"
#include "reference/reference.h"
#include "support/error.h"
#include "support/tensor_file_name.h"

namespace loom::cli {

namespace fs = std::filesystem;

namespace {

// Binds each input that still has unknown dims, and that \p b does not bind whole, to the shape of
// its .npy file in \p dir (when there is one: make_inputs names a missing file).
void bind_from_files(const Graph &g, const std::string &dir, InputBindings &b) {
    std::map<std::string, std::pair<int64_t, std::string>> symbol_sizes;  // symbol -> (size, file)
    for (const auto &name : g.inputs) {
        const ValueInfo &vi = g.value(name);
        bool unknown = std::any_of(vi.shape.begin(), vi.shape.end(), [](int64_t d) { return d < 0; });
        fs::path p = fs::path(dir) / (tensor_file_stem(name) + ".npy");
        if (!unknown || b.count(name) || !fs::exists(p)) continue;
        Shape file_shape = read_npy(p.string()).shape();
        std::vector<std::string> dims;
        for (size_t d = 0; d < vi.shape.size(); d++)
            dims.push_back(vi.shape[d] >= 0 ? std::to_string(vi.shape[d])
                           : d < vi.symbols.size() && !vi.symbols[d].empty() ? vi.symbols[d] : "?");
        std::string declared;
        for (size_t d = 0; d < dims.size(); d++) declared += (d ? "x" : "") + dims[d];
        user_check(file_shape.size() == vi.shape.size(), p.string(), ": shape ", shape_str(file_shape), " has rank ",
                   file_shape.size(), " but input '", name, "' is ", declared, " (rank ", vi.shape.size(),
                   "); write the file with that rank");
        for (size_t d = 0; d < vi.shape.size(); d++) {
            if (vi.shape[d] >= 0 || d >= vi.symbols.size() || vi.symbols[d].empty()) continue;
            const std::string &sym = vi.symbols[d];
            if (b.count(sym)) continue;  // bound by a flag: make_inputs checks the file against it
            auto [it, fresh] = symbol_sizes.emplace(sym, std::make_pair(file_shape[d], p.string()));
            user_check(fresh || it->second.first == file_shape[d], "--inputs ", dir, ": dim '", sym, "' is ",
                       it->second.first, " in ", it->second.second, " but ", file_shape[d], " in ", p.string(),
                       "; make the files agree or bind it with --input ", sym, "=N");
        }
        b[name] = file_shape;
    }
}

// The value of environment switch \p name: "", "0" or "1"; anything else is a UserError naming the
// variable and what each value does.
std::string switch_from_env(const char *name, const char *on, const char *off) {
    const char *env = std::getenv(name);
    const std::string v = env ? env : "";
    user_check(v.empty() || v == "0" || v == "1", name, "='", v, "' is neither 0 nor 1; set ", name, "=1 (", on, "), ",
               name, "=0 (", off, "), or unset it");
    return v;
}

}  // namespace

Graph prepare_model(Graph g, const std::vector<std::string> &input_flags, bool dump_passes,
                    const std::string &inputs_dir, const DynamicRequest &dynamic, AttentionFusion attention,
                    double linear_exact_gelu) {
    PrepareOptions opts;
    opts.dump = dump_passes;
    opts.dynamic_dims = dynamic.dims;
    opts.dynamic_all = dynamic.all;
    // Loom's own fused attention (CPU) is opt-in: on the 2-core build machine it ran slower than the
    // unfused ops (bench/DECISIONS.md#d88-cpu-fused-attention); cuDNN's (CUDA, BF16) is on by default.
    const std::string fuse = switch_from_env("LOOM_FUSE_ATTENTION", "fuse attention on the CPU too", "never fuse it");
    opts.attention = fuse == "0" || (attention == AttentionFusion::Halide && fuse != "1") ? AttentionFusion::Off : attention;
    // Winograd 3x3 convs are opt-in: through today's schedules they run slower than the direct conv
    // (bench/DECISIONS.md#d169-winograd-f23-as-a-graph-rewrite-opt-in).
    opts.winograd = switch_from_env("LOOM_WINOGRAD", "3x3 stride-1 convs as Winograd F(2x2, 3x3)",
                                    "direct convs, the default") == "1";
    for (const auto &f : input_flags) parse_input_binding(f, opts.bindings);
    if (!inputs_dir.empty()) bind_from_files(g, inputs_dir, opts.bindings);
    prepare_graph(g, opts);
    // Static shapes only: a graph kept open for every size stays as prepared.
    if (linear_exact_gelu >= 0 && !opts.dynamic() && fuse_linear_exact_gelu(g, linear_exact_gelu) > 0) g.validate();
    return g;
}

Graph load_model(const std::string &path, const std::vector<std::string> &input_flags, bool dump_passes,
                 const std::string &inputs_dir, const DynamicRequest &dynamic, AttentionFusion attention,
                 double linear_exact_gelu) {
    Graph g = import_onnx(path);
    // What preparation finds wrong (a bad attribute, an unbound dim) is about this file: say so.
    try {
        return prepare_model(std::move(g), input_flags, dump_passes, inputs_dir, dynamic, attention, linear_exact_gelu);
    } catch (const UserError &e) {
        std::string m = e.what();
        if (m.rfind(path, 0) == 0) throw;
        throw UserError(path + ": " + m);
    }
}

std::string describe_dynamic(const Graph &g) {
    std::ostringstream os;
    for (const auto *names : {&g.inputs, &g.outputs})
        for (const auto &n : *names) {
            const ValueInfo &vi = g.value(n);
            os << "  " << (names == &g.inputs ? "input  " : "output ") << n << ": "
               << (vi.sym.empty() ? shape_str(vi.shape) : sym_shape_str(vi.sym)) << "\n";
        }
    for (const auto &s : g.dynamic.symbols) {
        const DimRange &r = g.dynamic.ranges.at(s);
        os << "  dim " << s << " in " << r.lo << ".." << r.hi << " (planned at " << g.dynamic.representative.at(s)
           << ")\n";
    }
    return os.str();
}

std::map<std::string, Tensor> make_inputs(const Graph &g, const std::string &dir, uint64_t seed) {
    if (dir.empty()) return random_inputs(g, seed);
    std::map<std::string, Tensor> ins;
    for (const auto &name : g.inputs) {
        fs::path p = fs::path(dir) / (tensor_file_stem(name) + ".npy");
        user_check(fs::exists(p), "--inputs ", dir, ": no file ", p.string(), " for graph input '", name,
                   "'; write one .npy per input named after it ('/' and '%' in a name written as %2F and %25)");
        Tensor t = read_npy(p.string());
        const ValueInfo &vi = g.value(name);
        user_check(t.shape() == vi.shape, p.string(), ": shape ", shape_str(t.shape()), " but input '",
                   name, "' is bound to ", shape_str(vi.shape), " (use --input ", name, "=",
                   shape_str(t.shape()), " to bind it to the file's shape)");
        ins[name] = t.dtype() == vi.dtype ? t : t.cast(vi.dtype);
    }
    return ins;
}

void save_outputs(const std::string &dir, const std::map<std::string, Tensor> &outs, const Graph &g) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    user_check(!ec, "--save ", dir, ": cannot create the directory (", ec.message(), ")");
    for (const auto &kv : outs) {
        const ValueInfo &vi = g.value(kv.first);
        write_npy((fs::path(dir) / (tensor_file_stem(kv.first) + ".npy")).string(),
                  kv.second.dtype() == vi.dtype ? kv.second : kv.second.cast(vi.dtype));
    }
}

std::string summarize(const std::map<std::string, Tensor> &outs) {
    std::ostringstream os;
    for (const auto &kv : outs) {
        const Tensor &t = kv.second;
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        int64_t nans = 0;
        for (int64_t i = 0; i < t.numel(); i++) {
            double v = t.get(i);
            if (std::isnan(v)) {
                nans++;
                continue;
            }
            lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
        }
        os << "  " << kv.first << ": " << shape_str(t.shape()) << "  min " << lo << "  mean "
           << (t.numel() ? sum / t.numel() : 0) << "  max " << hi;
        if (nans) os << "  NaN x" << nans;
        os << "  [";
        for (int64_t i = 0; i < std::min<int64_t>(4, t.numel()); i++) os << (i ? ", " : "") << t.get(i);
        os << (t.numel() > 4 ? ", …]" : "]") << "\n";
    }
    return os.str();
}

}  // namespace loom::cli
