"""A vector's lanes as a Python sequence, and reductions across them.

A vector's width is always a compile-time number, so Python's ways of taking a sequence
apart work on it as on a tuple of scalars: `dsl.max(*v)`, `a, b, c, d = v`, `for e in v`
(unrolled), `[e * 2 for e in v]`, `len(v)`, `list(v)`. Each lane is one `vector.extract`;
the lanes nobody reads are removed by canonicalization.

Reductions (`v.sum()`, `v.max()`, `v.min()`, and `max(v)` / `min(v)`) combine lanes
pairwise by halves, lane i with lane i + w/2, so a `vector<8xf16>` sum is two packed
`add.f16x2`, one more, and a last scalar add, with a dependency chain of log2(w) adds
instead of w - 1. For integers and for min/max the order cannot change the result; for a
float sum it can (by rounding), and `sum(v)` keeps Python's left-to-right order from 0.
The arithmetic is ordinary `arith` ops, so the interpreter runs exactly what the GPU runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import ops
from dsl.frontend.values import DSLTypeError, Scalar, Vector, type_name

REDUCTIONS = ("sum", "max", "min")


def lanes(v: Vector) -> tuple[Scalar, ...]:
    """The lanes of `v` as scalars, in order."""
    return tuple(Scalar(ops.vector_extract(v.value, k), v.dtype) for k in range(v.width))


def pack(dtype: Any, scalars: list[Scalar]) -> Vector | Scalar:
    """Scalars of one type as a vector (one scalar stays a scalar)."""
    if len(scalars) == 1:
        return scalars[0]
    ty = ir.VectorType.get([len(scalars)], dtype.mlir_type())
    return Vector(ops.vector_from_elements(ty, [s.value for s in scalars]), dtype, len(scalars))


def _combine(kind: str) -> Callable[[Any, Any], Any]:
    if kind == "sum":
        return lambda a, b: A.binary("Add", a, b)
    return lambda a, b: A.min_max(kind, a, b)


def _check_reducible(v: Vector, kind: str, what: str) -> None:
    if v.dtype.is_fp8:
        raise DSLTypeError(f"{what} on {type_name(v)}; fp8 is a storage type: convert to f16, bf16 or f32 "
                           "first, e.g. v.to(dsl.f32)")
    if v.dtype.is_bool:
        raise DSLTypeError(f"{what} on {type_name(v)}; cast to an integer type first")


def reduce_lanes(v: Vector, kind: str, what: str) -> Scalar:
    """`kind` ("sum", "max" or "min") over the lanes of `v`, in `v`'s type (the promotion rules:
    lanes of one type need nothing); `what` names the call in messages."""
    _check_reducible(v, kind, what)
    combine = _combine(kind)
    scalars = list(lanes(v))
    return _reduce(v.dtype, scalars, combine)


def _reduce(dtype: Any, scalars: list[Scalar], combine: Callable[[Any, Any], Any]) -> Scalar:
    """Halving: an odd lane out is combined last; halves of two or more lanes are vector ops."""
    if len(scalars) == 1:
        return scalars[0]
    if len(scalars) % 2:
        return combine(_reduce(dtype, scalars[:-1], combine), scalars[-1])
    half = len(scalars) // 2
    merged = combine(pack(dtype, scalars[:half]), pack(dtype, scalars[half:]))
    return _reduce(dtype, list(lanes(merged)) if isinstance(merged, Vector) else [merged], combine)
