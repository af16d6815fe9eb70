"""The 8-bit forms of wgmma in the interpreter: m64nNk32 on fp8 (e4m3, e5m2, mixed) into f32 and
on 8-bit integers (s8, u8, mixed) into s32, for a 64 x 64 x 128 product of one warpgroup, A in
shared memory or in registers, checked against NumPy on an independent decode of the bytes."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Tensor, i32
from dsl.interpreter import bits

RNG = np.random.default_rng(8)
M, N, K = 64, 64, 128


@dsl.kernel(target="sm_90a")
def product(a: Tensor, b: Tensor, c: Tensor):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(a.dtype, (64, 128), swizzle=128)
    sb = smem.array(b.dtype, (64, 128), swizzle=128)
    t = dsl.thread_idx.x
    for e in dsl.static_range(64):  # thread t copies half a row of each tile
        sa[t // 2, (t % 2) * 64 + e] = a[t // 2, (t % 2) * 64 + e]
        sb[t // 2, (t % 2) * 64 + e] = b[t // 2, (t % 2) * 64 + e]
    dsl.fence_proxy_async()
    dsl.barrier()
    acc = dsl.wgmma(dsl.zeros(c.dtype, 32), sa, (0,), sb, (0,))
    acc = dsl.wgmma_wait(acc)
    for e in dsl.static_range(32):
        c[t, e] = acc[e]


@dsl.kernel(target="sm_90a")
def product_a_in_registers(fragments: Tensor, b: Tensor, c: Tensor):
    smem = dsl.SharedAllocator(dynamic=True)
    sb = smem.array(b.dtype, (64, 128), swizzle=128)
    t = dsl.thread_idx.x
    for e in dsl.static_range(64):
        sb[t // 2, (t % 2) * 64 + e] = b[t // 2, (t % 2) * 64 + e]
    dsl.fence_proxy_async()
    dsl.barrier()
    fa = dsl.vector(*[fragments[t * 64 + e] for e in dsl.static_range(64)])
    acc = dsl.wgmma(dsl.zeros(c.dtype, 32), fa, None, sb, (0,))
    acc = dsl.wgmma_wait(acc)
    for e in dsl.static_range(32):
        c[t, e] = acc[e]


@dsl.jit
def run(a: Tensor, b: Tensor, c: Tensor):
    product(a, b, c).launch(grid=1, block=128)


@dsl.jit
def run_a_in_registers(fragments: Tensor, b: Tensor, c: Tensor):
    product_a_in_registers(fragments, b, c).launch(grid=1, block=128)


def decode(raw: np.ndarray, kind: str) -> np.ndarray:
    """fp8 bytes as float64, from the formats' definitions (e4m3: bias 7, no infinities; e5m2: bias 15)."""
    exp_bits, bias = (4, 7) if kind == "e4m3" else (5, 15)
    man_bits = 7 - exp_bits
    raw = raw.astype(np.int64)
    sign = np.where(raw >> 7, -1.0, 1.0)
    exponent = (raw >> man_bits) & ((1 << exp_bits) - 1)
    mantissa = (raw & ((1 << man_bits) - 1)) / (1 << man_bits)
    normal = np.ldexp(1.0 + mantissa, exponent - bias)
    subnormal = np.ldexp(mantissa, 1 - bias)
    return sign * np.where(exponent == 0, subnormal, normal)


def finite_fp8(kind: str, shape: tuple[int, int]) -> np.ndarray:
    """Random bytes over the whole finite range (NaNs and infinities left out)."""
    raw = RNG.integers(0, 256, shape).astype(np.uint8)
    if kind == "e4m3":
        bad = (raw & 0x7F) == 0x7F
    else:
        bad = (raw & 0x7C) == 0x7C
    raw[bad] &= 0xF0  # a smaller exponent: finite
    return raw


def per_thread(d: np.ndarray) -> np.ndarray:
    """D (64 x N) as the warpgroup's threads hold it: element e of thread t at row
    16 (t // 32) + (t % 32) // 4 + 8 ((e // 2) % 2), column 8 (e // 4) + 2 (t % 4) + e % 2."""
    t = np.arange(128)[:, None]
    e = np.arange(32)[None, :]
    rows = 16 * (t // 32) + (t % 32) // 4 + 8 * ((e // 2) % 2)
    cols = 8 * (e // 4) + 2 * (t % 4) + e % 2
    return d[rows, cols]


def fragments(a: np.ndarray) -> np.ndarray:
    """A (64 x 128, 8-bit) as each thread holds it in registers, 16 elements per k32 step: word j of
    step s, byte h at row 16 w + g + 8 (j % 2), column 32 s + 4 q + 16 (j // 2) + h (lane 4 g + q
    of warp w), flattened thread by thread."""
    t = np.arange(128)[:, None]
    x = np.arange(64)[None, :]
    step, j, h = x // 16, (x // 4) % 4, x % 4
    rows = 16 * (t // 32) + (t % 32) // 4 + 8 * (j % 2)
    cols = 32 * step + 4 * (t % 4) + 16 * (j // 2) + h
    return a[rows, cols].reshape(-1)


DTYPES = {"e4m3": dsl.f8e4m3, "e5m2": dsl.f8e5m2, "s8": dsl.i8, "u8": dsl.u8}


def operand(kind: str, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(the bytes, their values as float64 or int64)."""
    if kind in ("e4m3", "e5m2"):
        raw = finite_fp8(kind, shape)
        return raw, decode(raw, kind)
    values = RNG.integers(-128, 128, shape) if kind == "s8" else RNG.integers(0, 256, shape)
    return values.astype(np.int8 if kind == "s8" else np.uint8), values.astype(np.int64)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, integer: bool) -> None:
    expected = per_thread(a @ b.T)
    if integer:
        np.testing.assert_array_equal(c, expected)
    else:  # exact products; f32 sums over four k32 steps: within their rounding of the exact sum
        bound = per_thread(np.abs(a) @ np.abs(b).T) * 2.0**-21
        assert np.all(np.abs(c.astype(np.float64) - expected) <= bound)


@pytest.mark.parametrize("a_kind, b_kind", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e4m3"), ("s8", "s8"),
                                            ("u8", "s8"), ("u8", "u8")])
def test_an_8_bit_product_from_shared_memory(a_kind, b_kind):
    (a_raw, a), (b_raw, b) = operand(a_kind, (M, K)), operand(b_kind, (N, K))
    integer = a_kind in ("s8", "u8")
    c = np.zeros((128, 32), dtype=np.int32 if integer else np.float32)
    dsl.interpret(run, bits(a_raw, DTYPES[a_kind]) if not integer else a_raw,
                  bits(b_raw, DTYPES[b_kind]) if not integer else b_raw, c)
    check(c, a, b, integer)


@pytest.mark.parametrize("a_kind, b_kind", [("e5m2", "e4m3"), ("s8", "u8")])
def test_an_8_bit_product_with_a_in_registers(a_kind, b_kind):
    (a_raw, a), (b_raw, b) = operand(a_kind, (M, K)), operand(b_kind, (N, K))
    integer = a_kind in ("s8", "u8")
    c = np.zeros((128, 32), dtype=np.int32 if integer else np.float32)
    frag = fragments(a_raw)
    dsl.interpret(run_a_in_registers, bits(frag, DTYPES[a_kind]) if not integer else frag,
                  bits(b_raw, DTYPES[b_kind]) if not integer else b_raw, c)
    check(c, a, b, integer)


def test_s32_accumulators_wrap():
    """255 x 255 x 128 = 8323200 per u8 product; 300 of them pass 2^31."""
    a = np.full((M, K), 255, dtype=np.uint8)
    c = np.zeros((128, 32), dtype=np.int32)
    dsl.interpret(run_wrapping, a, c, 300)
    expected = (8323200 * 300 + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(c, np.full((128, 32), expected))


@dsl.kernel(target="sm_90a")
def repeated(a: Tensor[dsl.u8, 2], c: Tensor[i32, 2], times: dsl.Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.u8, (64, 128), swizzle=128)
    t = dsl.thread_idx.x
    for e in dsl.static_range(64):
        sa[t // 2, (t % 2) * 64 + e] = a[t // 2, (t % 2) * 64 + e]
    dsl.fence_proxy_async()
    dsl.barrier()
    acc = dsl.zeros(i32, 32)
    for _ in range(times):
        acc = dsl.wgmma(acc, sa, (0,), sa, (0,))
    acc = dsl.wgmma_wait(acc)
    for e in dsl.static_range(32):
        c[t, e] = acc[e]


@dsl.jit
def run_wrapping(a: Tensor[dsl.u8, 2], c: Tensor[i32, 2], times: dsl.Int32):
    repeated(a, c, times).launch(grid=1, block=128)

