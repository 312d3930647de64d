/// \file
/// How far a compiled model's output may be from the FP64 reference interpreter's and still be
/// right: a tolerance on ‖out − ref‖ / ‖ref‖ that fits the model's depth, the precision its GEMMs
/// and convs ran in, and the scale its output is computed at, so that a FAIL means a bug.
///
/// The rule (one per output):
///
///     rtol = base(precision) × √max(1, depth / 4) × sensitivity
///
/// - base: 1e-5 in FP32 (rounding of FP32 accumulation, what a few ops reach); 4·u for operands
///   rounded to the low precision (u = unit roundoff: 2^-11 for TF32 and FP16, so 1.95e-3; 2^-8
///   for BF16, so 1.56e-2); at least the low-precision base of the narrowest 16-bit float an
///   ancestor value is rounded to (a model's Cast to f16/bf16, the rounding of an f16/bf16
///   output: graph/passes.h widen_half_precision), since the compiled f32 value and the reference's
///   f64 one can round to neighbouring f16/bf16 values there.
/// - depth: the accumulating ops (MatMul, Gemm, Conv, ConvTranspose, reductions, norms, softmax,
///   average pools) on the longest path from an input to the output. Each adds its own rounding,
///   independent of the others', so errors add in quadrature; up to 4 keep the base.
/// - sensitivity: where the output is an exponential of its input (Sigmoid, Exp, Softmax, reached
///   through Reshape/Transpose/Slice), an absolute error δx of the input x, which is relative to
///   x's own scale, becomes the relative error y·δx / y = δx of the output: κ = max(1, rms(x)).
///   A sigmoid map of logits near −10 is a hundred-thousandth of the values it came from, and a
///   plain 1e-5 failed such an output whose largest absolute error was 2e-8.
///
/// The result is capped at 0.1: past that, a check no longer tells a right answer from a wrong one.
#pragma once

#include <map>
#include <string>

#include "graph/graph.h"
#include "lower/precision.h"

namespace loom {

/// One output's tolerance and the terms of the rule that gave it.
struct OutputTolerance {
    double rtol = 1e-5;        ///< the bound on ‖out − ref‖ / ‖ref‖
    double base = 1e-5;        ///< base(precision)
    int depth = 0;             ///< accumulating ops on the longest path to the output
    double sensitivity = 1;    ///< κ
    std::string sensitive_op;  ///< "Sigmoid 'name'" when κ came from one, else ""
    Precision precision = Precision::FP32;
    Precision storage = Precision::FP32;  ///< FP16/BF16 when an ancestor is rounded to f16/bf16
    bool fixed = false;        ///< given by the user (--rtol, --tol), not by the rule
    /// "3.2e-05 (fp32: 1e-05 × √(17/4) depth × 1.6 Sigmoid 'out' input rms)"; ", f16 storage"
    /// after the precision when \p storage raised the base.
    std::string describe() const;
};

/// Accumulating ops on the longest path from a graph input or constant to \p value.
int accumulation_depth(const Graph &g, const std::string &value);

/// The input of the Sigmoid/Exp/Softmax that \p output is (through Reshape, Transpose and Slice),
/// or "" when it is none.
std::string sensitive_input(const Graph &g, const std::string &output);

/// The rule above for \p output; \p sensitive_value holds the sensitive input's values (FP64
/// reference), or nullptr when the output has none.
OutputTolerance output_tolerance(const Graph &g, const std::string &output, Precision p,
                                 const Tensor *sensitive_value);

/// run_reference, and each output's tolerance in \p tolerances (the sensitive inputs' values come
/// from the same run).
std::map<std::string, Tensor> run_reference_with_tolerances(const Graph &g,
                                                            const std::map<std::string, Tensor> &inputs,
                                                            Precision p,
                                                            std::map<std::string, OutputTolerance> &tolerances);

/// ‖out − ref‖ / ‖ref‖ (‖out − ref‖ when ref is all zeros), max |out − ref| and the count of
/// elements that are not finite where the reference is; shapes must match (InternalError).
struct OutputError {
    double rel = 0, max_abs = 0;
    int64_t worst = 0, non_finite = 0;
    bool passes(double rtol) const { return non_finite == 0 && rel < rtol; }
};
OutputError output_error(const Tensor &out, const Tensor &ref);

/// The lines of `data/tolerance.txt` that `loom compile` writes beside the reference outputs and
/// tools/loom_run reads: "<output> <rtol> <describe()>", one per output.
std::string tolerance_file_text(const std::map<std::string, OutputTolerance> &tolerances);

}  // namespace loom
