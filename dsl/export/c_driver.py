"""The first part of the C every export carries: includes and portability macros, the few
driver API types it uses (unless `cuda.h` came first), `libcuda.so.1` loaded at run time
(`dlopen` / `dlsym`, once per process with `pthread_once`), this thread's error text, and
messages built piece by piece as Python formats them (`repr` of a float included).
"""

from __future__ import annotations

DRIVER = r"""
/* ===== kdsl support code, the same in every export (the export's tables sit between its two parts) ===== */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__cplusplus)
#define KDSL_TLS thread_local
#define KDSL_ALIGNAS(n) alignas(n)
#else
#define KDSL_TLS _Thread_local
#define KDSL_ALIGNAS(n) _Alignas(n)
#endif
#if defined(__GNUC__)
#define KDSL_PRINTF(f, a) __attribute__((format(printf, f, a)))
/* error paths: kept out of the launch path's code (and not inline, so `unused` says what `inline` would) */
#define KDSL_COLD __attribute__((cold, noinline, unused))
#else
#define KDSL_PRINTF(f, a)
#define KDSL_COLD
#endif

/* snprintf, through a function: messages are cut at the buffer's end by design, which gcc's
   -Wformat-truncation (in -Wall, with optimization) would otherwise report */
KDSL_COLD static int kdsl_format(char *buffer, size_t size, const char *format, ...) KDSL_PRINTF(3, 4);
KDSL_COLD static int kdsl_format(char *buffer, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int n = vsnprintf(buffer, size, format, args);
    va_end(args);
    return n;
}

#define KDSL_NO_FIT (-1)   /* a specialization that does not take the arguments: try the next */
#define KDSL_SKIPPED (-2)  /* an empty grid: nothing to launch, as in the Python launcher */
#define KDSL_SMEM_DEFAULT (48 * 1024)
#define KDSL_INT32_MAX 2147483647

/* ----- the few driver API types an export uses (cuda.h, when included first, has them) ----- */
#ifndef __cuda_cuda_h__
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUtensorMap_st {
    KDSL_ALIGNAS(128) uint64_t opaque[16];
} CUtensorMap;
typedef struct CUlaunchAttribute_st {
    int id;
    char pad[4];
    union {
        char pad[64];
        void *align;
        struct {
            unsigned int x, y, z;
        } clusterDim;
    } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;
#endif
enum {
    KDSL_FUNC_SHARED_SIZE_BYTES = 1, KDSL_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    KDSL_DEVICE_CC_MAJOR = 75, KDSL_DEVICE_CC_MINOR = 76, KDSL_DEVICE_SMEM_OPTIN = 97,
    KDSL_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4, KDSL_POINTER_MEMORY_TYPE = 2, KDSL_POINTER_IS_MANAGED = 8,
    KDSL_MEMORYTYPE_HOST = 1, KDSL_MEMORYTYPE_DEVICE = 2
};

/* ----- the driver, loaded at run time ----- */
typedef struct kdsl_driver_api {
    CUresult status; /* CUDA_SUCCESS once the driver is usable */
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                               unsigned int, unsigned int, CUstream, void **, void **);
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuGetErrorName)(CUresult, const char **);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncGetAttribute)(int *, int, CUfunction);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
    /* optional: newer drivers only (cluster launches: CUDA 11.8; TMA tensor maps: CUDA 12.0) */
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *, int, uint32_t, void *, const uint64_t *, const uint64_t *,
                                       const uint32_t *, const uint32_t *, int, int, int, int);
    /* NVTX, when built with KDSL_EXPORT_NVTX and a library providing it is found */
    int (*nvtxRangePushA)(const char *);
    int (*nvtxRangePop)(void);
    char problem[320];
} kdsl_driver_api;

static kdsl_driver_api kdsl_driver;
static pthread_once_t kdsl_driver_once = PTHREAD_ONCE_INIT;

static inline int kdsl_symbol(void *lib, const char *name, void *slot)
{
    void *found = dlsym(lib, name);
    if (found != NULL)
        memcpy(slot, &found, sizeof found);
    return found != NULL;
}

static void kdsl_load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    kdsl_driver_api *d = &kdsl_driver;
    if (lib == NULL) {
        const char *why = dlerror();
        d->status = CUDA_ERROR_NOT_INITIALIZED;
        kdsl_format(d->problem, sizeof d->problem, "no NVIDIA GPU driver found (%s)", why ? why : "libcuda.so.1");
        return;
    }
#define KDSL_REQUIRE(name)                                                                       \
    if (!kdsl_symbol(lib, #name, &d->name)) {                                                    \
        d->status = CUDA_ERROR_NOT_INITIALIZED;                                                  \
        kdsl_format(d->problem, sizeof d->problem, "libcuda.so.1 has no %s (driver too old)", #name); \
        return;                                                                                  \
    }
    KDSL_REQUIRE(cuInit) KDSL_REQUIRE(cuGetErrorName) KDSL_REQUIRE(cuGetErrorString) KDSL_REQUIRE(cuCtxGetCurrent)
    KDSL_REQUIRE(cuCtxSetCurrent) KDSL_REQUIRE(cuCtxGetDevice) KDSL_REQUIRE(cuDeviceGet)
    KDSL_REQUIRE(cuDeviceGetName) KDSL_REQUIRE(cuDeviceGetAttribute) KDSL_REQUIRE(cuDevicePrimaryCtxRetain)
    KDSL_REQUIRE(cuModuleLoadData) KDSL_REQUIRE(cuModuleGetFunction) KDSL_REQUIRE(cuFuncGetAttribute)
    KDSL_REQUIRE(cuFuncSetAttribute) KDSL_REQUIRE(cuLaunchKernel) KDSL_REQUIRE(cuStreamSynchronize)
    KDSL_REQUIRE(cuPointerGetAttribute)
#undef KDSL_REQUIRE
    kdsl_symbol(lib, "cuLaunchKernelEx", &d->cuLaunchKernelEx);
    kdsl_symbol(lib, "cuTensorMapEncodeTiled", &d->cuTensorMapEncodeTiled);
    d->status = d->cuInit(0);
    if (d->status != CUDA_SUCCESS) {
        const char *name = NULL;
        d->cuGetErrorName(d->status, &name);
        kdsl_format(d->problem, sizeof d->problem, "cuInit failed: %s (no usable GPU?)", name ? name : "?");
    }
#ifdef KDSL_EXPORT_NVTX
    {
        static const char *const libraries[] = {"libnvToolsExt.so.1", "libnvtx3interop.so.1", "libnvToolsExt.so"};
        for (size_t i = 0; i < sizeof libraries / sizeof libraries[0] && d->nvtxRangePop == NULL; ++i) {
            void *nvtx = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
            if (nvtx != NULL && kdsl_symbol(nvtx, "nvtxRangePushA", &d->nvtxRangePushA))
                kdsl_symbol(nvtx, "nvtxRangePop", &d->nvtxRangePop);
        }
        if (d->nvtxRangePop == NULL)
            d->nvtxRangePushA = NULL;
    }
#endif
}

/* ----- errors: the last failure of this thread, as NAME_error_string() returns it ----- */
static KDSL_TLS char kdsl_error_text[4096];

KDSL_COLD static int kdsl_fail(int code, const char *format, ...) KDSL_PRINTF(2, 3);
KDSL_COLD static int kdsl_fail(int code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(kdsl_error_text, sizeof kdsl_error_text, format, args);
    va_end(args);
    return code;
}

/* "CUDA_ERROR_X (what it means)" */
KDSL_COLD static const char *kdsl_result_text(CUresult result, char *buffer, size_t size)
{
    const char *name = NULL, *text = NULL;
    if (kdsl_driver.cuGetErrorName != NULL)
        kdsl_driver.cuGetErrorName(result, &name);
    if (kdsl_driver.cuGetErrorString != NULL)
        kdsl_driver.cuGetErrorString(result, &text);
    if (name == NULL)
        kdsl_format(buffer, size, "CUresult %d", (int)result);
    else if (text != NULL && text[0] != 0)
        kdsl_format(buffer, size, "%s (%s)", name, text);
    else
        kdsl_format(buffer, size, "%s", name);
    return buffer;
}

/* ----- messages built piece by piece (assert messages, tuples) ----- */
typedef struct kdsl_msg {
    char *text;
    size_t size, length;
} kdsl_msg;

KDSL_COLD static void kdsl_msg_format(kdsl_msg *m, const char *format, ...) KDSL_PRINTF(2, 3);
KDSL_COLD static void kdsl_msg_format(kdsl_msg *m, const char *format, ...)
{
    va_list args;
    if (m->length + 1 >= m->size)
        return;
    va_start(args, format);
    int n = vsnprintf(m->text + m->length, m->size - m->length, format, args);
    va_end(args);
    if (n > 0)
        m->length = m->length + (size_t)n < m->size ? m->length + (size_t)n : m->size - 1;
}

KDSL_COLD static void kdsl_msg_text(kdsl_msg *m, const char *text)
{
    kdsl_msg_format(m, "%s", text);
}

KDSL_COLD static void kdsl_msg_bool(kdsl_msg *m, bool value)
{
    kdsl_msg_text(m, value ? "True" : "False");
}

/* Python's format(v, '[0][width](d|x)'): the sign before any zero padding */
KDSL_COLD static void kdsl_msg_int(kdsl_msg *m, int64_t value, int base, int width, int zero)
{
    char digits[72];
    int n = 0;
    uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    do {
        digits[n++] = "0123456789abcdef"[magnitude % (uint64_t)base];
        magnitude /= (uint64_t)base;
    } while (magnitude != 0);
    int length = n + (value < 0);
    if (!zero)
        for (; width > length; --width)
            kdsl_msg_text(m, " ");
    if (value < 0)
        kdsl_msg_text(m, "-");
    if (zero)
        for (; width > length; --width)
            kdsl_msg_text(m, "0");
    while (n > 0)
        kdsl_msg_format(m, "%c", digits[--n]);
}

/* `digits` (n of them, the first not 0) times 10**exponent, read back as a double */
KDSL_COLD static double kdsl_read_decimal(const char *digits, int n, int exponent)
{
    char text[48];
    kdsl_format(text, sizeof text, "%c.%.*se%d", digits[0], n - 1, digits + 1, exponent);
    return strtod(text, NULL);
}

/* The decimal one unit in the last of its n digits above (up) or below it; 9.99 -> 10.0 keeps n digits */
KDSL_COLD static void kdsl_step_decimal(char *digits, int n, int *exponent, int up)
{
    int i = n - 1;
    if (up) {
        while (i >= 0 && digits[i] == '9')
            digits[i--] = '0';
        if (i >= 0)
            ++digits[i];
        else {
            digits[0] = '1';
            ++*exponent;
        }
    } else {
        while (i >= 0 && digits[i] == '0')
            digits[i--] = '9';
        --digits[i];
        if (digits[0] == '0') { /* 1.00 -> 0.99: 9.99 a decade lower */
            memset(digits, '9', (size_t)n);
            --*exponent;
        }
    }
}

/* Python's repr of a float: the fewest digits that read back as it (of the two decimals of
   that many digits around it, the nearer, or the other where only it reads back), in fixed
   notation from 1e-4 to 1e16 */
KDSL_COLD static void kdsl_msg_repr_float(kdsl_msg *m, double value)
{
    char buffer[40], digits[24];
    int precision, exponent = 0, n = 0;
    if (isnan(value)) {
        kdsl_msg_text(m, "nan");
        return;
    }
    if (isinf(value)) {
        kdsl_msg_text(m, value < 0 ? "-inf" : "inf");
        return;
    }
    if (signbit(value))
        kdsl_msg_text(m, "-");
    value = fabs(value);
    for (precision = 1; precision <= 17; ++precision) {
        kdsl_format(buffer, sizeof buffer, "%.*e", precision - 1, value);
        n = 0;
        const char *p = buffer;
        for (; *p != 'e'; ++p)
            if (*p != '.')
                digits[n++] = *p;
        exponent = atoi(p + 1);
        double nearest = strtod(buffer, NULL);
        if (nearest == value || value == 0.0)
            break;
        kdsl_step_decimal(digits, n, &exponent, nearest < value);
        if (kdsl_read_decimal(digits, n, exponent) == value)
            break;
    }
    while (n > 1 && digits[n - 1] == '0')
        --n;
    digits[n] = 0;
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) {
            kdsl_msg_text(m, "0.");
            for (int i = -1; i > exponent; --i)
                kdsl_msg_text(m, "0");
            kdsl_msg_text(m, digits);
        } else {
            for (int i = 0; i <= exponent; ++i)
                kdsl_msg_format(m, "%c", i < n ? digits[i] : '0');
            kdsl_msg_format(m, ".%s", n > exponent + 1 ? digits + exponent + 1 : "0");
        }
    } else {
        kdsl_msg_format(m, "%c", digits[0]);
        if (n > 1)
            kdsl_msg_format(m, ".%s", digits + 1);
        kdsl_msg_format(m, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
    }
}

/* kind 'r': Python's str(v); 'f' / 'e': format(v, '[0][width].{precision}f|e') */
KDSL_COLD static void kdsl_msg_float(kdsl_msg *m, double value, char kind, int precision, int width, int zero)
{
    if (kind == 'r')
        kdsl_msg_repr_float(m, value);
    else if (kind == 'f')
        kdsl_msg_format(m, zero ? "%0*.*f" : "%*.*f", width, precision, value);
    else
        kdsl_msg_format(m, zero ? "%0*.*e" : "%*.*e", width, precision, value);
}

/* Python's repr of a tuple of ints: (), (3,), (2, 3) */
KDSL_COLD static void kdsl_msg_tuple(kdsl_msg *m, const int64_t *values, int count, char open, char close)
{
    kdsl_msg_format(m, "%c", open);
    for (int i = 0; i < count; ++i)
        kdsl_msg_format(m, i ? ", %lld" : "%lld", (long long)values[i]);
    if (count == 1 && open == '(')
        kdsl_msg_text(m, ",");
    kdsl_msg_format(m, "%c", close);
}

"""
