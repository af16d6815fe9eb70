/* Host microseconds per launch of saxpy through its exported entry point, against a bare
 * cuLaunchKernel of the same cubin with prebuilt parameters (benchmarks/export_dispatch.py
 * exports the kernels and builds this file; see there for the method and the goal).
 *
 * It includes the export's source, so the bare launch loads the very cubin the entry point
 * loads (kdsl_images), and calls the entry points as any C program does. Output: one line
 * per measurement, then a JSON line. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "bench.c"

#include <time.h>

#define BATCH 100
#define ROUNDS 200

static CUresult (*cuDeviceGet_)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain_)(CUcontext *, int);
static CUresult (*cuCtxSetCurrent_)(CUcontext);
static CUresult (*cuCtxSynchronize_)(void);
static CUresult (*cuMemAlloc_)(CUdeviceptr *, size_t);
static CUresult (*cuMemsetD32_)(CUdeviceptr, unsigned int, size_t);

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s failed: %d %s\n", what, (int)r, bench_error_string());
        exit(1);
    }
}

static void load(void *lib, const char *name, void *slot)
{
    if (!kdsl_symbol(lib, name, slot)) {
        fprintf(stderr, "libcuda.so.1 has no %s\n", name);
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], by_value);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    const int n = 1024, spin = argc > 1 ? atoi(argv[1]) : 2000000;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    CUcontext ctx;
    int device;
    if (lib == NULL) {
        fprintf(stderr, "no NVIDIA driver (libcuda.so.1)\n");
        return 1;
    }
    pthread_once(&kdsl_driver_once, kdsl_load_driver); /* the export's driver table: cuInit, launches */
    check(kdsl_driver.status, "loading the driver");
    load(lib, "cuDeviceGet", &cuDeviceGet_);
    load(lib, "cuDevicePrimaryCtxRetain", &cuDevicePrimaryCtxRetain_);
    load(lib, "cuCtxSetCurrent", &cuCtxSetCurrent_);
    load(lib, "cuCtxSynchronize", &cuCtxSynchronize_);
    load(lib, "cuMemAlloc_v2", &cuMemAlloc_);
    load(lib, "cuMemsetD32_v2", &cuMemsetD32_);
    check(cuDeviceGet_(&device, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain_(&ctx, device), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent_(ctx), "cuCtxSetCurrent");
    CUdeviceptr x, y, s;
    check(cuMemAlloc_(&x, n * sizeof(float)), "cuMemAlloc");
    check(cuMemAlloc_(&y, n * sizeof(float)), "cuMemAlloc");
    check(cuMemAlloc_(&s, sizeof(float)), "cuMemAlloc");
    check(cuMemsetD32_(x, 0, n), "cuMemsetD32");
    check(cuMemsetD32_(y, 0, n), "cuMemsetD32");
    check(cuMemsetD32_(s, 0, 1), "cuMemsetD32");
    kdsl_tensor tx = {x, KDSL_F32, 1, 0, 0, {n}, {1}}, ty = {y, KDSL_F32, 1, 0, 0, {n}, {1}};
    kdsl_tensor ts = {s, KDSL_F32, 1, 0, 0, {1}, {1}};
    check(bench_run_saxpy(NULL, &tx, &ty, 2.0f), "bench_run_saxpy");

    /* the bare launch: the same cubin, loaded and launched with the driver alone */
    int saxpy = -1, image = -1;
    for (int k = 0; k < KDSL_KERNELS; ++k)
        if (strcmp(kdsl_kernels[k].symbol, "saxpy") == 0)
            saxpy = k;
    for (int i = 0; i < KDSL_IMAGES; ++i)
        if (saxpy >= 0 && kdsl_images[i].variant == kdsl_kernels[saxpy].variant)
            image = i;
    if (image < 0) {
        fprintf(stderr, "the export holds no saxpy cubin\n");
        return 1;
    }
    CUmodule module;
    CUfunction fn;
    check(kdsl_driver.cuModuleLoadData(&module, kdsl_images[image].data), "cuModuleLoadData");
    check(kdsl_driver.cuModuleGetFunction(&fn, module, "saxpy"), "cuModuleGetFunction");
    CUdeviceptr px = x, py = y;
    int32_t pn = n;
    float pa = 2.0f;
    void *params[] = {&px, &pn, &py, &pn, &pa, &pn};
    const unsigned int grid = (unsigned int)((n + 255) / 256);

    double spin_us = 0, exported[ROUNDS], bare[ROUNDS], own[ROUNDS], empty[ROUNDS], current[ROUNDS];
    CUfunction loaded = kdsl_this_thread.function[saxpy]; /* the export's own handle of the kernel */
    kdsl_tensor ex = {x, KDSL_F32, 1, 0, 0, {0}, {1}}, ey = {y, KDSL_F32, 1, 0, 0, {0}, {1}}; /* an empty grid */
    for (int i = 0; i < 3 * BATCH; ++i) {
        check(bench_run_saxpy(NULL, &tx, &ty, 2.0f), "bench_run_saxpy");
        check(kdsl_driver.cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
    }
    check(cuCtxSynchronize_(), "cuCtxSynchronize");
    double t = now_us();
    check(bench_spin_wait(NULL, &ts, spin), "bench_spin_wait");
    check(cuCtxSynchronize_(), "cuCtxSynchronize");
    spin_us = now_us() - t;
    for (int r = 0; r < ROUNDS; ++r)
        for (int which = 0; which < 3; ++which) { /* rotating which goes first */
            int kind = (which + r) % 3;
            CUfunction f = kind == 1 ? fn : loaded;
            check(cuCtxSynchronize_(), "cuCtxSynchronize");
            check(bench_spin_wait(NULL, &ts, spin), "bench_spin_wait"); /* the GPU stays busy while we time */
            t = now_us();
            if (kind == 0)
                for (int i = 0; i < BATCH; ++i)
                    bench_run_saxpy(NULL, &tx, &ty, 2.0f);
            else
                for (int i = 0; i < BATCH; ++i)
                    kdsl_driver.cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
            (kind == 0 ? exported : kind == 1 ? bare : own)[r] = (now_us() - t) / BATCH;
        }
    check(cuCtxSynchronize_(), "cuCtxSynchronize");
    for (int r = 0; r < ROUNDS; ++r) { /* where the difference goes: the entry point's own work, and the context */
        CUcontext c;
        t = now_us();
        for (int i = 0; i < BATCH; ++i)
            bench_run_saxpy(NULL, &ex, &ey, 2.0f);
        empty[r] = (now_us() - t) / BATCH;
        t = now_us();
        for (int i = 0; i < BATCH; ++i)
            kdsl_driver.cuCtxGetCurrent(&c);
        current[r] = (now_us() - t) / BATCH;
    }
    double e = median(exported, ROUNDS), b = median(bare, ROUNDS);
    printf("exported entry point bench_run_saxpy   %7.3f us per launch (median of %d batches of %d)\n", e, ROUNDS,
           BATCH);
    printf("bare cuLaunchKernel, same cubin        %7.3f us per launch\n", b);
    printf("ratio                                  %7.3f (goal <= 1.1)\n", e / b);
    printf("spin kernel                            %7.0f us (must exceed a batch: %.0f us)\n", spin_us,
           BATCH * (e > b ? e : b));
    printf("bare cuLaunchKernel of the export's handle %7.3f us per launch\n", median(own, ROUNDS));
    printf("the entry point with nothing to launch (an empty grid) %.3f us, cuCtxGetCurrent %.3f us\n",
           median(empty, ROUNDS), median(current, ROUNDS));
    printf("{\"exported_us\": %.4f, \"bare_us\": %.4f, \"ratio\": %.4f, \"spin_us\": %.1f, \"batch\": %d, "
           "\"rounds\": %d}\n", e, b, e / b, spin_us, BATCH, ROUNDS);
    return spin_us > BATCH * (e > b ? e : b) ? 0 : 3;
}
