#include "cli/model_loading.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "frontends/onnx/onnx_import.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "reference/reference.h"

namespace loom::cli {

namespace fs = std::filesystem;

Graph load_model(const std::string &path, const std::vector<std::string> &input_flags, bool dump_passes) {
    Graph g = import_onnx(path);
    PrepareOptions opts;
    opts.dump = dump_passes;
    for (const auto &f : input_flags) parse_input_binding(f, opts.bindings);
    prepare_graph(g, opts);
    return g;
}

std::map<std::string, Tensor> make_inputs(const Graph &g, const std::string &dir, uint64_t seed) {
    if (dir.empty()) return random_inputs(g, seed);
    std::map<std::string, Tensor> ins;
    for (const auto &name : g.inputs) {
        fs::path p = fs::path(dir) / (name + ".npy");
        user_check(fs::exists(p), "--inputs ", dir, ": no file ", p.string(), " for graph input '", name,
                   "'; write one .npy per input named after it");
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
        write_npy((fs::path(dir) / (kv.first + ".npy")).string(),
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
