"""The README's integer edge rules hold in the PTX, not only in the interpreter.

Found by the generated programs' reference (tests/fuzz, issue #32), read against the PTX:
LLVM's `shl` / `lshr` / `ashr` are poison for an amount of the width or more, so
`x << 40` on an i32 compiled to no store at all; `sdiv INT_MIN, -1` is undefined in LLVM;
and a float converted to an 8- or 16-bit integer became `cvt.rzi.s16.f32` truncated to a
byte (300.0 gave 44 in an i8, not the saturated 127). A Python float cast to an integer
(`dsl.cast(-1.5, dsl.u32)`) wrapped instead of saturating. Fixture: `EDGES`, one store per rule.
"""

from __future__ import annotations

import math
import re

import numpy as np

import dsl
from dsl import Tensor, f32, i8, i32, u8, u32

INT_MIN = -(2**31)


@dsl.kernel
def edges(x: Tensor[i32], f: Tensor[f32], out: Tensor[i32], small: Tensor[i8], usmall: Tensor[u8]):
    t = dsl.thread_idx.x
    out[8 * t + 0] = x[t] << 40  # a compile-time amount past the width: 0
    out[8 * t + 1] = x[t] >> 33  # the sign
    out[8 * t + 2] = x[t] >> x[t + 4]  # a run-time amount, read unsigned: clamped
    out[8 * t + 3] = x[t] << x[t + 4]
    out[8 * t + 4] = x[t] // x[t + 4]  # INT_MIN // -1 wraps to INT_MIN
    out[8 * t + 5] = x[t] % x[t + 4]  # and INT_MIN % -1 is 0
    out[8 * t + 6] = dsl.cast(-1.5, u32).to(i32) + dsl.cast(math.nan, i32)  # literals saturate; NaN is 0
    out[8 * t + 7] = dsl.cast(3.0e9, i32)
    small[t] = dsl.cast(f[t], i8)  # saturating to the narrow range
    usmall[t] = dsl.cast(f[t], u8)


@dsl.jit
def run(x: Tensor[i32], f: Tensor[f32], out: Tensor[i32], small: Tensor[i8], usmall: Tensor[u8]):
    edges(x, f, out, small, usmall).launch(grid=1, block=4)


def _shift(op: str, a: int, amount: int) -> int:
    amount &= 0xFFFFFFFF
    if amount >= 32:
        return -1 if op == ">>" and a < 0 else 0
    value = (a << amount) & 0xFFFFFFFF if op == "<<" else a >> amount
    return value - 2**32 if value >= 2**31 else value


def test_the_interpreter_keeps_the_rules() -> None:
    a = [INT_MIN, -5, 7, 123]
    b = [-1, 40, -3, 31]
    x = np.array(a + b + [0] * 24, dtype=np.int32)
    f = np.array([300.0, -300.0, math.nan, -1.5] + [0.0] * 28, dtype=np.float32)
    out, small, usmall = np.zeros(32, np.int32), np.zeros(32, np.int8), np.zeros(32, np.uint8)
    dsl.interpret(run, x, f, out, small, usmall)
    rows = out.reshape(4, 8)
    for t, (p, q) in enumerate(zip(a, b)):
        quotient = INT_MIN if (p, q) == (INT_MIN, -1) else int(p / q)
        assert list(rows[t]) == [0, -1 if p < 0 else 0, _shift(">>", p, q), _shift("<<", p, q), quotient,
                                 p - q * quotient if (p, q) != (INT_MIN, -1) else 0, 0, 2**31 - 1], t
    assert list(small[:4]) == [127, -128, 0, -1] and list(usmall[:4]) == [255, 0, 0, 0]


def test_the_ptx_keeps_every_store_and_guards_what_llvm_leaves_undefined() -> None:
    ptx = dsl.compile(run).ptx
    stores = re.findall(r"st\.global\.b32\s+\[[^\]]*\], ([^;]+);", ptx)
    assert len(stores) == 8, stores  # none folded away as poison
    assert "0" in stores and "2147483647" in stores
    assert re.search(r"shr\.s32\s+%r\d+, %r\d+, 31;", ptx)  # x >> 33: the sign
    assert re.search(r"min\.u32\s+%r\d+, %r\d+, 31;", ptx)  # a run-time amount for >>, clamped
    assert "setp.eq.b32" in ptx and "-2147483648" in ptx  # the INT_MIN / -1 guard before div.s32
    assert re.search(r"cvt\.rzi\.s32\.f32", ptx) and not re.search(r"cvt\.rzi\.[su]16\.f32", ptx)
    assert re.search(r"max\.s32\s+%r\d+, %r\d+, -128;", ptx) and re.search(r"min\.u32\s+%r\d+, %r\d+, 255;", ptx)
