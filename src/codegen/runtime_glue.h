/// \file
/// The small C API around an ahead-of-time compiled model (`loom compile`), generated per model:
/// the header a user includes and the C++ glue source compiled into the artifact next to Halide's
/// pipeline object and runtime.
///
/// For a model called `m` (names derived from the model file, sanitised) the header declares:
/// \code
///   void *m_create(void);                                             // NULL on failure
///   int   m_run_host(void *h, const void *const *in, void *const *out);   // host pointers
///   int   m_run_device(void *h, const void *const *in, void *const *out); // CUDA device pointers
///   void  m_destroy(void *h);
///   const char *m_last_error(void);        // Halide's last error message ("" if none)
///   void *m_cuda_context(void);            // CUcontext the last CUDA call ran in (NULL on host)
///   int   m_set_cuda_graphs(void *h, int on);  // whole-model CUDA graphs on/off (codegen/cuda_graph_glue.h)
///   const char *m_cuda_graph_status(void *h);  // "graph", or why calls run directly
///   // Any size (a model compiled for every size, `loom compile --dim`/`--dynamic`; host):
///   int   m_run_host_shaped(void *h, const int64_t *const *input_shapes, const void *const *in, void *const *out);
///   int   m_output_shape_for(const int64_t *const *input_shapes, int k, int64_t *shape);
///   int   m_num_sizes(void);  const char *m_size_name(int i);  int64_t m_size_min(int i), m_size_max(int i);
///   const char *m_input_dims(int k), *m_output_dims(int k);  // "batchx3xheightxwidth"
/// \endcode
/// plus the model's shapes (`m_num_inputs`, `m_input_name(k)`, `m_input_rank(k)`,
/// `m_input_shape(k)` …). Inputs and outputs are dense, row-major, in graph order and graph dtype.
///
/// CUDA artifacts share the application's context: `m_create` installs acquire/release handlers
/// through Halide 14's `halide_set_cuda_acquire_context` / `halide_set_cuda_release_context` (the
/// hooks of its weak `halide_cuda_acquire_context`, which by default cuCtxCreate's a context of its
/// own) that return the calling thread's current context, else the primary context of Halide's
/// device (the one the CUDA runtime API uses), so cudaMalloc'd pointers can be passed to
/// `m_run_device` (tools/loom_run checks that the contexts are the same). The glue loads libcuda with dlopen, so the
/// artifact needs no libcudart. `m_run_device` enqueues on the default stream and returns without a
/// device sync (from the second call in a row with the same pointers on, as one CUDA graph); `m_run_host` copies in, runs, copies out and frees its device buffers.
#pragma once

#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/sym_dim.h"
#include "graph/tensor.h"

namespace loom {

/// What the glue needs to know about one model.
struct GlueSpec {
    std::string name;           ///< C identifier prefix of the API (`m` above)
    std::string halide_fn;      ///< the Halide pipeline function (its `_argv` entry is called)
    std::string target;         ///< Halide target string (returned by `m_target()`)
    bool cuda = false;          ///< target has CUDA: device entry points and the context override
    std::vector<std::string> input_names, output_names;
    std::vector<Shape> input_shapes, output_shapes;
    std::vector<DType> input_dtypes, output_dtypes;
    /// Dynamic shapes (inactive: a model of one size): the size symbols, Halide's scalar arguments
    /// in the order of dynamic.symbols, between the inputs and the outputs; each input's and
    /// output's symbolic shape (empty for a static one). `m_run_host_shaped` reads the sizes from
    /// the inputs' shapes, checks them, and runs at them; the shapes above are the planned ones.
    DynamicDims dynamic;
    std::vector<SymShape> input_syms, output_syms;
};

/// The C header of the API (`<name>.h`).
std::string glue_header(const GlueSpec &s);

/// The C++ source of the glue (compiled with Halide's runtime headers on the include path).
std::string glue_source(const GlueSpec &s);

/// \p d as a C expression over `<array>[i]`, the int64_t value of symbol i of \p syms; a floor
/// division calls `floordiv64`, which kFloorDiv64Source defines.
std::string sym_dim_c_expr(const SymDim &d, const std::vector<std::string> &syms, const std::string &array);
/// C source of `int64_t floordiv64(int64_t a, int64_t b)`: floor division (0 when b is 0).
extern const char *const kFloorDiv64Source;

/// Halide's type code/bits for a Loom dtype, as the glue writes them into halide_type_t
/// ("halide_type_float, 32").
std::string glue_halide_type(DType t);

}  // namespace loom
