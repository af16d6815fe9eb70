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

static PyObject *s_fast, *s_call_slow, *argument_error;

/* `_fast` is one (arity, launcher) tuple, replaced whole by the slow path: reading it once
 * gives a matching pair even while another thread switches the specialization. */
static PyObject *jit_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    if (kwargs == NULL || PyDict_Size(kwargs) == 0) {
        PyObject *fast = PyObject_GetAttr(self, s_fast);
        if (fast == NULL) return NULL;
        PyObject *arity = PyTuple_GetItem(fast, 0); /* borrowed */
        Py_ssize_t n = arity == NULL ? -1 : PyLong_AsSsize_t(arity);
        if (n == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        if (n == PyTuple_Size(args)) {
            PyObject *launch = PyTuple_GetItem(fast, 1); /* borrowed, kept alive by `fast` */
            PyObject *result = launch == NULL ? NULL : PyObject_Call(launch, args, NULL);
            Py_DECREF(fast);
            if (result != NULL || !PyErr_ExceptionMatches(argument_error)) return result;
            PyErr_Clear(); /* not this specialization's arguments: the slow path looks it up */
        } else {
            Py_DECREF(fast);
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
    s_fast = PyUnicode_InternFromString("_fast");
    s_call_slow = PyUnicode_InternFromString("_call_slow");
    if (s_fast == NULL || s_call_slow == NULL) return NULL;
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
