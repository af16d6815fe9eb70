/* A C program calling exported jit functions, as a user of `kdsl export` writes one
 * (tests/export/test_export_gpu.py builds it with gcc and compares what it writes with torch).
 *
 *     gpu_program DIR N ROWS COLS
 *
 * reads DIR/x.bin, DIR/y.bin (N floats each) and DIR/rows.bin (ROWS x COLS floats), runs
 *   lib_run_saxpy (y = 2.5 x + y), lib_run_softmax (rows -> softmax of each row),
 *   lib_copy on f32 with BLOCK=256 and on the f16 bits of x with BLOCK=128 (two specializations
 *   of one entry point), and once with a BLOCK no specialization has (which must be refused),
 * and writes DIR/saxpy.out, DIR/softmax.out, DIR/copy32.out, DIR/copy16.out. The driver calls
 * for memory are looked up with dlsym, as the export's own are: no CUDA toolkit is needed. */
#include "lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CUresult (*cuInit)(unsigned int);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
static CUresult (*cuCtxSetCurrent)(void *);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s failed: %d\n%s\n", what, (int)r, lib_error_string());
        exit(1);
    }
}

static void *symbol(void *lib, const char *name)
{
    void *found = dlsym(lib, name);
    if (found == NULL) {
        fprintf(stderr, "libcuda.so.1 has no %s\n", name);
        exit(1);
    }
    return found;
}

/* a driver entry point into a function pointer (dlsym answers an object pointer) */
static void load(void *slot, void *lib, const char *name)
{
    void *found = symbol(lib, name);
    memcpy(slot, &found, sizeof found);
}

static void *read_file(const char *dir, const char *name, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *data = malloc(size);
    if (f == NULL || fread(data, 1, size, f) != size) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    return data;
}

static void write_device(const char *dir, const char *name, CUdeviceptr from, size_t size)
{
    char path[4096];
    void *data = malloc(size);
    check(cuMemcpyDtoH(data, from, size), "cuMemcpyDtoH");
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, size, f);
    fclose(f);
    free(data);
}

static CUdeviceptr upload(const void *data, size_t size)
{
    CUdeviceptr p;
    check(cuMemAlloc(&p, size), "cuMemAlloc");
    check(cuMemcpyHtoD(p, data, size), "cuMemcpyHtoD");
    return p;
}

static kdsl_tensor vector(CUdeviceptr data, int dtype, int64_t n)
{
    kdsl_tensor t = {data, dtype, 1, 0, 0, {n}, {1}};
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gpu_program DIR N ROWS COLS\n");
        return 2;
    }
    const char *dir = argv[1];
    int64_t n = atoll(argv[2]), rows = atoll(argv[3]), cols = atoll(argv[4]);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    void *ctx;
    int device;
    if (lib == NULL) {
        fprintf(stderr, "no libcuda.so.1\n");
        return 1;
    }
    load(&cuInit, lib, "cuInit");
    load(&cuDeviceGet, lib, "cuDeviceGet");
    load(&cuDevicePrimaryCtxRetain, lib, "cuDevicePrimaryCtxRetain");
    load(&cuCtxSetCurrent, lib, "cuCtxSetCurrent");
    load(&cuCtxSynchronize, lib, "cuCtxSynchronize");
    load(&cuMemAlloc, lib, "cuMemAlloc_v2");
    load(&cuMemcpyHtoD, lib, "cuMemcpyHtoD_v2");
    load(&cuMemcpyDtoH, lib, "cuMemcpyDtoH_v2");
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&device, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

    size_t bytes = (size_t)n * sizeof(float), matrix = (size_t)(rows * cols) * sizeof(float);
    CUdeviceptr x = upload(read_file(dir, "x.bin", bytes), bytes), y = upload(read_file(dir, "y.bin", bytes), bytes);
    kdsl_tensor tx = vector(x, KDSL_F32, n), ty = vector(y, KDSL_F32, n);
    check(lib_run_saxpy(NULL, &tx, &ty, 2.5f), "lib_run_saxpy");
    check(cuCtxSynchronize(), "cuCtxSynchronize after saxpy");
    write_device(dir, "saxpy.out", y, bytes);

    CUdeviceptr in = upload(read_file(dir, "rows.bin", matrix), matrix), out;
    check(cuMemAlloc(&out, matrix), "cuMemAlloc");
    kdsl_tensor tin = {in, KDSL_F32, 2, 0, 0, {rows, cols}, {cols, 1}};
    kdsl_tensor tout = {out, KDSL_F32, 2, 0, 0, {rows, cols}, {cols, 1}};
    check(lib_run_softmax(NULL, &tin, &tout), "lib_run_softmax");
    check(cuCtxSynchronize(), "cuCtxSynchronize after softmax");
    write_device(dir, "softmax.out", out, matrix);

    CUdeviceptr c32, c16;
    check(cuMemAlloc(&c32, bytes), "cuMemAlloc");
    check(cuMemAlloc(&c16, bytes / 2), "cuMemAlloc");
    kdsl_tensor t32 = vector(c32, KDSL_F32, n), h = vector(x, KDSL_F16, n), t16 = vector(c16, KDSL_F16, n);
    check(lib_copy(NULL, &tx, &t32, 256), "lib_copy f32");
    check(lib_copy(NULL, &h, &t16, 128), "lib_copy f16");
    CUresult refused = lib_copy(NULL, &tx, &t32, 64);
    if (refused != CUDA_ERROR_INVALID_VALUE || strstr(lib_error_string(), "BLOCK=64") == NULL) {
        fprintf(stderr, "BLOCK=64 was not refused: %d %s\n", (int)refused, lib_error_string());
        return 1;
    }
    printf("refused: %s\n", lib_error_string());
    check(cuCtxSynchronize(), "cuCtxSynchronize after copy");
    write_device(dir, "copy32.out", c32, bytes);
    write_device(dir, "copy16.out", c16, bytes / 2);
    printf("ok\n");
    return 0;
}
