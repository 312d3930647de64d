#include "test_util.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::testing {

std::string data_path(const std::string &rel) { return std::string(LOOM_SOURCE_DIR) + "/tests/data/" + rel; }
std::string loom_binary() { return LOOM_BINARY; }
std::string temp_path(const std::string &name) {
    return ::testing::TempDir() + "loom_" + std::to_string(::getpid()) + "_" + name;
}

Comparison compare(const Tensor &out, const Tensor &ref) {
    Comparison c;
    if (out.shape() != ref.shape()) {
        c.shape_ok = false;
        return c;
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); i++) {
        double o = out.get(i), r = ref.get(i);
        if (!std::isfinite(o) && std::isfinite(r)) c.any_nan = true;
        double d = std::isfinite(o) ? std::abs(o - r) : INFINITY;
        num += d * d;
        den += r * r;
        if (d > c.max_abs || c.worst < 0) c.max_abs = d, c.worst = i;
    }
    if (den == 0) den = 1;  // all-zero reference: absolute error
    c.rel_error = std::sqrt(num / den);
    if (std::isnan(c.rel_error)) c.any_nan = true;
    return c;
}

::testing::AssertionResult close(const Tensor &out, const Tensor &ref, double rel_tol, double abs_tol) {
    Comparison c = compare(out, ref);
    if (!c.shape_ok)
        return ::testing::AssertionFailure()
               << "shape " << shape_str(out.shape()) << " != reference " << shape_str(ref.shape());
    if (c.any_nan) return ::testing::AssertionFailure() << "output has NaN/Inf (index " << c.worst << ")";
    if (!(c.rel_error < rel_tol) || !(c.max_abs < abs_tol))
        return ::testing::AssertionFailure() << "rel error " << c.rel_error << " (tol " << rel_tol
                                             << "), max abs " << c.max_abs << " at flat index "
                                             << c.worst << " (out " << out.get(c.worst) << ", ref "
                                             << ref.get(c.worst) << ")";
    return ::testing::AssertionSuccess() << "rel " << c.rel_error;
}

void poison(Tensor &t) {
    for (int64_t i = 0; i < t.numel(); i++) {
        if (dtype_is_float(t.dtype())) t.set(i, kPoison);
        else t.set_int(i, 0x5A5A5A5A);
    }
}

size_t count_of(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
    return n;
}

int run_command(const std::string &cmd, std::string &output) {
    output.clear();
    FILE *p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

ArtifactApi::ArtifactApi(const std::string &shared_lib, const std::string &model_name) : model(model_name) {
    lib = dlopen(shared_lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        error = dlerror();
        return;
    }
    create = (void *(*)())symbol("create");
    run = (int (*)(void *, const void *const *, void *const *))symbol("run_host");
    last_error = (const char *(*)())symbol("last_error");
    destroy = (void (*)(void *))symbol("destroy");
    if (!ok()) error = "missing functions of " + model + " in " + shared_lib;
}

ArtifactApi::~ArtifactApi() {
    if (lib) dlclose(lib);
}

void *ArtifactApi::symbol(const std::string &suffix) const { return lib ? dlsym(lib, (model + "_" + suffix).c_str()) : nullptr; }

}  // namespace loom::testing
