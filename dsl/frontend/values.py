"""What a Python name holds while a DSL function is traced.

Compile-time values stay plain Python objects (ints, floats, tuples, functions); run-time
values wrap an MLIR SSA value together with its DSL type. Keeping the DSL type beside the
MLIR value is what lets us tell i32 from u32 (MLIR integers are signless).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsl.language.types import DType


class DSLTypeError(Exception):
    """A type mistake in user code; the tracer turns it into DSL301 at the current node."""


class DSLUnsupported(Exception):
    """A construct the DSL cannot lower; the tracer turns it into DSL302 at the current node."""


@dataclass
class Scalar:
    """A run-time scalar: an MLIR value of `dtype`."""

    value: Any
    dtype: DType


@dataclass
class Vector:
    """A run-time short vector (`vector<NxT>`), e.g. from a 128-bit load."""

    value: Any
    dtype: DType
    width: int


@dataclass
class TensorRef:
    """A global-memory tensor argument: base pointer, dynamic shape, strides (last is 1)."""

    name: str
    ptr: Any
    dtype: DType
    rank: int
    shape: list[Scalar]
    strides: list[Scalar | int]
    address_space: int = 1


@dataclass
class SharedArray:
    """A shared-memory array with a static row-major shape."""

    ptr: Any
    dtype: DType
    shape: tuple[int, ...]

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


@dataclass
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
    """`t.shape` / `t.strides` of a tensor: indexable by compile-time ints."""

    items: list[Any]
    what: str


def is_runtime(value: Any) -> bool:
    return isinstance(value, Scalar | Vector)


def type_name(value: Any) -> str:
    """How a value's type reads in a diagnostic."""
    if isinstance(value, Scalar):
        return value.dtype.name
    if isinstance(value, Vector):
        return f"vector<{value.width}x{value.dtype.name}>"
    if isinstance(value, TensorRef):
        return f"Tensor[{value.dtype.name}, {value.rank}]"
    if isinstance(value, SharedArray):
        return f"shared {value.dtype.name}{list(value.shape)}"
    if isinstance(value, bool):
        return "Python bool"
    return f"Python {type(value).__name__}"
