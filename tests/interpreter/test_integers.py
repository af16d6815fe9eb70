"""Integer semantics in the interpreter: the GPU's, not Python's.

Sums and products wrap at 32 bits, `//` and `%` truncate toward zero (C, CUDA, PTX `div.s32`),
unsigned values compare and shift as unsigned, a run-time shift by 32 or more gives what PTX's
clamped shifts give, float-to-int conversions saturate (NaN -> 0) as `cvt.rzi` does.
Each expected value is computed here from Python integers by those rules.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, f32, i32, u32
from dsl.runtime.driver import LaunchError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def line_of(text: str) -> int:
    """The line of this file that holds `text`."""
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


def wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 2**32 if v >= 2**31 else v


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return wrap32(q if (a < 0) == (b < 0) else -q)


def c_mod(a: int, b: int) -> int:
    return wrap32(a - b * c_div(a, b)) if not (a == INT_MIN and b == -1) else 0


@dsl.kernel
def signed_ops(a: Tensor[i32], b: Tensor[i32], out: Tensor[i32, 2], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x = a[i]
        y = b[i]
        out[0, i] = x + y
        out[1, i] = x * y
        out[2, i] = x - y
        out[3, i] = x // y
        out[4, i] = x % y
        out[5, i] = x >> 3
        out[6, i] = x << (y & 63)
        out[7, i] = dsl.abs(x)


@dsl.jit
def run_signed(a: Tensor[i32], b: Tensor[i32], out: Tensor[i32, 2]):
    signed_ops(a, b, out, a.shape[0]).launch(grid=dsl.cdiv(a.shape[0], 64), block=64)


@dsl.kernel
def unsigned_ops(a: Tensor[u32], b: Tensor[u32], out: Tensor[u32, 2], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x = a[i]
        y = b[i]
        out[0, i] = x // y
        out[1, i] = x % y
        out[2, i] = x >> (y & 63)
        out[3, i] = dsl.cast(x < y, u32)
        out[4, i] = dsl.max(x, y)
        out[5, i] = x * y


@dsl.jit
def run_unsigned(a: Tensor[u32], b: Tensor[u32], out: Tensor[u32, 2]):
    unsigned_ops(a, b, out, a.shape[0]).launch(grid=1, block=128)


@dsl.kernel
def conversions(x: Tensor[f32], out: Tensor[i32, 2], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        out[0, i] = dsl.cast(x[i], i32)
        out[1, i] = dsl.bitcast(dsl.cast(x[i], u32), i32)


@dsl.jit
def run_conversions(x: Tensor[f32], out: Tensor[i32, 2]):
    conversions(x, out, x.shape[0]).launch(grid=1, block=64)


def test_signed_arithmetic_wraps_and_division_truncates():
    pairs = [(INT_MAX, 1), (INT_MIN, -1), (-7, 2), (7, -2), (-7, -2), (123456789, 1000), (INT_MIN, 3),
             (65536, 65536), (-1, 31), (5, 33), (3, 32), (-100, 7)]
    a = np.array([p[0] for p in pairs], dtype=np.int32)
    b = np.array([p[1] for p in pairs], dtype=np.int32)
    out = np.zeros((8, len(pairs)), dtype=np.int32)
    dsl.interpret(run_signed, a, b, out)
    for k, (x, y) in enumerate(pairs):
        shift = y & 63
        assert list(out[:, k]) == [
            wrap32(x + y), wrap32(x * y), wrap32(x - y), c_div(x, y), c_mod(x, y), x >> 3,
            wrap32(x << shift) if shift < 32 else 0,  # PTX shl clamps the amount: 32 or more gives 0
            wrap32(abs(x)),
        ], (x, y)


def test_unsigned_values_divide_compare_and_shift_as_unsigned():
    pairs = [(2**32 - 1, 2), (2**31, 3), (5, 2**31), (7, 33), (2**32 - 2, 2**32 - 1), (100, 7)]
    a = np.array([p[0] for p in pairs], dtype=np.uint32)
    b = np.array([p[1] for p in pairs], dtype=np.uint32)
    out = np.zeros((6, len(pairs)), dtype=np.uint32)
    dsl.interpret(run_unsigned, a, b, out)
    for k, (x, y) in enumerate(pairs):
        shift = y & 63
        assert list(out[:, k]) == [x // y, x % y, x >> shift if shift < 32 else 0, int(x < y), max(x, y),
                                   (x * y) % 2**32], (x, y)


def test_float_to_int_saturates_and_nan_is_zero():
    values = [-1.7, 1.7, 3.0e9, -3.0e9, math.nan, math.inf, -math.inf, -5.0, 2147483520.0, 4.5e9]
    x = np.array(values, dtype=np.float32)
    out = np.zeros((2, len(values)), dtype=np.int32)
    dsl.interpret(run_conversions, x, out)
    to_i32 = [-1, 1, INT_MAX, INT_MIN, 0, INT_MAX, INT_MIN, -5, 2147483520, INT_MAX]
    to_u32 = [0, 1, 3000000000, 0, 0, 2**32 - 1, 0, 0, 2147483520, 2**32 - 1]
    assert list(out[0]) == to_i32
    assert list(out[1].view(np.uint32)) == to_u32


def test_division_by_zero_names_the_thread_and_line():
    a = np.arange(64, dtype=np.int32)
    b = np.ones(64, dtype=np.int32)
    b[37] = 0
    out = np.zeros((8, 64), dtype=np.int32)
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_signed, a, b, out)
    err = caught.value
    assert "integer division by zero" in str(err)
    assert "by thread (37, 0, 0) of block (0, 0, 0)" in str(err)
    assert err.diagnostic.code == "DSL601"
    assert err.diagnostic.range.file == __file__
    rng = err.diagnostic.range
    assert (rng.line, rng.column, rng.end_column) == (line_of("out[3, i] = x // y"), 20, 26)  # the `x // y`
    (launch,) = err.diagnostic.related
    assert launch.range.line == line_of("signed_ops(a, b, out, a.shape[0]).launch")
