/*
 * The per-launch work of a generated launcher, in C: what makes a warm launch cost about
 * a bare cuLaunchKernel instead of several Python frames.
 *
 *   ArgReader.read(*args, stream) checks PyTorch tensor and scalar arguments against the
 *       specialization (and each tensor's pointer and outer strides against the alignment
 *       its kernels' accesses need) and returns (ptr, shape, strides) per tensor, the
 *       scalars, and the stream handle (torch's current one on the tensors' device), all in
 *       one flat tuple. No driver call: a CUDA tensor is device memory by construction. It
 *       notes the tensors' device in this thread (`t_device`) for the launches that follow.
 *       Tensors are read through torch's Python API until `set_torch_reader` hands over the
 *       C++ reader built against the installed torch (`_torch_tensors.cpp`, tensor_reader.h),
 *       which reads the same fields from the TensorImpl for a fraction of the time.
 *   Kernel.launch(grid, block, smem, stream, *params) packs the kernel parameters into a
 *       buffer owned by the kernel and calls cuLaunchKernel with the kernel's function on
 *       that device: one slot (primary context, CUfunction, shared memory allowed) per
 *       device, armed by the Python path once it has loaded the module there. When the
 *       thread's current context is another device's primary context it is pushed over
 *       and popped after the launch; a thread with none gets the device's.
 *
 * Both only take the common case. Anything else (CuPy or DLPack arrays, a wrong dtype or
 * rank, a non-contiguous or misaligned tensor, tensors on different devices, a device the
 * specialization was not compiled for, a stream object or a handle that is not an
 * unsigned 64-bit value, a kernel not loaded yet on the device, a current context kdsl does
 * not know, a value that does not fit its parameter) goes to the Python fallback given at
 * construction, which does the same work with every check and explains what is wrong.
 * A failed cuLaunchKernel goes to `report`, which raises the launch error.
 *
 * Threads: everything here runs holding the GIL and never runs Python code between packing
 * a kernel's parameter buffer and launching it (parameters are taken only from exact ints
 * and floats), so threads launching the same kernel on different devices share the buffer
 * safely; the device of a call is per thread (`t_device`).
 *
 * Optional: when this module is missing (no C compiler at install time) or libcuda cannot
 * be loaded, dsl.runtime uses its pure-Python path. Built against the stable ABI, so one
 * binary serves every CPython from 3.10 on.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor_reader.h"

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, void *, void **, void **);
typedef int (*cu_ctx_get_t)(void **);
typedef int (*cu_ctx_set_t)(void *);

static cu_launch_kernel_t cu_launch_kernel = NULL;
static cu_ctx_get_t cu_ctx_get_current = NULL, cu_ctx_pop_current = NULL;
static cu_ctx_set_t cu_ctx_set_current = NULL, cu_ctx_push_current = NULL;
static PyObject *s_dtype, *s_shape, *s_is_cuda, *s_get_device, *s_data_ptr, *s_stride;

/* PyTorch's tensor layout read in C++ (`_torch_tensors.cpp`, built against the installed
 * torch), once `set_torch_reader` has been given it; until then tensors are read through
 * torch's Python API. */
static const KdslTensorReader *torch_reader = NULL;

/* The device the arguments last read in this thread are on (-1: none said: no tensor, or
 * managed memory). Written by ArgReader.read and by the Python reader (`set_device`), read
 * by the launches of the same launcher call, in the same thread. */
static _Thread_local long long t_device = -1;

/* Primary contexts kdsl has seen (any device): a launch may push its own over one of these.
 * Any other current context is the caller's own, and the Python path decides. */
#define MAX_KNOWN 64
static void *known_contexts[MAX_KNOWN];
static int n_known = 0;

static int is_known(void *ctx) {
    for (int i = 0; i < n_known; i++)
        if (known_contexts[i] == ctx) return 1;
    return 0;
}

#define INT32_MAX_ELEMENTS 0x7FFFFFFFLL

/* Calls `fn(*args[:nargs])` (the slow path: a tuple is fine here). */
static PyObject *call_fallback(PyObject *fn, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(tuple, i, args[i]);
    }
    PyObject *out = PyObject_CallObject(fn, tuple);
    Py_DECREF(tuple);
    return out;
}

/* ---------------------------------------------------------------------------------------
 * ArgReader
 * ------------------------------------------------------------------------------------- */

enum { ARG_TENSOR, ARG_FLOAT, ARG_INT, ARG_BOOL, ARG_OTHER };

typedef struct {
    int kind;
    long rank;        /* tensors */
    PyObject *dtype;  /* tensors: the torch dtype object this specialization takes */
    long long align;  /* tensors: bytes (a power of two) the data pointer and outer strides must be multiples of */
    long long nbytes; /* tensors: element size */
    int scalar_type;  /* tensors: dtype's c10::ScalarType, once torch_reader has said it; -2 before */
} ArgEntry;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;           /* runtime parameters (the stream comes after them) */
    Py_ssize_t n_out;
    ArgEntry *entries;
    PyObject *tensor_type;  /* torch.Tensor, or None when torch was not imported */
    PyObject *stride;       /* torch.Tensor.stride, .data_ptr and .get_device: calling the */
    PyObject *data_ptr;     /* unbound methods saves a bound-method object per call */
    PyObject *get_device;
    PyObject *torch_stream; /* torch's current raw stream for a device ordinal, or None */
    PyObject *fallback;
    unsigned char *accept;  /* per ordinal, whether this specialization runs there; NULL: everywhere */
    Py_ssize_t n_accept;
    int single_device;      /* one GPU visible: a CUDA tensor is on device 0 (is_cuda is enough) */
} ArgReader;

/* Whether a tensor of these sizes and strides (in elements) is what check_tensor takes on
 * this path: a unit innermost stride, aligned outer strides, every offset within 32 bits.
 * Anything else (and its error message) is the Python path's. */
static int layout_fits(const ArgEntry *e, const long long *sizes, const long long *strides) {
    long long extent = 0;
    for (long i = 0; i < e->rank; i++) {
        long long n = sizes[i], st = strides[i];
        if (n > INT32_MAX_ELEMENTS) return 0;
        if (i == e->rank - 1 && st != 1 && n > 1) return 0;
        if (n > 1 && i < e->rank - 1 && ((st * e->nbytes) & (e->align - 1))) return 0; /* a misaligned row */
        if (n > 1) extent += (n - 1) * (st < 0 ? -st : st);
        if (extent > INT32_MAX_ELEMENTS) return 0;
    }
    return 1;
}

/* A tuple of `n` ints. */
static PyObject *int_tuple(const long long *values, long n) {
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL) return NULL;
    for (long i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (v == NULL) { Py_DECREF(tuple); return NULL; }
        PyTuple_SetItem(tuple, i, v); /* steals */
    }
    return tuple;
}

/* A tensor's device ordinal is the call's if no tensor has said one yet, or the same one;
 * tensors on two devices, like a CPU tensor, are the Python path's to refuse, naming both. */
static int same_device(long long ordinal, long long *device) {
    if (ordinal < 0 || (*device >= 0 && ordinal != *device)) return 0;
    *device = ordinal;
    return 1;
}

/* A null pointer with elements, and a misaligned one, are the Python path's errors. */
static int pointer_fits(const ArgEntry *e, unsigned long long address) {
    return address != 0 && !(address & (unsigned long long)(e->align - 1));
}

/* read_torch through `torch_reader`: the same checks on the fields C++ read. */
static int read_torch_native(ArgEntry *e, PyObject *t, PyObject *out, Py_ssize_t *k, long long *device) {
    if (e->scalar_type == -2) e->scalar_type = torch_reader->scalar_type(e->dtype);
    KdslTensorView view;
    if (!torch_reader->read(t, KDSL_MAX_RANK, &view)) return 0;
    if (view.scalar_type != e->scalar_type || view.rank != e->rank || view.device_type != KDSL_DEVICE_CUDA
        || !layout_fits(e, view.sizes, view.strides) || !same_device(view.device_index, device)
        || !pointer_fits(e, view.address))
        return 0;
    PyObject *ptr = PyLong_FromUnsignedLongLong(view.address);
    PyObject *shape = int_tuple(view.sizes, view.rank);
    PyObject *strides = int_tuple(view.strides, view.rank);
    if (ptr == NULL || shape == NULL || strides == NULL) {
        Py_XDECREF(ptr); Py_XDECREF(shape); Py_XDECREF(strides);
        return -1;
    }
    PyTuple_SetItem(out, (*k)++, ptr); /* steals */
    PyTuple_SetItem(out, (*k)++, shape);
    PyTuple_SetItem(out, (*k)++, strides);
    return 1;
}

/* 1: read into out[*k..]; 0: not the common case (the caller falls back); -1: error set. */
static int read_torch(ArgReader *r, ArgEntry *e, PyObject *t, PyObject *out, Py_ssize_t *k, long long *device) {
    if (torch_reader != NULL && e->rank <= KDSL_MAX_RANK) return read_torch_native(e, t, out, k, device);
    if ((PyObject *)Py_TYPE(t) != r->tensor_type) return 0;
    PyObject *dtype = PyObject_GetAttr(t, s_dtype);
    if (dtype == NULL) return -1;
    int same = dtype == e->dtype;
    Py_DECREF(dtype);
    if (!same) return 0;
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) return -1;
    if (!PyTuple_Check(shape) || PyTuple_Size(shape) != e->rank || e->rank > KDSL_MAX_RANK) {
        Py_DECREF(shape);
        return 0;
    }
    PyObject *strides = PyObject_CallFunctionObjArgs(r->stride, t, NULL);
    if (strides == NULL) { Py_DECREF(shape); return -1; }
    int fits = PyTuple_Check(strides) && PyTuple_Size(strides) == e->rank;
    long long sizes_v[KDSL_MAX_RANK], strides_v[KDSL_MAX_RANK];
    for (long i = 0; fits && i < e->rank; i++) {
        sizes_v[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        strides_v[i] = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
        if (PyErr_Occurred()) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
    }
    if (!fits || !layout_fits(e, sizes_v, strides_v)) { Py_DECREF(shape); Py_DECREF(strides); return 0; }
    /* The tensor's device ordinal (-1 for a CPU tensor). With one GPU visible a CUDA tensor
     * is on device 0, and the cheaper is_cuda says so. */
    long long ordinal;
    if (r->single_device) {
        PyObject *is_cuda = PyObject_GetAttr(t, s_is_cuda);
        if (is_cuda == NULL) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
        ordinal = is_cuda == Py_True ? 0 : -1;
        Py_DECREF(is_cuda);
    } else {
        PyObject *dev = PyObject_CallFunctionObjArgs(r->get_device, t, NULL);
        if (dev == NULL) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
        ordinal = PyLong_AsLongLong(dev);
        Py_DECREF(dev);
        if (ordinal == -1 && PyErr_Occurred()) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
    }
    if (!same_device(ordinal, device)) { Py_DECREF(shape); Py_DECREF(strides); return 0; }
    PyObject *ptr = PyObject_CallFunctionObjArgs(r->data_ptr, t, NULL);
    if (ptr == NULL) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
    unsigned long long address = PyLong_AsUnsignedLongLong(ptr);
    if (PyErr_Occurred() || !pointer_fits(e, address)) {
        Py_DECREF(ptr); Py_DECREF(shape); Py_DECREF(strides);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyTuple_SetItem(out, (*k)++, ptr); /* steals */
    PyTuple_SetItem(out, (*k)++, shape);
    PyTuple_SetItem(out, (*k)++, strides);
    return 1;
}

/* 1: read; 0: fall back. Exact Python types only: anything else is converted by Python. */
static int read_scalar(ArgEntry *e, PyObject *v, PyObject *out, Py_ssize_t *k) {
    PyObject *value = NULL;
    switch (e->kind) {
    case ARG_FLOAT:
        if (PyFloat_CheckExact(v) || PyLong_CheckExact(v)) { Py_INCREF(v); value = v; }
        break;
    case ARG_INT:
        if (PyLong_CheckExact(v)) { Py_INCREF(v); value = v; }
        else if (PyBool_Check(v)) value = PyLong_FromLong(v == Py_True);
        break;
    case ARG_BOOL:
        if (PyBool_Check(v)) { Py_INCREF(v); value = v; }
        break;
    }
    if (value == NULL) return 0;
    PyTuple_SetItem(out, (*k)++, value);
    return 1;
}

static PyObject *reader_read(ArgReader *r, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != r->n + 1 || r->tensor_type == Py_None)
        return call_fallback(r->fallback, args, nargs);
    PyObject *out = PyTuple_New(r->n_out);
    if (out == NULL) return NULL;
    Py_ssize_t k = 0;
    long long device = -1;
    for (Py_ssize_t i = 0; i < r->n; i++) {
        ArgEntry *e = &r->entries[i];
        int ok = e->kind == ARG_TENSOR ? read_torch(r, e, args[i], out, &k, &device) : read_scalar(e, args[i], out, &k);
        if (ok < 0) { Py_DECREF(out); return NULL; }
        if (ok == 0) { Py_DECREF(out); return call_fallback(r->fallback, args, nargs); }
    }
    /* a device this specialization was not compiled for (a mixed host): Python says so, and
     * the jit call then finds the specialization for that device's architecture */
    if (device >= 0 && r->accept != NULL && (device >= r->n_accept || !r->accept[device])) {
        Py_DECREF(out);
        return call_fallback(r->fallback, args, nargs);
    }
    PyObject *stream = args[r->n];
    PyObject *handle;
    if (stream == Py_None) {
        /* tensors from torch run on torch's current stream for their device */
        if (device >= 0 && r->torch_stream != Py_None) {
            PyObject *dev = PyLong_FromLongLong(device);
            if (dev == NULL) { Py_DECREF(out); return NULL; }
            handle = PyObject_CallFunctionObjArgs(r->torch_stream, dev, NULL);
            Py_DECREF(dev);
            if (handle == NULL) { Py_DECREF(out); return NULL; }
        } else {
            handle = PyLong_FromLong(0);
        }
    } else if (PyLong_CheckExact(stream)) {
        /* a handle is an unsigned 64-bit value: -1 or 2**64 is the Python path's error */
        PyLong_AsUnsignedLongLong(stream);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            Py_DECREF(out);
            return call_fallback(r->fallback, args, nargs);
        }
        Py_INCREF(stream);
        handle = stream;
    } else {
        Py_DECREF(out);
        return call_fallback(r->fallback, args, nargs);
    }
    PyTuple_SetItem(out, k, handle);
    t_device = device;
    return out;
}

static void reader_dealloc(ArgReader *r) {
    PyTypeObject *tp = Py_TYPE(r);
    for (Py_ssize_t i = 0; i < r->n; i++) Py_XDECREF(r->entries[i].dtype);
    PyMem_Free(r->entries);
    Py_XDECREF(r->tensor_type);
    Py_XDECREF(r->stride);
    Py_XDECREF(r->data_ptr);
    Py_XDECREF(r->get_device);
    Py_XDECREF(r->torch_stream);
    Py_XDECREF(r->fallback);
    PyMem_Free(r->accept);
    PyObject_Free(r);
    Py_DECREF(tp);
}

/*
 * ArgReader(entries, tensor_type, torch_stream, fallback, accept=None, single_device=False): entries
 * is a tuple of ("tensor", torch_dtype, rank, align, nbytes) | ("float" | "int" | "bool" | "other",
 * None, 0, 1, 1); accept is None (every device) or bytes, one per device ordinal, nonzero where
 * it may run; single_device: only one GPU is visible.
 */
static PyObject *reader_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *entries, *tensor_type, *torch_stream, *fallback, *accept = Py_None;
    int single_device = 0;
    if (!PyArg_ParseTuple(args, "O!OOO|Op:ArgReader", &PyTuple_Type, &entries, &tensor_type, &torch_stream, &fallback,
                          &accept, &single_device))
        return NULL;
    if (accept != Py_None && !PyBytes_Check(accept)) {
        PyErr_SetString(PyExc_TypeError, "accept must be None or bytes");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(entries);
    ArgReader *r = PyObject_New(ArgReader, tp);
    if (r == NULL) return NULL;
    r->n = 0;
    r->n_out = 1;
    r->entries = PyMem_Calloc(n > 0 ? n : 1, sizeof(ArgEntry));
    Py_INCREF(tensor_type);
    r->tensor_type = tensor_type;
    Py_INCREF(torch_stream);
    r->torch_stream = torch_stream;
    Py_INCREF(fallback);
    r->fallback = fallback;
    r->stride = r->data_ptr = r->get_device = NULL;
    r->accept = NULL;
    r->n_accept = 0;
    r->single_device = single_device;
    if (r->entries == NULL) { Py_DECREF(r); return PyErr_NoMemory(); }
    if (accept != Py_None) {
        r->n_accept = PyBytes_Size(accept);
        r->accept = PyMem_Malloc(r->n_accept > 0 ? r->n_accept : 1);
        if (r->accept == NULL) { Py_DECREF(r); return PyErr_NoMemory(); }
        memcpy(r->accept, PyBytes_AsString(accept), (size_t)r->n_accept);
    }
    if (tensor_type != Py_None) {
        r->stride = PyObject_GetAttr(tensor_type, s_stride);
        r->data_ptr = PyObject_GetAttr(tensor_type, s_data_ptr);
        r->get_device = PyObject_GetAttr(tensor_type, s_get_device);
        if (r->stride == NULL || r->data_ptr == NULL || r->get_device == NULL) { Py_DECREF(r); return NULL; }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *kind;
        PyObject *dtype;
        long rank;
        long long align, nbytes;
        if (!PyArg_ParseTuple(PyTuple_GetItem(entries, i), "sOlLL", &kind, &dtype, &rank, &align, &nbytes)) {
            Py_DECREF(r);
            return NULL;
        }
        if (align < 1 || (align & (align - 1)) || nbytes < 1) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_ValueError, "the alignment must be a power of two, the element size positive");
            return NULL;
        }
        ArgEntry *e = &r->entries[i];
        e->align = align;
        e->nbytes = nbytes;
        e->kind = !strcmp(kind, "tensor") ? ARG_TENSOR : !strcmp(kind, "float") ? ARG_FLOAT
                : !strcmp(kind, "int") ? ARG_INT : !strcmp(kind, "bool") ? ARG_BOOL : ARG_OTHER;
        e->rank = rank;
        e->scalar_type = -2;
        Py_INCREF(dtype);
        e->dtype = dtype;
        r->n = i + 1;
        r->n_out += e->kind == ARG_TENSOR ? 3 : 1;
    }
    return (PyObject *)r;
}

static PyMethodDef reader_methods[] = {
    {"read", (PyCFunction)(void (*)(void))reader_read, METH_FASTCALL,
     "read(*args, stream) -> (ptr, shape, strides per tensor, scalars..., stream handle)"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot reader_slots[] = {
    {Py_tp_new, reader_new},
    {Py_tp_dealloc, reader_dealloc},
    {Py_tp_methods, reader_methods},
    {Py_tp_doc, "Checks and unpacks one specialization's arguments (PyTorch tensors, scalars)."},
    {0, NULL},
};

static PyType_Spec reader_spec = {"dsl.runtime._fastpath.ArgReader", sizeof(ArgReader), 0, Py_TPFLAGS_DEFAULT,
                                  reader_slots};

/* ---------------------------------------------------------------------------------------
 * Kernel
 * ------------------------------------------------------------------------------------- */

/* f16 is left to Python: its rounding and range errors are struct's 'e' format. */
enum { P_U64, P_I64, P_I32, P_U32, P_I16, P_U16, P_I8, P_U8, P_BOOL, P_F32, P_F64, P_BF16, P_UNSUPPORTED };

/* The kernel on one device: NULL function until `arm`. */
typedef struct {
    void *ctx;      /* the device's primary context, which the module was loaded into */
    void *function; /* CUfunction */
    unsigned long long smem_allowed;
} Slot;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    unsigned char *codes;
    unsigned char *buf;   /* 8 bytes per parameter, copied by cuLaunchKernel at launch */
    void **ptrs;
    int native;           /* 0 when a parameter type needs the Python packer */
    Slot *slots;          /* by device ordinal */
    Py_ssize_t n_slots;
    PyObject *fallback;   /* fallback(kernel, grid, block, smem, stream, params) */
    PyObject *report;     /* report(CUresult, grid, block, smem): raises */
} Kernel;

static int code_of(const char *s) {
    static const struct { const char *name; int code; } table[] = {
        {"ptr", P_U64}, {"u64", P_U64}, {"i64", P_I64}, {"index", P_I64}, {"i32", P_I32}, {"u32", P_U32},
        {"i16", P_I16}, {"u16", P_U16}, {"i8", P_I8}, {"u8", P_U8}, {"bool", P_BOOL}, {"f32", P_F32},
        {"f64", P_F64}, {"bf16", P_BF16},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (!strcmp(s, table[i].name)) return table[i].code;
    return P_UNSUPPORTED;
}

static uint16_t bf16_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) return (uint16_t)((bits >> 16) | 0x40);
    return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

/* 0 on success; -1 when the value does not fit (the Python packer then explains why).
 * Ints and floats only, read without running Python code (no __index__ or __float__ of
 * another type), so that no other thread can run between packing and launching. */
static int pack_one(int code, PyObject *v, unsigned char *slot) {
    long long s;
    unsigned long long u;
    double d;
    switch (code) {
    case P_U64:
        if (!PyLong_Check(v)) return -1;
        u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        memcpy(slot, &u, 8);
        return 0;
    case P_BOOL: {
        if (!PyLong_Check(v)) return -1;
        int overflow = 0;
        long long b = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (b == -1 && PyErr_Occurred()) return -1;
        slot[0] = (unsigned char)(b != 0 || overflow != 0);
        return 0;
    }
    case P_F32: case P_F64: case P_BF16:
        if (!PyFloat_Check(v) && !PyLong_CheckExact(v) && !PyBool_Check(v)) return -1;
        d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        if (code == P_F64) memcpy(slot, &d, 8);
        else {
            float f = (float)d;
            if (isfinite(d) && !isfinite(f)) return -1; /* too large for f32: Python says so */
            if (code == P_F32) memcpy(slot, &f, 4);
            else { uint16_t h = bf16_bits(f); memcpy(slot, &h, 2); }
        }
        return 0;
    default:
        if (!PyLong_Check(v)) return -1;
        s = PyLong_AsLongLong(v);
        if (s == -1 && PyErr_Occurred()) return -1;
        switch (code) {
        case P_I64: memcpy(slot, &s, 8); return 0;
        case P_I32: if (s < INT32_MIN || s > INT32_MAX) return -1; { int32_t x = (int32_t)s; memcpy(slot, &x, 4); } return 0;
        case P_U32: if (s < 0 || s > UINT32_MAX) return -1; { uint32_t x = (uint32_t)s; memcpy(slot, &x, 4); } return 0;
        case P_I16: if (s < INT16_MIN || s > INT16_MAX) return -1; { int16_t x = (int16_t)s; memcpy(slot, &x, 2); } return 0;
        case P_U16: if (s < 0 || s > UINT16_MAX) return -1; { uint16_t x = (uint16_t)s; memcpy(slot, &x, 2); } return 0;
        case P_I8: if (s < INT8_MIN || s > INT8_MAX) return -1; slot[0] = (unsigned char)(int8_t)s; return 0;
        case P_U8: if (s < 0 || s > UINT8_MAX) return -1; slot[0] = (unsigned char)s; return 0;
        }
        return -1;
    }
}

/* Reads a dim3 of positive 32-bit ints; 0 when it is not one (the fallback handles it). */
static int dim3(PyObject *t, unsigned out[3]) {
    if (!PyTuple_Check(t) || PyTuple_Size(t) != 3) return 0;
    for (int i = 0; i < 3; i++) {
        PyObject *item = PyTuple_GetItem(t, i);
        if (!PyLong_Check(item)) return 0;
        long long v = PyLong_AsLongLong(item);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        if (v <= 0 || v > 0xFFFFFFFFLL) return 0;
        out[i] = (unsigned)v;
    }
    return 1;
}

static PyObject *kernel_slow(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *values = PyTuple_New(nargs - 4);
    if (values == NULL) return NULL;
    for (Py_ssize_t i = 4; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(values, i - 4, args[i]);
    }
    PyObject *out = PyObject_CallFunctionObjArgs(k->fallback, (PyObject *)k, args[0], args[1], args[2], args[3], values,
                                                 NULL);
    Py_DECREF(values);
    return out;
}

enum { SWITCH_NONE, SWITCH_SET, SWITCH_PUSH };

/* The slot a launch from this thread takes now (the device its arguments are on; with none
 * said, the one whose context is current) and how to make its context current; NULL when
 * the Python path must decide (not armed there, or a current context kdsl does not know). */
static Slot *slot_now(Kernel *k, long long device, int *how) {
    void *cur = NULL;
    if (cu_ctx_get_current(&cur)) return NULL;
    Slot *slot = NULL;
    if (device >= 0) {
        if (device < k->n_slots) slot = &k->slots[device];
    } else if (cur != NULL) {
        for (Py_ssize_t i = 0; i < k->n_slots; i++)
            if (k->slots[i].ctx == cur) { slot = &k->slots[i]; break; }
    }
    if (slot == NULL || slot->function == NULL) return NULL;
    *how = cur == slot->ctx ? SWITCH_NONE : cur == NULL ? SWITCH_SET : is_known(cur) ? SWITCH_PUSH : -1;
    return *how < 0 ? NULL : slot;
}

/* launch(grid, block, smem, stream, *params) */
static PyObject *kernel_launch(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4) {
        PyErr_SetString(PyExc_TypeError, "launch(grid, block, smem, stream, *params)");
        return NULL;
    }
    unsigned grid[3], block[3];
    int how = SWITCH_NONE;
    if (!k->native || nargs - 4 != k->n || !dim3(args[0], grid) || !dim3(args[1], block)
        || !PyLong_CheckExact(args[2]) || !PyLong_CheckExact(args[3]))
        return kernel_slow(k, args, nargs);
    Slot *slot = slot_now(k, t_device, &how);
    if (slot == NULL) return kernel_slow(k, args, nargs);
    long long smem = PyLong_AsLongLong(args[2]);
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) { PyErr_Clear(); return kernel_slow(k, args, nargs); }
    if (smem < 0 || (unsigned long long)smem > slot->smem_allowed) return kernel_slow(k, args, nargs);
    for (Py_ssize_t i = 0; i < k->n; i++) {
        if (pack_one(k->codes[i], args[4 + i], k->buf + 8 * i) < 0) {
            PyErr_Clear();
            return kernel_slow(k, args, nargs);
        }
    }
    if ((how == SWITCH_SET && cu_ctx_set_current(slot->ctx)) || (how == SWITCH_PUSH && cu_ctx_push_current(slot->ctx)))
        return kernel_slow(k, args, nargs); /* the Python path reports what the driver refused */
    int err = cu_launch_kernel(slot->function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               (unsigned)smem, (void *)(uintptr_t)stream, k->ptrs, NULL);
    if (how == SWITCH_PUSH) {
        void *popped = NULL;
        cu_ctx_pop_current(&popped);
    }
    if (err) {
        PyObject *code = PyLong_FromLong(err);
        if (code == NULL) return NULL;
        PyObject *r = PyObject_CallFunctionObjArgs(k->report, code, args[0], args[1], args[2], NULL);
        Py_DECREF(code);
        return r;
    }
    Py_RETURN_NONE;
}

/* arm(device, context, function, smem_allowed): later launches on `device` (from any thread)
 * take the native path; `context` is the device's primary context, holding `function`. */
static PyObject *kernel_arm(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "arm(device, context, function, smem_allowed)");
        return NULL;
    }
    long long device = PyLong_AsLongLong(args[0]);
    unsigned long long ctx = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long fn = PyLong_AsUnsignedLongLong(args[2]);
    unsigned long long smem = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (device < 0 || device >= 1024) {
        PyErr_SetString(PyExc_ValueError, "device ordinal out of range");
        return NULL;
    }
    if (!k->native) Py_RETURN_NONE;
    if (device >= k->n_slots) {
        Slot *slots = PyMem_Realloc(k->slots, (size_t)(device + 1) * sizeof(Slot));
        if (slots == NULL) return PyErr_NoMemory();
        memset(slots + k->n_slots, 0, (size_t)(device + 1 - k->n_slots) * sizeof(Slot));
        k->slots = slots;
        k->n_slots = device + 1;
    }
    Slot *slot = &k->slots[device];
    slot->ctx = (void *)(uintptr_t)ctx;
    slot->smem_allowed = smem;
    slot->function = (void *)(uintptr_t)fn;
    Py_RETURN_NONE;
}

static PyObject *kernel_disarm(Kernel *k, PyObject *unused) {
    for (Py_ssize_t i = 0; i < k->n_slots; i++) k->slots[i].function = NULL;
    Py_RETURN_NONE;
}

/* armed(device=-1): whether a launch from this thread on `device` (-1: the device the last
 * arguments read in this thread are on) would take the native path now. */
static PyObject *kernel_armed(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    long long device = t_device;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "armed(device=-1)");
        return NULL;
    }
    if (nargs == 1) {
        long long given = PyLong_AsLongLong(args[0]);
        if (given == -1 && PyErr_Occurred()) return NULL;
        if (given >= 0) device = given;
    }
    int how = SWITCH_NONE;
    return PyBool_FromLong(k->native && slot_now(k, device, &how) != NULL);
}

static void kernel_dealloc(Kernel *k) {
    PyTypeObject *tp = Py_TYPE(k);
    PyMem_Free(k->codes);
    PyMem_Free(k->buf);
    PyMem_Free(k->ptrs);
    PyMem_Free(k->slots);
    Py_XDECREF(k->fallback);
    Py_XDECREF(k->report);
    PyObject_Free(k);
    Py_DECREF(tp);
}

/* Kernel(codes, fallback, report): codes is a tuple of parameter type names ('ptr', 'i32', ...). */
static PyObject *kernel_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *codes, *fallback, *report;
    if (!PyArg_ParseTuple(args, "O!OO:Kernel", &PyTuple_Type, &codes, &fallback, &report)) return NULL;
    Py_ssize_t n = PyTuple_Size(codes);
    Kernel *k = PyObject_New(Kernel, tp);
    if (k == NULL) return NULL;
    k->n = n;
    k->native = 1;
    k->slots = NULL;
    k->n_slots = 0;
    k->codes = PyMem_Calloc(n > 0 ? n : 1, 1);
    k->buf = PyMem_Calloc(n > 0 ? n : 1, 8);
    k->ptrs = PyMem_Calloc(n > 0 ? n : 1, sizeof(void *));
    Py_INCREF(fallback);
    k->fallback = fallback;
    Py_INCREF(report);
    k->report = report;
    if (k->codes == NULL || k->buf == NULL || k->ptrs == NULL) { Py_DECREF(k); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GetItem(codes, i);
        const char *name = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, NULL) : NULL;
        if (name == NULL) {
            Py_DECREF(k);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "parameter type codes must be strings");
            return NULL;
        }
        k->codes[i] = (unsigned char)code_of(name);
        if (k->codes[i] == P_UNSUPPORTED) k->native = 0;
        k->ptrs[i] = k->buf + 8 * i;
    }
    return (PyObject *)k;
}

static PyMethodDef kernel_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))kernel_launch, METH_FASTCALL,
     "launch(grid, block, smem, stream, *params): cuLaunchKernel, or the fallback."},
    {"arm", (PyCFunction)(void (*)(void))kernel_arm, METH_FASTCALL,
     "arm(device, context, function, smem_allowed): launch natively on that device from now on."},
    {"disarm", (PyCFunction)kernel_disarm, METH_NOARGS, "Send every launch through the fallback again."},
    {"armed", (PyCFunction)(void (*)(void))kernel_armed, METH_FASTCALL,
     "armed(device=-1): whether a launch from this thread on that device takes the native path now."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kernel_slots[] = {
    {Py_tp_new, kernel_new},
    {Py_tp_dealloc, kernel_dealloc},
    {Py_tp_methods, kernel_methods},
    {Py_tp_doc, "One kernel's parameter buffer and native launch."},
    {0, NULL},
};

static PyType_Spec kernel_spec = {"dsl.runtime._fastpath.Kernel", sizeof(Kernel), 0, Py_TPFLAGS_DEFAULT,
                                  kernel_slots};

/* ---------------------------------------------------------------------------------------
 * Module
 * ------------------------------------------------------------------------------------- */

/* set_device(ordinal): the device the Python reader found this call's arguments on (-1: none). */
static PyObject *set_device(PyObject *unused, PyObject *arg) {
    long long device = PyLong_AsLongLong(arg);
    if (device == -1 && PyErr_Occurred()) return NULL;
    t_device = device < 0 ? -1 : device;
    Py_RETURN_NONE;
}

/* device(): the device of the arguments last read in this thread (-1: none said). */
static PyObject *get_device(PyObject *unused, PyObject *noargs) {
    return PyLong_FromLongLong(t_device);
}

/* set_primary_contexts(handles): the primary contexts a launch may push its own over. */
static PyObject *set_primary_contexts(PyObject *unused, PyObject *handles) {
    PyObject *seq = PySequence_Tuple(handles);
    if (seq == NULL) return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    void *found[MAX_KNOWN];
    int count = 0;
    for (Py_ssize_t i = 0; i < n && count < MAX_KNOWN; i++) {
        unsigned long long h = PyLong_AsUnsignedLongLong(PyTuple_GetItem(seq, i));
        if (PyErr_Occurred()) { Py_DECREF(seq); return NULL; }
        if (h) found[count++] = (void *)(uintptr_t)h;
    }
    Py_DECREF(seq);
    memcpy(known_contexts, found, sizeof(void *) * (size_t)count);
    n_known = count;
    Py_RETURN_NONE;
}

static PyObject *set_torch_reader(PyObject *unused, PyObject *capsule) {
    if (capsule == Py_None) { /* back to torch's Python API */
        torch_reader = NULL;
        Py_RETURN_NONE;
    }
    const KdslTensorReader *reader = PyCapsule_GetPointer(capsule, KDSL_TENSOR_READER_CAPSULE);
    if (reader == NULL) return NULL;
    if (reader->abi != KDSL_TENSOR_READER_ABI) {
        PyErr_Format(PyExc_ValueError, "the torch tensor reader speaks version %d of tensor_reader.h, not %d",
                     reader->abi, KDSL_TENSOR_READER_ABI);
        return NULL;
    }
    torch_reader = reader;
    Py_RETURN_NONE;
}

static PyObject *has_torch_reader(PyObject *unused, PyObject *noargs) {
    return PyBool_FromLong(torch_reader != NULL);
}

static PyMethodDef module_methods[] = {
    {"set_torch_reader", set_torch_reader, METH_O,
     "set_torch_reader(capsule): read torch tensors with the C++ reader of _torch_tensors from now on "
     "(None: through torch's Python API)."},
    {"has_torch_reader", has_torch_reader, METH_NOARGS, "has_torch_reader(): whether that reader is in use."},
    {"set_device", set_device, METH_O, "set_device(ordinal): this thread's launch device (-1: none said)."},
    {"device", get_device, METH_NOARGS, "device(): this thread's launch device, as the last argument read found it."},
    {"set_primary_contexts", set_primary_contexts, METH_O,
     "set_primary_contexts(handles): the primary contexts a launch may push its own over."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath", NULL, -1, module_methods};

typedef int (*cu_get_proc_address_t)(const char *, void **, int, unsigned long long, int *);

/* A driver entry point as the driver hands it out through cuGetProcAddress (what the CUDA
 * runtime and cuda-bindings call), else the exported symbol `exported`. */
static void *entry_point(void *lib, cu_get_proc_address_t get_proc, const char *name, const char *exported) {
    void *fn = NULL;
    int status = 0;
    if (get_proc != NULL && get_proc(name, &fn, 12000, 0 /* CU_GET_PROC_ADDRESS_DEFAULT */, &status) == 0 && fn != NULL)
        return fn;
    return dlsym(lib, exported);
}

static int load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_SetString(PyExc_ImportError, "libcuda.so.1 not found");
        return -1;
    }
    cu_get_proc_address_t get_proc = (cu_get_proc_address_t)dlsym(lib, "cuGetProcAddress_v2");
    cu_launch_kernel = (cu_launch_kernel_t)entry_point(lib, get_proc, "cuLaunchKernel", "cuLaunchKernel");
    cu_ctx_get_current = (cu_ctx_get_t)entry_point(lib, get_proc, "cuCtxGetCurrent", "cuCtxGetCurrent");
    cu_ctx_set_current = (cu_ctx_set_t)entry_point(lib, get_proc, "cuCtxSetCurrent", "cuCtxSetCurrent");
    cu_ctx_push_current = (cu_ctx_set_t)entry_point(lib, get_proc, "cuCtxPushCurrent", "cuCtxPushCurrent_v2");
    cu_ctx_pop_current = (cu_ctx_get_t)entry_point(lib, get_proc, "cuCtxPopCurrent", "cuCtxPopCurrent_v2");
    if (cu_launch_kernel == NULL || cu_ctx_get_current == NULL || cu_ctx_set_current == NULL
        || cu_ctx_push_current == NULL || cu_ctx_pop_current == NULL) {
        PyErr_SetString(PyExc_ImportError, "cuLaunchKernel or the cuCtx*Current calls not found in libcuda");
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (load_driver() < 0) return NULL;
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_stride = PyUnicode_InternFromString("stride");
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *reader_type = PyType_FromSpec(&reader_spec);
    PyObject *kernel_type = PyType_FromSpec(&kernel_spec);
    if (reader_type == NULL || kernel_type == NULL || PyModule_AddObject(m, "ArgReader", reader_type) < 0
        || PyModule_AddObject(m, "Kernel", kernel_type) < 0) {
        Py_XDECREF(reader_type);
        Py_XDECREF(kernel_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
