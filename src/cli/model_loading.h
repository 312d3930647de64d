/// \file
/// What every `loom` command does first: import a model file, bind its input shapes, and prepare
/// it (canonical form); and the input/output files of `loom run`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes.h"

namespace loom::cli {

/// Dynamic shapes asked for on the command line: `--dim NAME=LO..HI` flags (those dims kept open)
/// or `--dynamic` / several `--input` sets (every open dim kept open).
struct DynamicRequest {
    std::map<std::string, DimRange> dims;
    bool all = false;
    bool active() const { return all || !dims.empty(); }
};

/// Imports \p path (ONNX) and runs prepare_graph with the `--input` bindings given as text. With
/// \p inputs_dir (`loom run --inputs DIR`), an input that has unbound dims and no `--input` flag of
/// its own takes its shape from `<inputs_dir>/<input>.npy`. UserError naming the file when its rank
/// differs from the input's, or when two files give one symbolic dim two sizes.
/// With \p dynamic active, the graph is prepared for every size (graph/symbolic_shapes.h), the
/// `--input` bindings giving the representative sizes. \p attention: recognize_attention's mode
/// (Off for training and for CUDA artifacts, whose attention stays batched cuBLAS products around a
/// softmax kernel). \p linear_exact_gelu: when not negative, run fuse_linear_exact_gelu on the
/// prepared graph with that slack (CUDA in BF16: cli/scheduling.h, linear_exact_gelu).
Graph load_model(const std::string &path, const std::vector<std::string> &input_flags,
                 bool dump_passes = false, const std::string &inputs_dir = "", const DynamicRequest &dynamic = {},
                 AttentionFusion attention = AttentionFusion::Halide, double linear_exact_gelu = -1);

/// prepare_graph on an imported graph \p g with the `--input` bindings given as text.
Graph prepare_model(Graph g, const std::vector<std::string> &input_flags, bool dump_passes = false,
                    const std::string &inputs_dir = "", const DynamicRequest &dynamic = {},
                    AttentionFusion attention = AttentionFusion::Halide, double linear_exact_gelu = -1);

/// One line per graph input and output of a graph compiled for every size: its symbolic shape,
/// then the symbols with their ranges and representative sizes.
std::string describe_dynamic(const Graph &g);

/// Inputs for a run: `<dir>/<input name>.npy` for every graph input when \p dir is given,
/// else random from \p seed. UserError naming a missing file or a shape mismatch.
std::map<std::string, Tensor> make_inputs(const Graph &g, const std::string &dir, uint64_t seed);

/// Writes each tensor to `<dir>/<name>.npy` (each file atomically), cast to \p dtypes[name].
void save_outputs(const std::string &dir, const std::map<std::string, Tensor> &outs,
                  const Graph &g);

/// One line per tensor: name, dtype, shape, min/mean/max and the first values.
std::string summarize(const std::map<std::string, Tensor> &outs);

}  // namespace loom::cli
