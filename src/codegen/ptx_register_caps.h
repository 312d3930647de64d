/// \file
/// Per-kernel register budgets for CUDA artifacts (the schedule primitive `gpu_max_registers(N)`).
///
/// ptxas gives a kernel as many registers as its instruction schedule likes (up to the 64 that
/// Halide's runtime asks the driver for); a row kernel of 512 threads at 34 registers fits 3 blocks
/// on an SM where 32 would fit 4, which costs a memory-bound row kernel much of its speed
/// (bench/DECISIONS.md#d37-gpu-row-kernel). Halide 14 has no schedule handle for it: its
/// runtime reads one process-wide environment variable (HL_CUDA_JIT_MAX_REGISTERS) when it loads a
/// module. Loom instead writes `.maxnreg N` into the PTX of each capped kernel:
///
/// - the artifact links Halide's runtime as a separate object whose `halide_cuda_initialize_kernels`
///   is renamed (objcopy) to `loom_halide_cuda_initialize_kernels`;
/// - the artifact's own `halide_cuda_initialize_kernels` (hidden, so that two artifacts in one
///   process never call each other's) adds the directives to the PTX it is given, once per PTX
///   text, and calls the renamed one.
///
/// Kernels are matched by name: Halide names a kernel `_kernel_<func>_s<stage>_<block var>…`.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace loom {

/// \p ptx with `.maxnreg N` after the parameter list of every kernel of a Func in \p caps (Halide
/// Func name → N); other kernels and all other text unchanged. The same code runs in the artifact.
std::string cap_ptx_registers(const std::string &ptx, const std::map<std::string, int> &caps);

/// The C++ source of the artifact's `halide_cuda_initialize_kernels` applying \p caps (compiled
/// with Halide's runtime headers on the include path).
std::string ptx_register_caps_source(const std::map<std::string, int> &caps);

/// ptxas's verdict on one capped Func: the worst spill of its kernels under the cap, and the
/// smallest budget (a multiple of 8 up to 255) that spills nothing.
struct RegisterCapCheck {
    std::string func, kernel;  ///< the Func and its kernel that spills most
    int cap = 0, spill_bytes = 0, clean_cap = 0;  ///< clean_cap 0: none found up to 255
};

/// Assembles \p ptx capped by \p caps with \p ptxas (`-arch=sm_80 -v`) and reports every capped
/// Func whose kernels spill to local memory; empty when none does. UserError when ptxas cannot run.
std::vector<RegisterCapCheck> check_register_caps(const std::string &ptx, const std::map<std::string, int> &caps,
                                                  const std::string &ptxas);

/// What a build makes of \p budgets (Func → registers) for \p ptx, as warnings for the user: each
/// budget that spills is named with the smallest one that does not, and with \p raise (the
/// auto-scheduler's budgets) replaced by it in \p budgets (dropped when none up to 255 is clean).
/// Nothing when \p ptxas does not exist or \p ptx is empty; a ptxas that cannot read the PTX is a
/// warning too, since the driver assembles the PTX itself at load time.
std::vector<std::string> settle_register_budgets(const std::string &ptx, std::map<std::string, int> &budgets,
                                                 bool raise, const std::string &ptxas);

/// The PTX text that Halide embeds in a pipeline object (\p object's bytes), or "" when none.
std::string embedded_ptx(const std::string &object);

/// The symbol Halide's runtime's `halide_cuda_initialize_kernels` is renamed to in the artifact.
inline constexpr const char *kRenamedInitializeKernels = "loom_halide_cuda_initialize_kernels";

}  // namespace loom
