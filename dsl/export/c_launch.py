"""The C of a launch, in the Python launcher's order: the variant's module loaded (once per
context), an empty grid skipped, the dimensions checked, the shared-memory opt-in above
48 KiB applied, NVTX ranges (`KDSL_EXPORT_NVTX`), `cuLaunchKernel` or, for a cluster,
`cuLaunchKernelEx`, the synchronizing check of `KDSL_EXPORT_DEBUG`; and the launcher's
`rt.check_block`, `rt.check_smem` and `rt.tensor_map`.
"""

from __future__ import annotations

LAUNCH = r"""/* ----- launching ----- */
typedef struct kdsl_site {
    int variant, kernel, index, count; /* launch `index` of the `count` in its jit function */
    const char *where;                 /* file.py:line of its .launch(...) */
} kdsl_site;

KDSL_COLD static int kdsl_launch_fail(kdsl_call *C, const kdsl_site *site, const int64_t grid[3],
                                      const int64_t block[3], int64_t smem, int code, const char *message)
{
    return kdsl_fail(code, "%s: launching kernel '%s' with grid=(%lld, %lld, %lld), block=(%lld, %lld, %lld), "
                     "smem=%lld failed: %s\n  at %s (launch %d of %d)", C->function,
                     kdsl_kernels[site->kernel].symbol, (long long)grid[0], (long long)grid[1], (long long)grid[2],
                     (long long)block[0], (long long)block[1], (long long)block[2], (long long)smem, message,
                     site->where, site->index, site->count);
}

KDSL_COLD static int kdsl_launch_result(kdsl_call *C, const kdsl_site *site, const int64_t grid[3],
                                        const int64_t block[3], int64_t smem, CUresult r, const char *what)
{
    char text[200], message[400];
    kdsl_format(message, sizeof message, "%s%s", what, kdsl_result_text(r, text, sizeof text));
    return kdsl_launch_fail(C, site, grid, block, smem, r, message);
}

/* the point of failure of an argument read or an assert: Python raises ArgumentError there */
KDSL_COLD static int kdsl_argument_fault(kdsl_call *C, const kdsl_eval *ev, const char *where)
{
    kdsl_reason(C, "%s (at %s)", ev->fault, where);
    return KDSL_NO_FIT;
}

KDSL_COLD static int kdsl_load_variant(kdsl_call *C, int variant, const kdsl_site *site, const int64_t grid[3],
                                       const int64_t block[3], int64_t smem)
{
    kdsl_thread *T = C->thread;
    kdsl_context *ctx = C->context;
    CUresult r = CUDA_SUCCESS;
    char what[300];
    what[0] = 0;
    pthread_mutex_lock(&kdsl_lock);
    if (ctx->module[variant] == NULL) {
        const kdsl_image *im = &kdsl_images[ctx->image[kdsl_variant_spec[variant]]];
        CUmodule module = NULL;
        r = kdsl_driver.cuModuleLoadData(&module, im->data);
        if (r != CUDA_SUCCESS)
            kdsl_format(what, sizeof what, "cuModuleLoadData(cubin for %s) failed: ", im->target);
        for (int k = 0; k < KDSL_KERNELS && r == CUDA_SUCCESS; ++k) {
            if (kdsl_kernels[k].variant != variant)
                continue;
            r = kdsl_driver.cuModuleGetFunction(&ctx->function[k], module, kdsl_kernels[k].symbol);
            if (r != CUDA_SUCCESS) {
                kdsl_format(what, sizeof what, "cuModuleGetFunction('%s') failed: ", kdsl_kernels[k].symbol);
                break;
            }
            if (kdsl_driver.cuFuncGetAttribute(&ctx->static_smem[k], KDSL_FUNC_SHARED_SIZE_BYTES, ctx->function[k]) !=
                CUDA_SUCCESS)
                ctx->static_smem[k] = kdsl_kernels[k].static_smem;
            ctx->smem_allowed[k] = KDSL_SMEM_DEFAULT - ctx->static_smem[k];
        }
        if (r == CUDA_SUCCESS)
            ctx->module[variant] = module;
    }
    if (r == CUDA_SUCCESS) {
        for (int k = 0; k < KDSL_KERNELS; ++k)
            if (kdsl_kernels[k].variant == variant) {
                T->function[k] = ctx->function[k];
                T->smem_allowed[k] = ctx->smem_allowed[k];
            }
        T->loaded[variant] = 1;
    }
    pthread_mutex_unlock(&kdsl_lock);
    return r == CUDA_SUCCESS ? 0 : kdsl_launch_result(C, site, grid, block, smem, r, what);
}

/* A launch asking for more dynamic shared memory than the kernel is allowed: the limit raised
   (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES, once per size per context), or refused
   beyond what the device can give. */
KDSL_COLD static int kdsl_grow_smem(kdsl_call *C, const kdsl_site *site, const int64_t grid[3],
                                    const int64_t block[3], int64_t smem)
{
    kdsl_thread *T = C->thread;
    kdsl_context *ctx = C->context;
    int k = site->kernel;
    char message[400];
    CUresult result = CUDA_SUCCESS;
    int64_t limit = (int64_t)ctx->smem_optin - ctx->static_smem[k];
    if (smem > limit) {
        kdsl_format(message, sizeof message, "%lld bytes of dynamic shared memory requested, but %s allows at most "
                    "%lld per block for this kernel (%d opt-in maximum, %d static)", (long long)smem, ctx->name,
                    (long long)limit, ctx->smem_optin, ctx->static_smem[k]);
        return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE, message);
    }
    pthread_mutex_lock(&kdsl_lock);
    if (smem > ctx->smem_allowed[k]) {
        result = kdsl_driver.cuFuncSetAttribute(ctx->function[k], KDSL_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                (int)smem);
        if (result == CUDA_SUCCESS)
            ctx->smem_allowed[k] = (int)smem;
    }
    T->smem_allowed[k] = ctx->smem_allowed[k];
    pthread_mutex_unlock(&kdsl_lock);
    if (result != CUDA_SUCCESS) {
        kdsl_format(message, sizeof message, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=%lld) for '%s' "
                    "failed: ", (long long)smem, kdsl_kernels[k].symbol);
        return kdsl_launch_result(C, site, grid, block, smem, result, message);
    }
    return 0;
}

/* Before a launch, as the Python launcher's: a fault of its arithmetic, the kernel loaded, an
   empty grid skipped, the dimensions checked, the shared-memory opt-in above 48 KiB applied. */
static inline int kdsl_begin_launch(kdsl_call *C, const kdsl_site *site, kdsl_eval *ev, const int64_t grid[3],
                                    const int64_t block[3], int64_t smem)
{
    kdsl_thread *T = C->thread;
    int k = site->kernel, r;
    if (ev->fault != NULL)
        return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE, ev->fault);
    if (!T->loaded[site->variant] && (r = kdsl_load_variant(C, site->variant, site, grid, block, smem)) != 0)
        return r;
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
        return KDSL_SKIPPED;
    if (grid[0] < 0 || grid[1] < 0 || grid[2] < 0)
        return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE,
                                "grid dimensions must be positive");
    for (int i = 0; i < 3; ++i)
        if (grid[i] > 0xFFFFFFFFll || block[i] < 0 || block[i] > 0xFFFFFFFFll || smem < 0 || smem > 0xFFFFFFFFll)
            return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE,
                                    "grid, block and smem must be unsigned 32-bit integers");
    if (smem > T->smem_allowed[k])
        return kdsl_grow_smem(C, site, grid, block, smem);
    return 0;
}

static inline int kdsl_launch(kdsl_call *C, const kdsl_site *site, const int64_t grid[3], const int64_t block[3],
                              int64_t smem, void **params, const unsigned int *cluster)
{
    CUfunction fn = C->thread->function[site->kernel];
    CUresult r;
#ifdef KDSL_EXPORT_NVTX
    if (kdsl_driver.nvtxRangePushA != NULL)
        kdsl_driver.nvtxRangePushA(kdsl_kernels[site->kernel].symbol);
#endif
    if (cluster == NULL)
        r = kdsl_driver.cuLaunchKernel(fn, (unsigned int)grid[0], (unsigned int)grid[1], (unsigned int)grid[2],
                                       (unsigned int)block[0], (unsigned int)block[1], (unsigned int)block[2],
                                       (unsigned int)smem, C->stream, params, NULL);
    else if (kdsl_driver.cuLaunchKernelEx == NULL)
        r = CUDA_ERROR_NOT_SUPPORTED;
    else {
        CUlaunchAttribute attribute;
        CUlaunchConfig config;
        memset(&attribute, 0, sizeof attribute);
        memset(&config, 0, sizeof config);
        const int cluster_dimension = KDSL_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; /* an enum in cuda.h */
        memcpy(&attribute.id, &cluster_dimension, sizeof attribute.id);
        attribute.value.clusterDim.x = cluster[0];
        attribute.value.clusterDim.y = cluster[1];
        attribute.value.clusterDim.z = cluster[2];
        config.gridDimX = (unsigned int)grid[0];
        config.gridDimY = (unsigned int)grid[1];
        config.gridDimZ = (unsigned int)grid[2];
        config.blockDimX = (unsigned int)block[0];
        config.blockDimY = (unsigned int)block[1];
        config.blockDimZ = (unsigned int)block[2];
        config.sharedMemBytes = (unsigned int)smem;
        config.hStream = C->stream;
        config.attrs = &attribute;
        config.numAttrs = 1;
        r = kdsl_driver.cuLaunchKernelEx(&config, fn, params, NULL);
    }
#ifdef KDSL_EXPORT_NVTX
    if (kdsl_driver.nvtxRangePushA != NULL)
        kdsl_driver.nvtxRangePop();
#endif
    if (r != CUDA_SUCCESS)
        return kdsl_launch_result(C, site, grid, block, smem, r,
                                  cluster != NULL && kdsl_driver.cuLaunchKernelEx == NULL
                                      ? "a cluster launch needs cuLaunchKernelEx (CUDA 11.8 or newer): " : "");
#ifdef KDSL_EXPORT_DEBUG
    r = kdsl_driver.cuStreamSynchronize(C->stream);
    if (r != CUDA_SUCCESS)
        return kdsl_launch_result(C, site, grid, block, smem, r,
                                  "the kernel failed while running (KDSL_EXPORT_DEBUG synchronizes after each "
                                  "launch): ");
#endif
    return 0;
}

/* rt.check_block: a run-time block must be the kernel's known_block_size */
static inline int kdsl_check_block(kdsl_call *C, const kdsl_site *site, const int64_t grid[3], const int64_t block[3],
                                   const int64_t known[3])
{
    for (int axis = 0; axis < 3; ++axis)
        if (block[axis] != known[axis]) {
            char message[300];
            kdsl_format(message, sizeof message, "launch block %c=%lld differs from known_block_size %c=%lld "
                        "declared on kernel '%s'.", "xyz"[axis], (long long)block[axis], "xyz"[axis],
                        (long long)known[axis], kdsl_kernels[site->kernel].symbol);
            return kdsl_launch_fail(C, site, grid, block, 0, CUDA_ERROR_INVALID_VALUE, message);
        }
    return 0;
}

/* rt.check_smem: a run-time smem= must cover the kernel's shared arrays */
static inline int kdsl_check_smem(kdsl_call *C, const kdsl_site *site, const int64_t grid[3], const int64_t block[3],
                                  int64_t smem, int64_t required)
{
    if (smem >= required)
        return 0;
    char message[300];
    kdsl_format(message, sizeof message, "launch smem=%lld is less than the %lld bytes allocated by SharedAllocator in "
                "kernel '%s'", (long long)smem, (long long)required, kdsl_kernels[site->kernel].symbol);
    return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE, message);
}

/* rt.tensor_map: the TMA map of a tensor argument, as dsl.runtime.tensor_maps encodes it */
static inline int kdsl_tensor_map(kdsl_call *C, const kdsl_site *site, CUtensorMap *map, const kdsl_tensor *t,
                                  int data_type, const char *dtype, int64_t nbytes, int rank, const uint32_t *box,
                                  int swizzle_bytes, int swizzle)
{
    uint64_t dims[5], strides[4];
    uint32_t boxes[5], ones[5] = {1, 1, 1, 1, 1};
    char shape[200], boxed[100], problem[160];
    kdsl_msg s = {shape, sizeof shape, 0}, b = {boxed, sizeof boxed, 0};
    int64_t box64[5];
    for (int k = 0; k < rank; ++k)
        box64[k] = box[k];
    kdsl_msg_tuple(&s, t->shape, rank, '[', ']');
    kdsl_msg_tuple(&b, box64, rank, '[', ']');
    problem[0] = 0;
    for (int k = 0; k < rank; ++k) {
        dims[k] = (uint64_t)t->shape[rank - 1 - k];
        boxes[k] = box[rank - 1 - k];
    }
    for (int k = 0; k + 1 < rank; ++k)
        strides[k] = (uint64_t)(t->strides[rank - 2 - k] * nbytes);
    if (t->data % 16)
        kdsl_format(problem, sizeof problem, "needs a 16-byte aligned address, not %#llx", (unsigned long long)t->data);
    for (int k = 0; k + 1 < rank && !problem[0]; ++k)
        if (strides[k] % 16 || strides[k] >= ((uint64_t)1 << 40))
            kdsl_format(problem, sizeof problem, "needs strides that are multiples of 16 bytes, not %llu bytes",
                        (unsigned long long)strides[k]);
    for (int k = 0; k < rank && !problem[0]; ++k)
        if (t->shape[k] <= 0 || t->shape[k] >= ((int64_t)1 << 32))
            kdsl_format(problem, sizeof problem, "needs extents from 1 to 2**32 - 1");
    if (problem[0])
        return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: a TMA tensor map of this tensor (shape %s, %s) %s\n  at %s "
                         "(launch %d of %d)", C->function, shape, dtype, problem, site->where, site->index,
                         site->count);
    if (kdsl_driver.cuTensorMapEncodeTiled == NULL)
        return kdsl_fail(CUDA_ERROR_NOT_SUPPORTED, "%s: TMA tensor maps need cuTensorMapEncodeTiled (CUDA 12 or "
                         "newer)\n  at %s", C->function, site->where);
    CUresult r = kdsl_driver.cuTensorMapEncodeTiled(map, data_type, (uint32_t)rank, (void *)(uintptr_t)t->data, dims,
                                                    strides, boxes, ones, 0, swizzle, 3, 0);
    if (r != CUDA_SUCCESS) {
        char text[200];
        return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: cuTensorMapEncodeTiled refused the tensor (shape %s, %s, box "
                         "%s, swizzle %d): %s\n  at %s (launch %d of %d)", C->function, shape, dtype, boxed,
                         swizzle_bytes, kdsl_result_text(r, text, sizeof text), site->where, site->index, site->count);
    }
    return 0;
}

/* a fault while computing a launch's kernel arguments (a value no parameter of its type holds) */
KDSL_COLD static int kdsl_argument_error(kdsl_call *C, const kdsl_site *site, const int64_t grid[3],
                                         const int64_t block[3], int64_t smem, const kdsl_eval *ev)
{
    char message[400];
    kdsl_format(message, sizeof message, "a kernel argument does not fit its parameter type: %s", ev->fault);
    return kdsl_launch_fail(C, site, grid, block, smem, CUDA_ERROR_INVALID_VALUE, message);
}
/* ===== end of the kdsl support code ===== */
"""
