/* Heap bytes in use, counted the same way for any process: an LD_PRELOAD shim over glibc's
 * allocator (malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc,
 * pvalloc) that keeps the bytes live (malloc_usable_size of each block) and their peak. Both a Loom
 * step (Halide's buffers come from halide_malloc -> malloc; the artifact's parameters from new)
 * and PyTorch's CPU tensors (c10's allocator -> posix_memalign) go through it, so a step's own
 * bytes compare without either library's code, mappings or caches (RSS) in the figure.
 * Read from the process: memtrack_live(), memtrack_peak(), memtrack_reset_peak() (peak := live).
 * Build: cc -O2 -shared -fPIC -o libmemtrack.so memtrack.c */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static long long live_bytes, peak_bytes;

static void add(void *p) {
    if (!p) return;
    long long n = (long long)malloc_usable_size(p);
    long long now = __atomic_add_fetch(&live_bytes, n, __ATOMIC_RELAXED);
    long long peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_bytes, &peak, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}
static void sub(void *p) {
    if (p) __atomic_sub_fetch(&live_bytes, (long long)malloc_usable_size(p), __ATOMIC_RELAXED);
}

long long memtrack_live(void) { return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED); }
long long memtrack_peak(void) { return __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED); }
void memtrack_reset_peak(void) { __atomic_store_n(&peak_bytes, memtrack_live(), __ATOMIC_RELAXED); }

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    add(p);
    return p;
}
void *calloc(size_t a, size_t b) {
    void *p = __libc_calloc(a, b);
    add(p);
    return p;
}
void *realloc(void *old, size_t n) {
    long long before = old ? (long long)malloc_usable_size(old) : 0;
    void *p = __libc_realloc(old, n);
    if (p || n == 0) {
        __atomic_sub_fetch(&live_bytes, before, __ATOMIC_RELAXED);
        add(p);
    }
    return p;
}
void free(void *p) {
    sub(p);
    __libc_free(p);
}
void *memalign(size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    add(p);
    return p;
}
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    add(p);
    *out = p;
    return 0;
}
void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }
void *pvalloc(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return memalign(page, (n + page - 1) / page * page);
}
