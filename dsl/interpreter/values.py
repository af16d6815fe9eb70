"""How the interpreter holds a kernel's values: one NumPy array per SSA value, one entry per lane.

A value of MLIR type `T` is an array of shape `(lanes,)`, or of shape `()` when every lane
holds the same value (constants, kernel parameters, block indices while one block runs):
NumPy broadcasting then does the work once. A `vector<wxT>` is `(lanes, w)` or `(1, w)`.
Pointers are `memory.Pointer`s, `!llvm.struct`s tuples of their fields.

Integers are signless in MLIR: they live in the signed NumPy type of their width and the ops
that care (`divui`, `cmpi ult`, ...) look at the same bits as unsigned, so arithmetic wraps
as on the GPU. `bf16` lives in float32 arrays holding exactly representable bf16 values,
rounded to nearest even after every operation that makes one (an f32 result rounded to bf16
is the correctly rounded bf16 result for + - * / sqrt: 24 >= 2 * 8 + 2 bits). The helpers
here round and convert exactly as the PTX instructions do.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

_INTS = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_FLOATS = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}


@dataclass(frozen=True)
class LaneType:
    """What one MLIR type is in the interpreter."""

    kind: str  # "int", "float", "ptr", "struct"
    name: str  # "i32", "f32", "bf16", "index", "!llvm.ptr<3>", ...
    bits: int = 0
    width: int = 0  # lanes of a vector; 0 for a scalar
    space: int = 0  # address space of a pointer
    fields: tuple[LaneType, ...] = ()

    @property
    def np(self) -> Any:
        """The NumPy type that holds it."""
        if self.kind == "int":
            return _INTS[self.bits]
        return _FLOATS[self.name]

    @property
    def unsigned(self) -> Any:
        return np.bool_ if self.bits == 1 else _UNSIGNED[self.bits]

    @property
    def storage(self) -> Any:
        """The NumPy type of its bytes in memory (bf16 as its 16 bits, i1 as one byte)."""
        if self.name == "bf16":
            return np.uint16
        if self.kind == "int" and self.bits == 1:
            return np.uint8
        return self.np

    @property
    def nbytes(self) -> int:
        """Bytes of one element in memory (an i1 takes a byte)."""
        return max(1, self.bits // 8)

    @property
    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def element(self) -> LaneType:
        return LaneType(self.kind, self.name, self.bits)


@functools.cache
def lane_type(text: str) -> LaneType:
    """The `LaneType` of an MLIR type as printed (`i32`, `vector<4xf32>`, `!llvm.ptr<1>`)."""
    text = text.strip()
    if text.startswith("vector<"):
        inner = text[len("vector<"):-1]
        count, _, elem = inner.partition("x")
        e = lane_type(elem)
        return LaneType(e.kind, e.name, e.bits, int(count))
    if text.startswith("!llvm.ptr"):
        space = int(text[len("!llvm.ptr<"):-1]) if "<" in text else 0
        return LaneType("ptr", text, 64, space=space)
    if text.startswith("!llvm.struct<(") and text.endswith(")>"):
        inner = text[len("!llvm.struct<("):-2]
        return LaneType("struct", text, fields=tuple(lane_type(t) for t in _split_fields(inner)))
    if text == "index":
        return LaneType("int", "index", 64)
    if text in _FLOATS:
        return LaneType("float", text, 16 if text in ("f16", "bf16") else int(text[1:]))
    if text.startswith("i") and text[1:].isdigit() and int(text[1:]) in _INTS:
        return LaneType("int", text, int(text[1:]))
    raise TypeError(f"type {text}")


def _split_fields(inner: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(inner[start:i])
            start = i + 1
    out.append(inner[start:])
    return [f.strip() for f in out if f.strip()]


# --- integers ---------------------------------------------------------------------------------

def as_unsigned(x: Any, t: LaneType) -> Any:
    """The same bits read as an unsigned integer."""
    if t.bits == 1:
        return x
    return np.asarray(x).view(t.unsigned)


def from_python_int(value: int, t: LaneType) -> Any:
    """An integer attribute's value as `t` (wrapping to its width, as its bits are)."""
    if t.bits == 1:
        return np.bool_(value & 1)
    value &= (1 << t.bits) - 1
    if value >= 1 << (t.bits - 1):
        value -= 1 << t.bits
    return t.np(value)


# --- floats -----------------------------------------------------------------------------------

def round_to_bf16(x: Any) -> Any:
    """Float32 values (or float64 ones) rounded to the nearest bf16, ties to even, as float32.

    float64 input is first rounded to float32 with round-to-odd, so that the second rounding
    is correct (53 >= 24 + 2 bits): one rounding overall, as `cvt.rn.bf16.f64` does."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        x = _to_f32_round_to_odd(x)
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, (bits.astype(np.uint32) | 0x00400000).view(np.float32), out)
    return out


def _to_f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd: an inexact result keeps an odd last bit."""
    y = x.astype(np.float32)
    inexact = (y.astype(np.float64) != x) & np.isfinite(x)
    if not inexact.any():
        return y
    bits = y.view(np.uint32)
    even = (bits & 1) == 0
    fix = inexact & even
    toward = np.where(x > y.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    return np.where(fix, np.nextafter(y, toward), y)


def round_float(x: Any, t: LaneType) -> Any:
    """A float result brought to `t` (bf16 rounds; others are their NumPy type already)."""
    if t.is_bf16:
        return round_to_bf16(x)
    return np.asarray(x).astype(t.np, copy=False) if np.asarray(x).dtype != t.np else x


def convert_float(x: Any, t: LaneType) -> Any:
    """`arith.truncf` / `extf`: one correctly rounded conversion to `t`."""
    x = np.asarray(x)
    if t.is_bf16:
        return round_to_bf16(x)
    return x.astype(t.np)


def float_to_int(x: Any, src: LaneType, dst: LaneType, unsigned: bool) -> Any:
    """`fptosi` / `fptoui` as PTX `cvt.rzi` does them: toward zero, saturating, NaN -> 0."""
    x = np.asarray(x, dtype=np.float64)
    bits = dst.bits
    lo, hi = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    t = np.trunc(np.nan_to_num(x, nan=0.0, posinf=hi, neginf=lo))
    if bits < 64:
        out = np.clip(t, lo, hi).astype(np.int64)
    else:  # float64 cannot hold 2**63 - 1 exactly: clamp by comparison
        big = t >= float(hi) + 1 if not unsigned else t >= 2.0**64
        small = t < float(lo)
        safe = np.where(big | small, 0.0, t)
        out = safe.astype(np.uint64 if unsigned else np.int64)
        out = np.where(big, np.array(hi).astype(out.dtype), np.where(small, np.array(lo).astype(out.dtype), out))
    out = np.asarray(out)
    if unsigned:
        return out.astype(dst.unsigned).view(dst.np) if bits > 1 else out.astype(np.bool_)
    return out.astype(dst.np)


def int_to_float(x: Any, src: LaneType, dst: LaneType, unsigned: bool) -> Any:
    """`sitofp` / `uitofp`: one correctly rounded conversion."""
    v = as_unsigned(x, src) if unsigned else np.asarray(x)
    if src.bits == 1:
        v = np.asarray(v).astype(np.int64)
    if dst.is_bf16:
        if src.bits <= 32:
            return round_to_bf16(np.asarray(v).astype(np.float64))  # exact in f64, rounded once
        return round_to_bf16(_exact_int_to_f32_odd(np.asarray(v)))
    if dst.name == "f16" and src.bits == 64:
        return np.asarray(v).astype(np.float64).astype(np.float16)  # |v| >= 65520 is inf either way
    return np.asarray(v).astype(dst.np)


def _exact_int_to_f32_odd(v: np.ndarray) -> np.ndarray:
    """64-bit integers to float32 with round-to-odd (for a following rounding to bf16)."""
    flat = [float(_round_odd_fraction(Fraction(int(a)))) for a in v.reshape(-1)]
    return np.asarray(flat, dtype=np.float32).reshape(v.shape)


def _round_odd_fraction(q: Fraction) -> float:
    y = np.float32(float(q))
    if Fraction(float(y)) != q and int(np.asarray(y).view(np.uint32)) % 2 == 0:
        y = np.nextafter(y, np.float32(np.inf) if q > Fraction(float(y)) else np.float32(-np.inf))
    return float(y)


def fma(a: Any, b: Any, c: Any, t: LaneType) -> Any:
    """`math.fma`: a * b + c rounded once, as `fma.rn` does.

    For f16, bf16 and f32 the product is exact in float64 and the sum is made round-to-odd
    (TwoSum tells whether it was exact), so rounding it to `t` rounds once. float64 uses
    exact rationals (slow, rare)."""
    if t.name == "f64":
        shape = np.broadcast(a, b, c).shape
        a, b, c = (np.broadcast_to(np.asarray(v, dtype=np.float64), shape).reshape(-1) for v in (a, b, c))
        out = [_fma_f64(float(p), float(q), float(r)) for p, q, r in zip(a, b, c)]
        return np.asarray(out, dtype=np.float64).reshape(shape)
    p = np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)
    c64 = np.asarray(c, dtype=np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # TwoSum: s + err == p + c exactly (when finite)
    fix = (err != 0) & np.isfinite(s) & ((np.asarray(s).view(np.uint64) & 1) == 0)
    if np.any(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return convert_float(s, t) if t.is_bf16 else np.asarray(s).astype(t.np)


def _fma_f64(a: float, b: float, c: float) -> float:
    if not all(math.isfinite(v) for v in (a, b, c)):
        if math.isfinite(a) and math.isfinite(b):
            return c  # the exact product is finite: an infinite or NaN addend decides (a * b could overflow)
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of zero as IEEE says
    try:
        return float(exact)  # Fraction -> float rounds to nearest even
    except OverflowError:  # past the largest f64 (copysign would convert `exact` and overflow again)
        return math.inf if exact > 0 else -math.inf


def flush_subnormal(x: Any) -> Any:
    """f32 subnormals to zero of the same sign (the `.ftz` forms)."""
    x = np.asarray(x)
    tiny = (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)
    return np.where(tiny, np.copysign(np.float32(0), x), x).astype(x.dtype) if tiny.any() else x


# --- bits -------------------------------------------------------------------------------------

def to_bits(x: Any, t: LaneType) -> np.ndarray:
    """A value's bytes as its storage type (bf16 as uint16 bits)."""
    x = np.asarray(x)
    if t.is_bf16:
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if t.kind == "int" and t.bits == 1:
        return x.astype(np.uint8)
    return x.astype(t.np, copy=False)


def from_bits(raw: Any, t: LaneType) -> np.ndarray:
    """The inverse of `to_bits`."""
    raw = np.asarray(raw)
    if t.is_bf16:
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if t.kind == "int" and t.bits == 1:
        return raw != 0
    return raw.view(t.np) if raw.dtype != t.np else raw
