"""Float semantics in the interpreter: each operation rounded once, in its own type.

f16 and bf16 sums and products are rounded to nearest even in that type (expected values from
exact rationals), `dsl.fma` rounds once where a multiply and an add round twice, max and min
propagate NaN and order -0 below +0 (PTX `max.NaN`), and conversions to bf16 and fp8 round to
nearest even and saturate as `cvt` does (expected from the GPU runtime's bf16 packing and the
compiler's own fp8 literal encoder).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import dsl
from dsl import Int32, Tensor, bf16, f8e4m3, f8e5m2, f16, f32, f64
from dsl.frontend import fp8
from dsl.interpreter import bits
from dsl.runtime.launch import _bf16_bits


def bf16_value(raw: int) -> float:
    return float(np.array([raw << 16], dtype=np.uint32).view(np.float32)[0])


def round_bf16(q: Fraction) -> int:
    """The bf16 bits nearest to the exact rational `q` (ties to even), independently of NumPy."""
    sign = 0x8000 if q < 0 else 0
    q = abs(q)
    if q == 0:
        return sign
    e = math.floor(math.log2(q))
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    e = max(e, -126)  # subnormals share the smallest exponent
    scaled = q / Fraction(2) ** (e - 7)  # 8 significant bits
    n = math.floor(scaled)
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    return sign | (_bf16_bits(float(Fraction(n) * Fraction(2) ** (e - 7))) & 0x7FFF)


@dsl.kernel(contract=False)
def half_ops(a: Tensor[bf16], b: Tensor[bf16], h: Tensor[f16], g: Tensor[f16], out: Tensor[bf16, 2],
             hout: Tensor[f16, 2], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        out[0, i] = a[i] + b[i]
        out[1, i] = a[i] * b[i]
        out[2, i] = a[i] / b[i]
        hout[0, i] = h[i] * g[i] + h[i]
        hout[1, i] = dsl.sqrt(h[i] * h[i])


@dsl.jit
def run_half(a: Tensor[bf16], b: Tensor[bf16], h: Tensor[f16], g: Tensor[f16], out: Tensor[bf16, 2],
             hout: Tensor[f16, 2]):
    half_ops(a, b, h, g, out, hout, a.shape[0]).launch(grid=1, block=128)


def test_bf16_and_f16_round_once_per_operation():
    rng = np.random.default_rng(3)
    a = np.array([_bf16_bits(float(v)) for v in rng.standard_normal(100) * 10], dtype=np.uint16)
    b = np.array([_bf16_bits(float(v)) for v in rng.standard_normal(100)], dtype=np.uint16)
    h = (rng.standard_normal(100) * 30).astype(np.float16)
    g = rng.standard_normal(100).astype(np.float16)
    out = np.zeros((3, 100), dtype=np.uint16)
    hout = np.zeros((2, 100), dtype=np.float16)
    dsl.interpret(run_half, bits(a, bf16), bits(b, bf16), h, g, bits(out, bf16), hout)
    for k in range(100):
        x, y = Fraction(bf16_value(int(a[k]))), Fraction(bf16_value(int(b[k])))
        assert [int(v) for v in out[:, k]] == [round_bf16(x + y), round_bf16(x * y), round_bf16(x / y)], k
        p, q = Fraction(float(h[k])), Fraction(float(g[k]))
        product = np.float16(float(p * q))  # float(Fraction) rounds once, to float64: exact here
        assert hout[0, k] == np.float16(float(Fraction(float(product)) + p)), k
        assert hout[1, k] == np.float16(math.sqrt(float(np.float16(float(p * p))))), k


@dsl.kernel(contract=False)
def fused(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], out: Tensor[f32, 2]):
    i = dsl.thread_idx.x
    out[0, i] = dsl.fma(a[i], b[i], c[i])
    out[1, i] = a[i] * b[i] + c[i]


@dsl.jit
def run_fused(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], out: Tensor[f32, 2]):
    fused(a, b, c, out).launch(grid=1, block=a.shape[0])


def test_fma_rounds_once():
    eps = 2.0**-12
    a = np.array([1 + eps, 3.0, 1e20, 2.0**-70], dtype=np.float32)
    b = np.array([1 + eps, 1 / 3, 1e18, 2.0**-70], dtype=np.float32)
    c = np.array([-(1 + 2 * eps), -1.0, -1e38, 2.0**-149], dtype=np.float32)
    out = np.zeros((2, 4), dtype=np.float32)
    dsl.interpret(run_fused, a, b, c, out)
    for k in range(4):
        exact = Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(c[k]))
        assert out[0, k] == np.float32(float(exact)), k  # one rounding (float64 is exact enough here)
        assert out[1, k] == (a[k] * b[k]) + c[k], k  # two roundings, as contract=False compiles it
    assert out[0, 0] == 2.0**-24 and out[1, 0] == 0.0


@dsl.kernel
def fused_f64(a: Tensor[f64], out: Tensor[f64]):
    i = dsl.thread_idx.x
    out[i] = dsl.fma(a[i], a[i], a[i])


@dsl.jit
def run_fused_f64(a: Tensor[f64], out: Tensor[f64]):
    fused_f64(a, out).launch(grid=1, block=a.shape[0])


def test_an_f64_fma_past_the_largest_double_is_infinite():
    """Found by tests/fuzz: the exact result did not fit a float, and the overflow's own sign
    was taken with `copysign(inf, exact)`, which converts the Fraction and overflows again."""
    a = np.array([1e200, -1e200, 3.0], dtype=np.float64)
    out = np.zeros(3, dtype=np.float64)
    dsl.interpret(run_fused_f64, a, out)
    assert list(out) == [math.inf, math.inf, 12.0]  # (-1e200)**2 - 1e200 is still far past the largest


@dsl.kernel
def fused_f64_addend(a: Tensor[f64], b: Tensor[f64], c: Tensor[f64], out: Tensor[f64]):
    i = dsl.thread_idx.x
    out[i] = dsl.fma(a[i], b[i], c[i])


@dsl.jit
def run_fused_f64_addend(a: Tensor[f64], b: Tensor[f64], c: Tensor[f64], out: Tensor[f64]):
    fused_f64_addend(a, b, c, out).launch(grid=1, block=a.shape[0])


def test_an_f64_fma_with_an_infinite_addend_is_that_infinity():
    """Found by tests/fuzz: a finite product past the largest double plus an infinity of the
    other sign came out NaN (`a * b` rounded to inf first); fma's exact product is finite."""
    a = np.array([-1e300, 1e300, 2.0, math.inf], dtype=np.float64)
    b = np.array([7.0, 7.0, 3.0, 0.0], dtype=np.float64)
    c = np.array([math.inf, -math.inf, math.nan, 1.0], dtype=np.float64)
    out = np.zeros(4, dtype=np.float64)
    dsl.interpret(run_fused_f64_addend, a, b, c, out)
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2]) and math.isnan(out[3])


@dsl.kernel
def extremes(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32, 2]):
    i = dsl.thread_idx.x
    out[0, i] = dsl.max(x[i], y[i])
    out[1, i] = dsl.min(x[i], y[i])


@dsl.jit
def run_extremes(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32, 2]):
    extremes(x, y, out).launch(grid=1, block=x.shape[0])


def test_max_and_min_propagate_nan_and_order_signed_zeros():
    x = np.array([-0.0, 0.0, math.nan, 1.0, -math.inf], dtype=np.float32)
    y = np.array([0.0, -0.0, 2.0, math.nan, 3.0], dtype=np.float32)
    out = np.zeros((2, 5), dtype=np.float32)
    dsl.interpret(run_extremes, x, y, out)
    assert [str(v) for v in out[0]] == ["0.0", "0.0", "nan", "nan", "3.0"]
    assert [str(v) for v in out[1]] == ["-0.0", "-0.0", "nan", "nan", "-inf"]


@dsl.kernel
def narrow(x: Tensor[f32], b: Tensor[bf16], e4: Tensor[f8e4m3], e5: Tensor[f8e5m2], back: Tensor[f32]):
    i = dsl.thread_idx.x
    b[i] = dsl.cast(x[i], bf16)
    e4[i] = dsl.cast(x[i], f8e4m3)
    e5[i] = dsl.cast(x[i], f8e5m2)
    back[i] = dsl.cast(e4[i], f32)


@dsl.jit
def run_narrow(x: Tensor[f32], b: Tensor[bf16], e4: Tensor[f8e4m3], e5: Tensor[f8e5m2], back: Tensor[f32]):
    narrow(x, b, e4, e5, back).launch(grid=1, block=x.shape[0])


def test_conversions_to_bf16_and_fp8_round_to_nearest_even_and_saturate():
    specials = [0.0, -0.0, 1.0, 1.0625, 1.1875, 1.00390625, 448.0, 464.0, 1000.0, -1e6, 57344.0, 61440.0, 2.0**-9,
                2.0**-10, 3 * 2.0**-11, 2.0**-17, math.inf, -math.inf, math.nan, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8]
    rng = np.random.default_rng(5)
    values = np.array(specials + list(rng.standard_normal(64) * 50), dtype=np.float32)
    n = len(values)
    b = np.zeros(n, dtype=np.uint16)
    e4, e5 = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.uint8)
    back = np.zeros(n, dtype=np.float32)
    dsl.interpret(run_narrow, values, bits(b, bf16), bits(e4, f8e4m3), bits(e5, f8e5m2), back)
    assert list(b) == [_bf16_bits(float(v)) for v in values]
    assert list(e4) == [fp8.encode(float(v), f8e4m3) for v in values]
    assert list(e5) == [fp8.encode(float(v), f8e5m2) for v in values]
    decoded = [fp8.decode(int(code), f8e4m3) for code in e4]
    assert [str(v) for v in back] == [str(np.float32(v)) for v in decoded]


@dsl.kernel(ftz=True)
def halve_ftz(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x
    y[i] = x[i] * 0.5


@dsl.kernel
def halve(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x
    y[i] = x[i] * 0.5


@dsl.jit
def run_halves(x: Tensor[f32], flushed: Tensor[f32], kept: Tensor[f32]):
    halve_ftz(x, flushed).launch(grid=1, block=x.shape[0])
    halve(x, kept).launch(grid=1, block=x.shape[0])


def test_ftz_kernels_flush_f32_subnormals_and_others_keep_them():
    x = np.array([2e-38, -2e-38, 1e-39, 3.0], dtype=np.float32)
    flushed, kept = np.ones_like(x), np.ones_like(x)
    dsl.interpret(run_halves, x, flushed, kept)
    assert [str(v) for v in flushed] == ["0.0", "-0.0", "0.0", "1.5"]
    np.testing.assert_array_equal(kept, x * np.float32(0.5))
    assert kept[0] != 0 and kept[2] != 0
