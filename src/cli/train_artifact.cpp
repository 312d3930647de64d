#include "cli/train_artifact.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "autodiff/recompute_partition.h"
#include "autodiff/training_step.h"
#include "autoschedule/autoschedule.h"
#include "autoschedule/machine_model.h"
#include "cli/save_or_recompute.h"
#include "support/tensor_file_name.h"
#include "cli/scheduling.h"
#include "cli/training_model.h"
#include "codegen/aot.h"
#include "codegen/in_place_outputs.h"
#include "graph/npy.h"
#include "ops/lower_graph.h"
#include "schedule/schedule_printer.h"
#include "support/error.h"

namespace loom::cli {

namespace {

namespace fs = std::filesystem;

std::string c_string(const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o + "\"";
}

std::string train_header(const std::string &n) {
    std::ostringstream h;
    h << "/* Training step of model " << n << " (loom compile --train): forward, backward and the optimizer's\n"
      << " * update in one call. Parameters and optimizer state live in the trainer, in the model's layout\n"
      << " * (on the CPU each updated in place where the step allows it); a pointer from\n"
      << " * " << n << "_train_parameter / _state is valid (read and write) until the next step. A step that\n"
      << " * fails may leave them partly updated. */\n"
      << "#pragma once\n#include <stdint.h>\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
      << "void *" << n << "_train_create(void);\n"
      << "/* inputs: the model's inputs in graph order (f32, dense); target: f32 like the output (mse) or\n"
      << " * int64 class indices (cross_entropy), NULL for --loss output; loss: set to the step's loss\n"
      << " * (before the update) when not NULL. 0 on success. */\n"
      << "int " << n << "_train_step(void *trainer, const void *const *inputs, const void *target, float *loss);\n"
      << "int " << n << "_train_num_parameters(void);\n"
      << "const char *" << n << "_train_parameter_name(int k);\n"
      << "int64_t " << n << "_train_parameter_size(int k);\n"
      << "float *" << n << "_train_parameter(void *trainer, int k);\n"
      << "int " << n << "_train_num_state(void);\n"
      << "const char *" << n << "_train_state_name(int k);\n"
      << "int64_t " << n << "_train_state_size(int k);\n"
      << "float *" << n << "_train_state(void *trainer, int k);\n"
      << "/* BatchNorm running statistics, updated by each step (momentum as in the model) */\n"
      << "int " << n << "_train_num_buffers(void);\n"
      << "const char *" << n << "_train_buffer_name(int k);\n"
      << "int64_t " << n << "_train_buffer_size(int k);\n"
      << "float *" << n << "_train_buffer(void *trainer, int k);\n"
      << "void " << n << "_train_set_learning_rate(void *trainer, float lr);\n"
      << "float " << n << "_train_learning_rate(void *trainer);\n"
      << "int64_t " << n << "_train_steps(void *trainer);\n"
      << "const char *" << n << "_train_last_error(void);\n"
      << "/* CUDA artifacts: the same step on device pointers of the trainer's context (the calling\n"
      << " * thread's current one, else device 0's primary context); parameters, state and buffers live\n"
      << " * on the device and _train_parameter copies one to the host (written back before the next step).\n"
      << " * _train_synchronize waits for the queued steps (a step with loss NULL does not wait).\n"
      << " * On a CPU artifact _step_device fails and _synchronize does nothing. */\n"
      << "int " << n << "_train_step_device(void *trainer, const void *const *inputs, const void *target, float *loss);\n"
      << "int " << n << "_train_synchronize(void *trainer);\n"
      << "void " << n << "_train_destroy(void *trainer);\n"
      << "#ifdef __cplusplus\n}\n#endif\n";
    return h.str();
}

// The CUDA trainer after the tables (`@N@` is the model's name): parameters, state and buffers
// on the device, each step one `_run_device` call whose outputs are copied back over its inputs
// on the stream, so the pointers stay the same and the artifact replays the step as one CUDA graph.
std::string cuda_trainer_body() {
    return R"TRAINER(thread_local char last_error[512];
typedef unsigned long long DevPtr;
struct Driver {
    int (*cuInit)(unsigned);
    int (*cuDeviceGet)(int *, int);
    int (*cuDevicePrimaryCtxRetain)(void **, int);
    int (*cuCtxGetCurrent)(void **);
    int (*cuCtxSetCurrent)(void *);
    int (*cuCtxSynchronize)(void);
    int (*cuMemAlloc)(DevPtr *, size_t);
    int (*cuMemFree)(DevPtr);
    int (*cuMemcpyHtoD)(DevPtr, const void *, size_t);
    int (*cuMemcpyDtoH)(void *, DevPtr, size_t);
    int (*cuMemcpyDtoDAsync)(DevPtr, DevPtr, size_t, void *);
};
Driver cu;
bool load_driver() {
    if (cu.cuInit) return true;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return false;
    Driver d;
    bool ok = true;
    auto sym = [&](auto &f, const char *name) {
        f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
        ok = ok && f;
    };
    sym(d.cuInit, "cuInit");
    sym(d.cuDeviceGet, "cuDeviceGet");
    sym(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(d.cuCtxGetCurrent, "cuCtxGetCurrent");
    sym(d.cuCtxSetCurrent, "cuCtxSetCurrent");
    sym(d.cuCtxSynchronize, "cuCtxSynchronize");
    sym(d.cuMemAlloc, "cuMemAlloc_v2");
    sym(d.cuMemFree, "cuMemFree_v2");
    sym(d.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    sym(d.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    sym(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    if (ok) cu = d;
    return ok;
}
int fail(const char *what, int rc) {
    std::snprintf(last_error, sizeof last_error, "%s failed (CUDA error %d)", what, rc);
    return -1;
}
struct Trainer {
    void *model = nullptr, *ctx = nullptr;
    std::vector<DevPtr> cur, next;       // parameters, state, then buffers
    std::vector<float *> host;           // host copies handed out by _train_parameter/_state/_buffer
    std::vector<bool> host_live;         // host copy k may have been written: upload before the step
    std::vector<DevPtr> data;            // the step's data inputs and target on the device
    DevPtr target = 0, scalars = 0, loss = 0;
    float lr = 0;
    int64_t steps = 0;
};
int64_t size_of(int k) {
    return k < kNumParameter ? kParameterSizes[k]
           : k < kNumParameter + kNumState ? kStateSizes[k - kNumParameter]
                                           : kBufferSizes[k - kNumParameter - kNumState];
}
const int kNumOwned = kNumParameter + kNumState + kNumBuffer;
int bind_context(Trainer *t) {
    void *c = nullptr;
    if (cu.cuCtxGetCurrent(&c) == 0 && c) return 0;
    int rc = cu.cuCtxSetCurrent(t->ctx);
    return rc ? fail("cuCtxSetCurrent", rc) : 0;
}
int upload_host_copies(Trainer *t) {
    for (int k = 0; k < kNumOwned; k++) {
        if (!t->host_live[k]) continue;
        int rc = cu.cuMemcpyHtoD(t->cur[k], t->host[k], sizeof(float) * size_of(k));
        if (rc) return fail("cuMemcpyHtoD", rc);
        t->host_live[k] = false;
    }
    return 0;
}
float *host_copy(Trainer *t, int k) {
    if (bind_context(t) || cu.cuCtxSynchronize() != 0) return nullptr;
    if (!t->host_live[k] && cu.cuMemcpyDtoH(t->host[k], t->cur[k], sizeof(float) * size_of(k)) != 0) return nullptr;
    t->host_live[k] = true;
    return t->host[k];
}
int run_step(Trainer *t, const std::vector<const void *> &inputs, const void *target, float *loss) {
    if (bind_context(t) || upload_host_copies(t)) return -1;
    std::vector<const void *> in = inputs;
    if (kHasTarget) in.push_back(target);
    for (DevPtr p : t->cur) in.push_back(reinterpret_cast<const void *>(p));
    float scalars[2];
    t->steps++;
    if (kAdam) {
        scalars[0] = (float)(t->lr / (1 - std::pow(kBeta1, (double)t->steps)));
        scalars[1] = (float)(1 / std::sqrt(1 - std::pow(kBeta2, (double)t->steps)));
    } else {
        scalars[0] = t->lr;
    }
    // Each scalar in its own 256-byte slot: device inputs must be 16-byte aligned.
    int rc = cu.cuMemcpyHtoD(t->scalars, &scalars[0], sizeof(float));
    if (rc == 0 && kAdam) rc = cu.cuMemcpyHtoD(t->scalars + 256, &scalars[1], sizeof(float));
    if (rc) return t->steps--, fail("cuMemcpyHtoD", rc);
    in.push_back(reinterpret_cast<const void *>(t->scalars));
    if (kAdam) in.push_back(reinterpret_cast<const void *>(t->scalars + 256));
    std::vector<void *> out(1 + t->next.size());
    out[0] = reinterpret_cast<void *>(t->loss);
    for (size_t k = 0; k < t->next.size(); k++) out[kOutputIndex[k]] = reinterpret_cast<void *>(t->next[k]);
    rc = @N@_run_device(t->model, in.data(), out.data());
    if (rc != 0) {
        t->steps--;
        std::snprintf(last_error, sizeof last_error, "%s", @N@_last_error());
        return rc;
    }
    for (int k = 0; k < kNumOwned; k++) {
        rc = cu.cuMemcpyDtoDAsync(t->cur[k], t->next[k], sizeof(float) * size_of(k), nullptr);
        if (rc) return fail("cuMemcpyDtoDAsync", rc);
    }
    if (loss) {
        rc = cu.cuMemcpyDtoH(loss, t->loss, sizeof(float));
        if (rc) return fail("cuMemcpyDtoH", rc);
    }
    return 0;
}
}  // namespace

extern "C" {
void @N@_train_destroy(void *h);
void *@N@_train_create(void) {
    if (!load_driver()) {
        std::snprintf(last_error, sizeof last_error, "cannot load libcuda.so.1: this trainer needs an NVIDIA GPU and its driver");
        return nullptr;
    }
    Trainer *t = new Trainer;
    int rc = cu.cuInit(0);
    void *c = nullptr;
    if (rc == 0) rc = cu.cuCtxGetCurrent(&c);
    if (rc == 0 && !c) {
        int dev = 0;
        rc = cu.cuDeviceGet(&dev, 0);
        if (rc == 0) rc = cu.cuDevicePrimaryCtxRetain(&c, dev);
        if (rc == 0) rc = cu.cuCtxSetCurrent(c);
    }
    if (rc != 0) {
        fail("initialising CUDA (cuInit / the primary context)", rc);
        delete t;
        return nullptr;
    }
    t->ctx = c;
    t->model = @N@_create();
    if (!t->model) { std::snprintf(last_error, sizeof last_error, "%s", @N@_last_error()); delete t; return nullptr; }
    t->lr = @LR@f;
    const float *init = @N@_initial_parameters;
    auto alloc = [&](DevPtr *p, size_t bytes) { return rc == 0 && (rc = cu.cuMemAlloc(p, bytes ? bytes : 4)) == 0; };
    for (int k = 0; k < kNumOwned && rc == 0; k++) {
        int64_t size = size_of(k);
        DevPtr a = 0, b = 0;
        alloc(&a, sizeof(float) * size);
        alloc(&b, sizeof(float) * size);
        t->cur.push_back(a);
        t->next.push_back(b);
        float *h = static_cast<float *>(std::calloc(size ? size : 1, sizeof(float)));
        bool state = k >= kNumParameter && k < kNumParameter + kNumState;
        if (!state) { std::memcpy(h, init, sizeof(float) * size); init += size; }
        t->host.push_back(h);
        t->host_live.push_back(true);  // uploaded before the first step
    }
    for (int k = 0; k < kData; k++) {
        DevPtr p = 0;
        alloc(&p, kDataBytes[k]);
        t->data.push_back(p);
    }
    alloc(&t->target, kTargetBytes);
    alloc(&t->scalars, 512);
    alloc(&t->loss, sizeof(float));
    if (rc != 0) {
        fail("cuMemAlloc", rc);
        @N@_train_destroy(t);
        return nullptr;
    }
    return t;
}
int @N@_train_step(void *h, const void *const *inputs, const void *target, float *loss) {
    Trainer *t = static_cast<Trainer *>(h);
    if (bind_context(t)) return -1;
    std::vector<const void *> in;
    for (int k = 0; k < kData; k++) {
        int rc = cu.cuMemcpyHtoD(t->data[k], inputs[k], kDataBytes[k]);
        if (rc) return fail("cuMemcpyHtoD (an input)", rc);
        in.push_back(reinterpret_cast<const void *>(t->data[k]));
    }
    if (kHasTarget) {
        int rc = cu.cuMemcpyHtoD(t->target, target, kTargetBytes);
        if (rc) return fail("cuMemcpyHtoD (the target)", rc);
    }
    return run_step(t, in, reinterpret_cast<const void *>(t->target), loss);
}
int @N@_train_step_device(void *h, const void *const *inputs, const void *target, float *loss) {
    std::vector<const void *> in(inputs, inputs + kData);
    return run_step(static_cast<Trainer *>(h), in, target, loss);
}
int @N@_train_synchronize(void *h) {
    Trainer *t = static_cast<Trainer *>(h);
    if (bind_context(t)) return -1;
    int rc = cu.cuCtxSynchronize();
    return rc ? fail("cuCtxSynchronize", rc) : 0;
}
int @N@_train_num_parameters(void) { return kNumParameter; }
const char *@N@_train_parameter_name(int k) { return k >= 0 && k < kNumParameter ? kParameterNames[k] : nullptr; }
int64_t @N@_train_parameter_size(int k) { return k >= 0 && k < kNumParameter ? kParameterSizes[k] : -1; }
float *@N@_train_parameter(void *h, int k) { return k >= 0 && k < kNumParameter ? host_copy(static_cast<Trainer *>(h), k) : nullptr; }
int @N@_train_num_state(void) { return kNumState; }
const char *@N@_train_state_name(int k) { return k >= 0 && k < kNumState ? kStateNames[k] : nullptr; }
int64_t @N@_train_state_size(int k) { return k >= 0 && k < kNumState ? kStateSizes[k] : -1; }
float *@N@_train_state(void *h, int k) { return k >= 0 && k < kNumState ? host_copy(static_cast<Trainer *>(h), kNumParameter + k) : nullptr; }
int @N@_train_num_buffers(void) { return kNumBuffer; }
const char *@N@_train_buffer_name(int k) { return k >= 0 && k < kNumBuffer ? kBufferNames[k] : nullptr; }
int64_t @N@_train_buffer_size(int k) { return k >= 0 && k < kNumBuffer ? kBufferSizes[k] : -1; }
float *@N@_train_buffer(void *h, int k) { return k >= 0 && k < kNumBuffer ? host_copy(static_cast<Trainer *>(h), kNumParameter + kNumState + k) : nullptr; }
void @N@_train_set_learning_rate(void *h, float lr) { static_cast<Trainer *>(h)->lr = lr; }
float @N@_train_learning_rate(void *h) { return static_cast<Trainer *>(h)->lr; }
int64_t @N@_train_steps(void *h) { return static_cast<Trainer *>(h)->steps; }
const char *@N@_train_last_error(void) { return last_error; }
void @N@_train_destroy(void *h) {
    Trainer *t = static_cast<Trainer *>(h);
    if (!t) return;
    if (t->model) @N@_destroy(t->model);
    for (DevPtr p : t->cur) if (p) cu.cuMemFree(p);
    for (DevPtr p : t->next) if (p) cu.cuMemFree(p);
    for (DevPtr p : t->data) if (p) cu.cuMemFree(p);
    for (DevPtr p : {t->target, t->scalars, t->loss}) if (p) cu.cuMemFree(p);
    for (float *p : t->host) std::free(p);
    delete t;
}
}  // extern "C"
)TRAINER";
}

std::string train_source(const std::string &n, const TrainingStepGraph &s, const std::string &blob, bool cuda,
                         const std::vector<bool> &in_place) {
    const Graph &g = s.graph;
    std::ostringstream c;
    c << "// Generated by loom compile --train: the trainer of " << n << " (see " << n << "_train.h).\n"
      << "#include <cmath>\n#include <cstdio>\n#include <cstdint>\n#include <cstdlib>\n#include <cstring>\n#include <new>\n"
      << "#include <algorithm>\n#include <iterator>\n#include <map>\n#include <mutex>\n#include <type_traits>\n#include <vector>\n#include <dlfcn.h>\n"
      << "extern \"C\" {\nvoid *" << n << "_create(void);\nint " << n
      << "_run_host(void *, const void *const *, void *const *);\nint " << n
      << "_run_device(void *, const void *const *, void *const *);\nvoid " << n << "_destroy(void *);\nconst char *" << n
      << "_last_error(void);\n}\n"
      << "__asm__(\".section .rodata\\n.balign 64\\n" << n << "_initial_parameters:\\n.incbin \\\"" << blob
      << "\\\"\\n.previous\\n\");\n"
      << "extern \"C\" const float " << n << "_initial_parameters[] __asm__(\"" << n << "_initial_parameters\");\n"
      << "namespace {\n";
    auto list = [&](const char *what, const std::vector<std::string> &names) {
        c << "const char *const k" << what << "Names[] = {";
        for (const auto &v : names) c << c_string(v) << ", ";
        c << "nullptr};\nconst int64_t k" << what << "Sizes[] = {";
        for (const auto &v : names) c << shape_numel(g.value(v).shape) << ", ";
        c << "0};\nconst int kNum" << what << " = " << names.size() << ";\n";
    };
    list("Parameter", s.parameters);
    list("State", s.state);
    list("Buffer", s.buffers);
    c << "const int kData = " << s.data_inputs.size() << ";\nconst bool kHasTarget = " << (s.target.empty() ? "false" : "true")
      << ";\nconst bool kAdam = " << (s.optimizer.name == "adam" ? "true" : "false") << ";\n"
      << "const double kBeta1 = " << s.optimizer.beta1 << ", kBeta2 = " << s.optimizer.beta2 << ";\n";
    c << "const int64_t kDataBytes[] = {";
    for (const auto &v : s.data_inputs) c << shape_numel(g.value(v).shape) * dtype_size(g.value(v).dtype) << ", ";
    // Per parameter, state and buffer: its next value written over it (the step's in-place check).
    c << "0};\nconst bool kInPlace[] = {";
    for (size_t k = 0; k < s.parameters.size() + s.state.size() + s.buffers.size(); k++)
        c << (k < in_place.size() && in_place[k] ? "true" : "false") << ", ";
    c << "false};\n";
    // Per parameter, state and buffer: the index of its next value among the step's outputs.
    c << "const int kOutputIndex[] = {";
    for (const auto *names : {&s.parameters, &s.state, &s.buffers})
        for (const auto &v : *names) c << s.output_index(v) << ", ";
    c << "0};\nconst int64_t kTargetBytes = "
      << (s.target.empty() ? 0 : shape_numel(g.value(s.target).shape) * dtype_size(g.value(s.target).dtype)) << ";\n";
    if (cuda) {
        std::string body = cuda_trainer_body();
        for (size_t at = body.find("@N@"); at != std::string::npos; at = body.find("@N@", at)) body.replace(at, 3, n);
        std::ostringstream lr;
        lr << s.optimizer.lr;
        body.replace(body.find("@LR@"), 4, lr.str());
        return c.str() + body;
    }
    c << R"(thread_local char last_error[512];
struct Trainer {
    void *model = nullptr;
    std::vector<float *> cur, next;  // parameters, state, then buffers; next[k] == cur[k] when kInPlace[k]
    std::vector<void *> staged;      // per data input, then the target: an aligned copy (aligned_input)
    float lr = 0;
    int64_t steps = 0;
};
float *alloc_floats(int64_t n) { return static_cast<float *>(::operator new(sizeof(float) * (n ? n : 1), std::align_val_t(64))); }
// The step reads its inputs 64-byte aligned, and the caller's arrays need not be (malloc's are 16):
// such an input is copied into a buffer the trainer keeps. The model's glue would stage it in a
// block allocated and freed every step, and the step's other small allocations split those freed
// blocks, so glibc's heap grew by the input's size on every step.
const void *aligned_input(Trainer *t, int k, const void *p, int64_t bytes) {
    if (!p || reinterpret_cast<uintptr_t>(p) % 64 == 0) return p;
    if (!t->staged[k]) t->staged[k] = ::operator new(bytes ? bytes : 1, std::align_val_t(64), std::nothrow);
    if (!t->staged[k]) return p;  // out of memory: the glue stages it
    std::memcpy(t->staged[k], p, bytes);
    return t->staged[k];
}
)" << host_buffer_cache_source() << R"(}  // namespace

extern "C" {
)";
    c << "void *" << n << R"(_train_create(void) {
    Trainer *t = new Trainer;
    t->staged.assign(kData + 1, nullptr);
    buffer_cache_retain();
    t->model = )" << n << R"(_create();
    if (!t->model) { delete t; buffer_cache_release(); return nullptr; }
    t->lr = )" << s.optimizer.lr << R"(f;
    const float *init = )" << n << R"(_initial_parameters;
    for (int k = 0; k < kNumParameter + kNumState + kNumBuffer; k++) {
        bool state = k >= kNumParameter && k < kNumParameter + kNumState;
        int64_t size = k < kNumParameter ? kParameterSizes[k]
                       : state           ? kStateSizes[k - kNumParameter]
                                         : kBufferSizes[k - kNumParameter - kNumState];
        float *a = alloc_floats(size), *b = kInPlace[k] ? a : alloc_floats(size);
        if (!state) { std::memcpy(a, init, sizeof(float) * size); init += size; }
        else std::memset(a, 0, sizeof(float) * size);
        t->cur.push_back(a);
        t->next.push_back(b);
    }
    return t;
}
int )" << n << R"(_train_step(void *h, const void *const *inputs, const void *target, float *loss) {
    Trainer *t = static_cast<Trainer *>(h);
    std::vector<const void *> in;
    for (int k = 0; k < kData; k++) in.push_back(aligned_input(t, k, inputs[k], kDataBytes[k]));
    if (kHasTarget) in.push_back(aligned_input(t, kData, target, kTargetBytes));
    for (float *p : t->cur) in.push_back(p);
    // Scalars and the loss 64-byte aligned too, so that the glue stages nothing.
    alignas(64) float scalars[2][16];
    t->steps++;
    if (kAdam) {
        scalars[0][0] = (float)(t->lr / (1 - std::pow(kBeta1, (double)t->steps)));
        scalars[1][0] = (float)(1 / std::sqrt(1 - std::pow(kBeta2, (double)t->steps)));
        in.push_back(&scalars[0][0]);
        in.push_back(&scalars[1][0]);
    } else {
        scalars[0][0] = t->lr;
        in.push_back(&scalars[0][0]);
    }
    alignas(64) float loss_value = 0;
    std::vector<void *> out(1 + t->next.size());
    out[0] = &loss_value;
    for (size_t k = 0; k < t->next.size(); k++) out[kOutputIndex[k]] = t->next[k];
    buffer_cache_step_begin();
    int rc = )" << n << R"(_run_host(t->model, in.data(), out.data());
    buffer_cache_step_end();
    if (rc != 0) {
        t->steps--;
        std::snprintf(last_error, sizeof last_error, "%s", )" << n << R"(_last_error());
        return rc;
    }
    std::swap(t->cur, t->next);
    if (loss) *loss = loss_value;
    return 0;
}
int )" << n << R"(_train_num_parameters(void) { return kNumParameter; }
const char *)" << n << R"(_train_parameter_name(int k) { return k >= 0 && k < kNumParameter ? kParameterNames[k] : nullptr; }
int64_t )" << n << R"(_train_parameter_size(int k) { return k >= 0 && k < kNumParameter ? kParameterSizes[k] : -1; }
float *)" << n << R"(_train_parameter(void *h, int k) { return k >= 0 && k < kNumParameter ? static_cast<Trainer *>(h)->cur[k] : nullptr; }
int )" << n << R"(_train_num_state(void) { return kNumState; }
const char *)" << n << R"(_train_state_name(int k) { return k >= 0 && k < kNumState ? kStateNames[k] : nullptr; }
int64_t )" << n << R"(_train_state_size(int k) { return k >= 0 && k < kNumState ? kStateSizes[k] : -1; }
float *)" << n << R"(_train_state(void *h, int k) { return k >= 0 && k < kNumState ? static_cast<Trainer *>(h)->cur[kNumParameter + k] : nullptr; }
int )" << n << R"(_train_num_buffers(void) { return kNumBuffer; }
const char *)" << n << R"(_train_buffer_name(int k) { return k >= 0 && k < kNumBuffer ? kBufferNames[k] : nullptr; }
int64_t )" << n << R"(_train_buffer_size(int k) { return k >= 0 && k < kNumBuffer ? kBufferSizes[k] : -1; }
float *)" << n << R"(_train_buffer(void *h, int k) { return k >= 0 && k < kNumBuffer ? static_cast<Trainer *>(h)->cur[kNumParameter + kNumState + k] : nullptr; }
void )" << n << R"(_train_set_learning_rate(void *h, float lr) { static_cast<Trainer *>(h)->lr = lr; }
float )" << n << R"(_train_learning_rate(void *h) { return static_cast<Trainer *>(h)->lr; }
int64_t )" << n << R"(_train_steps(void *h) { return static_cast<Trainer *>(h)->steps; }
const char *)" << n << R"(_train_last_error(void) { return last_error; }
int )" << n << R"(_train_step_device(void *, const void *const *, const void *, float *) {
    std::snprintf(last_error, sizeof last_error, "this trainer was compiled for the CPU: call _train_step");
    return -1;
}
int )" << n << R"(_train_synchronize(void *) { return 0; }
void )" << n << R"(_train_destroy(void *h) {
    Trainer *t = static_cast<Trainer *>(h);
    if (!t) return;
    )" << n << R"(_destroy(t->model);
    for (size_t k = 0; k < t->cur.size(); k++) {
        if (t->next[k] != t->cur[k]) ::operator delete(t->next[k], std::align_val_t(64));
        ::operator delete(t->cur[k], std::align_val_t(64));
    }
    for (void *p : t->staged) ::operator delete(p, std::align_val_t(64));
    delete t;
    buffer_cache_release();
}
}  // extern "C"
)";
    return c.str();
}

void run_or_fail(const std::string &cmd, const std::string &what) {
    if (std::system(cmd.c_str()) != 0)
        throw UserError(str_cat("loom compile --train: ", what, " failed (", cmd, "); is g++ installed?"));
}

}  // namespace

std::string host_buffer_cache_source() {
    return R"CACHE(extern "C" {
typedef void *(*halide_malloc_t)(void *, size_t);
typedef void (*halide_free_t)(void *, void *);
halide_malloc_t halide_set_custom_malloc(halide_malloc_t);
halide_free_t halide_set_custom_free(halide_free_t);
}
// Halide's buffers are 128-byte aligned.
constexpr size_t kCacheAlign = 128;
constexpr size_t kNoEnd = ~size_t(0);
std::mutex cache_mutex;
int cache_users = 0;
bool cache_installed = false;
// The first step records its requests (sizes, in order, and when each was freed); the plan places
// them in one arena, each at an offset no request live at the same time overlaps; later steps take
// their k-th request from the plan when it has the recorded size and its place is free.
enum { kNoPlan, kRecording, kPlanned } cache_state = kNoPlan;
bool in_step = false;
size_t step_request = 0, record_clock = 0;
std::vector<size_t> record_size;                     // per request of the recorded step
std::vector<std::pair<size_t, size_t>> record_life;  // (allocated at, freed at) on record_clock
std::map<void *, size_t> record_live;                // recorded block still live -> its request
std::vector<size_t> plan_size, plan_offset;          // per request; size 0: not planned
char *arena = nullptr;
size_t cache_bytes = 0;                              // the arena's bytes
std::map<size_t, size_t> arena_live;                 // offset -> end of arena blocks lent now
size_t cache_fallbacks = 0;                          // requests a planned step took from the heap

bool arena_free_at(size_t offset, size_t size) {
    auto it = arena_live.lower_bound(offset);
    if (it != arena_live.end() && it->first < offset + size) return false;
    return it == arena_live.begin() || std::prev(it)->second <= offset;
}
// Greedy by size: the largest request first, each at the lowest offset where it meets no placed
// request whose life overlaps its own (requests not freed within the step stay unplanned).
void make_plan() {
    const size_t n = record_size.size();
    std::vector<size_t> order;
    for (size_t k = 0; k < n; k++)
        if (record_life[k].second != kNoEnd) order.push_back(k);
    std::stable_sort(order.begin(), order.end(), [](size_t a, size_t b) { return record_size[a] > record_size[b]; });
    plan_size.assign(n, 0);
    plan_offset.assign(n, 0);
    std::vector<size_t> placed;
    size_t total = 0;
    for (size_t k : order) {
        std::vector<std::pair<size_t, size_t>> taken;  // [offset, end) of placed requests alive with k
        for (size_t j : placed)
            if (record_life[j].first < record_life[k].second && record_life[k].first < record_life[j].second)
                taken.push_back({plan_offset[j], plan_offset[j] + plan_size[j]});
        std::sort(taken.begin(), taken.end());
        size_t at = 0;
        for (const auto &t : taken) {
            if (t.first >= at + record_size[k]) break;
            at = std::max(at, t.second);
        }
        plan_offset[k] = at;
        plan_size[k] = record_size[k];
        total = std::max(total, at + record_size[k]);
        placed.push_back(k);
    }
    arena = total ? static_cast<char *>(std::aligned_alloc(kCacheAlign, total)) : nullptr;
    cache_bytes = arena ? total : 0;
    if (!arena) plan_size.assign(n, 0);  // out of memory: every request from the heap
}
void *cached_malloc(void *, size_t size) {
    size = (size + kCacheAlign - 1) / kCacheAlign * kCacheAlign;
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        if (in_step && cache_state == kPlanned) {
            size_t k = step_request++;
            if (k < plan_size.size() && plan_size[k] == size && arena_free_at(plan_offset[k], size)) {
                arena_live[plan_offset[k]] = plan_offset[k] + size;
                return arena + plan_offset[k];
            }
            cache_fallbacks++;
        } else if (in_step && cache_state == kRecording) {
            void *p = std::aligned_alloc(kCacheAlign, size);
            if (p) {
                record_live[p] = record_size.size();
                record_size.push_back(size);
                record_life.push_back({record_clock++, kNoEnd});
            }
            return p;
        }
    }
    return std::aligned_alloc(kCacheAlign, size);
}
void cached_free(void *, void *ptr) {
    if (!ptr) return;
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        if (arena && ptr >= arena && ptr < arena + cache_bytes) {
            arena_live.erase(size_t(static_cast<char *>(ptr) - arena));
            return;
        }
        if (auto it = record_live.find(ptr); it != record_live.end()) {
            record_life[it->second].second = record_clock++;
            record_live.erase(it);
        }
    }
    std::free(ptr);
}
// A step's requests are told apart by their order within it.
void buffer_cache_step_begin() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    in_step = true;
    step_request = 0;
    if (cache_state == kNoPlan) {
        cache_state = kRecording;
        record_size.clear();
        record_life.clear();
        record_live.clear();
        record_clock = 0;
    }
}
void buffer_cache_step_end() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    in_step = false;
    if (cache_state != kRecording) return;
    make_plan();
    record_live.clear();
    cache_state = kPlanned;
}
// Installed by the first trainer and kept: a block freed later (Halide's thread pool outlives a
// trainer) must come back to the allocator that made it.
void buffer_cache_retain() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache_users++ == 0 && !cache_installed) {
        halide_set_custom_malloc(cached_malloc);
        halide_set_custom_free(cached_free);
        cache_installed = true;
    }
}
// The last trainer gone, the arena goes back (unless a block of it is still lent) and the next
// trainer's first step plans again.
void buffer_cache_release() {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (--cache_users > 0 || !arena_live.empty()) return;
    std::free(arena);
    arena = nullptr;
    cache_bytes = 0;
    cache_state = kNoPlan;
    plan_size.clear();
    plan_offset.clear();
}
)CACHE";
}

// The machine the step is planned for: --machine's preset (which sets the target) with its
// overrides, else this machine's model for the target. UserError, before anything slow runs, for
// a preset that does not exist or contradicts --target, or a --machine the cost model does not read.
static MachineModel training_machine(const TrainCompileOptions &o, Halide::Target &target) {
    const std::string flag = "loom compile --train --machine";
    MachineOptions mo;
    try {
        mo = parse_machine_options(o.machine);
    } catch (const UserError &e) {
        throw UserError(flag + ": " + e.what());
    }
    if (mo.preset) {
        // Halide's profiler (`-profile`) changes no instruction the plan is made for: kept.
        const bool profile = target.has_feature(Halide::Target::Profile);
        Halide::Target named = target.without_feature(Halide::Target::JIT).without_feature(Halide::Target::Profile);
        user_check(!o.target_given || named == mo.preset->target, flag, " ", mo.preset->name, " plans for target ",
                   mo.preset->target.to_string(), ", not --target ", o.target, " (", named.to_string(),
                   "); drop --target (the preset sets it) or the preset");
        target = profile ? mo.preset->target.with_feature(Halide::Target::Profile) : mo.preset->target;
    }
    if (!o.machine.empty()) {
        user_check(!target.has_gpu_feature(), flag, " with --target ", o.target,
                   ": the machine model is the CPU cost model's; drop --machine for a GPU target");
        user_check(o.schedule == "auto", flag, " with ", o.schedule == "eager" ? "--eager" : "--schedule " + o.schedule,
                   ": --machine shapes the cost model's plan, and this step takes no plan from it; drop one of the two");
    }
    MachineModel m = mo.preset ? mo.preset->model : detect_machine(target);
    for (const auto &kv : mo.overrides) {
        try {
            override_machine(m, kv);
        } catch (const UserError &e) {
            throw UserError(flag + ": " + e.what());
        }
    }
    return m;
}

void compile_training(const TrainCompileOptions &o) {
    Halide::Target target = aot_target(o.target);
    const MachineModel machine = training_machine(o, target);
    OptimizerSpec opt;
    opt.name = o.optimizer;
    opt.lr = o.lr;
    TrainingModel m = load_training_model(o.model, o.inputs, o.loss, "", o.recompute);
    TrainingStepGraph step =
        make_training_step(m.grad, opt, target.has_gpu_feature() ? StepDevice::Gpu : StepDevice::Cpu);
    std::string spec = o.schedule.empty() ? "auto" : o.schedule;
    // CUDA: the GEMMs and 2-D convs of the step (weights are parameters, every gradient's operands
    // computed) go to cuBLAS and cuDNN unless the flags say otherwise; the CPU keeps its lowering.
    LowerOptions lo = library_lowering(target, o.libs, "loom compile --train");
    if (!target.has_feature(Halide::Target::CUDA)) lo = LowerOptions{};
    // The cost model plans for `machine` (a preset's caches and cores, not this machine's, with --machine).
    AutoscheduleFn autofn = nullptr;
    if (!target.has_gpu_feature())
        autofn = [machine](const LoweredPipeline &p, const Halide::Target &t) { return auto_schedule(p, t, machine); };
    ScheduledModel sm = schedule_model(step.graph, spec, target, o.model, lo, autofn);
    for (const auto &w : sm.warnings) std::cerr << "warning: " << w << "\n";
    std::string text = print_schedule(sm.schedule);
    if (o.print_schedule) std::cout << text;

    std::set<std::string> forward;
    for (const Node &n : step.graph.nodes)
        if (!is_backward_node(n)) forward.insert(n.name);
    if (!o.report.empty()) {
        LoweredPipeline lp = lower_graph(step.graph, lo);
        AutoScheduleResult r = auto_schedule_with_plan(lp, target, machine);
        std::ofstream f(o.report);
        user_check((bool)f, "--report: cannot write ", o.report);
        f << format_report(lp, r, machine) << "\n" << m.recompute.describe() << "\n" << save_or_recompute(lp, r, forward).table;
    }

    AotOptions ao;
    ao.name = o.name.empty() ? fs::path(o.model).stem().string() + "_step" : o.name;
    ao.force = o.force;
    ao.schedule_text = text;
    ao.raise_spilling_budgets = spec == "auto";
    std::string libraries;  // what the extern stages link (compile_aot fills it in)
    ao.link_libraries = &libraries;
    // The CPU trainer writes each next value over its parameter, state or buffer where the
    // lowered pipeline allows it (bench/DECISIONS.md#d218-parameters-updated-in-place).
    std::vector<bool> in_place;
    if (!target.has_gpu_feature()) {
        const size_t first = step.data_inputs.size() + (step.target.empty() ? 0 : 1);
        size_t k = 0;
        for (const auto *names : {&step.parameters, &step.state, &step.buffers})
            for (const auto &v : *names) ao.in_place_candidates.push_back({first + k++, step.output_index(v)});
        ao.in_place = &in_place;
        // One pipeline: Halide frees each buffer after its last reader, where a cut kept every
        // buffer crossing it for whole pipelines (#d219-step-memory-one-pipeline-planned-arena).
        ao.max_pipelines = 1;
        order_reads_before_outputs(sm.pipeline, ao.in_place_candidates);
    }
    std::string name;
    auto write_trainer = [&](const std::string &dir) {
        fs::path d = fs::absolute(dir);
        // The C name compile_aot chose (sanitised) is the prefix of lib<name>.a.
        for (const auto &e : fs::directory_iterator(d)) {
            std::string f = e.path().filename().string();
            if (f.size() > 5 && f.rfind("lib", 0) == 0 && f.substr(f.size() - 2) == ".a") name = f.substr(3, f.size() - 5);
        }
        internal_check(!name.empty(), "compile --train: no static library in ", d.string());
        {
            std::ofstream blob(d / "params.bin", std::ios::binary);
            for (const auto &p : step.parameters) {
                Tensor t = m.params.initial.at(p).cast(DType::F32);
                blob.write(reinterpret_cast<const char *>(t.data()), (std::streamsize)t.bytes().size());
            }
            for (const auto &b : step.buffers) {
                const Tensor &t = step.buffer_initial.at(b);
                blob.write(reinterpret_cast<const char *>(t.data()), (std::streamsize)t.bytes().size());
            }
        }
        std::ofstream(d / (name + "_train.h")) << train_header(name);
        std::ofstream(d / (name + "_train.cpp"))
            << train_source(name, step, (d / "params.bin").string(), target.has_gpu_feature(), in_place);
        fs::create_directories(d / "data");
        auto ins = gradient_inputs(m, "", 1);
        for (const auto &i : step.data_inputs) write_npy((d / "data" / (tensor_file_stem(i) + ".npy")).string(), ins.at(i));
        if (!step.target.empty()) write_npy((d / "data" / "target.npy").string(), ins.at(step.target));
        std::string cxx = std::getenv("LOOM_CXX") ? std::getenv("LOOM_CXX") : "g++";
        run_or_fail(cxx + " -std=c++17 -O2 -fPIC -shared -fopenmp -o '" + (d / ("lib" + name + "_train.so")).string() + "' '" +
                        (d / (name + "_train.cpp")).string() + "' -Wl,--whole-archive '" +
                        (d / ("lib" + name + ".a")).string() + "' -Wl,--no-whole-archive" + libraries + " -ldl -lpthread",
                    "building the trainer");
    };
    AotArtifact a = with_schedule_errors(sm.applied, [&] { return compile_aot(sm.pipeline, target, o.out, ao, write_trainer); });
    for (const auto &w : a.warnings) std::cerr << "warning: " << w << "\n";
    int64_t params = 0;
    for (const auto &p : step.parameters) params += shape_numel(step.graph.value(p).shape);
    std::cout << "compiled a training step of " << o.model << " (loss " << o.loss << ", " << opt.name << ", lr " << opt.lr
              << "; " << step.parameters.size() << " parameters, " << params << " values) for " << target.to_string()
              << " (" << spec << " schedule) in " << a.halide_seconds << " s into " << a.dir << ":\n  " << a.dir << "/lib"
              << name << "_train.so\n  " << a.dir << "/" << name << "_train.h\n"
              << "  data/: seeded inputs and target\n"
              << m.recompute.summary();
}

}  // namespace loom::cli
