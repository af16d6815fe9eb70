/* A recording stand-in for libcuda.so.1, for CPU tests of exported C (tests/export).
 *
 * It answers the driver calls an export makes as one GPU would (compute capability and
 * attributes from RECORDING_CUDA_CC, default 90) and writes each launch to the file named
 * by RECORDING_CUDA_LOG: the kernel, grid, block, shared memory, cluster and every
 * parameter's bytes (their sizes come from RECORDING_CUDA_PARAMS, "kernel=8,4,4;other=..."),
 * so a test compares them with what the Python launcher packs for the same call (a kernel is
 * named there as SYMBOL@HASH, the FNV-1a hash of its cubin: specializations share symbols). A tensor
 * map is "encoded" as the numbers it was given, so those are compared too. The real driver
 * is exercised by the GPU tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
static void *current_context;
static int primary = 1;

static FILE *log_file(void)
{
    static FILE *f;
    if (f == NULL) {
        const char *path = getenv("RECORDING_CUDA_LOG");
        f = path ? fopen(path, "a") : stdout;
    }
    return f;
}

CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
CUresult cuGetErrorName(CUresult r, const char **name)
{
    *name = r == 1 ? "CUDA_ERROR_INVALID_VALUE" : r == 701 ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
CUresult cuGetErrorString(CUresult r, const char **text) { (void)r; *text = "recorded"; return 0; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current_context; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current_context = ctx; return 0; }
CUresult cuCtxGetDevice(int *device) { *device = 0; return 0; }
CUresult cuDeviceGet(int *device, int ordinal) { *device = ordinal; return ordinal == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char *name, int size, int device) { (void)device; snprintf(name, (size_t)size, "Recording GPU"); return 0; }
CUresult cuDeviceGetAttribute(int *value, int attribute, int device)
{
    const char *cc = getenv("RECORDING_CUDA_CC");
    int capability = cc ? atoi(cc) : 90;
    (void)device;
    switch (attribute) {
    case 75: *value = capability / 10; break;
    case 76: *value = capability % 10; break;
    case 16: *value = 132; break;    /* multiprocessor_count */
    case 97: *value = 232448; break; /* max_shared_memory_per_block_optin */
    default: *value = 1000 + attribute; break;
    }
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int device) { (void)device; *ctx = &primary; return 0; }
typedef struct {
    char name[200];
    char key[240];
} Function;

/* the cubin's FNV-1a hash; an ELF image's size is where its section headers end */
CUresult cuModuleLoadData(void **module, const void *image)
{
    const unsigned char *bytes = (const unsigned char *)image;
    uint64_t shoff, hash = 1469598103934665603ull;
    uint16_t shentsize, shnum;
    memcpy(&shoff, bytes + 0x28, 8);
    memcpy(&shentsize, bytes + 0x3A, 2);
    memcpy(&shnum, bytes + 0x3C, 2);
    for (uint64_t i = 0; i < shoff + (uint64_t)shentsize * shnum; ++i)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    uint64_t *handle = (uint64_t *)malloc(sizeof hash);
    *handle = hash;
    *module = handle;
    return 0;
}
CUresult cuModuleGetFunction(void **fn, void *module, const char *name)
{
    Function *f = (Function *)calloc(1, sizeof(Function));
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->key, sizeof f->key, "%s@%016llx", name, (unsigned long long)*(uint64_t *)module);
    *fn = f;
    return 0;
}
CUresult cuFuncGetAttribute(int *value, int attribute, void *fn) { (void)attribute; (void)fn; *value = 0; return 0; }
CUresult cuFuncSetAttribute(void *fn, int attribute, int value)
{
    fprintf(log_file(), "attribute %s %d %d\n", ((Function *)fn)->name, attribute, value);
    return 0;
}
CUresult cuStreamSynchronize(void *stream) { (void)stream; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
/* "device" memory is host memory here: copies copy, kernels never run */
CUresult cuMemAlloc_v2(unsigned long long *ptr, size_t size) { *ptr = (unsigned long long)(uintptr_t)calloc(1, size); return 0; }
CUresult cuMemsetD32_v2(unsigned long long ptr, unsigned int value, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        ((unsigned int *)(uintptr_t)ptr)[i] = value;
    return 0;
}
CUresult cuMemcpyHtoD_v2(unsigned long long to, const void *from, size_t size)
{
    memcpy((void *)(uintptr_t)to, from, size);
    return 0;
}
CUresult cuMemcpyDtoH_v2(void *to, unsigned long long from, size_t size)
{
    memcpy(to, (const void *)(uintptr_t)from, size);
    return 0;
}
CUresult cuPointerGetAttribute(void *value, int attribute, unsigned long long ptr)
{
    (void)ptr;
    *(unsigned int *)value = attribute == 2 ? 2 : 0; /* device memory, not managed */
    return 0;
}

static void record(const Function *fn, unsigned int g[3], unsigned int b[3], unsigned int smem,
                   const unsigned int *cluster, void **params)
{
    FILE *f = log_file();
    const char *key = fn->key;
    fprintf(f, "launch %s grid %u %u %u block %u %u %u smem %u", fn->name, g[0], g[1], g[2], b[0], b[1], b[2], smem);
    if (cluster)
        fprintf(f, " cluster %u %u %u", cluster[0], cluster[1], cluster[2]);
    const char *sizes = getenv("RECORDING_CUDA_PARAMS"), *at = sizes ? strstr(sizes, key) : NULL;
    while (at && (at[strlen(key)] != '=' || (at != sizes && at[-1] != ';')))
        at = strstr(at + 1, key);
    if (at) {
        at += strlen(key) + 1;
        for (int i = 0; *at && *at != ';'; ++i) {
            int size = atoi(at);
            fprintf(f, " ");
            for (int k = 0; k < size; ++k)
                fprintf(f, "%02x", ((const unsigned char *)params[i])[k]);
            while (*at && *at != ',' && *at != ';')
                ++at;
            if (*at == ',')
                ++at;
        }
    }
    fprintf(f, "\n");
    fflush(f);
}

CUresult cuLaunchKernel(void *fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                        unsigned int bz, unsigned int smem, void *stream, void **params, void **extra)
{
    unsigned int g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    (void)stream;
    (void)extra;
    record((const Function *)fn, g, b, smem, NULL, params);
    return getenv("RECORDING_CUDA_FAIL") ? atoi(getenv("RECORDING_CUDA_FAIL")) : 0;
}

typedef struct {
    int id;
    char pad[4];
    union {
        char pad[64];
        struct { unsigned int x, y, z; } clusterDim;
    } value;
} Attribute;
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream;
    Attribute *attrs;
    unsigned int numAttrs;
} Config;

CUresult cuLaunchKernelEx(const Config *c, void *fn, void **params, void **extra)
{
    unsigned int g[3] = {c->gridDimX, c->gridDimY, c->gridDimZ}, b[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
    unsigned int cluster[3] = {0, 0, 0};
    (void)extra;
    for (unsigned int i = 0; i < c->numAttrs; ++i)
        if (c->attrs[i].id == 4) {
            cluster[0] = c->attrs[i].value.clusterDim.x;
            cluster[1] = c->attrs[i].value.clusterDim.y;
            cluster[2] = c->attrs[i].value.clusterDim.z;
        }
    record((const Function *)fn, g, b, c->sharedMemBytes, cluster, params);
    return 0;
}

/* the map holds what it was given: type, rank, address, extents, strides, box, swizzle, as 64-bit words */
CUresult cuTensorMapEncodeTiled(uint64_t *map, int type, uint32_t rank, void *address, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *element_strides,
                                int interleave, int swizzle, int l2, int fill)
{
    int n = 0;
    memset(map, 0, 128);
    map[n++] = (uint64_t)type;
    map[n++] = rank;
    map[n++] = (uint64_t)(uintptr_t)address;
    for (uint32_t k = 0; k < rank; ++k)
        map[n++] = dims[k];
    for (uint32_t k = 0; k + 1 < rank; ++k)
        map[n++] = strides[k];
    for (uint32_t k = 0; k < rank; ++k)
        map[n++] = (uint64_t)box[k] << 32 | element_strides[k];
    map[n++] = (uint64_t)swizzle << 48 | (uint64_t)interleave << 32 | (uint64_t)l2 << 16 | (uint64_t)fill;
    return 0;
}
