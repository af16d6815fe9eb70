/*
 * The per-launch work of a generated launcher, in C: what makes a warm launch cost about
 * a bare cuLaunchKernel instead of several Python frames.
 *
 *   ArgReader.read(*args, stream) checks PyTorch tensor and scalar arguments against the
 *       specialization (and each tensor's pointer and outer strides against the alignment
 *       its kernels' accesses need) and returns (ptr, shape, strides) per tensor, the
 *       scalars, and the stream handle, all in one flat tuple. No driver call: a CUDA
 *       tensor is device memory by construction.
 *   Kernel.launch(grid, block, smem, stream, *params) packs the kernel parameters into a
 *       buffer owned by the kernel and calls cuLaunchKernel.
 *
 * Both only take the common case. Anything else (CuPy or DLPack arrays, a wrong dtype or
 * rank, a non-contiguous or misaligned tensor, a stream object or a handle that is not an
 * unsigned 64-bit value, a kernel not loaded yet in this thread,
 * a value that does not fit its parameter) goes to the Python fallback given at
 * construction, which does the same work with every check and explains what is wrong.
 * A failed cuLaunchKernel goes to `report`, which raises the launch error.
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

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, void *, void **, void **);

static cu_launch_kernel_t cu_launch_kernel = NULL;
static PyObject *s_dtype, *s_shape, *s_is_cuda, *s_data_ptr, *s_stride;

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
} ArgEntry;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;           /* runtime parameters (the stream comes after them) */
    Py_ssize_t n_out;
    ArgEntry *entries;
    PyObject *tensor_type;  /* torch.Tensor, or None when torch was not imported */
    PyObject *stride;       /* torch.Tensor.stride and .data_ptr: calling the unbound */
    PyObject *data_ptr;     /* methods saves a bound-method object per call */
    PyObject *torch_stream; /* torch's current raw stream for a device ordinal, or None */
    PyObject *fallback;
} ArgReader;

/* 1: read into out[*k..]; 0: not the common case (the caller falls back); -1: error set. */
static int read_torch(ArgReader *r, ArgEntry *e, PyObject *t, PyObject *out, Py_ssize_t *k, long long *device) {
    if ((PyObject *)Py_TYPE(t) != r->tensor_type) return 0;
    PyObject *dtype = PyObject_GetAttr(t, s_dtype);
    if (dtype == NULL) return -1;
    int same = dtype == e->dtype;
    Py_DECREF(dtype);
    if (!same) return 0;
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) return -1;
    if (!PyTuple_Check(shape) || PyTuple_Size(shape) != e->rank) {
        Py_DECREF(shape);
        return 0;
    }
    PyObject *strides = PyObject_CallFunctionObjArgs(r->stride, t, NULL);
    if (strides == NULL) { Py_DECREF(shape); return -1; }
    /* A unit innermost stride and every offset within 32 bits, as check_tensor requires;
     * anything else (and its error message) is the Python path's. */
    int fits = PyTuple_Check(strides) && PyTuple_Size(strides) == e->rank;
    long long extent = 0;
    for (Py_ssize_t i = 0; fits && i < e->rank; i++) {
        long long n = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        long long st = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
        if (PyErr_Occurred()) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
        if (n > INT32_MAX_ELEMENTS) fits = 0;
        else if (i == e->rank - 1 && st != 1 && n > 1) fits = 0;
        else if (n > 1 && i < e->rank - 1 && ((st * e->nbytes) & (e->align - 1))) fits = 0; /* a misaligned row */
        else if (n > 1) extent += (n - 1) * (st < 0 ? -st : st);
        if (extent > INT32_MAX_ELEMENTS) fits = 0;
    }
    if (!fits) { Py_DECREF(shape); Py_DECREF(strides); return 0; }
    /* One visible GPU (the reader is only built then): a CUDA tensor is on device 0. */
    PyObject *is_cuda = PyObject_GetAttr(t, s_is_cuda);
    if (is_cuda == NULL) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
    int cuda = is_cuda == Py_True;
    Py_DECREF(is_cuda);
    if (!cuda) { Py_DECREF(shape); Py_DECREF(strides); return 0; } /* the Python path says why */
    *device = 0;
    PyObject *ptr = PyObject_CallFunctionObjArgs(r->data_ptr, t, NULL);
    if (ptr == NULL) { Py_DECREF(shape); Py_DECREF(strides); return -1; }
    /* a null pointer with elements, and a misaligned one, are the Python path's errors */
    unsigned long long address = PyLong_AsUnsignedLongLong(ptr);
    if (address == 0 || (address & (unsigned long long)(e->align - 1))) {
        Py_DECREF(ptr); Py_DECREF(shape); Py_DECREF(strides);
        if (PyErr_Occurred()) return -1;
        return 0;
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
    return out;
}

static void reader_dealloc(ArgReader *r) {
    PyTypeObject *tp = Py_TYPE(r);
    for (Py_ssize_t i = 0; i < r->n; i++) Py_XDECREF(r->entries[i].dtype);
    PyMem_Free(r->entries);
    Py_XDECREF(r->tensor_type);
    Py_XDECREF(r->stride);
    Py_XDECREF(r->data_ptr);
    Py_XDECREF(r->torch_stream);
    Py_XDECREF(r->fallback);
    PyObject_Free(r);
    Py_DECREF(tp);
}

/*
 * ArgReader(entries, tensor_type, torch_stream, fallback): entries is a tuple of
 * ("tensor", torch_dtype, rank, align, nbytes) | ("float" | "int" | "bool" | "other", None, 0, 1, 1).
 */
static PyObject *reader_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
    PyObject *entries, *tensor_type, *torch_stream, *fallback;
    if (!PyArg_ParseTuple(args, "O!OOO:ArgReader", &PyTuple_Type, &entries, &tensor_type, &torch_stream, &fallback))
        return NULL;
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
    r->stride = r->data_ptr = NULL;
    if (r->entries == NULL) { Py_DECREF(r); return PyErr_NoMemory(); }
    if (tensor_type != Py_None) {
        r->stride = PyObject_GetAttr(tensor_type, s_stride);
        r->data_ptr = PyObject_GetAttr(tensor_type, s_data_ptr);
        if (r->stride == NULL || r->data_ptr == NULL) { Py_DECREF(r); return NULL; }
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

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    unsigned char *codes;
    unsigned char *buf;   /* 8 bytes per parameter, copied by cuLaunchKernel at launch */
    void **ptrs;
    int native;           /* 0 when a parameter type needs the Python packer */
    void *function;       /* CUfunction; NULL until `arm` */
    unsigned long thread; /* the thread whose current context loaded `function` */
    unsigned long long smem_allowed;
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

/* 0 on success; -1 when the value does not fit (the Python packer then explains why). */
static int pack_one(int code, PyObject *v, unsigned char *slot) {
    long long s;
    unsigned long long u;
    double d;
    switch (code) {
    case P_U64:
        u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        memcpy(slot, &u, 8);
        return 0;
    case P_BOOL: {
        int b = PyObject_IsTrue(v);
        if (b < 0) return -1;
        slot[0] = (unsigned char)b;
        return 0;
    }
    case P_F32: case P_F64: case P_BF16:
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

/* launch(grid, block, smem, stream, *params) */
static PyObject *kernel_launch(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 4) {
        PyErr_SetString(PyExc_TypeError, "launch(grid, block, smem, stream, *params)");
        return NULL;
    }
    unsigned grid[3], block[3];
    if (k->function == NULL || nargs - 4 != k->n || k->thread != PyThread_get_thread_ident()
        || !dim3(args[0], grid) || !dim3(args[1], block) || !PyLong_CheckExact(args[2]) || !PyLong_CheckExact(args[3]))
        return kernel_slow(k, args, nargs);
    long long smem = PyLong_AsLongLong(args[2]);
    unsigned long long stream = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) { PyErr_Clear(); return kernel_slow(k, args, nargs); }
    if (smem < 0 || (unsigned long long)smem > k->smem_allowed) return kernel_slow(k, args, nargs);
    for (Py_ssize_t i = 0; i < k->n; i++) {
        if (pack_one(k->codes[i], args[4 + i], k->buf + 8 * i) < 0) {
            PyErr_Clear();
            return kernel_slow(k, args, nargs);
        }
    }
    int err = cu_launch_kernel(k->function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               (unsigned)smem, (void *)(uintptr_t)stream, k->ptrs, NULL);
    if (err) {
        PyObject *code = PyLong_FromLong(err);
        if (code == NULL) return NULL;
        PyObject *r = PyObject_CallFunctionObjArgs(k->report, code, args[0], args[1], args[2], NULL);
        Py_DECREF(code);
        return r;
    }
    Py_RETURN_NONE;
}

/* arm(function, smem_allowed): later launches from this thread take the native path. */
static PyObject *kernel_arm(Kernel *k, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "arm(function, smem_allowed)");
        return NULL;
    }
    unsigned long long fn = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long smem = PyLong_AsUnsignedLongLong(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (k->native) {
        k->function = (void *)(uintptr_t)fn;
        k->smem_allowed = smem;
        k->thread = PyThread_get_thread_ident();
    }
    Py_RETURN_NONE;
}

static PyObject *kernel_disarm(Kernel *k, PyObject *unused) {
    k->function = NULL;
    Py_RETURN_NONE;
}

static PyObject *kernel_armed(Kernel *k, PyObject *unused) {
    return PyBool_FromLong(k->function != NULL && k->thread == PyThread_get_thread_ident());
}

static void kernel_dealloc(Kernel *k) {
    PyTypeObject *tp = Py_TYPE(k);
    PyMem_Free(k->codes);
    PyMem_Free(k->buf);
    PyMem_Free(k->ptrs);
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
    k->function = NULL;
    k->thread = 0;
    k->smem_allowed = 0;
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
     "arm(function, smem_allowed): launch natively from this thread from now on."},
    {"disarm", (PyCFunction)kernel_disarm, METH_NOARGS, "Send every launch through the fallback again."},
    {"armed", (PyCFunction)kernel_armed, METH_NOARGS, "Whether launches from this thread take the native path."},
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

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath", NULL, -1, NULL};

typedef int (*cu_get_proc_address_t)(const char *, void **, int, unsigned long long, int *);

/* cuLaunchKernel as the driver hands it out through cuGetProcAddress (what the CUDA
 * runtime and cuda-bindings call), else the exported symbol. */
static int load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_SetString(PyExc_ImportError, "libcuda.so.1 not found");
        return -1;
    }
    cu_get_proc_address_t get_proc = (cu_get_proc_address_t)dlsym(lib, "cuGetProcAddress_v2");
    if (get_proc != NULL) {
        void *fn = NULL;
        int status = 0;
        if (get_proc("cuLaunchKernel", &fn, 12000, 0 /* CU_GET_PROC_ADDRESS_DEFAULT */, &status) == 0 && fn != NULL)
            cu_launch_kernel = (cu_launch_kernel_t)fn;
    }
    if (cu_launch_kernel == NULL) cu_launch_kernel = (cu_launch_kernel_t)dlsym(lib, "cuLaunchKernel");
    if (cu_launch_kernel == NULL) {
        PyErr_SetString(PyExc_ImportError, "cuLaunchKernel not found in libcuda");
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (load_driver() < 0) return NULL;
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
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
