"""The GPUs of the host, and which one a call runs on: the one its array arguments are on.

What GPUs there are (`visible_archs`, `current_arch`) is read from libcuda directly through
ctypes, in well under a millisecond and without cuda-bindings (~15 ms to import), so that a
first call knows what to compile for while the bindings load during ptxas.

A launch runs on one GPU, so every array of a call must be on the same one. Where an array
is comes from the array itself, without a driver call: a PyTorch tensor's `get_device()`,
a CuPy array's `device.id`, DLPack's `__dlpack_device__()` ((kDLCUDA = 2, ordinal)). An
`__cuda_array_interface__` object does not say; the driver is asked about its pointer
(`pointers.py`) only where a call's device decides something before the launcher runs (the
architecture a call compiles for on a host of mixed GPUs). Two arrays on different devices,
a host array next to a GPU one included, are an `ArgumentError` naming both, raised before
anything is compiled or launched.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterable
from typing import Any

from dsl.diagnostics import ArgumentError

# DLDeviceType -> how a message names memory that is not on a GPU
_HOST_KINDS = {1: "cpu", 3: "cuda host (pinned)", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm"}
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13

Where = int | str  # a CUDA device ordinal, or the kind of memory that is not a GPU's ("cpu")


def device_of(value: Any) -> Where | None:
    """Where array `value` lives, asked of the array alone: a CUDA ordinal, the kind of host
    memory ("cpu"), or None where it does not say (managed memory, an
    `__cuda_array_interface__` object, not an array)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        ordinal = value.get_device()
        return ordinal if ordinal >= 0 else str(value.device.type)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(value, cupy.ndarray):
        return int(value.device.id)
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is None or isinstance(value, type):
        return None
    try:
        kind, ordinal = dlpack_device()
        kind, ordinal = int(kind), int(ordinal)
    except Exception:  # the array's own checks say what is wrong with it
        return None
    if kind == _DL_CUDA:
        return ordinal
    if kind == _DL_CUDA_MANAGED:
        return None
    return _HOST_KINDS.get(kind, f"device type {kind}")


def where(device: Where) -> str:
    return f"cuda:{device}" if isinstance(device, int) else device


def mixed_devices(first: tuple[str, Where], second: tuple[str, Where]) -> ArgumentError:
    """The error for arguments `first` and `second` (name, device) on different devices."""
    (a, da), (b, db) = first, second
    if isinstance(da, str) != isinstance(db, str):  # host memory beside GPU memory: the host array is wrong
        (host, kind), (gpu, ordinal) = (second, first) if isinstance(db, str) else (first, second)
        return ArgumentError(f"argument '{host}' is in host memory ({kind}) while '{gpu}' is on {where(ordinal)}; "
                             f"kernels need GPU memory: move '{host}' to {where(ordinal)} first (e.g. .cuda())")
    return ArgumentError(f"arguments '{a}' and '{b}' are on different devices ({where(da)} and {where(db)}); "
                         f"a launch runs on one GPU: put every array argument on the same device "
                         f"(e.g. copy '{b}' to {where(da)})")


def mixed_error(named: Iterable[tuple[str, Any]]) -> ArgumentError | None:
    """The error for the first two of the (name, value) arrays that are on different devices;
    None when they all agree (or do not say)."""
    try:
        common_device(named)
    except ArgumentError as err:
        return err
    return None


def common_device(named: Iterable[tuple[str, Any]], *, ask_driver: bool = False) -> int | None:
    """The CUDA device the (name, value) arrays are on: None when none says (or all are host
    arrays, which the argument checks refuse). Arrays on different devices raise ArgumentError.
    `ask_driver`: an `__cuda_array_interface__` array's device is asked of the driver."""
    first: tuple[str, Where] | None = None
    for name, value in named:
        device = device_of(value)
        if device is None and ask_driver:
            device = _interface_device(value)
        if device is None:
            continue
        if first is None:
            first = (name, device)
        elif device != first[1]:
            raise mixed_devices(first, (name, device))
    return first[1] if first is not None and isinstance(first[1], int) else None


def _interface_device(value: Any) -> int | None:
    """The device of an `__cuda_array_interface__` array's memory, as the driver says."""
    try:
        cai = getattr(value, "__cuda_array_interface__", None)
        ptr = int(cai["data"][0] or 0) if isinstance(cai, dict) else 0
    except Exception:
        return None
    if not ptr:
        return None
    from dsl.runtime.pointers import ALLOCATIONS

    return ALLOCATIONS.info(ptr).device


def stream_device(stream: Any) -> int | None:
    """The GPU a PyTorch or CuPy stream object belongs to (None for a raw handle or another
    kind: asking the driver would cost a call per launch)."""
    device = getattr(stream, "device", None)  # torch.cuda.Stream
    if device is not None and getattr(device, "type", None) == "cuda" and isinstance(device.index, int):
        return device.index
    device_id = getattr(stream, "device_id", None)  # cupy.cuda.Stream
    return device_id if isinstance(device_id, int) and not isinstance(device_id, bool) else None


def call_arguments(names: list[str], args: tuple, kwargs: dict) -> Iterable[tuple[str, Any]]:
    """A call's arguments as (parameter name, value) pairs."""
    for i, value in enumerate(args):
        yield (names[i] if i < len(names) else f"#{i}"), value
    yield from kwargs.items()


# --- what GPUs there are ------------------------------------------------------------------------

_COMPUTE_CAPABILITY_MAJOR, _COMPUTE_CAPABILITY_MINOR = 75, 76  # CUdevice_attribute values
_libcuda: Any = None
_archs: tuple[str, ...] | None = None


def _lib() -> Any:
    """libcuda through ctypes, initialised; None where it cannot be loaded or initialised."""
    global _libcuda
    if _libcuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            _libcuda = False
            return None
        _libcuda = lib if not lib.cuInit(0) else False
    return _libcuda or None


def _arch_of(lib: Any, dev: ctypes.c_int) -> str | None:
    major, minor = ctypes.c_int(), ctypes.c_int()
    if (lib.cuDeviceGetAttribute(ctypes.byref(major), _COMPUTE_CAPABILITY_MAJOR, dev)
            or lib.cuDeviceGetAttribute(ctypes.byref(minor), _COMPUTE_CAPABILITY_MINOR, dev)):
        return None
    return f"sm_{major.value}{minor.value}"


def current_arch() -> str | None:
    """The architecture (`sm_90`) of the current context's device (device 0 when no context
    is current), read from libcuda directly in well under a millisecond; None if that fails.

    A first call needs only this before it compiles, so importing cuda-bindings (~15 ms) can
    wait for the time ptxas runs. Failures are not reported here: `current_context()`, which
    every launch goes through, reports them.
    """
    lib = _lib()
    if lib is None:
        return None
    ctx, dev = ctypes.c_void_p(), ctypes.c_int(0)
    if lib.cuCtxGetCurrent(ctypes.byref(ctx)):
        return None
    if lib.cuCtxGetDevice(ctypes.byref(dev)) if ctx.value else lib.cuDeviceGet(ctypes.byref(dev), 0):
        return None
    return _arch_of(lib, dev)


def visible_archs() -> tuple[str, ...]:
    """The architecture of every visible GPU, by ordinal (read once from libcuda, as
    `current_arch` is); empty where libcuda cannot say."""
    global _archs
    if _archs is None:
        lib = _lib()
        count, archs = ctypes.c_int(0), []
        if lib is not None and not lib.cuDeviceGetCount(ctypes.byref(count)):
            for ordinal in range(count.value):
                dev = ctypes.c_int(0)
                arch = _arch_of(lib, dev) if not lib.cuDeviceGet(ctypes.byref(dev), ordinal) else None
                if arch is None:
                    archs = []
                    break
                archs.append(arch)
        _archs = tuple(archs)
    return _archs


def device_arch(device: int | None) -> str | None:
    """The architecture of GPU `device` (None: the current context's, as `current_arch`)."""
    if device is None:
        return current_arch()
    archs = visible_archs()
    return archs[device] if 0 <= device < len(archs) else None


_mixed: tuple[tuple[str, ...] | None, bool] = (None, False)  # (the archs it was computed from, answer)


def mixed_architectures() -> bool:
    """Whether the visible GPUs are of more than one architecture (an sm_80 next to an sm_90):
    only then does a specialization's key need the architecture of its arguments' device."""
    global _mixed
    archs = visible_archs()
    if _mixed[0] is not archs:
        _mixed = (archs, len(set(archs)) > 1)
    return _mixed[1]
