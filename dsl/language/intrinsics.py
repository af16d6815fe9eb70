"""The DSL's built-in functions, as kernel authors see them.

These objects only exist to be named inside `@kernel` / `@jit` functions: the frontend
recognises them and emits IR (see `dsl/frontend/intrinsic_ops.py`). Calling one from plain
Python raises. Their docstrings are what the editor shows on hover.
"""

from __future__ import annotations

from typing import Any

warp_size = 32


def _outside(name: str) -> RuntimeError:
    return RuntimeError(f"dsl.{name} can only be used inside @dsl.kernel or @dsl.jit functions")


class Dim3:
    """A built-in 3-vector of thread coordinates; read `.x`, `.y` or `.z` (i32 values)."""

    def __init__(self, name: str, doc: str):
        self.name = name
        self.__doc__ = doc

    def __getattr__(self, axis: str) -> Any:
        if axis in ("x", "y", "z"):
            raise _outside(f"{self.name}.{axis}")
        raise AttributeError(axis)

    def __repr__(self) -> str:
        return f"dsl.{self.name}"


thread_idx = Dim3("thread_idx", "Index of the thread within its block (`threadIdx`), per axis, as i32.")
block_idx = Dim3("block_idx", "Index of the block within the grid (`blockIdx`), per axis, as i32.")
block_dim = Dim3(
    "block_dim",
    "Threads per block (`blockDim`), per axis, as i32; a constant when the block size is known.",
)
grid_dim = Dim3("grid_dim", "Blocks in the grid (`gridDim`), per axis, as i32.")


def lane_id() -> Any:
    """The thread's lane within its warp, 0..31 (i32)."""
    raise _outside("lane_id")


def barrier() -> None:
    """Waits until every thread of the block reaches this point (`__syncthreads`)."""
    raise _outside("barrier")


def shfl_xor(value: Any, mask: Any, width: int = 32) -> Any:
    """Butterfly shuffle: the value of lane `lane ^ mask` within groups of `width` lanes."""
    raise _outside("shfl_xor")


def shfl_down(value: Any, delta: Any, width: int = 32) -> Any:
    """The value of lane `lane + delta`; lanes past the group end keep their own value."""
    raise _outside("shfl_down")


def shfl_up(value: Any, delta: Any, width: int = 32) -> Any:
    """The value of lane `lane - delta`; lanes before the group start keep their own value."""
    raise _outside("shfl_up")


def shfl_idx(value: Any, lane: Any, width: int = 32) -> Any:
    """The value held by lane `lane` of the group (a broadcast when `lane` is uniform)."""
    raise _outside("shfl_idx")


def atomic_add(ref: Any, index: Any, value: Any) -> Any:
    """Atomically adds `value` to `ref[index]` (global tensor or shared array); returns the old value."""
    raise _outside("atomic_add")


def atomic_min(ref: Any, index: Any, value: Any) -> Any:
    """Atomic integer minimum on `ref[index]`; returns the old value."""
    raise _outside("atomic_min")


def atomic_max(ref: Any, index: Any, value: Any) -> Any:
    """Atomic integer maximum on `ref[index]`; returns the old value."""
    raise _outside("atomic_max")


def atomic_cas(ref: Any, index: Any, compare: Any, value: Any) -> Any:
    """Compare-and-swap on `ref[index]`: stores `value` if it held `compare`; returns the old value."""
    raise _outside("atomic_cas")


def _math(name: str, doc: str) -> Any:
    def intrinsic(*args: Any) -> Any:
        raise _outside(name)

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = doc
    return intrinsic


exp = _math("exp", "e**x, elementwise, for float scalars and vectors.")
log = _math("log", "Natural logarithm, for floats.")
sqrt = _math("sqrt", "Square root, for floats (f32: the hardware approximation, as CUDA fast math).")
rsqrt = _math("rsqrt", "1 / sqrt(x), for floats.")
sin = _math("sin", "Sine, for floats.")
cos = _math("cos", "Cosine, for floats.")
tanh = _math("tanh", "Hyperbolic tangent, for floats.")
floor = _math("floor", "Largest integral value not above x, for floats.")
ceil = _math("ceil", "Smallest integral value not below x, for floats.")
fma = _math("fma", "a * b + c with one rounding, for floats.")
minimum = _math("min", "The smaller of two values (ints or floats; NaN-propagating for floats).")
maximum = _math("max", "The larger of two values (ints or floats; NaN-propagating for floats).")
abs_ = _math("abs", "Absolute value, for ints and floats.")
min = minimum
max = maximum
abs = abs_


def printf(fmt: str, *args: Any) -> None:
    """Device-side printf (CUDA `vprintf` formats); arguments are DSL scalars or literals."""
    raise _outside("printf")


def cast(value: Any, dtype: Any) -> Any:
    """Converts a DSL value to `dtype` (also written `dtype(value)` or `value.to(dtype)`)."""
    raise _outside("cast")


def vector(*values: Any) -> Any:
    """Builds a vector value from scalars of one type, e.g. `dsl.vector(a, b, c, d)`."""
    raise _outside("vector")


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division `(a + b - 1) // b`; evaluated in Python when both are Python ints."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    raise _outside("cdiv")


def const_expr(value: Any) -> Any:
    """Marks a condition as compile-time: the `if` picks one branch while tracing."""
    return value


def static_range(*args: int) -> range:
    """Like `range`, but unrolled while tracing; its bounds must be compile-time ints."""
    return range(*args)


class SharedAllocator:
    """Allocates shared-memory arrays for one kernel, statically or from dynamic smem.

    Inside a kernel: `smem = dsl.SharedAllocator()` then `buf = smem.array(dsl.f32, (32, 33))`.
    With `dynamic=True` the arrays are carved from the launch's dynamic shared memory, and
    `launch(smem=None)` passes exactly the bytes the allocator used.
    """

    def __init__(self, dynamic: bool = False):
        raise _outside("SharedAllocator")

    def array(self, dtype: Any, shape: Any, align: int = 16) -> Any:
        """A shared array of `dtype` with a static `shape` (row-major)."""
        raise _outside("SharedAllocator.array")
