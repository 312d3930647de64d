/// \file
/// Helpers shared by the tests: compare outputs with the reference, paths of fixtures.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "graph/tensor.h"
#include "support/error.h"

namespace loom::testing {

/// Path of a file under tests/data.
std::string data_path(const std::string &rel);
/// Path of the built `loom` binary.
std::string loom_binary();
/// \p name in the temporary folder, made unique to this process: the suites of two checkouts (a
/// sanitizer build beside the normal one) may run at once.
std::string temp_path(const std::string &name);

/// The message of the UserError \p f throws ("" and a test failure if it throws none);
/// LOOM_SHOW_ERRORS=1 prints each message, to read them while writing a test.
template <typename F>
std::string user_error_of(F f) {
    try {
        f();
    } catch (const UserError &e) {
        if (std::getenv("LOOM_SHOW_ERRORS")) std::fprintf(stderr, "%s\n", e.what());
        return e.what();
    }
    ADD_FAILURE() << "expected a UserError";
    return "";
}

/// Result of comparing an output with a reference.
struct Comparison {
    double rel_error = 0;   ///< ‖out − ref‖ / ‖ref‖ (‖out‖ when ref is all zero)
    double max_abs = 0;     ///< max |out − ref|
    int64_t worst = -1;     ///< flat index of the largest error
    bool any_nan = false;   ///< out has NaN/Inf where ref has none
    bool shape_ok = true;
};
/// Compares \p out with \p ref element by element in double.
Comparison compare(const Tensor &out, const Tensor &ref);
/// gtest assertion: shapes equal, no NaN, rel error < \p rel_tol, max abs < \p abs_tol.
::testing::AssertionResult close(const Tensor &out, const Tensor &ref, double rel_tol = 1e-5,
                                 double abs_tol = 1e-3);

/// A float value no correct kernel writes (a signalling pattern): used to poison outputs.
constexpr float kPoison = -7.77e33f;
/// Fills a tensor with kPoison (floats) or a large sentinel (ints).
void poison(Tensor &t);

/// Runs a shell command, returning its exit code and capturing stdout+stderr into \p output.
int run_command(const std::string &cmd, std::string &output);

/// How many times \p what occurs in \p text (a PTX instruction, a schedule call).
size_t count_of(const std::string &text, const std::string &what);

/// The C API of a `loom compile` shared library, opened as an application would (dlopen,
/// RTLD_LOCAL): model \p model's create, run_host, last_error and destroy. The library is closed
/// with this object; `error` holds dlerror's text when something is missing.
struct ArtifactApi {
    ArtifactApi(const std::string &shared_lib, const std::string &model);
    ~ArtifactApi();
    ArtifactApi(const ArtifactApi &) = delete;
    ArtifactApi &operator=(const ArtifactApi &) = delete;
    /// Every function found.
    bool ok() const { return create && run && last_error && destroy; }
    /// Another of the model's functions, `<model>_<suffix>` (set_threading, run_device…), or nullptr.
    void *symbol(const std::string &suffix) const;

    void *lib = nullptr;
    std::string model, error;
    void *(*create)() = nullptr;
    int (*run)(void *, const void *const *, void *const *) = nullptr;
    const char *(*last_error)() = nullptr;
    void (*destroy)(void *) = nullptr;
};

}  // namespace loom::testing
