/* Times a `loom compile --train` artifact's step: N warm-up steps, then R timed steps (median,
 * min), and the peak RSS the process reached (whole process, and above its RSS right after the
 * trainer was created: the step's own working memory). Inputs and target are random (classes for
 * cross_entropy), fixed across steps. On stderr: glibc's bytes in use (mallinfo2) before the first
 * step and after the last, and the RSS then (what the step's buffers and the kept crossing buffers hold).
 * With LOOM_THREADING=openmp the artifact's parallel loops run on OpenMP's team (NAME_set_threading(1))
 * instead of Halide's thread pool. LOOM_STEP_WINDOWS=W also prints, on stderr, the median of each of W
 * equal windows of the timed steps in order (whether a slow run was slow throughout or for a while).
 * usage: train_step_driver LIB NAME LOSS(mse|cross_entropy) REPS IN_NUMEL OUT_NUMEL ROWS CLASSES */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <malloc.h>

/* A "VmRSS:" or "VmHWM:" line of /proc/self/status, in KiB. */
static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key));
    if (f) fclose(f);
    return v;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (argc != 9) { fprintf(stderr, "usage: %s LIB NAME LOSS REPS IN_NUMEL OUT_NUMEL ROWS CLASSES\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    char sym[256];
    snprintf(sym, sizeof sym, "%s_train_create", argv[2]);
    void *(*create)(void) = (void *(*)(void))dlsym(lib, sym);
    snprintf(sym, sizeof sym, "%s_train_step", argv[2]);
    int (*step)(void *, const void *const *, const void *, float *) = (int (*)(void *, const void *const *, const void *, float *))dlsym(lib, sym);
    if (!create || !step) { fprintf(stderr, "missing symbols\n"); return 1; }
    int reps = atoi(argv[4]), ce = !strcmp(argv[3], "cross_entropy");
    long in_n = atol(argv[5]), out_n = atol(argv[6]), rows = atol(argv[7]), classes = atol(argv[8]);
    float *x = malloc(sizeof(float) * in_n), *y = malloc(sizeof(float) * out_n);
    int64_t *cls = malloc(sizeof(int64_t) * rows);
    srand(1);
    for (long i = 0; i < in_n; i++) x[i] = rand() / (float)RAND_MAX * 2 - 1;
    for (long i = 0; i < out_n; i++) y[i] = rand() / (float)RAND_MAX * 2 - 1;
    for (long i = 0; i < rows; i++) cls[i] = rand() % classes;
    const char *threading = getenv("LOOM_THREADING");
    if (threading && !strcmp(threading, "openmp")) {
        snprintf(sym, sizeof sym, "%s_set_threading", argv[2]);
        int (*set_threading)(int) = (int (*)(int))dlsym(lib, sym);
        if (!set_threading) { fprintf(stderr, "missing %s\n", sym); return 1; }
        set_threading(1);
    }
    void *t = create();
    long base = status_kib("VmRSS:");
    struct mallinfo2 m0 = mallinfo2();
    const void *inputs[1] = {x};
    float loss;
    for (int i = 0; i < 5; i++) step(t, inputs, ce ? (void *)cls : (void *)y, &loss);
    double *ms = malloc(sizeof(double) * reps);
    for (int i = 0; i < reps; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (step(t, inputs, ce ? (void *)cls : (void *)y, &loss)) return 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        ms[i] = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
    }
    struct mallinfo2 m1 = mallinfo2();
    fprintf(stderr, "malloc in use %zu -> %zu KiB (mmapped %zu -> %zu KiB), RSS after steps %ld KiB\n", (m0.uordblks + m0.hblkhd) / 1024, (m1.uordblks + m1.hblkhd) / 1024, m0.hblkhd / 1024, m1.hblkhd / 1024, status_kib("VmRSS:"));
    const char *windows = getenv("LOOM_STEP_WINDOWS");
    int nw = windows ? atoi(windows) : 0;
    if (nw > 0 && reps / nw > 0) {
        int w = reps / nw;
        double *tmp = malloc(sizeof(double) * w);
        fprintf(stderr, "window medians (%d steps each):", w);
        for (int i = 0; i < nw; i++) {
            memcpy(tmp, ms + (size_t)i * w, sizeof(double) * w);
            qsort(tmp, w, sizeof(double), cmp);
            fprintf(stderr, " %.4f", tmp[w / 2]);
        }
        fprintf(stderr, "\n");
        free(tmp);
    }
    qsort(ms, reps, sizeof(double), cmp);
    printf("median_ms %.4f min_ms %.4f peak_rss_kib %ld step_kib %ld loss %.5f\n", ms[reps / 2], ms[0], status_kib("VmHWM:"),
           status_kib("VmHWM:") - base, loss);
    return 0;
}
