"""`arith` and `math` arithmetic on lanes, with the GPU's integer and float semantics.

Integers wrap at their width; `divsi`/`remsi` truncate toward zero (and a division by zero
is reported, naming the thread, where the GPU would return garbage); shifts by the width or
more give what PTX's clamped shifts give. Float `+ - * /` and `sqrt` round once to nearest
even in the value's own type (bf16 included), `fma` rounds once (conversions, bit casts and
vectors: `cast_ops`). Functions the GPU approximates (`ex2.approx` behind `dsl.exp`, `rsqrt.approx`,
libdevice's `erf`, `sin`, ...) are computed in float64 and rounded to the type: they agree
with the GPU to within its documented error, not to the bit.

Kernels compiled with `ftz=True` flush f32 subnormal inputs and results to zero, as the
`.ftz` instructions do. Multiplies and adds are never fused here: with `contract=True` (the
default) the GPU may fuse `a * b + c` into one FMA and differ in the last place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from mlir import ir

from dsl.interpreter.lanes import Lanes, select
from dsl.interpreter.memory import LaneFault
from dsl.interpreter.program import Maker, OpInfo, Step, binary, registrar, unary
from dsl.interpreter.values import (
    as_unsigned,
    convert_float,
    flush_subnormal,
    fma,
    from_python_int,
    round_float,
)

MAKERS: dict[str, Maker] = {}
_maker = registrar(MAKERS)


# --- constants --------------------------------------------------------------------------------

@_maker("arith.constant")
def _constant(info: OpInfo) -> Step:
    (o,), (t,) = info.outs, info.out_types
    attr = info.attr("value")
    if t.width:
        raw = _dense_values(attr)
        if raw.size == 1:  # a splat
            raw = np.repeat(raw, t.width)
        value = (round_float(raw.astype(np.float64), t) if t.kind == "float" else raw.astype(t.np)).reshape(1, -1)
    elif t.kind == "float":
        value = round_float(np.asarray(float(attr.value)), t) if t.is_bf16 else np.asarray(attr.value, dtype=t.np)
    elif t.bits == 1:
        value = np.asarray(bool(attr.value))
    else:
        value = np.asarray(from_python_int(int(attr.value), t))

    def step(st: Lanes) -> None:
        st.v[o] = value

    return step


def _dense_values(attr: Any) -> np.ndarray:
    """The elements of a dense vector constant. NumPy has no bf16, so the buffer protocol
    refuses a bf16 vector; a splat one (a zero accumulator, a placeholder on a path that
    exited) is read from its one value instead."""
    try:
        return np.array(attr).reshape(-1)
    except TypeError:
        dense = ir.DenseFPElementsAttr(attr)
        if not dense.is_splat:
            raise
        return np.asarray([float(ir.FloatAttr(dense.get_splat_value()).value)])


# --- integers ---------------------------------------------------------------------------------

def _wrapping(fn: Callable[[Any, Any], Any]) -> Maker:
    def make(info: OpInfo) -> Step:
        t = info.out_types[0]
        if t.bits == 1:  # i1 arithmetic is arithmetic modulo 2
            table = {np.add: np.logical_xor, np.subtract: np.logical_xor, np.multiply: np.logical_and}
            return binary(info, table.get(fn, fn))
        return binary(info, lambda a, b: fn(a, b).astype(t.np, copy=False))

    return make


MAKERS["arith.addi"] = _wrapping(np.add)
MAKERS["arith.subi"] = _wrapping(np.subtract)
MAKERS["arith.muli"] = _wrapping(np.multiply)
MAKERS["arith.andi"] = _wrapping(np.bitwise_and)
MAKERS["arith.ori"] = _wrapping(np.bitwise_or)
MAKERS["arith.xori"] = _wrapping(np.bitwise_xor)


@_maker("arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui")
def _int_minmax(info: OpInfo) -> Step:
    t = info.out_types[0]
    pick = np.maximum if "max" in info.name else np.minimum
    if info.name.endswith("ui"):
        return binary(info, lambda a, b: pick(as_unsigned(a, t), as_unsigned(b, t)).view(t.np))
    return binary(info, pick)


@_maker("arith.shli", "arith.shrui", "arith.shrsi")
def _shift(info: OpInfo) -> Step:
    t = info.out_types[0]
    bits = t.bits
    kind = info.name

    def shift(a: Any, b: Any) -> Any:
        amount = np.asarray(as_unsigned(b, t)).astype(np.uint64)
        big = amount >= bits
        safe = np.where(big, 0, amount).astype(t.unsigned)
        if kind == "arith.shrsi":
            out = np.right_shift(np.asarray(a), safe.astype(t.np))
            return np.where(big, np.where(np.asarray(a) < 0, -1, 0).astype(t.np), out)
        u = as_unsigned(a, t)
        out = np.left_shift(u, safe) if kind == "arith.shli" else np.right_shift(u, safe)
        return np.where(big, 0, out).astype(t.unsigned).view(t.np)

    return binary(info, shift)


def _first_active_zero(st: Lanes, b: Any) -> int | None:
    zero = np.asarray(b) == 0
    if not zero.any():
        return None
    if zero.ndim == 0:
        return 0 if st.mask is None else int(np.argmax(st.mask)) if st.mask.any() else None
    hit = zero if st.mask is None else zero & st.mask
    return int(np.argmax(hit)) if hit.any() else None


@_maker("arith.divsi", "arith.remsi", "arith.divui", "arith.remui", "arith.ceildivsi", "arith.ceildivui",
        "arith.floordivsi")
def _divide(info: OpInfo) -> Step:
    (a, b), (o,) = info.args, info.outs
    t = info.out_types[0]
    kind = info.name.removeprefix("arith.")
    unsigned = kind.endswith("ui")
    smallest = np.asarray(-(2 ** (t.bits - 1))).astype(t.np) if t.bits > 1 else None

    def step(st: Lanes) -> None:
        x, y = st.v[a], st.v[b]
        lane = _first_active_zero(st, y)
        if lane is not None:
            raise LaneFault(f"integer division by zero ('{'//' if 'div' in kind else '%'}' with a zero divisor)",
                            lane)
        y = np.where(np.asarray(y) == 0, 1, y).astype(t.np)
        if unsigned:
            ux, uy = as_unsigned(x, t), as_unsigned(y, t)
            q, r = ux // uy, ux % uy
            if kind == "ceildivui":
                q = q + (r != 0)
            out = {"divui": q, "remui": r, "ceildivui": q}[kind]
            st.v[o] = np.asarray(out).astype(t.unsigned).view(t.np)
            return
        overflow = (np.asarray(x) == smallest) & (np.asarray(y) == -1)
        y1 = np.where(overflow, 1, y).astype(t.np)
        r = np.fmod(x, y1).astype(t.np)
        q = ((np.asarray(x) - r) // y1).astype(t.np)  # exact: truncating division
        if kind == "remsi":
            st.v[o] = r
            return
        if kind == "floordivsi":
            q = q - ((r != 0) & ((r < 0) != (np.asarray(y) < 0)))
        elif kind == "ceildivsi":
            q = q + ((r != 0) & ((r < 0) == (np.asarray(y) < 0)))
        st.v[o] = np.asarray(q).astype(t.np)

    return step


_CMPI = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}


@_maker("arith.cmpi")
def _cmpi(info: OpInfo) -> Step:
    t = info.arg_types[0]
    pred = _CMPI[info.int_attr("predicate")]  # type: ignore[index]
    fn = _COMPARE[pred[-2:]]
    if t.kind == "ptr":
        raise info.refuse("comparing pointers")
    if t.bits == 1:  # as a signed i1, true is -1
        signed = pred.startswith("s")
        return binary(info, lambda a, b: fn(_i1(a, signed), _i1(b, signed)))
    if pred.startswith("u"):
        return binary(info, lambda a, b: fn(as_unsigned(a, t), as_unsigned(b, t)))
    return binary(info, fn)


def _i1(x: Any, signed: bool) -> Any:
    x = np.asarray(x).astype(np.int8)
    return -x if signed else x


@_maker("arith.select")
def _select(info: OpInfo) -> Step:
    (c, a, b), (o,) = info.args, info.outs
    vector = info.out_types[0].width > 0 and info.arg_types[0].width == 0

    def step(st: Lanes) -> None:
        v = st.v
        cond = v[c]
        if np.ndim(cond) == 0:
            v[o] = v[a] if cond else v[b]
        else:
            v[o] = select(cond, v[a], v[b], vector)

    return step


# --- floats -----------------------------------------------------------------------------------

def _floatbinary(fn: Callable[[Any, Any], Any]) -> Maker:
    def make(info: OpInfo) -> Step:
        t = info.out_types[0]
        if info.flushes(t):
            return binary(info, lambda a, b: flush_subnormal(fn(flush_subnormal(a), flush_subnormal(b))))
        if t.is_bf16:
            return binary(info, lambda a, b: round_float(fn(a, b), t))
        return binary(info, fn)

    return make


def _remf(a: Any, b: Any) -> Any:
    """NVPTX's expansion of `frem`: a - b * trunc(a / b), each step rounded; a when b is infinite."""
    a, b = np.asarray(a), np.asarray(b)
    q = np.trunc(a / b).astype(a.dtype)
    out = (a - (q * b).astype(a.dtype)).astype(a.dtype)
    return np.where(np.isinf(b) & np.isfinite(a), a, out)


MAKERS["arith.addf"] = _floatbinary(np.add)
MAKERS["arith.subf"] = _floatbinary(np.subtract)
MAKERS["arith.mulf"] = _floatbinary(np.multiply)
MAKERS["arith.divf"] = _floatbinary(np.divide)
MAKERS["arith.remf"] = _floatbinary(_remf)


def _maximum(a: Any, b: Any) -> Any:
    """IEEE maximum: NaN if either is NaN, and +0 above -0 (PTX `max.NaN`)."""
    a, b = np.asarray(a), np.asarray(b)
    out = np.where(a > b, a, b)
    both_zero = (a == 0) & (b == 0)
    out = np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), a, np.abs(a)), out)
    return np.where(np.isnan(a) | np.isnan(b), np.asarray(np.nan, dtype=a.dtype), out).astype(a.dtype)


def _minimum(a: Any, b: Any) -> Any:
    a, b = np.asarray(a), np.asarray(b)
    out = np.where(a < b, a, b)
    both_zero = (a == 0) & (b == 0)
    out = np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), -np.abs(a), a), out)
    return np.where(np.isnan(a) | np.isnan(b), np.asarray(np.nan, dtype=a.dtype), out).astype(a.dtype)


MAKERS["arith.maximumf"] = _floatbinary(_maximum)
MAKERS["arith.minimumf"] = _floatbinary(_minimum)
MAKERS["arith.maxnumf"] = _floatbinary(np.fmax)
MAKERS["arith.minnumf"] = _floatbinary(np.fmin)
MAKERS["math.copysign"] = _floatbinary(np.copysign)  # exact: no rounding


@_maker("arith.negf", "math.absf")
def _sign(info: OpInfo) -> Step:
    return unary(info, np.negative if info.name == "arith.negf" else np.abs)


@_maker("math.absi")
def _absi(info: OpInfo) -> Step:
    t = info.out_types[0]
    return unary(info, lambda x: np.abs(x).astype(t.np))


_CMPF = {0: "false", 1: "oeq", 2: "ogt", 3: "oge", 4: "olt", 5: "ole", 6: "one", 7: "ord", 8: "ueq", 9: "ugt",
         10: "uge", 11: "ult", 12: "ule", 13: "une", 14: "uno", 15: "true"}


@_maker("arith.cmpf")
def _cmpf(info: OpInfo) -> Step:
    pred = _CMPF[info.int_attr("predicate")]  # type: ignore[index]
    ftz = info.flushes(info.arg_types[0])

    def compare(a: Any, b: Any) -> Any:
        if ftz:
            a, b = flush_subnormal(a), flush_subnormal(b)
        a, b = np.asarray(a), np.asarray(b)
        unordered = np.isnan(a) | np.isnan(b)
        if pred in ("false", "true"):
            return np.broadcast_to(pred == "true", np.broadcast(a, b).shape).copy()
        if pred == "ord":
            return ~unordered
        if pred == "uno":
            return unordered
        if pred == "one":
            return (a != b) & ~unordered
        if pred == "une":
            return a != b
        fn = _COMPARE[pred[1:]]
        return fn(a, b) | unordered if pred[0] == "u" else fn(a, b)

    return binary(info, compare)


@_maker("math.fma")
def _fma(info: OpInfo) -> Step:
    (a, b, c), (o,) = info.args, info.outs
    t = info.out_types[0]
    ftz = info.flushes(t)

    def step(st: Lanes) -> None:
        v = st.v
        x, y, z = v[a], v[b], v[c]
        if ftz:
            x, y, z = flush_subnormal(x), flush_subnormal(y), flush_subnormal(z)
        out = fma(x, y, z, t)
        v[o] = flush_subnormal(out) if ftz else out

    return step


@_maker("math.sqrt", "math.floor", "math.ceil", "math.trunc", "math.roundeven")
def _exact_math(info: OpInfo) -> Step:
    """Results that are correctly rounded in the value's own type."""
    t = info.out_types[0]
    fn = {"math.sqrt": np.sqrt, "math.floor": np.floor, "math.ceil": np.ceil, "math.trunc": np.trunc,
          "math.roundeven": np.rint}[info.name]
    if info.flushes(t) and info.name == "math.sqrt":
        return unary(info, lambda x: flush_subnormal(np.sqrt(flush_subnormal(x))))
    if t.is_bf16:
        return unary(info, lambda x: round_float(fn(x), t))
    return unary(info, fn)


def _vectorized(fn: Callable[..., float]) -> Callable[..., Any]:
    ufunc = np.frompyfunc(fn, 2 if fn in (math.atan2, math.pow) else 1, 1)
    return lambda *xs: np.asarray(ufunc(*[np.asarray(x, dtype=np.float64) for x in xs]), dtype=np.float64)


def _pow(x: Any, y: Any) -> Any:
    return np.power(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))


_APPROXIMATE: dict[str, Callable[..., Any]] = {
    "math.exp": np.exp, "math.exp2": np.exp2, "math.expm1": np.expm1, "math.log": np.log, "math.log2": np.log2,
    "math.log10": np.log10, "math.log1p": np.log1p, "math.sin": np.sin, "math.cos": np.cos, "math.tan": np.tan,
    "math.tanh": np.tanh, "math.atan": np.arctan, "math.atan2": np.arctan2, "math.powf": _pow,
    "math.rsqrt": lambda x: 1.0 / np.sqrt(x), "math.cbrt": np.cbrt,
    "math.erf": _vectorized(math.erf), "math.erfc": _vectorized(math.erfc),
}


def _approximate(info: OpInfo) -> Step:
    """Computed in float64, rounded once to the result type."""
    t = info.out_types[0]
    fn = _APPROXIMATE[info.name]
    ftz = info.flushes(t)

    def compute(*xs: Any) -> Any:
        wide = [np.asarray(flush_subnormal(x) if ftz else x, dtype=np.float64) for x in xs]
        out = convert_float(fn(*wide), t)
        return flush_subnormal(out) if ftz else out

    if len(info.args) == 1:
        return unary(info, compute)
    return binary(info, compute)


for _name in _APPROXIMATE:
    MAKERS[_name] = _approximate
