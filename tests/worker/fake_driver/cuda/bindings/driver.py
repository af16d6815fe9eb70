"""A stand-in for `cuda.bindings.driver` that reports one device and refuses the rest.

On a machine without a GPU, `dsl.run_function` stops at its GPU check, before the user's
module runs. Put first on a test worker's `PYTHONPATH` (never on the test process's), this
module lets a GPU run get past that check, so tests can watch what the module's own code
does inside a GPU run: its processes, its hangs, its limits. It initialises, answers the
questions a context is described by, and refuses every other call (`cuMemAlloc`, a launch)
with CUDA_ERROR_NOT_SUPPORTED; nothing it answers is a measurement.
"""

from __future__ import annotations

import enum
from typing import Any


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_SUPPORTED = 801


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


_ATTRIBUTES = {8: 48 * 1024, 16: 132, 75: 9, 76: 0, 97: 227 * 1024}
_OK = CUresult.CUDA_SUCCESS
_current: list[int] = [0]


def cuInit(flags: int) -> tuple[CUresult]:
    return (_OK,)


def cuDeviceGetCount() -> tuple[CUresult, int]:
    return _OK, 1


def cuDeviceGet(ordinal: int) -> tuple[CUresult, int]:
    return _OK, 0


def cuCtxGetCurrent() -> tuple[CUresult, int | None]:
    return _OK, _current[0] or None


def cuDevicePrimaryCtxRetain(device: int) -> tuple[CUresult, int]:
    return _OK, 0x1000


def cuCtxSetCurrent(handle: int) -> tuple[CUresult]:
    _current[0] = int(handle)
    return (_OK,)


def cuCtxGetDevice() -> tuple[CUresult, int]:
    return _OK, 0


def cuDeviceGetAttribute(attribute: Any, device: int) -> tuple[CUresult, int]:
    return _OK, _ATTRIBUTES.get(int(attribute), 0)


def cuDeviceGetName(length: int, device: int) -> tuple[CUresult, bytes]:
    return _OK, b"stand-in device\0"


def cuGetErrorName(code: Any) -> tuple[CUresult, bytes]:
    return _OK, CUresult(int(code)).name.encode()


def cuGetErrorString(code: Any) -> tuple[CUresult, bytes]:
    return _OK, b"refused by the stand-in driver"


def __getattr__(name: str) -> Any:
    if not name.startswith("cu"):
        raise AttributeError(name)
    return lambda *args, **kwargs: (CUresult.CUDA_ERROR_NOT_SUPPORTED,)
