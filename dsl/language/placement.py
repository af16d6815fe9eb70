"""Where each part of the kernel language may be used: device code, host code, or both.

A `@dsl.kernel` body is device code and a `@dsl.jit` body host code. The tracers refuse what
does not belong on their side and the editor offers only what does; both ask `placement`, so
the two never disagree. The rule is a default with a few exceptions: every object of a
`dsl.language` module is device code (an intrinsic added to `intrinsics.py`, or a module of
new ones beside it, needs no entry here), scalar types cast on both sides, the compile-time
helpers below run wherever they are traced, and `dsl.language.device` reads the launching
GPU from the host. Annotations and decorators (`Tensor`, `Constexpr`, `kernel`) are no code
of either side: `placement` answers None for them, as for anything outside the language.
"""

from __future__ import annotations

import types
from typing import Any

from dsl.language.types import DType

DEVICE = "device"  # inside @dsl.kernel bodies (and the helpers they inline)
HOST = "host"  # inside @dsl.jit bodies
BOTH = "both"

# Compile-time helpers (and min / max, which fold or emit either side's arithmetic).
_BOTH_NAMES = frozenset({"cdiv", "const_expr", "static_range", "warp_size", "min", "max", "minimum", "maximum"})
# Host facts of other language modules: `dsl.tensor_map` is built by the launcher.
_HOST_NAMES = frozenset({"tensor_map"})
_HOST_MODULES = frozenset({"dsl.language.device"})
# Annotations, decorators and the language's own machinery: no code of either side.
_NO_CODE_MODULES = frozenset({"dsl.language.types", "dsl.language.decorators", "dsl.language.call_site",
                              "dsl.language.placement", "dsl.language.autotune"})
_NO_CODE_NAMES = frozenset({"TensorMap"})  # a kernel parameter's annotation

# Members of a `Tensor` parameter, with where each one may be read.
TENSOR_MEMBERS: dict[str, tuple[str, str]] = {
    "shape": (BOTH, "The extents, one i32 per dimension: `x.shape[0]` (index with a compile-time int)."),
    "strides": (BOTH, "The strides in elements, one i32 per dimension; the innermost is 1."),
    "dtype": (BOTH, "The element type (a DSL scalar type), known at compile time."),
    "rank": (DEVICE, "The number of dimensions, a compile-time int."),
    "vload": (DEVICE, "`x.vload(i, width=4)`: a 128-bit (or narrower) vector load of `width` elements from `x[i]`."),
    "vstore": (DEVICE, "`x.vstore(i, v)`: stores the vector `v` to `x[i]`, `x[i + 1]`, ... in one access."),
    "view": (DEVICE, "`x.view(dsl.i16)`: the same bytes as elements of another type; the innermost extent and "
             "the outer strides scale by the ratio of the element sizes."),
}


def _module_of(obj: Any) -> str:
    if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType):
        return getattr(obj, "__module__", "") or ""
    return type(obj).__module__


def placement(obj: Any, name: str | None = None) -> str | None:
    """Where `obj` may be used: DEVICE, HOST or BOTH; None when it is no code of either side.

    `name` is the name the language exports it under (`warp_size` is a plain int, so only
    its name says what it is); without one, a function's own `__name__` is read."""
    if isinstance(obj, DType):
        return BOTH
    module = _module_of(obj)
    key = name or getattr(obj, "__name__", None)
    in_language = module.startswith("dsl.language.")
    if key in _BOTH_NAMES and (in_language or name is not None):
        return BOTH
    if not in_language or module in _NO_CODE_MODULES or key in _NO_CODE_NAMES:
        return None
    if module in _HOST_MODULES or key in _HOST_NAMES:
        return HOST
    return DEVICE


def allowed(where: str | None, side: str) -> bool:
    """Whether something placed `where` may be used in code of `side` (DEVICE or HOST)."""
    return where in (BOTH, side)
