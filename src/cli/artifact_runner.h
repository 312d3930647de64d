/// \file
/// `loom run M --artifact DIR`: a `loom compile` artifact's C API (codegen/runtime_glue.h) loaded
/// into this process with dlopen and run on Tensors, at the shapes of the inputs it is given: any
/// size for a model compiled for every size (`<name>_run_host_shaped`), the compiled size otherwise.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace loom::cli {

class ArtifactRunner {
public:
    /// Loads `DIR/manifest.txt` and its library. UserError naming \p dir and what is missing.
    explicit ArtifactRunner(const std::string &dir);
    ~ArtifactRunner();
    ArtifactRunner(const ArtifactRunner &) = delete;
    ArtifactRunner &operator=(const ArtifactRunner &) = delete;

    /// Runs the artifact on \p inputs (by input name, in the artifact's dtypes), outputs poisoned
    /// first; UserError with the artifact's own message (which input, which dim, the fix) when it
    /// refuses the sizes.
    std::map<std::string, Tensor> run(const std::map<std::string, Tensor> &inputs);
    /// Milliseconds of one more run on the inputs of the last run().
    double time_run();
    /// The artifact's name, and its dims line by line ("height 32..2048"; none for one size).
    const std::string &name() const { return name_; }
    const std::vector<std::string> &dims() const { return dims_; }

private:
    void *lib_ = nullptr, *model_ = nullptr;
    std::string dir_, name_;
    std::vector<std::string> dims_;
    std::vector<std::string> input_names_, output_names_, output_dtypes_;
    std::vector<size_t> output_ranks_;
    std::vector<Tensor> last_inputs_, last_outputs_;
    std::vector<Shape> last_shapes_;
    int (*run_shaped_)(void *, const int64_t *const *, const void *const *, void *const *) = nullptr;
    int (*shape_for_)(const int64_t *const *, int, int64_t *) = nullptr;
    const char *(*last_error_)() = nullptr;
    void (*destroy_)(void *) = nullptr;
};

}  // namespace loom::cli
