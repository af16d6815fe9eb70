"""Views in the interpreter: the same bytes as elements of another type, through tensors and
shared arrays, 8-bit tiles through ldmatrix on the m16n8k32 fragment layout, and the launcher's
alignment check of the tensor behind a wider view."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Tensor, i8, i16, i32
from dsl.runtime import ArgumentError

RNG = np.random.default_rng(11)


@dsl.kernel
def widen_and_narrow(x: Tensor[i8, 2], y: Tensor[i8, 2], shape: Tensor[i32]):
    """Row r of `x` read as i32 words, added as i16 halves into `y`; the views' extents out."""
    r = dsl.block_idx.x
    t = dsl.thread_idx.x
    words = x.view(dsl.i32)
    halves = y.view(dsl.i16)
    if t < words.shape[1]:
        w = words[r, t]
        halves[r, 2 * t] = dsl.cast(w & 0xFFFF, dsl.i16)
        halves[r, 2 * t + 1] = dsl.cast(w >> 16, dsl.i16)
    if r == 0 and t == 0:
        shape[0] = words.shape[1]
        shape[1] = words.strides[0]
        shape[2] = halves.shape[1]
        shape[3] = halves.strides[0]


@dsl.jit
def run_widen_and_narrow(x: Tensor[i8, 2], y: Tensor[i8, 2], shape: Tensor[i32]):
    widen_and_narrow(x, y, shape).launch(grid=x.shape[0], block=32)


def test_a_tensor_view_moves_the_same_bytes():
    x = RNG.integers(-128, 128, (3, 80), dtype=np.int8)[:, :64]  # rows 80 bytes apart: a multiple of 4
    y = np.zeros((3, 64), dtype=np.int8)
    shape = np.zeros(4, dtype=np.int32)
    dsl.interpret(run_widen_and_narrow, x, y, shape)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(shape, [16, 20, 32, 32])  # i32 view: 16 words, rows 20 apart; i16: 32, 32


def test_a_view_wider_than_the_tensor_allows_is_refused_before_the_launch():
    """Rows 66 bytes apart hold no whole number of i32 words: the launcher's alignment check,
    which the view's 4-byte accesses set, names the parameter."""
    x = np.zeros((3, 66), dtype=np.int8)[:, :64]
    with pytest.raises(ArgumentError, match=r"'x' has stride 66 .* 4-byte"):
        dsl.interpret(run_widen_and_narrow, x, np.zeros((3, 64), dtype=np.int8), np.zeros(4, dtype=np.int32))


@dsl.kernel
def load_i8_fragments(x: Tensor[i8, 2], out: Tensor[i8, 2]):
    """A 16 x 32 i8 tile written through its i16 view, read back by ldmatrix x4 as bytes."""
    tile = dsl.SharedAllocator().array(i8, (16, 32))
    pairs = tile.view(i16)
    lane = dsl.thread_idx.x
    source = x.view(i16)
    for k in dsl.static_range(8):
        pairs[lane // 2, (lane % 2) * 8 + k] = source[lane // 2, (lane % 2) * 8 + k]
    dsl.barrier()
    frag = dsl.ldmatrix(tile, (lane % 16, (lane // 16) * 16))
    out.vstore((lane, 0), frag)


@dsl.jit
def run_load_i8_fragments(x: Tensor[i8, 2], out: Tensor[i8, 2]):
    load_i8_fragments(x, out).launch(grid=1, block=32)


def test_ldmatrix_of_8_bit_rows_gives_the_m16n8k32_a_fragment():
    """Lane (g, q) = (lane // 4, lane % 4) holds A[g + 8 ((j // 4) % 2), 4 q + 16 (j // 8) + j % 4]
    in lane j of its vector<16xi8>: the layout of `dsl/language/tensor_cores.py`."""
    x = RNG.integers(-128, 128, (16, 32), dtype=np.int8)
    out = np.zeros((32, 16), dtype=np.int8)
    dsl.interpret(run_load_i8_fragments, x, out)
    g, q, j = np.arange(32)[:, None] // 4, np.arange(32)[:, None] % 4, np.arange(16)[None, :]
    np.testing.assert_array_equal(out, x[g + 8 * ((j // 4) % 2), 4 * q + 16 * (j // 8) + j % 4])
