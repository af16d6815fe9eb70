"""What one thread holds at a stop: its values by Python name, as NumPy scalars and arrays.

The interpreter keeps one array per SSA value over a batch's lanes (`dsl.interpreter.values`);
a step marker says which slots hold which names (`dsl.interpreter.stepping.StepMarker`). Here
a lane's entry becomes the value a user reads: integers by their DSL type (a `u32` unsigned,
a bool as `True`), bf16 as the float it is, a vector as a tuple of its lanes, a shared array
as a NumPy array of its block's contents (un-swizzled), a tensor as the caller's array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dsl.interpreter.memory import Pointer, swizzled
from dsl.interpreter.stepping import NamedValue

_UNSIGNED = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
_STORAGE = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.uint16, "i8": np.int8,
            "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
            "u32": np.uint32, "u64": np.uint64, "bool": np.bool_, "f8e4m3": np.uint8, "f8e5m2": np.uint8}


def per_lane(raw: Any, lanes: int, width: int) -> np.ndarray:
    """An interpreter value as one entry per lane (uniform values broadcast)."""
    arr = np.asarray(raw)
    return np.broadcast_to(arr, (lanes, width) if width else (lanes,))


def as_user_type(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Interpreter storage -> the values the DSL type means (unsigned ints, bools)."""
    if dtype in _UNSIGNED:
        return arr.astype(arr.dtype).view(_UNSIGNED[dtype]) if arr.dtype.itemsize == np.dtype(
            _UNSIGNED[dtype]).itemsize else arr.astype(_UNSIGNED[dtype])
    if dtype == "bool":
        return arr.astype(bool)
    return arr


def lane_values(value: NamedValue, raw: Any, lanes: int) -> np.ndarray:
    """Every lane's value of one name (shape (lanes,) or (lanes, width))."""
    return as_user_type(np.ascontiguousarray(per_lane(raw, lanes, value.lane_type.width)), value.dtype)


def scalar(x: Any) -> Any:
    """A NumPy element as the Python-facing scalar a user reads (a vector: a tuple)."""
    if isinstance(x, np.ndarray):
        return tuple(scalar(e) for e in x)
    return x.item() if isinstance(x, np.bool_) else x


def format_value(x: Any) -> str:
    """`3`, `1.5`, `True`, `(1.0, 2.0)`: as Python would print the value."""
    if isinstance(x, tuple):
        return "(" + ", ".join(format_value(e) for e in x) + (",)" if len(x) == 1 else ")")
    if isinstance(x, np.floating):
        return str(x) if np.isfinite(x) else {True: "nan"}.get(bool(np.isnan(x)), "inf" if x > 0 else "-inf")
    if isinstance(x, np.integer):
        return str(int(x))
    return repr(x)


def shared_contents(value: NamedValue, raw: Any, lane: int, lane_base: Any) -> np.ndarray:
    """The shared array `value` names, as the block of `lane` holds it now (a copy, un-swizzled)."""
    assert value.shared is not None
    dtype, shape, swizzle = value.shared
    pointer = raw
    if not isinstance(pointer, Pointer):
        raise TypeError("not a shared array")
    storage = np.dtype(_STORAGE.get(dtype, np.uint8))
    offset = int(np.broadcast_to(np.asarray(pointer.offset), (lane + 1,))[lane])
    base = int(lane_base[lane]) if lane_base is not None else 0
    region = pointer.region
    count = math.prod(shape) if shape else 1
    logical = np.arange(count * storage.itemsize, dtype=np.int64) + region.address + offset
    physical = (swizzled(logical, swizzle) if swizzle else logical) - region.address + base
    data = region.data[np.clip(physical, 0, len(region.data) - 1)].copy().view(storage)
    if dtype == "bf16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return data.reshape(shape or (1,))


def tensor_contents(raw: Any) -> np.ndarray | None:
    """The caller's array a tensor parameter points into, or None."""
    if isinstance(raw, Pointer) and raw.region.array is not None:
        return np.asarray(raw.region.array)
    return None
