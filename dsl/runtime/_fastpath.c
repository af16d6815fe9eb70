/*
 * The two per-launch steps that Python makes slow, in C: reading a PyTorch tensor's
 * pointer, shape and strides, and calling the driver's cuLaunchKernel.
 *
 * Optional: when this module is missing (no C compiler at install time) or libcuda
 * cannot be loaded, dsl.runtime uses its pure-Python path, which does the same checks.
 * Built against the stable ABI, so one binary serves every CPython from 3.10 on.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>

typedef int (*cu_launch_kernel_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, void *, void **, void **);

static cu_launch_kernel_t cu_launch_kernel = NULL;
static PyObject *s_dtype, *s_shape, *s_is_contiguous, *s_get_device, *s_data_ptr, *s_stride;

/* launch(function, gx, gy, gz, bx, by, bz, smem, stream, params) -> CUresult as int */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long v[10];
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "launch takes 10 integer arguments");
        return NULL;
    }
    for (int i = 0; i < 10; i++) {
        v[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        if (i >= 1 && i <= 7 && v[i] > 0xFFFFFFFFull) {
            PyErr_SetString(PyExc_OverflowError, "grid, block and smem must fit 32 bits");
            return NULL;
        }
    }
    int err = cu_launch_kernel((void *)(uintptr_t)v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3],
                               (unsigned)v[4], (unsigned)v[5], (unsigned)v[6], (unsigned)v[7],
                               (void *)(uintptr_t)v[8], (void **)(uintptr_t)v[9], NULL);
    return PyLong_FromLong(err);
}

static long long call_long(PyObject *obj, PyObject *name) {
    PyObject *r = PyObject_CallMethodObjArgs(obj, name, NULL);
    if (r == NULL) return -2;
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    return v;
}

/*
 * torch_tensor(t, dtype, rank) -> (ptr, shape, strides, device), or None when the tensor is
 * not a contiguous CUDA tensor of that dtype and rank with at most 2**31 - 1 elements (the
 * Python path then explains what is wrong). `strides` is () for rank 1.
 */
static PyObject *torch_tensor(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "torch_tensor takes (tensor, dtype, rank)");
        return NULL;
    }
    PyObject *t = args[0];
    long rank = PyLong_AsLong(args[2]);
    if (rank == -1 && PyErr_Occurred()) return NULL;
    PyObject *dtype = PyObject_GetAttr(t, s_dtype);
    if (dtype == NULL) return NULL;
    int same = dtype == args[1];
    Py_DECREF(dtype);
    if (!same) Py_RETURN_NONE;
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) return NULL;
    if (!PyTuple_Check(shape) || PyTuple_Size(shape) != rank) {
        Py_DECREF(shape);
        Py_RETURN_NONE;
    }
    long long numel = 1;
    for (Py_ssize_t i = 0; i < rank; i++) {
        long long s = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
        if (s == -1 && PyErr_Occurred()) { Py_DECREF(shape); return NULL; }
        numel *= s;
        if (numel > 0x7FFFFFFFLL) { Py_DECREF(shape); Py_RETURN_NONE; }
    }
    PyObject *contiguous = PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL);
    if (contiguous == NULL) { Py_DECREF(shape); return NULL; }
    int is_contiguous = PyObject_IsTrue(contiguous);
    Py_DECREF(contiguous);
    long long device = call_long(t, s_get_device);
    if (is_contiguous != 1 || device < 0) {
        Py_DECREF(shape);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *ptr = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    if (ptr == NULL) { Py_DECREF(shape); return NULL; }
    PyObject *strides = rank > 1 ? PyObject_CallMethodObjArgs(t, s_stride, NULL) : PyTuple_New(0);
    if (strides == NULL) { Py_DECREF(shape); Py_DECREF(ptr); return NULL; }
    PyObject *dev = PyLong_FromLongLong(device);
    PyObject *out = PyTuple_Pack(4, ptr, shape, strides, dev);
    Py_DECREF(ptr);
    Py_DECREF(shape);
    Py_DECREF(strides);
    Py_XDECREF(dev);
    return out;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "cuLaunchKernel with raw handles."},
    {"torch_tensor", (PyCFunction)(void (*)(void))torch_tensor, METH_FASTCALL,
     "(ptr, shape, strides, device) of a matching contiguous CUDA torch tensor, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastpath(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        PyErr_SetString(PyExc_ImportError, "libcuda.so.1 not found");
        return NULL;
    }
    cu_launch_kernel = (cu_launch_kernel_t)dlsym(lib, "cuLaunchKernel");
    if (cu_launch_kernel == NULL) {
        PyErr_SetString(PyExc_ImportError, "cuLaunchKernel not found in libcuda");
        return NULL;
    }
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_get_device = PyUnicode_InternFromString("get_device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_stride = PyUnicode_InternFromString("stride");
    return PyModule_Create(&module);
}
