"""IEEE 754 binary formats for the reference: rounding to nearest even, bit patterns, conversions.

Written from the standard, not from NumPy or the interpreter. A value of a DSL float type is
held as the Python float (an IEEE f64) equal to it, which every format here fits in exactly.
An operation is computed exactly or in f64 and then rounded once to its format:

- `+ - * /` and `sqrt` of f16, bf16 and f32 operands are computed in f64 and rounded again:
  f64's 53 bits are at least 2p + 2 for each of those precisions p, so the double rounding
  gives the correctly rounded result (and no f32 operation over- or underflows in f64);
- integers (up to 64 bits) and `fma` are rounded from their exact value (`round_exact`);
- float to integer truncates toward zero, saturates to the type's range, and NaN gives 0
  (`cvt.rzi`, the rule of `dsl/interpreter/cast_ops.py` and the README).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Format:
    """A binary interchange format: exponent and stored fraction widths."""

    exp_bits: int
    man_bits: int

    @property
    def precision(self) -> int:
        return self.man_bits + 1

    @property
    def emax(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.emax

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits


FORMATS = {"f16": Format(5, 10), "bf16": Format(8, 7), "f32": Format(8, 23), "f64": Format(11, 52)}
F64, F32 = FORMATS["f64"], FORMATS["f32"]
_F32 = struct.Struct("<f")


def round_exact(fmt: Format, negative: bool, num: int, den: int) -> float:
    """The positive rational num/den (with `negative` its sign) rounded to nearest even in `fmt`:
    subnormals where the exponent would fall below `emin`, infinity past the largest finite."""
    e = num.bit_length() - den.bit_length()  # 2**e <= num/den < 2**(e+1), after the fix-up
    if (num << max(0, -e)) < (den << max(0, e)):
        e -= 1
    e = max(e, fmt.emin)
    shift = e - (fmt.precision - 1)  # the quantum is 2**shift
    n, d = (num, den << shift) if shift >= 0 else (num << -shift, den)
    m, r = divmod(n, d)
    if 2 * r > d or (2 * r == d and m & 1):
        m += 1
    if m == 0:
        return -0.0 if negative else 0.0
    if m.bit_length() - 1 + shift > fmt.emax:
        return -math.inf if negative else math.inf
    value = math.ldexp(m, shift)
    return -value if negative else value


def round_float(fmt: Format, x: float) -> float:
    """An f64 value rounded to `fmt` (exact for f64 itself, for zeros, infinities and NaN).
    f32 goes through C's double-to-float conversion (IEEE, to nearest even: the same result
    as `round_exact`, checked in test_fuzz.py), which is many times faster."""
    if fmt is F64 or x == 0 or not math.isfinite(x):
        return x
    if fmt is F32:
        try:
            return _F32.unpack(_F32.pack(x))[0]
        except OverflowError:  # rounds past the largest f32
            return math.copysign(math.inf, x)
    num, den = x.as_integer_ratio()
    return round_exact(fmt, num < 0, abs(num), den)


def round_int(fmt: Format, v: int) -> float:
    """An integer converted to `fmt` with one rounding (big i64 / u64 values included)."""
    if v == 0:
        return 0.0
    return round_exact(fmt, v < 0, abs(v), 1)


def round_fraction(fmt: Format, q: Fraction) -> float:
    return round_exact(fmt, q < 0, abs(q.numerator), q.denominator)


def to_int(x: float, bits: int, signed: bool) -> int:
    """Float to integer: toward zero, saturating to the type's range, NaN to 0."""
    if x != x:
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if x <= lo:
        return lo
    if x >= hi:
        return hi
    return int(x)


def encode(fmt: Format, x: float) -> int:
    """The bit pattern of a value of `fmt` (NaN: the quiet NaN with a clear sign)."""
    if fmt is F64:
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    sign = (1 << (fmt.bits - 1)) if math.copysign(1.0, x) < 0 else 0
    top = (1 << fmt.exp_bits) - 1
    if x != x:
        return (top << fmt.man_bits) | (1 << (fmt.man_bits - 1))
    a = abs(x)
    if a == math.inf:
        return sign | (top << fmt.man_bits)
    if a == 0:
        return sign
    _, e = math.frexp(a)  # a = m * 2**e, 0.5 <= m < 1: the exponent is e - 1
    if e - 1 >= fmt.emin:
        fraction = int(math.ldexp(a, fmt.man_bits - (e - 1))) - (1 << fmt.man_bits)
        return sign | ((e - 1 + fmt.emax) << fmt.man_bits) | fraction
    return sign | int(math.ldexp(a, fmt.man_bits - fmt.emin))


def decode(fmt: Format, bits: int) -> float:
    """The value of a bit pattern of `fmt`."""
    if fmt is F64:
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    negative = bits >> (fmt.bits - 1)
    biased = (bits >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1)
    fraction = bits & ((1 << fmt.man_bits) - 1)
    if biased == (1 << fmt.exp_bits) - 1:
        value = math.nan if fraction else math.inf
    elif biased == 0:
        value = math.ldexp(fraction, fmt.emin - fmt.man_bits)
    else:
        value = math.ldexp(fraction | (1 << fmt.man_bits), biased - fmt.emax - fmt.man_bits)
    return -value if negative else value


def is_nan_bits(fmt: Format, bits: int) -> bool:
    top = (1 << fmt.exp_bits) - 1
    return (bits >> fmt.man_bits) & top == top and bits & ((1 << fmt.man_bits) - 1) != 0


def fma(fmt: Format, a: float, b: float, c: float) -> float:
    """a * b + c rounded once: exact rational arithmetic on finite values, IEEE's rules on the rest."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # an infinite or NaN product is exact; inf - inf is NaN as it should be
    if not math.isfinite(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # the sign of an exact zero: -0 only when both terms are negative zeros
        product_negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        if a * b == 0 and c == 0 and product_negative and math.copysign(1.0, c) < 0:
            return -0.0
        return 0.0
    return round_fraction(fmt, exact)


def divide(a: float, b: float) -> float:
    """IEEE division in f64 (Python raises on a zero divisor)."""
    if b != 0:
        return a / b
    if a != a or a == 0:
        return math.nan
    negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    return -math.inf if negative else math.inf


def sqrt(x: float) -> float:
    if x != x or x < 0:
        return math.nan
    return math.sqrt(x)  # sqrt(-0.0) is -0.0, sqrt(inf) is inf


def rounded_to_integral(kind: str, x: float) -> float:
    """floor / ceil / trunc / round (ties to even) of a float; exact, and keeping the sign of zero."""
    if not math.isfinite(x) or abs(x) >= 2.0**52:
        return x
    rounding: dict[str, Callable[[float], int]] = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
                                                    "round": round}
    whole = rounding[kind](x)
    return math.copysign(float(whole), x)
