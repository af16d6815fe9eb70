"""Host values of a `@jit` function: each one an MLIR value and the launcher's Python
expression for it, and the arithmetic that keeps the two side by side.

Compile-time operands fold in Python; a run-time one gives a `HostScalar` whose `expr`
the generated launcher evaluates (`x_shape[1]`, `(16 + (4 * x_shape[1]))`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsl.frontend import arith as A
from dsl.frontend.values import DSLTypeError, Scalar
from dsl.language.types import DType, boolean

PY_SYMBOL = dict(A.SYMBOLS)


@dataclass
class HostScalar(Scalar):
    """A run-time host scalar: MLIR value + the launcher's Python expression for it."""

    expr: str = ""
    nonneg: bool = False  # known >= 0 (shapes, device attributes): Python's // and % then agree with C's


def nonneg(v: Any) -> bool:
    """Whether a host value is known never to be negative."""
    if isinstance(v, HostScalar):
        return v.nonneg or (v.dtype.is_int and not v.dtype.is_signed)
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


_KEEPS_NONNEG = ("Add", "Mult", "FloorDiv", "Mod")


@dataclass
class HostTensor:
    name: str
    dtype: DType
    rank: int
    ptr: Any
    shape: list[HostScalar]
    strides: list[HostScalar]


PY_COMPARE = {
    "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b, "Lt": lambda a, b: a < b,
    "LtE": lambda a, b: a <= b, "Gt": lambda a, b: a > b, "GtE": lambda a, b: a >= b,
    "Is": lambda a, b: a is b, "IsNot": lambda a, b: a is not b, "In": lambda a, b: a in b,
    "NotIn": lambda a, b: a not in b,
}


def host_binary(op: str, a: Any, b: Any) -> Any:
    """`a <op> b` on host values: folded when both are Python values, else MLIR + expression."""
    result = A.binary(op, a, b)
    if not isinstance(result, Scalar):
        return result
    both = nonneg(a) and nonneg(b)
    if op in ("FloorDiv", "Mod") and result.dtype.is_int and not both:
        # the DSL's integer // and % truncate toward zero (the IR's divsi / remsi); Python's floor
        helper = "trunc_div" if op == "FloorDiv" else "trunc_mod"
        return HostScalar(result.value, result.dtype, f"rt.{helper}({py_expr(a)}, {py_expr(b)})")
    expr = f"({py_expr(a)} {PY_SYMBOL[op]} {py_expr(b)})"
    return HostScalar(result.value, result.dtype, expr, both and op in _KEEPS_NONNEG)


def truth_expr(v: Any) -> str:
    return py_expr(v) if isinstance(v, Scalar) and v.dtype.is_bool else f"({py_expr(v)} != 0)"


def host_logical(op: str, a: Any, b: Any) -> Any:
    """`a and b` / `a or b` where at least one side is a run-time value (both are evaluated)."""
    if not isinstance(a, Scalar):
        if (op == "And") != bool(a):
            return a
        return b
    if not isinstance(b, Scalar):
        return a if (op == "And") == bool(b) else b
    out = A.logical(op, a, b)
    word = "and" if op == "And" else "or"
    return HostScalar(out.value, boolean, f"({truth_expr(a)} {word} {truth_expr(b)})")


def py_expr(v: Any) -> str:
    if isinstance(v, HostScalar):
        return v.expr
    if isinstance(v, Scalar):
        raise DSLTypeError("this host value has no launcher expression")
    return repr(v)


def tuple_expr(items: list[Any]) -> str:
    return "(" + ", ".join(py_expr(i) for i in items) + ")"
