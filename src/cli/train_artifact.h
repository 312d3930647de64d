/// \file
/// `loom compile M --train`: a training step (autodiff/training_step.h) compiled ahead of time
/// into an artifact that owns the parameters and the optimizer state. Beside the usual
/// `lib<name>.a/.so` (the step's pipeline with its plain C API, runtime_glue.h) the folder holds
///
///     lib<name>_train.so   the trainer: the pipeline plus the glue below, parameters' initial
///                          values embedded (.incbin of params.bin)
///     <name>_train.h       its C API:
///
///   void *N_train_create(void);     // parameters at the model file's values, state zero; NULL on failure
///   int   N_train_step(void *t, const void *const *inputs, const void *target, float *loss);
///   int   N_train_num_parameters(void);  const char *N_train_parameter_name(int k);
///   int64_t N_train_parameter_size(int k);  float *N_train_parameter(void *t, int k);
///   int   N_train_num_state(void);  const char *N_train_state_name(int k);
///   int64_t N_train_state_size(int k);  float *N_train_state(void *t, int k);
///   int   N_train_num_buffers(void);  const char *N_train_buffer_name(int k);   // BatchNorm running
///   int64_t N_train_buffer_size(int k);  float *N_train_buffer(void *t, int k);  // mean and var
///   void  N_train_set_learning_rate(void *t, float lr);  float N_train_learning_rate(void *t);
///   int64_t N_train_steps(void *t);  const char *N_train_last_error(void);  void N_train_destroy(void *t);
///
/// `step` runs forward, backward and the update. On the CPU each parameter (state, buffer) is
/// stored once and its new value written over it, in the model's layout, where the lowered
/// pipeline reads no element of it after writing that element (codegen/in_place_outputs.h; all of
/// the bench models' large ones); any other is written into a second buffer that then becomes the
/// current one. Either way a pointer from N_train_parameter is valid (read and write) until the
/// next step; a step that fails may leave the parameters partly updated. On CUDA targets the
/// trainer keeps them on the device, written into a second set and copied back
/// (N_train_step_device, N_train_synchronize; N_train_parameter copies one to the host).
#pragma once

#include <string>
#include <vector>

#include "cli/scheduling.h"

namespace loom::cli {

/// What `loom compile --train` was given.
struct TrainCompileOptions {
    std::string model, target = "host", schedule, out, name, loss = "mse", optimizer = "sgd";
    std::vector<std::string> inputs;
    double lr = 0.01;
    bool force = false, print_schedule = false;
    std::string recompute = "min-cut";  ///< the save-or-recompute partition (training_model.h)
    std::string report;  ///< write the fusion report of the step's schedule here ("" none)
    /// --machine: plan for a fixed machine (a preset, which sets the target, then key=value
    /// overrides), as `loom autoschedule --machine` does; empty: this machine's model for target.
    std::vector<std::string> machine;
    bool target_given = false;  ///< --target was passed (a preset sets it otherwise)
    /// cuBLAS/cuDNN switches (CUDA: GEMMs and convs whose weights are parameters go to the libraries).
    LibraryFlags libs;
};

/// Builds the training artifact (CPU or CUDA). UserError for an unknown loss, optimizer or
/// --recompute, a --machine that names no preset, comes with a schedule file or --eager, a CUDA
/// target or a --target other than its preset's, and every error `loom compile` gives.
void compile_training(const TrainCompileOptions &o);

/// C++ source of the CPU trainer's allocator for Halide's buffers (installed with
/// halide_set_custom_malloc while a trainer exists; `buffer_cache_retain`/`_release`, and
/// `buffer_cache_step_begin`/`_end` around each step): the first step's requests are recorded
/// (size, order, life) and planned into one arena, each at an offset that no request live at the
/// same time overlaps (largest first, lowest offset); a later step's k-th request of the recorded
/// size takes its planned place when that is free, any other comes from the heap. So each step
/// reuses the same pages instead of faulting fresh ones in
/// (bench/DECISIONS.md#d91-trainer-reuses-step-buffers) and the arena holds what the step needs at
/// its peak, no freed block kept beside it (#d219-step-memory-one-pipeline-planned-arena).
/// `cache_bytes` is the arena's size, `cache_fallbacks` the requests a planned step took elsewhere.
std::string host_buffer_cache_source();

}  // namespace loom::cli
