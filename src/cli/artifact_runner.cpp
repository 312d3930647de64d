#include "cli/artifact_runner.h"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/error.h"

namespace loom::cli {

namespace {

template <typename T>
T symbol(void *lib, const std::string &name, const std::string &dir) {
    void *p = dlsym(lib, name.c_str());
    user_check(p != nullptr, "--artifact ", dir, ": the library has no ", name, "; compile the model again with this "
               "loom (`loom compile M --dim NAME=LO..HI -o ", dir, " --force`)");
    return reinterpret_cast<T>(p);
}

}  // namespace

ArtifactRunner::ArtifactRunner(const std::string &dir) : dir_(dir) {
    std::ifstream f(dir + "/manifest.txt");
    user_check(bool(f), "--artifact ", dir, ": no manifest.txt there; give the folder `loom compile ... -o DIR` wrote");
    std::string line, library;
    while (std::getline(f, line)) {
        std::istringstream is(line);
        std::string key;
        is >> key;
        if (key == "name") is >> name_;
        else if (key == "library") is >> library;
        else if (key == "dim") {
            std::string d, lo, hi;
            is >> d >> lo >> hi;
            dims_.push_back(d + " " + lo + ".." + hi);
        } else if (key == "input" || key == "output") {
            std::string n, dt;
            is >> n >> dt;
            int64_t d;
            size_t rank = 0;
            while (is >> d) rank++;
            if (key == "input") input_names_.push_back(n);
            else output_names_.push_back(n), output_dtypes_.push_back(dt), output_ranks_.push_back(rank);
        } else if (key == "cuda") {
            int cuda = 0;
            is >> cuda;
            user_check(!cuda, "--artifact ", dir, ": a CUDA artifact; `loom run --artifact` runs host ones (tools/loom_run "
                       "runs CUDA artifacts)");
        }
    }
    user_check(!name_.empty() && !library.empty(), "--artifact ", dir, ": manifest.txt names no model or library");
    std::string path = dir + "/" + library;
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    user_check(lib_ != nullptr, "--artifact ", dir, ": cannot load ", path, ": ", dlerror());
    run_shaped_ = symbol<decltype(run_shaped_)>(lib_, name_ + "_run_host_shaped", dir);
    shape_for_ = symbol<decltype(shape_for_)>(lib_, name_ + "_output_shape_for", dir);
    last_error_ = symbol<decltype(last_error_)>(lib_, name_ + "_last_error", dir);
    destroy_ = symbol<decltype(destroy_)>(lib_, name_ + "_destroy", dir);
    model_ = symbol<void *(*)()>(lib_, name_ + "_create", dir)();
    user_check(model_ != nullptr, "--artifact ", dir, ": ", name_, "_create failed: ", last_error_());
}

ArtifactRunner::~ArtifactRunner() {
    if (model_) destroy_(model_);
    if (lib_) dlclose(lib_);
}

std::map<std::string, Tensor> ArtifactRunner::run(const std::map<std::string, Tensor> &inputs) {
    last_inputs_.clear();
    last_shapes_.clear();
    for (const auto &n : input_names_) {
        auto it = inputs.find(n);
        internal_check(it != inputs.end(), "artifact input '", n, "' not given");
        last_inputs_.push_back(it->second);
        last_shapes_.push_back(it->second.shape());
    }
    std::vector<const int64_t *> shapes;
    for (const auto &s : last_shapes_) shapes.push_back(s.data());
    std::vector<const void *> in;
    for (const auto &t : last_inputs_) in.push_back(t.data());
    last_outputs_.clear();
    std::vector<void *> out;
    std::map<std::string, Tensor> result;
    for (size_t k = 0; k < output_names_.size(); k++) {
        Shape s(output_ranks_[k], 0);
        if (shape_for_(shapes.data(), (int)k, s.data()) != 0) throw UserError(str_cat("--artifact ", dir_, ": ", last_error_()));
        last_outputs_.emplace_back(dtype_from_name(output_dtypes_[k]), s);
        Tensor &t = last_outputs_.back();
        std::memset(t.data(), 0xFF, t.bytes().size());  // NaN in every float format
    }
    for (auto &t : last_outputs_) out.push_back(t.data());
    if (run_shaped_(model_, shapes.data(), in.data(), out.data()) != 0)
        throw UserError(str_cat("--artifact ", dir_, ": ", last_error_()));
    for (size_t k = 0; k < output_names_.size(); k++) result.emplace(output_names_[k], last_outputs_[k]);
    return result;
}

double ArtifactRunner::time_run() {
    std::vector<const int64_t *> shapes;
    for (const auto &s : last_shapes_) shapes.push_back(s.data());
    std::vector<const void *> in;
    for (const auto &t : last_inputs_) in.push_back(t.data());
    std::vector<void *> out;
    for (auto &t : last_outputs_) out.push_back(t.data());
    auto t0 = std::chrono::steady_clock::now();
    if (run_shaped_(model_, shapes.data(), in.data(), out.data()) != 0)
        throw UserError(str_cat("--artifact ", dir_, ": ", last_error_()));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace loom::cli
