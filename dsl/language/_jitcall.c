/*
 * Calling a @dsl.jit function without a Python frame of our own: the base class of
 * JitFunction whose tp_call hands the arguments straight to the launcher of the last
 * specialization when they can be its arguments (same count, no keywords). Anything else,
 * and a launcher that refuses the arguments with ArgumentError (another dtype or rank:
 * another specialization), goes to `self._call_slow(*args, **kwargs)`, which specializes.
 *
 * `dsl/language/decorators.py` holds the pure-Python twin used when this optional module
 * is not built. Needs no GPU; stable ABI, one binary for every CPython from 3.10 on.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>

static PyObject *s_fast_arity, *s_fast_launch, *s_call_slow, *argument_error;

static PyObject *jit_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    if (kwargs == NULL || PyDict_Size(kwargs) == 0) {
        PyObject *arity = PyObject_GetAttr(self, s_fast_arity);
        if (arity == NULL) return NULL;
        Py_ssize_t n = PyLong_AsSsize_t(arity);
        Py_DECREF(arity);
        if (n == -1 && PyErr_Occurred()) return NULL;
        if (n == PyTuple_Size(args)) {
            PyObject *launch = PyObject_GetAttr(self, s_fast_launch);
            if (launch == NULL) return NULL;
            PyObject *result = PyObject_Call(launch, args, NULL);
            Py_DECREF(launch);
            if (result != NULL || !PyErr_ExceptionMatches(argument_error)) return result;
            PyErr_Clear(); /* not this specialization's arguments: the slow path looks it up */
        }
    }
    PyObject *slow = PyObject_GetAttr(self, s_call_slow);
    if (slow == NULL) return NULL;
    PyObject *result = PyObject_Call(slow, args, kwargs);
    Py_DECREF(slow);
    return result;
}

static PyType_Slot jit_call_slots[] = {
    {Py_tp_call, jit_call},
    {Py_tp_doc, "Base of JitFunction: calls the last specialization's launcher directly."},
    {0, NULL},
};

static PyType_Spec jit_call_spec = {"dsl.language._jitcall.JitCall", sizeof(PyObject), 0,
                                    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, jit_call_slots};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jitcall", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__jitcall(void) {
    PyObject *diagnostics = PyImport_ImportModule("dsl.diagnostics");
    if (diagnostics == NULL) return NULL;
    argument_error = PyObject_GetAttrString(diagnostics, "ArgumentError");
    Py_DECREF(diagnostics);
    if (argument_error == NULL) return NULL;
    s_fast_arity = PyUnicode_InternFromString("_fast_arity");
    s_fast_launch = PyUnicode_InternFromString("_fast_launch");
    s_call_slow = PyUnicode_InternFromString("_call_slow");
    if (s_fast_arity == NULL || s_fast_launch == NULL || s_call_slow == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *type = PyType_FromSpec(&jit_call_spec);
    if (type == NULL || PyModule_AddObject(m, "JitCall", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
