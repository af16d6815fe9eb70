"""TMA tensor maps for a launch: `cuTensorMapEncodeTiled`, from a tensor's pointer, shape
and strides (what the launcher's argument reader returns) and the box and swizzle the
kernel was compiled for.

A map is 128 opaque bytes that the launcher copies into the kernel's by-value parameter.
Encoding costs a few microseconds, so maps are kept per argument tuple (a bounded cache:
the same tensor launched again reuses its map, and the map only holds what the key holds).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from dsl.runtime.dlpack import ArgumentError
from dsl.runtime.driver import driver

_DATA_TYPES = {
    "u8": "UINT8", "i8": "UINT8", "f8e4m3": "UINT8", "f8e5m2": "UINT8", "u16": "UINT16", "i16": "UINT16",
    "u32": "UINT32", "i32": "INT32", "u64": "UINT64", "i64": "INT64", "f16": "FLOAT16", "bf16": "BFLOAT16",
    "f32": "FLOAT32", "f64": "FLOAT64",
}
_NBYTES = {"u8": 1, "i8": 1, "f8e4m3": 1, "f8e5m2": 1, "u16": 2, "i16": 2, "f16": 2, "bf16": 2, "u32": 4,
           "i32": 4, "f32": 4, "u64": 8, "i64": 8, "f64": 8}
_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
_CACHE_LIMIT = 4096

_cache: dict[tuple, bytes] = {}
_lock = threading.Lock()


def tensor_map(ptr: int, shape: Any, strides: Any, dtype: str, box: tuple[int, ...], swizzle: int) -> bytes:
    """The encoded `CUtensorMap` of the tensor at `ptr` (shape and element strides, outer
    first; the innermost stride is 1) for boxes of `box` elements."""
    rank = len(box)
    key = (ptr, tuple(shape[:rank]), tuple(strides[:rank - 1]), dtype, box, swizzle)
    found = _cache.get(key)
    if found is not None:
        return found
    encoded = _encode(*key)
    with _lock:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[key] = encoded
    return encoded


def _encode(ptr: int, shape: tuple, strides: tuple, dtype: str, box: tuple, swizzle: int) -> bytes:
    drv = driver()
    nbytes = _NBYTES[dtype]
    rank = len(box)
    byte_strides = [s * nbytes for s in reversed(strides)]  # dimensions 1.. of the map, inner first
    problem = _problem(ptr, shape, byte_strides, box)
    if problem:
        raise ArgumentError(f"a TMA tensor map of this tensor (shape {list(shape)}, {dtype}) {problem}")
    err, tmap = drv.cuTensorMapEncodeTiled(
        getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPES[dtype]}"), rank, ptr,
        [drv.cuuint64_t(d) for d in reversed(shape)], [drv.cuuint64_t(s) for s in byte_strides],
        [drv.cuuint32_t(b) for b in reversed(box)], [drv.cuuint32_t(1)] * rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(drv.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLES[swizzle]}"),
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise ArgumentError(f"cuTensorMapEncodeTiled refused the tensor (shape {list(shape)}, {dtype}, box "
                            f"{list(box)}, swizzle {swizzle}): {err.name}")
    return ctypes.string_at(tmap.getPtr(), 128)


def _problem(ptr: int, shape: tuple, byte_strides: list[int], box: tuple) -> str | None:
    """What of the tensor TMA cannot map (the driver would only say CUDA_ERROR_INVALID_VALUE)."""
    if ptr % 16:
        return f"needs a 16-byte aligned address, not {ptr:#x}"
    bad = [s for s in byte_strides if s % 16 or s >= 1 << 40]
    if bad:
        return f"needs strides that are multiples of 16 bytes, not {bad[0]} bytes"
    if any(d <= 0 or d >= 1 << 32 for d in shape):
        return "needs extents from 1 to 2**32 - 1"
    return None
