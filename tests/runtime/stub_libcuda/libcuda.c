/*
 * A stand-in libcuda.so.1 for the native launch path's device logic on a machine without a
 * GPU: the five entry points `_fastpath.c` loads, a per-thread context stack, and a log of
 * the launches (function, current context at launch, first parameter). Nothing runs; the
 * tests built on it (test_native_devices.py) check which function a launch took and in
 * which context, never a result.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define STACK 16
#define LOG 100000

static __thread void *stack[STACK];
static __thread int depth = 0;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { void *function, *ctx; uint64_t param0; } entries[LOG];
static int logged = 0;
static int pushes = 0, pops = 0, sets = 0;
static int fail_with = 0;

int cuCtxGetCurrent(void **ctx) { *ctx = depth ? stack[depth - 1] : NULL; return 0; }

int cuCtxSetCurrent(void *ctx) {
    __sync_fetch_and_add(&sets, 1);
    if (ctx == NULL) { if (depth) depth--; return 0; }
    if (depth) stack[depth - 1] = ctx; else stack[depth++] = ctx;
    return 0;
}

int cuCtxPushCurrent_v2(void *ctx) {
    if (depth == STACK) return 1;
    __sync_fetch_and_add(&pushes, 1);
    stack[depth++] = ctx;
    return 0;
}

int cuCtxPopCurrent_v2(void **ctx) {
    if (!depth) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    __sync_fetch_and_add(&pops, 1);
    void *top = stack[--depth];
    if (ctx) *ctx = top;
    return 0;
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *stream, void **params, void **extra) {
    pthread_mutex_lock(&lock);
    if (logged < LOG) {
        entries[logged].function = f;
        entries[logged].ctx = depth ? stack[depth - 1] : NULL;
        entries[logged].param0 = params ? *(uint64_t *)params[0] : 0;
        logged++;
    }
    pthread_mutex_unlock(&lock);
    return fail_with;
}

/* What the tests read and set. */
int stub_logged(void) { return logged; }
void stub_entry(int i, uint64_t out[3]) {
    out[0] = (uint64_t)(uintptr_t)entries[i].function;
    out[1] = (uint64_t)(uintptr_t)entries[i].ctx;
    out[2] = entries[i].param0;
}
void stub_counts(int out[3]) { out[0] = pushes; out[1] = pops; out[2] = sets; }
void stub_reset(void) { logged = pushes = pops = sets = 0; }
void stub_fail_with(int code) { fail_with = code; }
int stub_depth(void) { return depth; }
