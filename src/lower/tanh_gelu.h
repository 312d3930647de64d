/// \file
/// When an exact (Erf) GELU may run as the tanh-form GELU that cuBLASLt's GELU_BIAS epilogue
/// computes: the stated bound on the difference of the two forms, and the precisions whose operand
/// rounding it stays under (bench/DECISIONS.md#d203-cuda-bf16-exact-gelu-as-the-tanh-epilogue).
#pragma once

#include "lower/precision.h"

namespace loom {

/// The largest deviation of the tanh-form GELU from the exact one relative to its argument:
/// |gelu_tanh(x) − gelu_erf(x)| ≤ kTanhGeluDeviation · |x| for every x (1.79e-4, at x ≈ −2.59; the
/// absolute maximum is 4.7e-4, at x ≈ −2.70).
inline constexpr double kTanhGeluDeviation = 1.8e-4;

/// Whether an exact GELU after a GEMM may run as cuBLASLt's tanh-form GELU_BIAS epilogue when the
/// GEMM's operands are rounded to \p p: when kTanhGeluDeviation is under a sixteenth of p's unit
/// roundoff, so that the change is small beside the rounding the product already carries and a
/// small part of the output check's tolerance (measure/output_tolerance.h: 4·u at depth up to 4).
/// BF16 only (u = 2^-8: 1.8e-4 < 2.4e-4); in FP16 and TF32 (u = 2^-11) it would be a third of the
/// rounding, in FP32 larger than it, so those keep the exact form.
inline bool tanh_gelu_within_rounding(Precision p) { return kTanhGeluDeviation < unit_roundoff(p) / 16; }

/// How far from the exact GELU, relative to its argument, a region fuse_linear_exact_gelu takes
/// may compute when it is to run as the tanh epilogue under \p p: what is left of a sixteenth of p's
/// unit roundoff beside kTanhGeluDeviation (BF16: 6.4e-5), so that the two together stay under
/// tanh_gelu_within_rounding's bound. A bf16 model's GELU has BF16 constants (√2 as 1.4140625, within
/// 2.6e-5·|x| of the exact GELU) and is taken; 0 where the tanh form is not allowed.
inline double exact_gelu_region_slack(Precision p) {
    return tanh_gelu_within_rounding(p) ? unit_roundoff(p) / 16 - kTanhGeluDeviation : 0;
}

}  // namespace loom
