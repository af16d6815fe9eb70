"""Array arguments without depending on any array library.

`describe(obj)` reads a GPU array's device pointer, shape, strides (in elements), dtype
and device from whatever it offers, fastest first:

1. PyTorch tensors and CuPy arrays, recognised by type only when their module is already
   imported (kdsl never imports them), read through their cheap attributes;
2. `__cuda_array_interface__` (CuPy, Numba, and plain objects);
3. `__dlpack__` / `__dlpack_device__` (JAX and any DLPack producer): the capsule is
   parsed with ctypes, for both `DLManagedTensor` and `DLManagedTensorVersioned`.

`check_tensor` then rejects, before any launch, what a kernel cannot take: host arrays,
arrays on another device, a dtype or rank other than the specialization's, negative sizes
or strides, a non-unit innermost stride, sizes or strides that do not fit the kernels'
32-bit indices, a pointer (or outer stride) not aligned for the kernel's accesses, and a
read-only array (`__cuda_array_interface__`'s `data[1]`, DLPack 1.0's read-only flag) that
a kernel writes. Whether the pointer really is GPU memory is the driver's to say
(`dsl.runtime.pointers`).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from dsl.diagnostics import ArgumentError
from dsl.language.types import SCALAR_TYPES, DType, dtype_from_foreign

INT32_MAX = 2**31 - 1


# --- DLPack structures ----------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]

# DLDeviceType values
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 10: "ROCm", 13: "CUDA managed"}
DLPACK_FLAG_BITMASK_READ_ONLY = 1
# DLDataTypeCode -> kind
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool"}


def _dl_dtype(code: int, bits: int, lanes: int) -> DType | None:
    if lanes != 1:
        return None
    kind = _DL_CODES.get(code)
    if kind == "bool":
        return SCALAR_TYPES["bool"]
    if kind == "bfloat":
        return SCALAR_TYPES["bf16"] if bits == 16 else None
    prefix = {"int": "i", "uint": "u", "float": "f"}.get(kind or "")
    return SCALAR_TYPES.get(f"{prefix}{bits}") if prefix else None


_TYPESTR = {"b1": "bool", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64", "u1": "u8", "u2": "u16",
            "u4": "u32", "u8": "u64", "f2": "f16", "f4": "f32", "f8": "f64"}


def _typestr_dtype(typestr: str, descr: Any = None) -> DType | None:
    if typestr[0] == ">":
        return None  # big-endian data
    name = _TYPESTR.get(typestr[1:])
    if typestr[1:] == "V2" and descr and "bfloat16" in str(descr):
        name = "bf16"
    return SCALAR_TYPES.get(name) if name else None


# --- describing arrays --------------------------------------------------------------------------

def _from_cai(obj: Any, cai: dict) -> tuple:
    shape = tuple(int(s) for s in cai["shape"])
    dtype = _typestr_dtype(cai["typestr"], cai.get("descr"))
    if dtype is None:
        raise ArgumentError(f"unsupported element type {cai['typestr']!r}")
    data = cai["data"]
    ptr = int(data[0] or 0)
    readonly = bool(data[1]) if len(data) > 1 else False
    strides_b = cai.get("strides")
    if strides_b is None:
        strides = _contiguous(shape)
    else:
        size = dtype.nbytes
        if any(s % size for s in strides_b):
            raise ArgumentError(f"strides {tuple(strides_b)} (bytes) are not multiples of the element size {size}")
        strides = tuple(int(s) // size for s in strides_b)
    return ptr, shape, strides, dtype, None, None, readonly


def _contiguous(shape: tuple) -> tuple:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(1, s)
    return tuple(reversed(strides))


def _from_dlpack(obj: Any) -> tuple:
    try:
        dev_type, dev_id = obj.__dlpack_device__()
    except Exception as err:
        raise ArgumentError(f"__dlpack_device__() failed: {err}") from None
    dev_type = int(dev_type)
    if dev_type not in (DL_CUDA, DL_CUDA_MANAGED):
        where = _DEVICE_NAMES.get(dev_type, f"device type {dev_type}")
        raise ArgumentError(f"is a {where} array; kernels need GPU (CUDA device) memory — move it to the GPU first")
    try:
        capsule = obj.__dlpack__(max_version=(1, 0))
    except TypeError:
        capsule = obj.__dlpack__()
    name = _capsule_get_name(capsule)
    readonly = False
    if name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, name))
        readonly = bool(managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    elif name == b"dltensor":
        managed = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, name))
    else:
        raise ArgumentError(f"__dlpack__() returned a capsule named {name!r}, not a DLPack tensor")
    t = managed.dl_tensor
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    strides = tuple(t.strides[i] for i in range(ndim)) if t.strides else _contiguous(shape)
    dtype = _dl_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    if dtype is None:
        raise ArgumentError(f"unsupported DLPack element type (code {t.dtype.code}, {t.dtype.bits} bits, "
                            f"{t.dtype.lanes} lanes)")
    ptr = (t.data or 0) + t.byte_offset
    # `capsule` is dropped unconsumed here: its destructor releases the producer's view, while
    # `obj` (still referenced by the caller) keeps the memory alive.
    return ptr, shape, strides, dtype, int(dev_id), None, readonly


_TORCH_DTYPES: dict[Any, DType | None] = {}


def _from_torch(t: Any) -> tuple:
    dev = t.get_device()
    if dev < 0:
        raise ArgumentError(f"is a CPU tensor (device {t.device}); kernels need GPU memory — use .cuda() first")
    dt = t.dtype
    dtype = _TORCH_DTYPES.get(dt, False)
    if dtype is False:
        dtype = _TORCH_DTYPES[dt] = dtype_from_foreign(dt)
    if dtype is None:
        raise ArgumentError(f"unsupported element type {dt}")
    return t.data_ptr(), tuple(t.shape), t.stride(), dtype, dev, "torch", False


def torch_fast(t: Any, dtype: str, rank: int, align: int = 1) -> tuple | None:
    """(ptr, shape, strides, device) of a contiguous CUDA torch tensor matching the
    specialization and `align`, or None when any check needs the full path (and its error
    message)."""
    dt = _TORCH_DTYPES.get(t.dtype)
    shape = t.shape
    # contiguous with at most 2**31 - 1 elements: unit innermost stride, every offset fits an i32
    if dt is None or dt.name != dtype or len(shape) != rank or not t.is_contiguous() or t.numel() > INT32_MAX:
        return None
    dev = t.get_device()
    if dev < 0:
        return None
    ptr, strides = t.data_ptr(), t.stride()
    if align > 1 and not aligned(ptr, shape, strides, dt.nbytes, align):
        return None
    return ptr, shape, strides, dev


def aligned(ptr: int, shape: Any, strides: Any, nbytes: int, align: int) -> bool:
    """Whether every row of the array starts `align`-byte aligned: the pointer and each outer
    stride (of a dimension with more than one element) are multiples of `align` bytes."""
    if ptr % align:
        return False
    return all(shape[k] <= 1 or not (strides[k] * nbytes) % align for k in range(len(shape) - 1))


_TORCH_BY_NAME: dict[str, Any] = {}


def torch_dtypes() -> dict[str, Any]:
    """kdsl element type name -> torch dtype object (empty until torch is imported)."""
    if not _TORCH_BY_NAME:
        torch = sys.modules.get("torch")
        if torch is None:
            return _TORCH_BY_NAME
        for name in ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
                     "uint8", "uint16", "uint32", "uint64", "bool"):
            obj = getattr(torch, name, None)
            ours = dtype_from_foreign(obj) if obj is not None else None
            if ours is not None:
                _TORCH_BY_NAME.setdefault(ours.name, obj)
    return _TORCH_BY_NAME


def _from_cupy(a: Any) -> tuple:
    dtype = dtype_from_foreign(a.dtype)
    if dtype is None:
        raise ArgumentError(f"unsupported element type {a.dtype}")
    size = a.itemsize
    return a.data.ptr, a.shape, tuple(s // size for s in a.strides), dtype, a.device.id, "cupy", False


_READERS: dict[type, Any] = {}


def _reader_for(tp: type) -> Any:
    reader = _READERS.get(tp)
    if reader is not None:
        return reader
    torch = sys.modules.get("torch")
    cupy = sys.modules.get("cupy")
    if torch is not None and issubclass(tp, torch.Tensor):
        reader = _from_torch
    elif cupy is not None and issubclass(tp, cupy.ndarray):
        reader = _from_cupy
    elif hasattr(tp, "__cuda_array_interface__"):
        reader = lambda obj: _from_cai(obj, obj.__cuda_array_interface__)  # noqa: E731
    elif hasattr(tp, "__dlpack__"):
        reader = _from_dlpack
    elif hasattr(tp, "__array_interface__") or hasattr(tp, "__array__"):
        reader = _host_array
    else:
        reader = _by_instance
    _READERS[tp] = reader
    return reader


def _by_instance(obj: Any) -> tuple:
    """Objects whose array protocols are instance attributes rather than on their type."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj)
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        return _host_array(obj)
    return _not_an_array(obj)


def _host_array(obj: Any) -> tuple:
    raise ArgumentError(f"is a host array ({type(obj).__module__}.{type(obj).__name__}); kernels need GPU memory "
                        "(a torch CUDA tensor, a CuPy array, or any DLPack CUDA array)")


def _not_an_array(obj: Any) -> tuple:
    raise ArgumentError(f"is a {type(obj).__name__}, not a GPU array (expected an object with __dlpack__ "
                        "or __cuda_array_interface__)")


def describe(obj: Any) -> tuple:
    """(ptr, shape, strides in elements, dtype, device ordinal or None, framework or None,
    read-only)."""
    return _reader_for(type(obj))(obj)


def check_strides(name: str, shape: Any, strides: Any, rank: int, contiguous: str) -> None:
    """What kdsl tensors need of their strides (`contiguous`: how the user's library makes a
    contiguous copy): none negative, the innermost one unit."""
    if any(st < 0 and s > 1 for s, st in zip(shape, strides)):
        raise ArgumentError(f"argument '{name}' has negative strides {tuple(strides)}; kdsl tensors need "
                            "non-negative strides (pass a copy in row-major order)")
    if rank and strides[-1] != 1 and shape[-1] > 1:
        raise ArgumentError(f"argument '{name}' has innermost stride {strides[-1]}; kdsl tensors need a unit "
                            f"innermost stride (pass a contiguous array, e.g. {contiguous})")


def check_tensor(obj: Any, name: str, dtype: str, rank: int, device: int | None = None,
                 access: tuple | None = None) -> tuple:
    """Validates `obj` against the specialization and the kernels' `access` to it (the
    launcher's TENSOR_ACCESS entry: alignment, the kernel parameter needing it, the one
    writing it); returns (ptr, shape, strides, device, framework)."""
    try:
        ptr, shape, strides, dt, dev, fw, readonly = _reader_for(type(obj))(obj)
    except ArgumentError as err:
        raise ArgumentError(f"argument '{name}' {err}") from None
    if dt.name != dtype:
        raise ArgumentError(f"argument '{name}' has element type {dt.name}, but this specialization takes "
                            f"Tensor[{dtype}, {rank}]")
    if len(shape) != rank:
        raise ArgumentError(f"argument '{name}' has rank {len(shape)} (shape {tuple(shape)}), but this "
                            f"specialization takes Tensor[{dtype}, {rank}]")
    if device is not None and dev is not None and dev != device:
        raise ArgumentError(f"argument '{name}' is on cuda:{dev}, but the launch runs on cuda:{device}")
    if any(s < 0 for s in shape):
        raise ArgumentError(f"argument '{name}' has a negative size in its shape {tuple(shape)}")
    check_strides(name, shape, strides, rank, ".contiguous()")
    for s in shape:
        if s > INT32_MAX:
            raise ArgumentError(f"argument '{name}' has a dimension of {s} elements; kernels index with "
                                f"32-bit integers (at most {INT32_MAX})")
    extent = 0
    for s, st in zip(shape, strides):
        if s > 1:
            extent += (s - 1) * abs(st)
    if extent > INT32_MAX:
        raise ArgumentError(f"argument '{name}' spans {extent + 1} elements (shape {tuple(shape)}, strides "
                            f"{tuple(strides)}); kernels index with 32-bit integers (at most {INT32_MAX})")
    if not ptr:
        numel = 1
        for s in shape:
            numel *= s
        if numel:
            raise ArgumentError(f"argument '{name}' has a null data pointer")
    elif all(shape):  # arrays with elements: what the kernels read and write
        _check_access(name, ptr, shape, strides, dt.nbytes, access, readonly)
    return ptr, tuple(shape), tuple(strides), dev, fw


def _check_access(name: str, ptr: int, shape: tuple, strides: tuple, nbytes: int, access: tuple | None,
                  readonly: bool) -> None:
    align, site, writer = access if access is not None else (nbytes, None, None)
    if readonly and writer is not None:
        raise ArgumentError(f"argument '{name}' is a read-only array, but kernel parameter '{writer}' writes it; "
                            "pass a writable array")
    align = max(align, nbytes)
    vector = site is not None and align > nbytes
    need = (f"kernel parameter '{site}' is accessed with {align}-byte vector loads/stores" if vector
            else f"its {nbytes}-byte elements need it")
    if ptr % align:
        raise ArgumentError(f"argument '{name}' starts at {ptr:#x}, which is {ptr & -ptr}-byte aligned, but {need}: "
                            f"its data pointer must be {align}-byte aligned"
                            + (" (a view such as x[1:] moves it; pass a copy)" if vector else ""))
    for k in range(len(shape) - 1):
        if shape[k] > 1 and (strides[k] * nbytes) % align:
            raise ArgumentError(f"argument '{name}' has stride {strides[k]} ({strides[k] * nbytes} bytes) in "
                                f"dimension {k}, but {need}: each row must start {align}-byte aligned, so outer "
                                f"strides must be multiples of {align // nbytes} elements")
