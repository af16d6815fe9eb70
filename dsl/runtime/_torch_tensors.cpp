// The PyTorch tensor reader of the native launch path (see tensor_reader.h): a tensor's
// pointer, sizes, strides, dtype and device read from its c10::TensorImpl. Built against the
// installed torch by `dsl.runtime.torch_tensors` (one binary per torch and Python version).
//
// Only c10's TensorImpl header is included (about 2 s to compile, against 20 s for torch's
// Python bindings): where a torch.Tensor object keeps its TensorImpl pointer is found by
// `configure`, which looks for each probe tensor's `_cdata` (that pointer, as torch's Python
// API reports it) in the object and takes an offset only if every probe agrees on one; the
// Python side then checks `read` against torch's own answers before anything uses it.
// `read(tensor)` and `scalar_type(dtype)` are the same readings for those checks and tests.
#include <Python.h>

#include <c10/core/ScalarTypeToTypeMeta.h>
#include <c10/core/TensorImpl.h>

extern "C" {
#include "tensor_reader.h"
}

namespace {

PyObject* tensor_type = nullptr;     // torch.Tensor
PyObject* parameter_type = nullptr;  // torch.nn.Parameter: a tensor to C++, bookkeeping to Python
PyObject* scalar_types = nullptr;    // {torch.dtype: c10::ScalarType}
Py_ssize_t impl_offset = -1;         // where the object holds its TensorImpl*

constexpr Py_ssize_t kFirstOffset = sizeof(PyObject);
constexpr Py_ssize_t kLastOffset = 128;

c10::TensorImpl* impl_of(PyObject* obj) {
  return *reinterpret_cast<c10::TensorImpl**>(reinterpret_cast<char*>(obj) + impl_offset);
}

int read_tensor(PyObject* obj, int max_rank, KdslTensorView* view) noexcept {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj));
  if (impl_offset < 0 || max_rank > KDSL_MAX_RANK || (type != tensor_type && type != parameter_type)) return 0;
  try {
    c10::TensorImpl* impl = impl_of(obj);
    if (impl == nullptr || impl->is_python_dispatch() || impl->is_nested() || impl->has_symbolic_sizes_strides() ||
        impl->layout() != c10::kStrided || !impl->has_storage())
      return 0;
    const int64_t rank = impl->dim();
    if (rank > max_rank) return 0;
    c10::IntArrayRef sizes = impl->sizes(), strides = impl->strides();
    view->rank = static_cast<int>(rank);
    for (int64_t i = 0; i < rank; i++) {
      view->sizes[i] = sizes[i];
      view->strides[i] = strides[i];
    }
    view->scalar_type = static_cast<int>(c10::typeMetaToScalarType(impl->dtype()));
    const c10::Device device = impl->device();
    view->device_type = static_cast<int>(device.type());
    view->device_index = device.index();
    view->address = reinterpret_cast<uintptr_t>(impl->mutable_data());  // as Tensor.data_ptr() reads it
    return 1;
  } catch (...) {
    return 0;  // whatever torch refuses here, the Python path says why
  }
}

int scalar_type_of(PyObject* dtype) noexcept {
  if (scalar_types == nullptr) return -1;
  PyObject* code = PyDict_GetItemWithError(scalar_types, dtype);  // borrowed
  if (code == nullptr) {
    PyErr_Clear();
    return -1;
  }
  return static_cast<int>(PyLong_AsLong(code));
}

KdslTensorReader reader = {KDSL_TENSOR_READER_ABI, read_tensor, scalar_type_of};

// configure(tensor_type, parameter_type, probes, scalar_types): probes is a list of
// (tensor, its _cdata); the offset at which every probe holds its _cdata, and only that one.
PyObject* configure(PyObject*, PyObject* args) {
  PyObject *tensor, *parameter, *probes, *types;
  if (!PyArg_ParseTuple(args, "OOO!O!:configure", &tensor, &parameter, &PyList_Type, &probes, &PyDict_Type, &types))
    return nullptr;
  Py_ssize_t found = -1;
  for (Py_ssize_t offset = kFirstOffset; offset <= kLastOffset; offset += sizeof(void*)) {
    bool all = PyList_Size(probes) > 0;
    for (Py_ssize_t i = 0; all && i < PyList_Size(probes); i++) {
      PyObject* probe = PyList_GetItem(probes, i);
      PyObject* obj = PyTuple_Check(probe) && PyTuple_Size(probe) == 2 ? PyTuple_GetItem(probe, 0) : nullptr;
      if (obj == nullptr || (reinterpret_cast<PyObject*>(Py_TYPE(obj)) != tensor &&
                             reinterpret_cast<PyObject*>(Py_TYPE(obj)) != parameter)) {
        PyErr_SetString(PyExc_TypeError, "each probe must be (a torch.Tensor or nn.Parameter, its _cdata)");
        return nullptr;
      }
      void* expected = PyLong_AsVoidPtr(PyTuple_GetItem(probe, 1));
      if (PyErr_Occurred()) return nullptr;
      if (offset + static_cast<Py_ssize_t>(sizeof(void*)) > Py_TYPE(obj)->tp_basicsize) all = false;
      else all = *reinterpret_cast<void**>(reinterpret_cast<char*>(obj) + offset) == expected;
    }
    if (!all) continue;
    if (found >= 0) {
      PyErr_SetString(PyExc_RuntimeError, "more than one place in a tensor object holds its TensorImpl pointer");
      return nullptr;
    }
    found = offset;
  }
  if (found < 0) {
    PyErr_SetString(PyExc_RuntimeError, "no place in a tensor object holds its TensorImpl pointer");
    return nullptr;
  }
  Py_INCREF(tensor);
  Py_INCREF(parameter);
  Py_INCREF(types);
  Py_XSETREF(tensor_type, tensor);
  Py_XSETREF(parameter_type, parameter);
  Py_XSETREF(scalar_types, types);
  impl_offset = found;
  return PyLong_FromSsize_t(found);
}

PyObject* read(PyObject*, PyObject* obj) {
  KdslTensorView view;
  if (!read_tensor(obj, KDSL_MAX_RANK, &view)) Py_RETURN_NONE;
  PyObject* sizes = PyTuple_New(view.rank);
  PyObject* strides = PyTuple_New(view.rank);
  if (sizes == nullptr || strides == nullptr) {
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    return nullptr;
  }
  for (int i = 0; i < view.rank; i++) {
    PyTuple_SET_ITEM(sizes, i, PyLong_FromLongLong(view.sizes[i]));
    PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(view.strides[i]));
  }
  return Py_BuildValue("(KNNiii)", view.address, sizes, strides, view.scalar_type, view.device_type,
                       view.device_index);
}

PyObject* scalar_type(PyObject*, PyObject* dtype) { return PyLong_FromLong(scalar_type_of(dtype)); }

PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(tensor_type, parameter_type, probes, scalar_types): find the TensorImpl pointer; its offset."},
    {"read", read, METH_O, "read(tensor): (address, sizes, strides, scalar type, device type, device index), or None."},
    {"scalar_type", scalar_type, METH_O, "scalar_type(dtype): its c10::ScalarType as configured, else -1."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_torch_tensors", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__torch_tensors() {
  PyObject* m = PyModule_Create(&module);
  if (m == nullptr) return nullptr;
  PyObject* capsule = PyCapsule_New(&reader, KDSL_TENSOR_READER_CAPSULE, nullptr);
  if (capsule == nullptr || PyModule_AddObject(m, "READER", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
