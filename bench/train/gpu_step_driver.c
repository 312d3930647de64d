/* Times a CUDA `loom compile --train --target cuda` artifact's step on the GPU, and checks its first
 * step against the CPU artifact of the same model: both take one step on the same inputs (raw f32 /
 * int64 files) and print the loss and a checksum of every parameter after it.
 * usage: gpu_step_driver LIB NAME X.bin TARGET.bin REPS cuda|cpu
 *   cuda: then REPS steps on device pointers (no loss read back), synchronized, five times: ms per
 *         step (median and min of the five), and the device memory the trainer holds (cuMemGetInfo,
 *         after the steps, above what was free before it was created).
 *   cpu:  then REPS host steps, one at a time: median and min ms per step. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef unsigned long long DevPtr;
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static void *read_file(const char *path, long *bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
    fseek(f, 0, SEEK_END);
    *bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*bytes ? *bytes : 1);
    if (fread(p, 1, *bytes, f) != (size_t)*bytes) { fprintf(stderr, "short read %s\n", path); exit(1); }
    fclose(f);
    return p;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
typedef void *(*CreateFn)(void);
typedef int (*StepFn)(void *, const void *const *, const void *, float *);
typedef int (*SyncFn)(void *);
typedef int (*CountFn)(void);
typedef int64_t (*SizeFn)(int);
typedef float *(*ParamFn)(void *, int);
typedef const char *(*ErrorFn)(void);
typedef const char *(*NameFn)(int);
typedef void (*SetLrFn)(void *, float);
#define SYM(type, var, suffix)                                   \
    snprintf(sym, sizeof sym, "%s%s", argv[2], suffix);          \
    type var = (type)dlsym(lib, sym);                            \
    if (!var) { fprintf(stderr, "missing %s\n", sym); return 1; }

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: %s LIB NAME X.bin TARGET.bin REPS cuda|cpu\n", argv[0]); return 2; }
    int cuda = !strcmp(argv[6], "cuda"), reps = atoi(argv[5]);
    char sym[256];
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    SYM(CreateFn, create, "_train_create");
    SYM(StepFn, step, "_train_step");
    SYM(StepFn, step_device, "_train_step_device");
    SYM(SyncFn, synchronize, "_train_synchronize");
    SYM(CountFn, num_parameters, "_train_num_parameters");
    SYM(SizeFn, parameter_size, "_train_parameter_size");
    SYM(NameFn, parameter_name, "_train_parameter_name");
    SYM(SetLrFn, set_learning_rate, "_train_set_learning_rate");
    SYM(ParamFn, parameter, "_train_parameter");
    SYM(ErrorFn, last_error, "_train_last_error");
    long xb, tb;
    void *x = read_file(argv[3], &xb), *target = read_file(argv[4], &tb);

    int (*cuInit)(unsigned) = 0;
    int (*cuDeviceGet)(int *, int) = 0;
    int (*cuDevicePrimaryCtxRetain)(void **, int) = 0;
    int (*cuCtxSetCurrent)(void *) = 0;
    int (*cuMemGetInfo)(size_t *, size_t *) = 0;
    int (*cuMemAlloc)(DevPtr *, size_t) = 0;
    int (*cuMemcpyHtoD)(DevPtr, const void *, size_t) = 0;
    size_t free0 = 0, total = 0;
    if (cuda) {
        void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!cu) { fprintf(stderr, "no libcuda\n"); return 1; }
        cuInit = (int (*)(unsigned))dlsym(cu, "cuInit");
        cuDeviceGet = (int (*)(int *, int))dlsym(cu, "cuDeviceGet");
        cuDevicePrimaryCtxRetain = (int (*)(void **, int))dlsym(cu, "cuDevicePrimaryCtxRetain");
        cuCtxSetCurrent = (int (*)(void *))dlsym(cu, "cuCtxSetCurrent");
        cuMemGetInfo = (int (*)(size_t *, size_t *))dlsym(cu, "cuMemGetInfo_v2");
        cuMemAlloc = (int (*)(DevPtr *, size_t))dlsym(cu, "cuMemAlloc_v2");
        cuMemcpyHtoD = (int (*)(DevPtr, const void *, size_t))dlsym(cu, "cuMemcpyHtoD_v2");
        void *ctx = 0;
        int dev = 0;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
            fprintf(stderr, "CUDA init failed\n");
            return 1;
        }
        cuMemGetInfo(&free0, &total);
    }
    void *t = create();
    if (!t) { fprintf(stderr, "create failed: %s\n", last_error()); return 1; }
    const void *inputs[1] = {x};
    float loss = -1;
    /* LOOM_PARAM_DUMP=FILE: every parameter before and after the first step, each as its int64 size
     * then its floats (compare_params.py compares two such files' updates). */
    FILE *dump = getenv("LOOM_PARAM_DUMP") ? fopen(getenv("LOOM_PARAM_DUMP"), "wb") : NULL;
    for (int k = 0; dump && k < num_parameters(); k++) {
        int64_t n = parameter_size(k);
        fwrite(&n, sizeof n, 1, dump);
        fwrite(parameter(t, k), sizeof(float), (size_t)n, dump);
    }
    /* LOOM_DUMP_LR=LR: the dumped step takes this learning rate, large enough that the update
     * outweighs the parameter and is read back without its float32 rounding (the gradient check;
     * the steps after it go on from there, so time another run). */
    if (dump && getenv("LOOM_DUMP_LR")) set_learning_rate(t, (float)atof(getenv("LOOM_DUMP_LR")));
    if (step(t, inputs, target, &loss)) { fprintf(stderr, "step failed: %s\n", last_error()); return 1; }
    for (int k = 0; dump && k < num_parameters(); k++) {
        int64_t n = parameter_size(k);
        fwrite(&n, sizeof n, 1, dump);
        fwrite(parameter(t, k), sizeof(float), (size_t)n, dump);
    }
    if (dump) fclose(dump);
    /* Beside it, FILE.names: the parameters' names, one a line (first_step_f64.py reads them). */
    if (dump) {
        char names_path[1024];
        snprintf(names_path, sizeof names_path, "%s.names", getenv("LOOM_PARAM_DUMP"));
        FILE *names = fopen(names_path, "w");
        for (int k = 0; names && k < num_parameters(); k++) fprintf(names, "%s\n", parameter_name(k));
        if (names) fclose(names);
    }
    double checksum = 0, abssum = 0;
    for (int k = 0; k < num_parameters(); k++) {
        const float *p = parameter(t, k);
        for (int64_t i = 0; i < parameter_size(k); i++) checksum += p[i] * (double)((i % 7) + 1), abssum += p[i] < 0 ? -p[i] : p[i];
    }
    printf("first_loss %.6f param_checksum %.6f param_abssum %.6f\n", loss, checksum, abssum);
    double ms[64];
    int trials = 5;
    if (cuda) {
        DevPtr dx = 0, dt = 0;
        if (cuMemAlloc(&dx, xb) || cuMemAlloc(&dt, tb) || cuMemcpyHtoD(dx, x, xb) || cuMemcpyHtoD(dt, target, tb)) {
            fprintf(stderr, "device inputs failed\n");
            return 1;
        }
        const void *dinputs[1] = {(const void *)dx};
        for (int i = 0; i < 20; i++)
            if (step_device(t, dinputs, (const void *)dt, NULL)) { fprintf(stderr, "step_device failed: %s\n", last_error()); return 1; }
        synchronize(t);
        for (int r = 0; r < trials; r++) {
            double a = now_ms();
            for (int i = 0; i < reps; i++) step_device(t, dinputs, (const void *)dt, NULL);
            if (synchronize(t)) { fprintf(stderr, "sync failed: %s\n", last_error()); return 1; }
            ms[r] = (now_ms() - a) / reps;
        }
        size_t free1 = 0;
        cuMemGetInfo(&free1, &total);
        step_device(t, dinputs, (const void *)dt, &loss);
        qsort(ms, trials, sizeof(double), cmp);
        printf("median_ms %.4f min_ms %.4f device_mib_held %.1f loss_after %.6f\n", ms[trials / 2], ms[0],
               ((double)free0 - (double)free1) / 1048576.0, loss);
    } else {
        double *one = malloc(sizeof(double) * reps);
        for (int i = 0; i < 5; i++) step(t, inputs, target, &loss);
        for (int i = 0; i < reps; i++) {
            double a = now_ms();
            step(t, inputs, target, &loss);
            one[i] = now_ms() - a;
        }
        qsort(one, reps, sizeof(double), cmp);
        printf("median_ms %.4f min_ms %.4f loss_after %.6f\n", one[reps / 2], one[0], loss);
    }
    return 0;
}
