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
    """Butterfly shuffle: the value of lane `lane ^ mask` within groups of `width` lanes.

    Any scalar (bool, 8- to 64-bit ints and floats, fp8) or vector moves in one call: it is
    split into 32-bit words, shuffled word by word and joined again.
    """
    raise _outside("shfl_xor")


def shfl_down(value: Any, delta: Any, width: int = 32) -> Any:
    """The value of lane `lane + delta`; lanes past the group end keep their own value (any type)."""
    raise _outside("shfl_down")


def shfl_up(value: Any, delta: Any, width: int = 32) -> Any:
    """The value of lane `lane - delta`; lanes before the group start keep their own value (any type)."""
    raise _outside("shfl_up")


def shfl_idx(value: Any, lane: Any, width: int = 32) -> Any:
    """The value held by lane `lane` of the group (a broadcast when `lane` is uniform; any type)."""
    raise _outside("shfl_idx")


def ballot(predicate: Any, mask: Any = 0xFFFFFFFF) -> Any:
    """The u32 mask whose bit k is set when lane k of `mask` has `predicate` true (`vote.sync.ballot`).

    Every lane named in `mask` must reach the call.
    """
    raise _outside("ballot")


def any_(predicate: Any, mask: Any = 0xFFFFFFFF) -> Any:
    """Whether `predicate` is true on any lane of `mask` (a bool; `vote.sync.any`)."""
    raise _outside("any")


def all_(predicate: Any, mask: Any = 0xFFFFFFFF) -> Any:
    """Whether `predicate` is true on every lane of `mask` (a bool; `vote.sync.all`)."""
    raise _outside("all")


def match_any(value: Any, mask: Any = 0xFFFFFFFF) -> Any:
    """The u32 mask of the lanes of `mask` whose `value` has the same bits as this lane's
    (`match.any.sync`; floats compare bits, so -0.0 and 0.0 differ). Scalars up to 64 bits."""
    raise _outside("match_any")


def warp_reduce(value: Any, op: str, width: int = 32) -> Any:
    """Reduces `value` over groups of `width` lanes; every lane of a group gets the result.

    `op` is "sum", "max", "min", "and", "or" or "xor". Floats use butterfly shuffles
    (max/min propagate NaN); i32 and u32 over a whole warp use `redux.sync`, bool and/or a
    warp vote. Vectors reduce lane by lane.
    """
    raise _outside("warp_reduce")


def atomic_add(ref: Any, index: Any, value: Any, order: str = "relaxed", scope: str = "device") -> Any:
    """Atomically adds `value` to `ref[index]` (global tensor or shared array); returns the old value.

    Ints (32/64-bit), f32, f64, f16 and bf16 (native on sm_90), and packed pairs: a
    `vector<2xf16>` / `vector<2xbf16>` at an even index adds two halves in one instruction.
    `order`: "relaxed", "acquire", "release", "acq_rel"; `scope`: "block", "cluster",
    "device", "system".
    """
    raise _outside("atomic_add")


def atomic_min(ref: Any, index: Any, value: Any, order: str = "relaxed", scope: str = "device") -> Any:
    """Atomic minimum on `ref[index]` (32/64-bit ints, f32, f64); returns the old value.

    Floats are exact (one integer atomic on their bits); -0.0 < +0.0, and a NaN argument
    sticks (NaN propagates). `order` and `scope` as for `atomic_add`.
    """
    raise _outside("atomic_min")


def atomic_max(ref: Any, index: Any, value: Any, order: str = "relaxed", scope: str = "device") -> Any:
    """Atomic maximum on `ref[index]` (32/64-bit ints, f32, f64); returns the old value.

    Floats are exact (one integer atomic on their bits); -0.0 < +0.0, and a NaN argument
    sticks (NaN propagates, as in torch.amax). `order` and `scope` as for `atomic_add`.
    """
    raise _outside("atomic_max")


def atomic_cas(ref: Any, index: Any, compare: Any, value: Any, order: str = "relaxed",
               scope: str = "device") -> Any:
    """Compare-and-swap on `ref[index]`: stores `value` if it held `compare`; returns the old value.

    32- and 64-bit ints and floats (floats compare bits). `order` and `scope` as for `atomic_add`.
    """
    raise _outside("atomic_cas")


def _math(name: str, doc: str) -> Any:
    def intrinsic(*args: Any) -> Any:
        raise _outside(name)

    intrinsic.__name__ = intrinsic.__qualname__ = name
    intrinsic.__doc__ = doc
    return intrinsic


exp = _math("exp", "e**x, elementwise, for float scalars and vectors.")
log = _math("log", "Natural logarithm, for floats.")
sqrt = _math("sqrt", "Square root, for floats (f32: IEEE, correctly rounded; the approximation with fastmath=True).")
rsqrt = _math("rsqrt", "1 / sqrt(x), for floats.")
exp2 = _math("exp2", "2**x, for floats (f32: the hardware ex2, 2 ulp).")
log2 = _math("log2", "Base-2 logarithm, for floats.")
log1p = _math("log1p", "log(1 + x), accurate for small x, for floats.")
expm1 = _math("expm1", "exp(x) - 1, accurate for small x, for floats.")
erf = _math("erf", "The error function, for floats (libdevice; exact GELU is 0.5 * x * (1 + erf(x / sqrt(2)))).")
erfc = _math("erfc", "1 - erf(x), accurate where erf(x) is near 1, for floats.")
pow = _math("pow", "x**y for floats (libdevice `pow`); `x ** n` with a small constant int n multiplies.")
atan2 = _math("atan2", "The angle of the point (x, y): atan2(y, x), for floats.")
round = _math("round", "Nearest integral value, ties to even (like Python's round and torch.round), for floats.")
trunc = _math("trunc", "The integral part (rounds toward zero), for floats.")
isnan = _math("isnan", "Whether x is a NaN: a bool (bool vector for vectors).")
isinf = _math("isinf", "Whether x is +inf or -inf: a bool (bool vector for vectors).")
sin = _math("sin", "Sine, for floats.")
cos = _math("cos", "Cosine, for floats.")
tanh = _math("tanh", "Hyperbolic tangent, for floats.")
floor = _math("floor", "Largest integral value not above x, for floats.")
ceil = _math("ceil", "Smallest integral value not below x, for floats.")
fma = _math("fma", "a * b + c with one rounding, for floats.")
minimum = _math("min", "The smallest of two or more values (ints or floats; NaN-propagating for floats); "
                "of one vector, its smallest lane (`v.min()`).")
maximum = _math("max", "The largest of two or more values (ints or floats; NaN-propagating for floats); "
                "of one vector, its largest lane (`v.max()`).")
abs_ = _math("abs", "Absolute value, for ints and floats.")
min = minimum
max = maximum
abs = abs_
any = any_
all = all_
any_.__name__ = any_.__qualname__ = "any"
all_.__name__ = all_.__qualname__ = "all"


def printf(fmt: str, *args: Any) -> None:
    """Device-side printf (CUDA `vprintf` formats); arguments are DSL scalars or literals."""
    raise _outside("printf")


def cast(value: Any, dtype: Any) -> Any:
    """Converts a DSL value to `dtype` (also written `dtype(value)` or `value.to(dtype)`).

    To `f8e4m3` / `f8e5m2` (sm_89+): rounds to nearest even and saturates (+-448 / +-57344
    for larger values and infinities; NaN stays NaN). From fp8: exact.
    """
    raise _outside("cast")


def bitcast(value: Any, dtype: Any) -> Any:
    """The same bits read as `dtype`: a scalar when the widths match, else a vector of `dtype`.

    `dsl.bitcast(x, dsl.u32)` of an f32 gives its bits; of a `vector<2xf16>` one u32; an
    f64 to `dsl.f16` gives a `vector<4xf16>`.
    """
    raise _outside("bitcast")


def vector(*values: Any) -> Any:
    """Builds a vector value from scalars of one type, e.g. `dsl.vector(a, b, c, d)`; any
    width (register fragments), while loads and stores move at most 128 bits."""
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

    def array(self, dtype: Any, shape: Any, align: int = 16, swizzle: int = 0) -> Any:
        """A shared array of `dtype` with a static `shape` (row-major), `align`-byte aligned.

        `swizzle=128` (or 64, 32) lays each row's 16-byte chunks out as TMA writes and wgmma
        reads them (see `dsl.language.tensor_cores`); indexing still reads as the plain array.
        """
        raise _outside("SharedAllocator.array")
