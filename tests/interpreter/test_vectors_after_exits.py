"""Vectors, MMA fragments and wgmma accumulators defined after an early exit (issue 28, item 1).

A `return` under a run-time `if` (or a `break` / `continue` in a run-time loop) leaves the
rest of the block to the paths that did not exit; what the rest defines, a `vload` the guard
protects included, is carried like a scalar. Each kernel runs in the interpreter, which
faults on any access out of bounds, so a load that ran on a path that had left (past the end
of its tensor, here) would fail the test, and the outputs are compared with NumPy, rows the
exited paths own included (they must stay as they were).
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, bf16, f16, f32, i8, i32
from dsl.interpreter import bits

RNG = np.random.default_rng(28)


@dsl.kernel
def copy_rows(x: Tensor[f16], y: Tensor[f16], rows: Int32):
    row = dsl.block_idx.x
    if row >= rows:
        return
    v = x.vload(row * 8, 8)
    y.vstore(row * 8, v)


@dsl.jit
def run_copy_rows(x: Tensor[f16], y: Tensor[f16], rows: Int32, blocks: Int32):
    copy_rows(x, y, rows).launch(grid=blocks, block=1)


def test_the_issue_kernel_compiles_and_copies_only_the_rows_that_exist():
    rows, blocks = 5, 8
    x = RNG.standard_normal(rows * 8).astype(np.float16)  # blocks 5..7 would read past its end
    y = np.full(blocks * 8, -1.0, dtype=np.float16)
    dsl.interpret(run_copy_rows, x, y, rows, blocks)
    np.testing.assert_array_equal(y[:rows * 8], x)
    np.testing.assert_array_equal(y[rows * 8:], -1.0)  # the rows past `rows` are untouched
    compiled = dsl.compile(run_copy_rows, x, y, rows, blocks)
    assert "ld.global.v4" in compiled.ptx and "st.global.v4" in compiled.ptx  # one 128-bit access each


@dsl.kernel
def scale_rows_skipping(x: Tensor[f32, 2], y: Tensor[f32, 2], limit: Int32):
    """`continue` past rows whose first element is negative, `break` at the first row past
    `limit`; each row that is reached loads one vector after those exits."""
    for r in range(x.shape[0]):
        if r >= limit:
            break
        if x[r, 0] < 0.0:
            continue
        v = x.vload((r, 0), 4)
        w = v * 2.0 + 1.0
        y.vstore((r, 0), w)


@dsl.jit
def run_scale_rows_skipping(x: Tensor[f32, 2], y: Tensor[f32, 2], limit: Int32):
    scale_rows_skipping(x, y, limit).launch(grid=1, block=1)


def test_vectors_after_break_and_continue_in_a_run_time_loop():
    x = RNG.standard_normal((9, 4)).astype(np.float32)
    x[[1, 4], 0] = -np.abs(x[[1, 4], 0]) - 1.0
    x[[0, 2, 3, 5], 0] = np.abs(x[[0, 2, 3, 5], 0]) + 0.5
    y = np.zeros_like(x)
    dsl.interpret(run_scale_rows_skipping, x, y, 6)
    expected = np.zeros_like(x)
    for r in (0, 2, 3, 5):  # rows below the limit whose first element is not negative
        expected[r] = x[r] * np.float32(2.0) + np.float32(1.0)
    np.testing.assert_array_equal(y, expected)


@dsl.kernel(target="sm_90")
def mma_tiles(a: Tensor[i8, 2], b_t: Tensor[i8, 2], d: Tensor[i32, 2], tiles: Int32):
    """Block k multiplies row tile k of `a` (16 rows) by `b_t`; blocks past `tiles` leave
    before they build a fragment. s8 m16n8k32, fragments by the PTX layout."""
    tile = dsl.block_idx.x
    if tile >= tiles:
        return
    lane = dsl.thread_idx.x
    g, q = lane // 4, lane % 4
    r0 = 16 * tile
    fa = dsl.vector(*[a[r0 + g + 8 * ((j // 4) % 2), 4 * q + 16 * (j // 8) + j % 4] for j in dsl.static_range(16)])
    fb = dsl.vector(*[b_t[g, 4 * q + 16 * (j // 4) + j % 4] for j in dsl.static_range(8)])
    out = dsl.mma_sync(fa, fb, dsl.zeros(i32, 4))
    for j in dsl.static_range(4):
        d[r0 + g + 8 * (j // 2), 2 * q + j % 2] = out[j]


@dsl.jit
def run_mma_tiles(a: Tensor[i8, 2], b_t: Tensor[i8, 2], d: Tensor[i32, 2], tiles: Int32):
    mma_tiles(a, b_t, d, tiles).launch(grid=d.shape[0] // 16, block=32)


def test_mma_fragments_after_an_early_return_are_exact():
    a = RNG.integers(-128, 128, (32, 32), dtype=np.int8)
    b_t = RNG.integers(-128, 128, (8, 32), dtype=np.int8)
    d = np.full((48, 8), 7, dtype=np.int32)  # three row tiles; the third block returns
    dsl.interpret(run_mma_tiles, a, b_t, d, 2)  # `a` has two tiles: the third would read past it
    np.testing.assert_array_equal(d[:32], a.astype(np.int64) @ b_t.astype(np.int64).T)
    np.testing.assert_array_equal(d[32:], 7)


@dsl.kernel(target="sm_90a")
def wgmma_tiles(a: Tensor[bf16, 2], tb: dsl.TensorMap, d: Tensor[f32, 2], tiles: Int32):
    """d (64 x 128 per block) = a (64 x 64, in registers) @ b (64 x 128, N-major, by TMA); a
    block past `tiles` leaves first, so its accumulator is defined only after the exit."""
    if dsl.block_idx.x >= tiles:
        return
    smem = dsl.SharedAllocator(dynamic=True)
    sb = smem.array(dsl.bf16, (2, 64, 64), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t == 0:
        dsl.mbarrier_expect_tx(bar, 0, 64 * 128 * 2)
        for chunk in dsl.static_range(2):
            dsl.tma_load(sb, (chunk,), tb, (0, 64 * chunk), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    row = 16 * warp + g
    r0 = 64 * dsl.block_idx.x
    fa = dsl.vector(*[a[r0 + row + 8 * ((e // 2) % 2), 16 * (e // 8) + 2 * q + 8 * (e // 4 % 2) + e % 2]
                      for e in dsl.static_range(32)])
    acc = dsl.wgmma(dsl.zeros(f32, 64), fa, None, sb, (), b_major="n")
    acc = dsl.wgmma_wait(acc)
    for j in dsl.static_range(16):
        for e in dsl.static_range(4):
            d[r0 + row + 8 * (e // 2), 8 * j + 2 * q + e % 2] = acc[4 * j + e]


@dsl.jit
def run_wgmma_tiles(a: Tensor[bf16, 2], b: Tensor[bf16, 2], d: Tensor[f32, 2], tiles: Int32):
    tb = dsl.tensor_map(b, box=(64, 64), swizzle=128)
    wgmma_tiles(a, tb, d, tiles).launch(grid=d.shape[0] // 64, block=128)


def bf16_bits(values: np.ndarray) -> bits:
    """Values exactly representable in bf16 (small integers), as bf16 tensor arguments."""
    return bits((values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16), bf16)


@pytest.mark.filterwarnings("ignore::dsl.diagnostics.DiagnosticWarning")  # DSL502: one block of 128 threads
def test_a_wgmma_accumulator_after_an_early_return():
    a = RNG.integers(-4, 5, (64, 64)).astype(np.float32)
    b = RNG.integers(-4, 5, (64, 128)).astype(np.float32)
    d = np.full((128, 128), 5.0, dtype=np.float32)  # two blocks; the second returns
    dsl.interpret(run_wgmma_tiles, bf16_bits(a), bf16_bits(b), d, 1)  # `a` has one tile of rows
    np.testing.assert_array_equal(d[:64], a @ b)  # small integers: exact in f32
    np.testing.assert_array_equal(d[64:], 5.0)
    assert dsl.compile(run_wgmma_tiles, dsl.TensorSpec(bf16, rank=2), dsl.TensorSpec(bf16, rank=2),
                       dsl.TensorSpec(f32, rank=2), Int32, target="sm_90a").ptx.count("wgmma.mma_async") == 4
