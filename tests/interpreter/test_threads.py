"""Threads that talk to each other: shared memory and barriers, warp shuffles, votes and
reductions, atomics, and the coordinates of multi-dimensional blocks and grids.

Expected values come from plain-Python models of the CUDA semantics (each thread's shuffle
source lane, each warp's ballot, atomics applied in thread order); a barrier or shuffle the GPU
leaves undefined (divergent, or reading a lane that does not take part) must be an error.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Constexpr, Int32, Tensor, f32, i32, u32
from dsl.runtime.driver import LaunchError

RNG = np.random.default_rng(11)


@dsl.kernel
def reverse_blocks(x: Tensor[f32], y: Tensor[f32], BLOCK: Constexpr[int]):
    tile = dsl.SharedAllocator().array(f32, BLOCK)
    t = dsl.thread_idx.x
    base = dsl.block_idx.x * BLOCK
    tile[t] = x[base + t]
    dsl.barrier()
    y[base + t] = tile[BLOCK - 1 - t]


@dsl.jit
def run_reverse(x: Tensor[f32], y: Tensor[f32], BLOCK: Constexpr[int] = 96):
    reverse_blocks(x, y, BLOCK).launch(grid=x.shape[0] // BLOCK, block=BLOCK)


def test_shared_memory_is_per_block_and_barriers_order_it():
    x = RNG.standard_normal(96 * 300, dtype=np.float32)  # several batches of blocks
    y = np.zeros_like(x)
    dsl.interpret(run_reverse, x, y)
    np.testing.assert_array_equal(y, x.reshape(300, 96)[:, ::-1].reshape(-1))


@dsl.kernel
def early_exit(x: Tensor[f32], y: Tensor[f32], n: Int32):
    tile = dsl.SharedAllocator().array(f32, 128)
    t = dsl.thread_idx.x
    if t >= n:
        return
    tile[t] = x[t]
    dsl.barrier()
    y[t] = tile[n - 1 - t]


@dsl.jit
def run_early_exit(x: Tensor[f32], y: Tensor[f32]):
    early_exit(x, y, x.shape[0]).launch(grid=1, block=128)


def test_threads_that_returned_do_not_hold_up_a_barrier():
    x = RNG.standard_normal(100, dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(run_early_exit, x, y)
    np.testing.assert_array_equal(y, x[::-1])


@dsl.kernel
def divergent(x: Tensor[f32]):
    t = dsl.thread_idx.x
    if t < 32:
        dsl.barrier()
        x[t] = 1.0
    dsl.barrier()


@dsl.jit
def run_divergent(x: Tensor[f32]):
    divergent(x).launch(grid=2, block=64)


def test_a_barrier_in_divergent_code_is_an_error():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_divergent, np.zeros(64, dtype=np.float32))
    message = str(caught.value)
    assert "a barrier or warp operation in divergent control flow" in message
    assert "by thread (32, 0, 0) of block (0, 0, 0)" in message  # the first to reach the second barrier
    assert caught.value.diagnostic.range.line == divergent.fn.__code__.co_firstlineno + 6


@dsl.kernel
def shuffles(x: Tensor[i32], out: Tensor[i32, 2]):
    t = dsl.thread_idx.x
    v = x[t]
    out[0, t] = dsl.shfl_xor(v, 5)
    out[1, t] = dsl.shfl_down(v, 3)
    out[2, t] = dsl.shfl_up(v, 2)
    out[3, t] = dsl.shfl_idx(v, 7)
    out[4, t] = dsl.shfl_down(v, 3, width=8)
    out[5, t] = dsl.shfl_up(v, 1, width=8)
    out[6, t] = dsl.shfl_idx(v, 5, width=16)
    out[7, t] = dsl.shfl_xor(v, 2, width=4)


@dsl.jit
def run_shuffles(x: Tensor[i32], out: Tensor[i32, 2]):
    shuffles(x, out).launch(grid=1, block=x.shape[0])


def cuda_shuffle(values: list[int], mode: str, delta: int, width: int) -> list[int]:
    """CUDA's __shfl_*_sync for a whole warp: segments of `width` lanes; out-of-segment reads
    keep the lane's own value."""
    out = []
    for lane, own in enumerate(values):
        base = lane - lane % width
        j = {"xor": lane ^ delta, "down": lane + delta, "up": lane - delta, "idx": base + delta % width}[mode]
        inside = base <= j < base + width
        out.append(values[j] if inside else own)
    return out


def test_shuffles_follow_cuda_segments_and_bounds():
    x = RNG.integers(-1000, 1000, 64).astype(np.int32)  # two warps
    out = np.zeros((8, 64), dtype=np.int32)
    dsl.interpret(run_shuffles, x, out)
    cases = [("xor", 5, 32), ("down", 3, 32), ("up", 2, 32), ("idx", 7, 32), ("down", 3, 8), ("up", 1, 8),
             ("idx", 5, 16), ("xor", 2, 4)]
    for row, (mode, delta, width) in enumerate(cases):
        expected = [v for w in range(2) for v in cuda_shuffle(list(x[32 * w:32 * w + 32]), mode, delta, width)]
        assert list(out[row]) == expected, (mode, delta, width)


@dsl.kernel
def half_warp_shuffle(x: Tensor[f32]):
    t = dsl.thread_idx.x
    if t % 32 < 16:
        x[t] = dsl.shfl_xor(x[t], 16)


@dsl.jit
def run_half_warp(x: Tensor[f32]):
    half_warp_shuffle(x).launch(grid=1, block=32)


def test_a_shuffle_reading_a_lane_that_does_not_take_part_is_an_error():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_half_warp, np.zeros(32, dtype=np.float32))
    assert "reads lane 16 of the warp, which is not executing it" in str(caught.value)
    assert "by thread (0, 0, 0) of block (0, 0, 0)" in str(caught.value)


@dsl.kernel
def votes(x: Tensor[i32], out: Tensor[u32, 2], sums: Tensor[i32, 2], fmax: Tensor[f32]):
    t = dsl.thread_idx.x
    v = x[t]
    out[0, t] = dsl.ballot(v > 0)
    out[1, t] = dsl.cast(dsl.any(v > 900), u32)
    out[2, t] = dsl.cast(dsl.all(v > -1001), u32)
    out[3, t] = dsl.match_any(v % 4)
    sums[0, t] = dsl.warp_reduce(v, "sum")
    sums[1, t] = dsl.warp_reduce(v, "min")
    sums[2, t] = dsl.warp_reduce(v, "max", width=8)
    fmax[t] = dsl.warp_reduce(dsl.cast(v, f32), "max")


@dsl.jit
def run_votes(x: Tensor[i32], out: Tensor[u32, 2], sums: Tensor[i32, 2], fmax: Tensor[f32]):
    votes(x, out, sums, fmax).launch(grid=1, block=x.shape[0])


def test_votes_match_and_warp_reductions():
    x = RNG.integers(-1000, 1000, 64).astype(np.int32)
    x[40] = 950  # only the second warp has a value above 900
    out = np.zeros((4, 64), dtype=np.uint32)
    sums = np.zeros((3, 64), dtype=np.int32)
    fmax = np.zeros(64, dtype=np.float32)
    dsl.interpret(run_votes, x, out, sums, fmax)
    for t in range(64):
        warp = [int(v) for v in x[32 * (t // 32):32 * (t // 32) + 32]]
        lane = t % 32
        assert out[0, t] == sum(1 << k for k, v in enumerate(warp) if v > 0)
        assert out[1, t] == any(v > 900 for v in warp)
        assert out[2, t] == 1
        mod = [int(np.fmod(v, 4)) for v in warp]
        assert out[3, t] == sum(1 << k for k, m in enumerate(mod) if m == mod[lane])
        assert sums[0, t] == sum(warp) and sums[1, t] == min(warp)
        assert sums[2, t] == max(warp[lane - lane % 8:lane - lane % 8 + 8])
        assert fmax[t] == max(warp)


@dsl.kernel
def histogram(x: Tensor[i32], hist: Tensor[i32], old: Tensor[i32], total: Tensor[f32], v: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        old[i] = dsl.atomic_add(hist, x[i] % 8, 1)
        dsl.atomic_add(total, 0, v[i])


@dsl.kernel
def cas_counter(counter: Tensor[i32], turns: Tensor[i32]):
    t = dsl.thread_idx.x
    done = False
    while not done:
        seen = counter[0]
        if dsl.atomic_cas(counter, 0, seen, seen + 1) == seen:
            turns[t] = seen
            done = True


@dsl.jit
def run_atomics(x: Tensor[i32], hist: Tensor[i32], old: Tensor[i32], total: Tensor[f32], v: Tensor[f32],
                counter: Tensor[i32], turns: Tensor[i32]):
    histogram(x, hist, old, total, v, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 128), block=128)
    cas_counter(counter, turns).launch(grid=1, block=turns.shape[0])


def test_atomics_apply_in_thread_order():
    x = RNG.integers(0, 1000, 1000).astype(np.int32)
    v = RNG.standard_normal(1000, dtype=np.float32)
    hist, old = np.zeros(8, dtype=np.int32), np.zeros(1000, dtype=np.int32)
    total = np.zeros(1, dtype=np.float32)
    counter, turns = np.zeros(1, dtype=np.int32), np.full(64, -1, dtype=np.int32)
    dsl.interpret(run_atomics, x, hist, old, total, v, counter, turns)
    np.testing.assert_array_equal(hist, np.bincount(x % 8, minlength=8))
    seen = [0] * 8
    for i, bucket in enumerate(x % 8):  # each thread got the count of the threads before it
        assert old[i] == seen[bucket]
        seen[bucket] += 1
    acc = np.float32(0)
    for value in v:  # one rounding per thread, in thread order
        acc = np.float32(acc + value)
    assert total[0] == acc
    assert counter[0] == 64 and sorted(turns) == list(range(64))  # every thread won exactly one turn


@dsl.kernel
def coordinates(out: Tensor[i32, 2]):
    tx, ty, tz = dsl.thread_idx.x, dsl.thread_idx.y, dsl.thread_idx.z
    bx, by, bz = dsl.block_idx.x, dsl.block_idx.y, dsl.block_idx.z
    block = (bz * dsl.grid_dim.y + by) * dsl.grid_dim.x + bx
    t = (tz * dsl.block_dim.y + ty) * dsl.block_dim.x + tx
    i = block * (dsl.block_dim.x * dsl.block_dim.y * dsl.block_dim.z) + t
    out[0, i] = tx + 10 * ty + 100 * tz
    out[1, i] = bx + 10 * by + 100 * bz
    out[2, i] = dsl.lane_id()


@dsl.jit
def run_coordinates(out: Tensor[i32, 2]):
    coordinates(out).launch(grid=(3, 2, 2), block=(5, 4, 3))


def test_multidimensional_blocks_and_grids():
    out = np.full((3, 12 * 60), -1, dtype=np.int32)
    dsl.interpret(run_coordinates, out)
    expected = [[], [], []]
    for bz in range(2):
        for by in range(2):
            for bx in range(3):
                for tz in range(3):
                    for ty in range(4):
                        for tx in range(5):
                            t = (tz * 4 + ty) * 5 + tx
                            expected[0].append(tx + 10 * ty + 100 * tz)
                            expected[1].append(bx + 10 * by + 100 * bz)
                            expected[2].append(t % 32)
    assert out.tolist() == expected


@dsl.kernel
def dynamic_tiles(x: Tensor[f32], y: Tensor[f32], n: Int32):
    tile = dsl.SharedAllocator(dynamic=True).array(f32, n)
    t = dsl.thread_idx.x
    tile[t] = x[t] * 2.0
    dsl.barrier()
    y[t] = tile[n - 1 - t]


@dsl.jit
def run_dynamic(x: Tensor[f32], y: Tensor[f32]):
    n = x.shape[0]
    dynamic_tiles(x, y, n).launch(grid=1, block=n)


def test_dynamic_shared_memory_is_sized_by_the_launch():
    x = RNG.standard_normal(200, dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(run_dynamic, x, y)
    np.testing.assert_array_equal(y, (x * 2)[::-1])


@dsl.kernel
def staged(x: Tensor[f32], y: Tensor[f32], n: Int32):
    tile = dsl.SharedAllocator().array(f32, 256)
    t = dsl.thread_idx.x
    dsl.cp_async(tile, t * 4, x, t * 4, 16, mask=t * 4 < n)
    dsl.cp_async_commit()
    dsl.cp_async_wait(0)
    dsl.barrier()
    y[t] = tile[255 - t]


@dsl.jit
def run_staged(x: Tensor[f32], y: Tensor[f32], n: Int32):
    staged(x, y, n).launch(grid=1, block=64)


def test_async_copies_arrive_by_the_wait_and_a_false_mask_zero_fills_without_reading():
    x = RNG.standard_normal(100, dtype=np.float32)  # threads 25..63 would read past its end
    y = np.zeros(64, dtype=np.float32)
    dsl.interpret(run_staged, x, y, 100)
    staged_tile = np.concatenate([x, np.zeros(156, dtype=np.float32)])
    np.testing.assert_array_equal(y, staged_tile[255 - np.arange(64)])
