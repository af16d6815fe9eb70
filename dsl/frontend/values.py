"""What a Python name holds while a DSL function is traced.

Compile-time values stay plain Python objects (ints, floats, tuples, functions); run-time
values wrap an MLIR SSA value together with its DSL type. Keeping the DSL type beside the
MLIR value is what lets us tell i32 from u32 (MLIR integers are signless).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from dsl.language.types import DType


class DSLTypeError(Exception):
    """A type mistake in user code; the tracer turns it into DSL301 at the current node."""


class DSLTargetError(DSLTypeError):
    """An instruction the target lacks but `target` has; the tracer reports it as DSL207 with a
    fix that pins the kernel to `target`."""

    def __init__(self, message: str, target: str):
        super().__init__(message)
        self.target = target


class DSLUnsupported(Exception):
    """A construct the DSL cannot lower; the tracer turns it into DSL302 at the current node."""


@dataclass(repr=False)
class Scalar:
    """A run-time scalar: an MLIR value of `dtype`."""

    value: Any
    dtype: DType


@dataclass(repr=False)
class Vector:
    """A run-time short vector (`vector<NxT>`), e.g. from a 128-bit load."""

    value: Any
    dtype: DType
    width: int


@dataclass(repr=False)
class TensorRef:
    """A global-memory tensor argument: base pointer, dynamic shape, strides (last is 1)."""

    name: str
    ptr: Any
    dtype: DType
    rank: int
    shape: list[Scalar]
    strides: list[Scalar | int]
    address_space: int = 1


@dataclass(repr=False)
class SharedArray:
    """A shared-memory array with a static row-major shape; `swizzle` (bytes: 0, 32, 64 or
    128) permutes the 16-byte chunks of each row as TMA and wgmma expect (see `memory.address`)."""

    ptr: Any
    dtype: DType
    shape: tuple[int, ...]
    swizzle: int = 0
    align: int = 16

    @property
    def strides(self) -> list[int]:
        out, acc = [], 1
        for dim in reversed(self.shape):
            out.append(acc)
            acc *= dim
        return list(reversed(out))

    @property
    def nbytes(self) -> int:
        n = self.dtype.nbytes
        for d in self.shape:
            n *= d
        return n


@dataclass(repr=False)
class TensorMapRef:
    """A TMA tensor map kernel parameter: a pointer to the 128-byte `CUtensorMap` in parameter
    space, and the box and swizzle it was encoded with (compile-time facts of the launch)."""

    name: str
    ptr: Any
    dtype: DType
    rank: int
    box: tuple[int, ...]
    swizzle: int


@dataclass(repr=False)
class SharedAllocatorState:
    """The one shared-memory allocator of a kernel: static or carving dynamic smem."""

    dynamic: bool
    static_bytes: int = 0
    dynamic_bytes: int = 0
    node: Any = None  # the allocator's construction, for diagnostics


@dataclass
class BoundMethod:
    """`value.method` on a DSL value (e.g. `x.to(f32)`, `t.vload(i, 4)`), called later."""

    name: str
    receiver: Any


@dataclass
class ShapeView:
    """`t.shape` / `t.strides` of a tensor: indexable by compile-time ints; its length is the
    rank, and it unpacks as a tuple does (`M, K = a.shape`)."""

    items: list[Any]
    what: str

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Any:
        return iter(self.items)


def is_runtime(value: Any) -> bool:
    return isinstance(value, Scalar | Vector)


class _ReadableRepr:
    """Messages may format run-time values with `{x!r}` or inside containers: they read as
    the user's types (`<run-time i32>`), never as MLIR objects."""

    def __repr__(self) -> str:
        return f"<run-time {type_name(self)}>" if isinstance(self, Scalar | Vector) else f"<{type_name(self)}>"


for _cls in (Scalar, Vector, TensorRef, SharedArray, TensorMapRef, SharedAllocatorState):
    _cls.__repr__ = _ReadableRepr.__repr__  # type: ignore[method-assign]


def _operator(op: str, reflected: bool = False) -> Any:
    def method(self: Any, other: Any) -> Any:
        from dsl.frontend import arith

        return arith.binary(op, other, self) if reflected else arith.binary(op, self, other)

    return method


# Python code the tracer runs at compile time (`sum(acc)`, `functools.reduce`) can combine
# run-time values with the DSL's own rules; comparisons stay with the tracer.
for _cls in (Scalar, Vector):
    for _name, _op in (("add", "Add"), ("sub", "Sub"), ("mul", "Mult"), ("truediv", "Div"),
                       ("floordiv", "FloorDiv"), ("mod", "Mod")):
        setattr(_cls, f"__{_name}__", _operator(_op))
        setattr(_cls, f"__r{_name}__", _operator(_op, reflected=True))


def type_name(value: Any) -> str:
    """How a value's type reads in a diagnostic."""
    if isinstance(value, Scalar):
        return value.dtype.name
    if isinstance(value, Vector):
        return f"vector<{value.width}x{value.dtype.name}>"
    if isinstance(value, TensorRef):
        return f"Tensor[{value.dtype.name}, {value.rank}]"
    if isinstance(value, SharedArray):
        swizzled = f" (swizzle={value.swizzle})" if value.swizzle else ""
        return f"shared {value.dtype.name}{list(value.shape)}{swizzled}"
    if isinstance(value, TensorMapRef):
        return f"TensorMap[{value.dtype.name}, box={list(value.box)}]"
    if isinstance(value, SharedAllocatorState):
        return "SharedAllocator"
    if isinstance(value, ShapeView):
        return value.what
    from dsl.frontend.host_values import HostTensor  # host values build on these: imported late

    if isinstance(value, HostTensor):
        return f"Tensor[{value.dtype.name}, {value.rank}]"
    if isinstance(value, bool):
        return "Python bool"
    return f"Python {type(value).__name__}"


def missing_attribute(node: ast.Attribute, base: Any, attr: str) -> str:
    """The message for `base.attr` that does not exist, naming the module as the code spells it
    (`dsl` has no attribute 'shfl'; did you mean 'shfl_xor', ...?), not "Python module"."""
    import difflib
    import types as pytypes

    if isinstance(base, pytypes.ModuleType):
        spelled = ast.unparse(node.value) if isinstance(node.value, ast.Name | ast.Attribute) else base.__name__
        public = [name for name in dir(base) if not name.startswith("_")]
        close = difflib.get_close_matches(attr, public, n=4, cutoff=0.6)
        close += [name for name in public if name.startswith(attr) and name not in close][: 4 - len(close)]
        hint = f"; did you mean {', '.join(repr(f'{spelled}.{name}') for name in close)}?" if close else ""
        return f"module '{spelled}' has no attribute '{attr}'{hint}"
    return f"{type_name(base)} has no attribute '{attr}'"
