"""Lane reductions and unpacked lanes compute what the README says (issue 28, item 3).

`v.sum()` adds lanes pairwise by halves, each add rounded in the vector's type, so the
expected f16 sums are computed in that order with NumPy float16; `sum(v)` adds left to
right from 0, as Python does; max and min propagate NaN (`dsl.max`); integer reductions
are exact and wrap as the type does.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, f16, f32, i32, u8
from dsl.diagnostics import CompileError

RNG = np.random.default_rng(3)


def halving(lanes: np.ndarray, combine) -> np.ndarray:
    """Lane i with lane i + w/2 until one is left (an odd lane out is combined last)."""
    if lanes.shape[-1] == 1:
        return lanes[..., 0]
    if lanes.shape[-1] % 2:
        return combine(halving(lanes[..., :-1], combine), lanes[..., -1])
    half = lanes.shape[-1] // 2
    return halving(combine(lanes[..., :half], lanes[..., half:]), combine)


@dsl.kernel
def reduce_f16(x: Tensor[f16], out: Tensor[f16, 2], n: Int32):
    i = dsl.thread_idx.x
    if i < n:
        v = x.vload(i * 8, 8)
        out[0, i] = v.sum()
        out[1, i] = sum(v)
        out[2, i] = v.max()
        out[3, i] = min(v)
        out[4, i] = dsl.max(*v)
        a, b, c, d, e, f, g, h = v
        out[5, i] = ((a + b) + (c + d)) + ((e + f) + (g + h))


@dsl.jit
def run_reduce_f16(x: Tensor[f16], out: Tensor[f16, 2]):
    reduce_f16(x, out, out.shape[1]).launch(grid=1, block=64)


def test_f16_reductions_round_in_their_order():
    x = (RNG.standard_normal(40 * 8) * 30).astype(np.float16)
    x[5 * 8 + 3] = np.nan  # row 5: max and min propagate it
    out = np.zeros((6, 40), dtype=np.float16)
    dsl.interpret(run_reduce_f16, x, out)
    lanes = x.reshape(40, 8)
    np.testing.assert_array_equal(out[0], halving(lanes, np.add))  # float16 adds, rounded each time
    left_to_right = np.zeros(40, dtype=np.float16)
    for k in range(8):
        left_to_right = left_to_right + lanes[:, k]
    np.testing.assert_array_equal(out[1], left_to_right)
    np.testing.assert_array_equal(out[2], lanes.max(axis=1))  # NumPy's max propagates NaN too
    np.testing.assert_array_equal(out[3], lanes.min(axis=1))
    np.testing.assert_array_equal(out[4], lanes.max(axis=1))
    pairs = ((lanes[:, 0] + lanes[:, 1]) + (lanes[:, 2] + lanes[:, 3])) + ((lanes[:, 4] + lanes[:, 5])
                                                                       + (lanes[:, 6] + lanes[:, 7]))
    np.testing.assert_array_equal(out[5], pairs)  # the unpacked lanes, added as written
    assert np.isnan(out[2, 5]) and np.isnan(out[3, 5])


@dsl.kernel
def reduce_ints(x: Tensor[i32], b: Tensor[u8], out: Tensor[i32, 2], bout: Tensor[u8, 2]):
    i = dsl.thread_idx.x
    v = x.vload(i * 4, 4)
    out[0, i] = v.sum()
    out[1, i] = v.max()
    out[2, i] = v.min()
    w = b.vload(i * 16, 16)
    bout[0, i] = w.sum()  # u8: wraps modulo 256
    bout[1, i] = w.max()
    bout[2, i] = max([e for e in w])  # a per-thread list reduces with dsl.max too


@dsl.jit
def run_reduce_ints(x: Tensor[i32], b: Tensor[u8], out: Tensor[i32, 2], bout: Tensor[u8, 2]):
    reduce_ints(x, b, out, bout).launch(grid=1, block=out.shape[1])


def test_integer_reductions_are_exact_and_wrap_in_their_type():
    x = RNG.integers(-(2**31), 2**31, 16 * 4, dtype=np.int64).astype(np.int32)
    b = RNG.integers(0, 256, 16 * 16, dtype=np.int64).astype(np.uint8)
    out = np.zeros((3, 16), dtype=np.int32)
    bout = np.zeros((3, 16), dtype=np.uint8)
    dsl.interpret(run_reduce_ints, x, b, out, bout)
    lanes = x.reshape(16, 4).astype(np.int64)
    np.testing.assert_array_equal(out[0], ((lanes.sum(axis=1) + 2**31) % 2**32 - 2**31).astype(np.int32))
    np.testing.assert_array_equal(out[1], lanes.max(axis=1))
    np.testing.assert_array_equal(out[2], lanes.min(axis=1))
    blanes = b.reshape(16, 16).astype(np.int64)
    np.testing.assert_array_equal(bout[0], blanes.sum(axis=1) % 256)
    np.testing.assert_array_equal(bout[1], blanes.max(axis=1))
    np.testing.assert_array_equal(bout[2], blanes.max(axis=1))


@dsl.kernel
def dot4(a: Tensor[f32], b: Tensor[f32], out: Tensor[f32]):
    i = dsl.thread_idx.x
    out[i] = (a.vload(i * 4, 4) * b.vload(i * 4, 4)).sum()
    total = 0.0
    for e in a.vload(i * 4, 4):  # unrolled over the lanes
        total += e
    out[32 + i] = total


@dsl.jit
def run_dot4(a: Tensor[f32], b: Tensor[f32], out: Tensor[f32]):
    dot4(a, b, out).launch(grid=1, block=32)


def test_a_dot_product_and_a_loop_over_lanes():
    a, b = RNG.standard_normal(128).astype(np.float32), RNG.standard_normal(128).astype(np.float32)
    out = np.zeros(64, dtype=np.float32)
    dsl.interpret(run_dot4, a, b, out)
    products = (a * b).reshape(32, 4)
    np.testing.assert_array_equal(out[:32], (products[:, 0] + products[:, 2]) + (products[:, 1] + products[:, 3]))
    lanes = a.reshape(32, 4)
    expected = np.zeros(32, dtype=np.float32)
    for k in range(4):
        expected = expected + lanes[:, k]
    np.testing.assert_array_equal(out[32:], expected)


@dsl.kernel
def lane_at_run_time(x: Tensor[i32], k: Int32):
    v = x.vload(0, 4)
    x[0] = v[k]


@dsl.jit
def run_lane_at_run_time(x: Tensor[i32], k: Int32):
    lane_at_run_time(x, k).launch(grid=1, block=1)


def test_a_run_time_lane_is_refused_not_run():
    """The interpreter runs only what compiles: the lane must be a compile-time int."""
    with pytest.raises(CompileError, match=r"a vector lane must be a compile-time int .* 'k' is a run-time i32"):
        dsl.interpret(run_lane_at_run_time, np.zeros(4, dtype=np.int32), 1)
