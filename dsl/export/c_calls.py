"""The C of one call of an entry point: the per-context state, finding the current context,
the argument checks of the Python launcher's reader, and the bookkeeping of which
specialization does not take the arguments, and why.

The concurrency rule, stated once: the list of per-context states and everything in a
state that changes after it is made (modules, functions, the shared-memory limit) are
touched only under `kdsl_lock`; each thread keeps a copy of what its calls read
(`kdsl_thread`), refreshed under the lock, so a call in a context its thread has seen takes
no lock at all. Error paths are `KDSL_COLD` functions, out of the way of the launch path.
"""

from __future__ import annotations

from dsl.export.c_types import DTYPE_CODES

_NAMES = ", ".join(f'"{name}"' for name in sorted(DTYPE_CODES, key=DTYPE_CODES.__getitem__))

CALLS = r"""/* ----- tensor arguments: the Python launcher's argument reader, check by check ----- */
static const char *const kdsl_dtype_names[] = {"?", DTYPE_NAMES};

static inline const char *kdsl_dtype_name(int code)
{
    return code > 0 && code < (int)(sizeof kdsl_dtype_names / sizeof kdsl_dtype_names[0]) ? kdsl_dtype_names[code]
                                                                                         : "an unknown kdsl_dtype";
}

/* ----- per CUDA context: the device, its cubins, its loaded kernels (see the concurrency rule) ----- */
typedef struct kdsl_context {
    CUcontext handle;
    int device, cc_major, cc_minor, smem_optin;
    char name[128];
    int attributes[KDSL_ATTRIBUTES];
    int image[KDSL_SPECS]; /* the cubin each specialization loads on this GPU; -1: none */
    CUmodule module[KDSL_VARIANTS];
    CUfunction function[KDSL_KERNELS];
    int static_smem[KDSL_KERNELS], smem_allowed[KDSL_KERNELS];
    struct kdsl_context *next;
} kdsl_context;

typedef struct kdsl_thread { /* what a call reads, in one place: the current context's copy */
    int driver_checked, device;
    CUcontext handle;
    kdsl_context *context;
    int variant[KDSL_SPECS]; /* the variant each specialization runs on this GPU; -1: no cubin for it */
    unsigned char loaded[KDSL_VARIANTS];
    CUfunction function[KDSL_KERNELS];
    int smem_allowed[KDSL_KERNELS];
} kdsl_thread;

static pthread_mutex_t kdsl_lock = PTHREAD_MUTEX_INITIALIZER;
static kdsl_context *kdsl_contexts;
static CUcontext kdsl_primary[64]; /* primary contexts retained for devices with no current context */
static KDSL_TLS kdsl_thread kdsl_this_thread;

/* Why the specialization being tried does not take the arguments, and why none did (one line
   each): in thread-local storage, not on the stack, so that a call's frame stays small. */
static KDSL_TLS char kdsl_why_text[1024], kdsl_reasons_text[3072];

/* one call of an entry point */
typedef struct kdsl_call {
    kdsl_thread *thread;
    kdsl_context *context;
    CUstream stream;
    const char *function;
    int candidates;
    size_t reasons_length;
    char *why, *reasons;
} kdsl_call;

KDSL_COLD static int kdsl_reason(kdsl_call *C, const char *format, ...) KDSL_PRINTF(2, 3);
KDSL_COLD static int kdsl_reason(kdsl_call *C, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(C->why, sizeof kdsl_why_text, format, args);
    va_end(args);
    return 1;
}

KDSL_COLD static kdsl_msg kdsl_why(kdsl_call *C)
{
    kdsl_msg m = {C->why, sizeof kdsl_why_text, 0};
    C->why[0] = 0;
    return m;
}

/* the tensor's shape and strides as Python prints tuples, for a message */
KDSL_COLD static void kdsl_tensor_text(const kdsl_tensor *t, char *shape, char *strides, size_t size)
{
    kdsl_msg s = {shape, size, 0}, st = {strides, size, 0};
    kdsl_msg_tuple(&s, t->shape, t->rank, '(', ')');
    kdsl_msg_tuple(&st, t->strides, t->rank, '(', ')');
}

static inline int kdsl_check_tensor(kdsl_call *C, const char *name, const kdsl_tensor *t, int dtype, int rank,
                                    int64_t nbytes, int64_t align, const char *site)
{
    char shape[400], strides[400];
    if (t->dtype != dtype)
        return kdsl_reason(C, "argument '%s' has element type %s, but this specialization takes Tensor[%s, %d]", name,
                           kdsl_dtype_name(t->dtype), kdsl_dtype_name(dtype), rank);
    if (t->rank < 0 || t->rank > KDSL_MAX_RANK)
        return kdsl_reason(C, "argument '%s' has rank %d; a kdsl_tensor has 0 to %d dimensions", name, t->rank,
                           KDSL_MAX_RANK);
    if (t->rank != rank) {
        kdsl_tensor_text(t, shape, strides, sizeof shape);
        return kdsl_reason(C, "argument '%s' has rank %d (shape %s), but this specialization takes Tensor[%s, %d]",
                           name, t->rank, shape, kdsl_dtype_name(dtype), rank);
    }
    int nonempty = 1;
    int64_t extent = 0;
    for (int k = 0; k < rank; ++k) {
        const int64_t s = t->shape[k], st = t->strides[k];
        if (s < 0 || (st < 0 && s > 1)) {
            kdsl_tensor_text(t, shape, strides, sizeof shape);
            for (int j = 0; j < rank; ++j)
                if (t->shape[j] < 0)
                    return kdsl_reason(C, "argument '%s' has a negative size in its shape %s", name, shape);
            return kdsl_reason(C, "argument '%s' has negative strides %s; kdsl tensors need non-negative strides "
                               "(pass a copy in row-major order)", name, strides);
        }
        nonempty = nonempty && s != 0;
    }
    if (rank > 0 && t->strides[rank - 1] != 1 && t->shape[rank - 1] > 1)
        return kdsl_reason(C, "argument '%s' has innermost stride %lld; kdsl tensors need a unit innermost stride "
                           "(pass a contiguous array, e.g. .contiguous())", name, (long long)t->strides[rank - 1]);
    for (int k = 0; k < rank; ++k)
        if (t->shape[k] > KDSL_INT32_MAX)
            return kdsl_reason(C, "argument '%s' has a dimension of %lld elements; kernels index with 32-bit "
                               "integers (at most %d)", name, (long long)t->shape[k], KDSL_INT32_MAX);
    for (int k = 0; k < rank && extent <= KDSL_INT32_MAX; ++k) {
        const int64_t s = t->shape[k], st = t->strides[k]; /* here s <= 2**31 - 1 and st >= 0 where s > 1 */
        if (s > 1)
            extent = st > (INT64_MAX - extent) / (s - 1) ? INT64_MAX : extent + (s - 1) * st;
    }
    if (extent > KDSL_INT32_MAX) {
        char spans[32];
        kdsl_tensor_text(t, shape, strides, sizeof shape);
        if (extent == INT64_MAX)
            kdsl_format(spans, sizeof spans, "more than %lld", (long long)INT64_MAX);
        else
            kdsl_format(spans, sizeof spans, "%lld", (long long)(extent + 1));
        return kdsl_reason(C, "argument '%s' spans %s elements (shape %s, strides %s); kernels index with 32-bit "
                           "integers (at most %d)", name, spans, shape, strides, KDSL_INT32_MAX);
    }
    if (t->data == 0) {
        if (nonempty)
            return kdsl_reason(C, "argument '%s' has a null data pointer", name);
        return 0;
    }
    if (!nonempty)
        return 0;
    /* what the kernels do with it: vector accesses need aligned rows */
    if (align < nbytes)
        align = nbytes;
    int vector = site != NULL && align > nbytes;
    char need[200];
    if (vector)
        kdsl_format(need, sizeof need, "kernel parameter '%s' is accessed with %lld-byte vector loads/stores", site,
                    (long long)align);
    else
        kdsl_format(need, sizeof need, "its %lld-byte elements need it", (long long)nbytes);
    if (t->data % (uint64_t)align)
        return kdsl_reason(C, "argument '%s' starts at %#llx, which is %llu-byte aligned, but %s: its data pointer "
                           "must be %lld-byte aligned%s", name, (unsigned long long)t->data,
                           (unsigned long long)(t->data & (0 - t->data)), need, (long long)align,
                           vector ? " (a view such as x[1:] moves it; pass a copy)" : "");
    for (int k = 0; k + 1 < rank; ++k)
        if (t->shape[k] > 1 && (t->strides[k] * nbytes) % align)
            return kdsl_reason(C, "argument '%s' has stride %lld (%lld bytes) in dimension %d, but %s: each row must "
                               "start %lld-byte aligned, so outer strides must be multiples of %lld elements", name,
                               (long long)t->strides[k], (long long)(t->strides[k] * nbytes), k, need,
                               (long long)align, (long long)(align / nbytes));
#ifdef KDSL_EXPORT_DEBUG
    {   /* the pointer is memory of the GPU (the Python launcher asks the driver for arrays not from PyTorch) */
        unsigned int memory_type = 0, managed = 0;
        if (kdsl_driver.cuPointerGetAttribute(&managed, KDSL_POINTER_IS_MANAGED, t->data) != CUDA_SUCCESS ||
            (!managed && (kdsl_driver.cuPointerGetAttribute(&memory_type, KDSL_POINTER_MEMORY_TYPE, t->data) !=
                              CUDA_SUCCESS || memory_type != KDSL_MEMORYTYPE_DEVICE)))
            return kdsl_reason(C, "argument '%s' points to %s at %#llx, not GPU memory; kernels need device or "
                               "managed memory - copy it to the GPU first", name,
                               memory_type == KDSL_MEMORYTYPE_HOST ? "page-locked host memory"
                                   : "memory the CUDA driver does not know (host memory, or freed)",
                               (unsigned long long)t->data);
    }
#endif
    return 0;
}

/* the image of specialization `spec` that runs on a device of compute capability major.minor */
static inline int kdsl_choose_image(int spec, int major, int minor)
{
    int best = -1;
    for (int i = 0; i < KDSL_IMAGES; ++i) {
        const kdsl_image *im = &kdsl_images[i];
        if (im->spec != spec || im->major != major || im->minor > minor || (im->arch_specific && im->minor != minor))
            continue;
        if (best < 0 || im->minor > kdsl_images[best].minor ||
            (im->minor == kdsl_images[best].minor && im->arch_specific))
            best = i;
    }
    return best;
}

KDSL_COLD static int kdsl_new_context(kdsl_call *C, CUcontext handle, kdsl_context **out)
{
    char text[200];
    CUresult r;
    CUdevice device;
    kdsl_context *ctx = (kdsl_context *)calloc(1, sizeof(kdsl_context));
    if (ctx == NULL)
        return kdsl_fail(CUDA_ERROR_OUT_OF_MEMORY, "%s: out of host memory", C->function);
    ctx->handle = handle;
    if ((r = kdsl_driver.cuCtxGetDevice(&device)) != CUDA_SUCCESS ||
        (r = kdsl_driver.cuDeviceGetAttribute(&ctx->cc_major, KDSL_DEVICE_CC_MAJOR, device)) != CUDA_SUCCESS ||
        (r = kdsl_driver.cuDeviceGetAttribute(&ctx->cc_minor, KDSL_DEVICE_CC_MINOR, device)) != CUDA_SUCCESS ||
        (r = kdsl_driver.cuDeviceGetAttribute(&ctx->smem_optin, KDSL_DEVICE_SMEM_OPTIN, device)) != CUDA_SUCCESS ||
        (r = kdsl_driver.cuDeviceGetName(ctx->name, (int)sizeof ctx->name, device)) != CUDA_SUCCESS) {
        free(ctx);
        return kdsl_fail(r, "%s: reading the current device failed: %s", C->function,
                         kdsl_result_text(r, text, sizeof text));
    }
    ctx->device = (int)device;
    for (int a = 0; a < KDSL_ATTRIBUTES; ++a)
        if (kdsl_attribute_ids[a] != 0 &&
            (r = kdsl_driver.cuDeviceGetAttribute(&ctx->attributes[a], kdsl_attribute_ids[a], device)) !=
                CUDA_SUCCESS) {
            free(ctx);
            return kdsl_fail(r, "%s: cuDeviceGetAttribute(%s) failed: %s", C->function, kdsl_attribute_names[a],
                             kdsl_result_text(r, text, sizeof text));
        }
    for (int s = 0; s < KDSL_SPECS; ++s)
        ctx->image[s] = kdsl_choose_image(s, ctx->cc_major, ctx->cc_minor);
    ctx->next = kdsl_contexts;
    kdsl_contexts = ctx;
    *out = ctx;
    return 0;
}

/* The state of context `handle` for this thread (made on first use in any thread); with no
   context current, device `device`'s primary one, made current, as the Python launcher does. */
KDSL_COLD static int kdsl_switch_context(kdsl_call *C, CUcontext handle, int device)
{
    kdsl_thread *T = C->thread;
    char text[200];
    CUresult r = CUDA_SUCCESS;
    if (handle == NULL) {
        int ordinal = device < 0 ? 0 : device;
        if (ordinal >= 64)
            return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: no CUDA context is current and device %d is beyond the "
                             "64 this export keeps primary contexts for; make a context current", C->function, ordinal);
        pthread_mutex_lock(&kdsl_lock);
        handle = kdsl_primary[ordinal];
        if (handle == NULL) {
            CUdevice dev;
            if ((r = kdsl_driver.cuDeviceGet(&dev, ordinal)) == CUDA_SUCCESS &&
                (r = kdsl_driver.cuDevicePrimaryCtxRetain(&handle, dev)) == CUDA_SUCCESS)
                kdsl_primary[ordinal] = handle;
        }
        pthread_mutex_unlock(&kdsl_lock);
        if (r != CUDA_SUCCESS)
            return kdsl_fail(r, "%s: the primary context of cuda:%d could not be made: %s", C->function, ordinal,
                             kdsl_result_text(r, text, sizeof text));
        if ((r = kdsl_driver.cuCtxSetCurrent(handle)) != CUDA_SUCCESS)
            return kdsl_fail(r, "%s: cuCtxSetCurrent failed: %s", C->function, kdsl_result_text(r, text, sizeof text));
        if (handle == T->handle)
            return 0;
    }
    int failed = 0;
    kdsl_context *ctx;
    pthread_mutex_lock(&kdsl_lock);
    for (ctx = kdsl_contexts; ctx != NULL && ctx->handle != handle; ctx = ctx->next) {
    }
    if (ctx == NULL)
        failed = kdsl_new_context(C, handle, &ctx);
    if (!failed) {
        for (int v = 0; v < KDSL_VARIANTS; ++v)
            T->loaded[v] = ctx->module[v] != NULL;
        memcpy(T->function, ctx->function, sizeof T->function);
        memcpy(T->smem_allowed, ctx->smem_allowed, sizeof T->smem_allowed);
        for (int s = 0; s < KDSL_SPECS; ++s)
            T->variant[s] = ctx->image[s] >= 0 ? kdsl_images[ctx->image[s]].variant : -1;
        T->device = ctx->device;
        T->handle = handle;
        T->context = ctx;
    }
    pthread_mutex_unlock(&kdsl_lock);
    return failed;
}

/* Where a call starts: the driver loaded, the tensors' device, the thread's current context. */
static inline int kdsl_enter(kdsl_call *C, const char *function, const kdsl_tensor *const *tensors,
                             const char *const *names, int count, CUstream stream)
{
    kdsl_thread *T = &kdsl_this_thread;
    CUresult r;
    C->thread = T;
    C->function = function;
    C->stream = stream;
    C->candidates = 0;
    C->reasons_length = 0;
    C->why = kdsl_why_text;
    C->reasons = kdsl_reasons_text;
    if (!T->driver_checked) {
        pthread_once(&kdsl_driver_once, kdsl_load_driver);
        T->driver_checked = 1;
    }
    if (kdsl_driver.status != CUDA_SUCCESS)
        return kdsl_fail(kdsl_driver.status, "%s: %s", function, kdsl_driver.problem);
    int device = -1;
    for (int i = 0; i < count; ++i) {
        if (tensors[i] == NULL)
            return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: argument '%s' is NULL, not a kdsl_tensor", function,
                             names[i]);
        if (device < 0)
            device = tensors[i]->device;
        else if (tensors[i]->device != device)
            return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: argument '%s' is on cuda:%d, but the launch runs on "
                             "cuda:%d", function, names[i], tensors[i]->device, device);
    }
    CUcontext handle = NULL;
    if ((r = kdsl_driver.cuCtxGetCurrent(&handle)) != CUDA_SUCCESS) {
        char text[200];
        return kdsl_fail(r, "%s: cuCtxGetCurrent failed: %s", function, kdsl_result_text(r, text, sizeof text));
    }
    int failed;
    if ((handle == NULL || handle != T->handle) && (failed = kdsl_switch_context(C, handle, device)) != 0)
        return failed;
    C->context = T->context;
    if (device >= 0 && device != T->device)
        return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: the arguments are on cuda:%d but the current CUDA context is "
                         "cuda:%d; make that device current (e.g. cudaSetDevice(%d))", function, device, T->device,
                         device);
    return 0;
}

KDSL_COLD static int kdsl_no_image(kdsl_call *C, int spec)
{
    char built[200];
    kdsl_msg m = {built, sizeof built, 0};
    built[0] = 0;
    for (int i = 0; i < KDSL_IMAGES; ++i)
        if (kdsl_images[i].spec == spec)
            kdsl_msg_format(&m, "%s%s", m.length ? ", " : "", kdsl_images[i].target);
    kdsl_reason(C, "no cubin of this export runs on sm_%d%d (%s): it has cubins for %s; export with --target sm_%d%d",
                C->context->cc_major, C->context->cc_minor, C->context->name, built, C->context->cc_major,
                C->context->cc_minor);
    return -1;
}

/* The variant of `spec` this GPU runs, or -1 (with the reason) when the export has no cubin for it */
static inline int kdsl_variant_for(kdsl_call *C, int spec)
{
    int variant = C->thread->variant[spec];
    ++C->candidates;
    return variant >= 0 ? variant : kdsl_no_image(C, spec);
}

/* after a specialization did not take the arguments: keep why */
KDSL_COLD static void kdsl_note(kdsl_call *C, int spec)
{
    kdsl_msg m = {C->reasons, sizeof kdsl_reasons_text, C->reasons_length};
    kdsl_msg_format(&m, "\n  [%s] %s", kdsl_specs[spec], C->why);
    C->reasons_length = m.length;
}

KDSL_COLD static int kdsl_no_fit(kdsl_call *C)
{
    if (C->candidates == 1)
        return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: %s", C->function, C->why);
    return kdsl_fail(CUDA_ERROR_INVALID_VALUE, "%s: no exported specialization takes these arguments:%s", C->function,
                     C->reasons);
}

""".replace("DTYPE_NAMES", _NAMES)
