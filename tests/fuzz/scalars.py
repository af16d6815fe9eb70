"""The reference's scalar values (`Val`) and their operators, by the README's rules.

Types and promotion come from `dsl.language.types` (the rule table the compiler uses too);
everything a value does is written out here again, never taken from the tracer or the
interpreter:

- a Python literal beside a value takes the value's type; an integer literal must fit the
  bits (`-2**(b-1) <= lit < 2**b`: 255 beside an i8 is -1), a float one beside an integer is
  refused, beside a float it is rounded to nearest even in that type;
- integers of one signedness widen to the wider, floats to the wider (f16 with bf16 gives
  f32); mixed signedness, integer with float, bool arithmetic and `/` on integers are refused
  (`Refused`, the compiler's DSL301), and so are `//`, shifts, `~` and bit operations on floats;
- integers wrap at the width; `//` and `%` truncate toward zero, `INT_MIN // -1` is `INT_MIN`
  and `INT_MIN % -1` is 0 (two's complement wraps); a shift amount is read unsigned, and one
  of the width or more gives 0 (`<<`, unsigned `>>`) or the sign (`>>` of a signed value), as
  PTX's shifts clamp; a division by zero is a `Fault`;
- floats are IEEE (`floats.py`): `+ - * /`, `dsl.fma`, `dsl.sqrt` correctly rounded in the
  value's type; `dsl.min` / `max` propagate NaN and order -0.0 below +0.0; comparisons are
  ordered (`!=` is true on a NaN); conversions round to nearest even, float to integer
  truncates, saturates and gives 0 for NaN; to bool is `!= 0`.

What the reference does not model raises `Unmodelled` (not a refusal: the harness skips it).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

from dsl.language import types as T
from dsl.language.types import DType, promote
from tests.fuzz import floats as F


class Refused(Exception):
    """The program breaks a typing rule: the compiler must refuse it (DSL301)."""


class Fault(Exception):
    """What the GPU would fault on or leave undefined: an out-of-bounds access, a division by
    zero, a barrier or warp operation in divergent code."""


class Unmodelled(Exception):
    """Something the reference does not model; the program is skipped, not judged."""


def fmt(t: DType) -> F.Format:
    return F.FORMATS[t.name]


def wrap(t: DType, value: int) -> int:
    """`value` reduced to `t`'s width: the canonical Python int (signed or not) for its bits."""
    if t.is_bool:
        return value & 1
    value &= (1 << t.bits) - 1
    if t.is_signed and value >= 1 << (t.bits - 1):
        value -= 1 << t.bits
    return value


def unsigned(t: DType, value: int) -> int:
    return value & ((1 << t.bits) - 1)


def is_literal(x: Any) -> bool:
    return isinstance(x, bool | int | float)


def _check_type(t: DType) -> None:
    if t.kind == "index" or t.is_fp8:
        raise Unmodelled(f"values of type {t.name}")


def literal(value: Any, like: DType) -> Val:
    """A Python literal beside a `like` value (promotion rule 2)."""
    _check_type(like)
    if like.is_float:
        exact = F.round_int(fmt(like), int(value)) if not isinstance(value, float) else None
        return Val(like, exact if exact is not None else F.round_float(fmt(like), value))
    if isinstance(value, float):
        raise Refused(f"float literal {value} beside {like.name}")
    if like.is_bool:
        return Val(like, 1 if value else 0)
    value = int(value)
    if not -(2 ** (like.bits - 1)) <= value <= 2**like.bits - 1:
        raise Refused(f"literal {value} does not fit in {like.name}")
    return Val(like, wrap(like, value))


def common(a: Any, b: Any, what: str) -> tuple[Val, Val, DType]:
    """Both operands in their common type, or `Refused` where the rules say they don't mix."""
    if isinstance(a, Val) and isinstance(b, Val):
        if a.dtype is b.dtype:
            return a, b, a.dtype
        t = promote(a.dtype, b.dtype)
        if t is None:
            raise Refused(f"mixed types {a.dtype.name} and {b.dtype.name} in '{what}'")
        return a.to(t), b.to(t), t
    if isinstance(a, Val):
        return a, literal(b, a.dtype), a.dtype
    if isinstance(b, Val):
        return literal(a, b.dtype), b, b.dtype
    raise Refused(f"'{what}' on {type(a).__name__} and {type(b).__name__}")


def _truncating_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _shift(op: str, t: DType, a: int, amount: int) -> int:
    amount = unsigned(t, amount)
    if amount >= t.bits:  # PTX clamps the amount
        return -1 if (op == ">>" and a < 0) else 0
    return wrap(t, a << amount) if op == "<<" else a >> amount  # `a` is canonical: signed >> is arithmetic


def _float_arithmetic(op: str, t: DType, p: float, q: float) -> Val:
    if op == "%":
        raise Unmodelled("'%' on floats (NVPTX expands it in several roundings)")
    if op not in ("+", "-", "*", "/"):
        raise Refused(f"'{op}' is not defined for {t.name}")
    result = {"+": lambda: p + q, "-": lambda: p - q, "*": lambda: p * q, "/": lambda: F.divide(p, q)}[op]()
    return Val(t, F.round_float(fmt(t), result))


def arithmetic(op: str, a: Any, b: Any) -> Val:
    x, y, t = common(a, b, op)
    if t.is_bool and op not in ("&", "|", "^"):
        raise Refused(f"'{op}' on bool values")
    if t.is_float:
        return _float_arithmetic(op, t, x.v, y.v)
    if op == "/":
        raise Refused("'/' on integers")
    p, q = x.v, y.v
    if op in ("//", "%"):
        if q == 0:
            raise Fault("integer division by zero")
        quotient = _truncating_div(p, q)
        return Val(t, wrap(t, quotient if op == "//" else p - q * quotient))
    if op in ("<<", ">>"):
        return Val(t, _shift(op, t, p, q))
    result = {"+": p + q, "-": p - q, "*": p * q, "&": p & q, "|": p | q, "^": p ^ q}[op]
    return Val(t, wrap(t, result))


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda p, q: p < q, "<=": lambda p, q: p <= q, ">": lambda p, q: p > q,
    ">=": lambda p, q: p >= q, "==": lambda p, q: p == q, "!=": lambda p, q: p != q,
}


def compare(op: str, a: Any, b: Any) -> Val:
    """Canonical integers compare by the type's signedness, bools as Python orders them, floats
    as IEEE does (every ordered comparison with a NaN is false, `!=` true)."""
    x, y, _ = common(a, b, op)
    return Val(T.boolean, int(_COMPARE[op](x.v, y.v)))


def convert(v: Any, src: DType, t: DType) -> Any:
    """The canonical value of `v` (of type `src`) converted to `t` (`dsl.cast`, `.to`)."""
    if t.is_bool:
        return int(v != 0)  # a float NaN is != 0: True
    if src.is_float:
        return F.round_float(fmt(t), v) if t.is_float else F.to_int(v, t.bits, t.is_signed)
    if t.is_float:  # from an integer or a bool: one rounding from the exact value
        return F.round_int(fmt(t), v)
    return wrap(t, v)


class Val:
    """A DSL scalar: its type and its canonical value (a `wrap`ped int, or the float it holds)."""

    __slots__ = ("dtype", "v")
    __hash__ = None  # type: ignore[assignment]  # `==` gives a Val, as in the DSL

    def __init__(self, dtype: DType, v: Any):
        self.dtype = dtype
        self.v = v

    def __repr__(self) -> str:
        return f"{self.dtype.name}({self.v})"

    def to(self, t: DType) -> Val:
        if t is self.dtype or t == self.dtype:
            return self
        _check_type(t)
        return Val(t, convert(self.v, self.dtype, t))

    def __bool__(self) -> bool:  # a run-time condition: numbers compared with zero
        return self.v != 0

    def __index__(self) -> int:
        raise Refused("a run-time value used where a compile-time index is needed")

    # binary operators, in both orders (a literal on the left comes through the reflected one)
    def __add__(self, o: Any) -> Val: return arithmetic("+", self, o)
    def __radd__(self, o: Any) -> Val: return arithmetic("+", o, self)
    def __sub__(self, o: Any) -> Val: return arithmetic("-", self, o)
    def __rsub__(self, o: Any) -> Val: return arithmetic("-", o, self)
    def __mul__(self, o: Any) -> Val: return arithmetic("*", self, o)
    def __rmul__(self, o: Any) -> Val: return arithmetic("*", o, self)
    def __floordiv__(self, o: Any) -> Val: return arithmetic("//", self, o)
    def __rfloordiv__(self, o: Any) -> Val: return arithmetic("//", o, self)
    def __truediv__(self, o: Any) -> Val: return arithmetic("/", self, o)
    def __rtruediv__(self, o: Any) -> Val: return arithmetic("/", o, self)
    def __mod__(self, o: Any) -> Val: return arithmetic("%", self, o)
    def __rmod__(self, o: Any) -> Val: return arithmetic("%", o, self)
    def __lshift__(self, o: Any) -> Val: return arithmetic("<<", self, o)
    def __rlshift__(self, o: Any) -> Val: return arithmetic("<<", o, self)
    def __rshift__(self, o: Any) -> Val: return arithmetic(">>", self, o)
    def __rrshift__(self, o: Any) -> Val: return arithmetic(">>", o, self)
    def __and__(self, o: Any) -> Val: return arithmetic("&", self, o)
    def __rand__(self, o: Any) -> Val: return arithmetic("&", o, self)
    def __or__(self, o: Any) -> Val: return arithmetic("|", self, o)
    def __ror__(self, o: Any) -> Val: return arithmetic("|", o, self)
    def __xor__(self, o: Any) -> Val: return arithmetic("^", self, o)
    def __rxor__(self, o: Any) -> Val: return arithmetic("^", o, self)
    def __lt__(self, o: Any) -> Val: return compare("<", self, o)
    def __le__(self, o: Any) -> Val: return compare("<=", self, o)
    def __gt__(self, o: Any) -> Val: return compare(">", self, o)
    def __ge__(self, o: Any) -> Val: return compare(">=", self, o)
    def __eq__(self, o: Any) -> Val: return compare("==", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Val: return compare("!=", self, o)  # type: ignore[override]

    def __neg__(self) -> Val:
        if self.dtype.is_bool:
            raise Refused("unary '-' on a bool")
        if self.dtype.is_float:
            return Val(self.dtype, -self.v)
        return Val(self.dtype, wrap(self.dtype, -self.v))

    def __pos__(self) -> Val:
        return self

    def __invert__(self) -> Val:
        if self.dtype.is_float:
            raise Refused(f"'~' on {self.dtype.name}")
        if self.dtype.is_bool:
            raise Unmodelled("'~' on a bool")
        return Val(self.dtype, wrap(self.dtype, ~self.v))


def cast(value: Any, t: DType) -> Val:
    """`dsl.cast(value, t)`: a value converts; a literal converts as a value of its kind would."""
    if isinstance(value, Val):
        return value.to(t)
    if not is_literal(value):
        raise Refused(f"cannot cast {type(value).__name__}")
    _check_type(t)
    if t.is_bool:
        return Val(t, int(value != 0))
    if isinstance(value, float):
        return Val(t, convert(value, T.f64, t))
    return literal(value, t)


def _min_max_pair(kind: str, x: Val, y: Val, t: DType) -> Val:
    p, q = x.v, y.v
    if not t.is_float:
        return Val(t, builtins.min(p, q) if kind == "min" else builtins.max(p, q))
    if p != p or q != q:
        return Val(t, math.nan)
    if p == q == 0:  # -0.0 below +0.0
        negative = (math.copysign(1.0, p) < 0, math.copysign(1.0, q) < 0)
        take_negative = any(negative) if kind == "min" else all(negative)
        return Val(t, -0.0 if take_negative else 0.0)
    return Val(t, builtins.min(p, q) if kind == "min" else builtins.max(p, q))


def min_max(kind: str, *args: Any) -> Any:
    if len(args) < 2:
        raise Unmodelled(f"dsl.{kind} of fewer than two values (vectors)")
    if all(is_literal(a) for a in args):
        return builtins.min(args) if kind == "min" else builtins.max(args)
    acc = args[0]
    for other in args[1:]:
        x, y, t = common(acc, other, kind)
        if t.is_bool:
            raise Refused(f"dsl.{kind} on bool values")
        acc = _min_max_pair(kind, x, y, t)
    return acc


def absolute(value: Any) -> Any:
    if is_literal(value):
        return builtins.abs(value)
    t = value.dtype
    if t.is_bool:
        raise Refused("dsl.abs on a bool")
    if t.is_float:
        return Val(t, builtins.abs(value.v))
    return Val(t, wrap(t, builtins.abs(value.v))) if t.is_signed else value


def float_args(name: str, *args: Any) -> tuple[list[Val], DType]:
    """The operands of a float intrinsic in one float type (a lone literal is an f32)."""
    if len(args) == 1 and is_literal(args[0]) and not isinstance(args[0], bool):
        args = (literal(float(args[0]), T.f32),)
    acc = args[0]
    for other in args[1:]:
        acc = common(acc, other, name)[0]
    values = [common(acc, a, name)[1] for a in args]
    t = values[0].dtype
    if not t.is_float:
        raise Refused(f"dsl.{name} needs float values, got {t.name}")
    return values, t


def intrinsic(name: str) -> Callable[..., Val]:
    """`dsl.fma`, `dsl.sqrt`, `floor`, `ceil`, `trunc`, `round`, `isnan`, `isinf`: exact in the type."""
    def call(*args: Any) -> Val:
        values, t = float_args(name, *args)
        if name == "fma":
            if len(values) != 3:
                raise Refused("dsl.fma takes three arguments")
            return Val(t, F.fma(fmt(t), *(v.v for v in values)))
        if len(values) != 1:
            raise Refused(f"dsl.{name} takes one argument")
        x = values[0].v
        if name == "sqrt":
            return Val(t, F.round_float(fmt(t), F.sqrt(x)))
        if name in ("isnan", "isinf"):
            return Val(T.boolean, int(x != x if name == "isnan" else builtins.abs(x) == math.inf))
        return Val(t, F.rounded_to_integral(name, x))

    return call
