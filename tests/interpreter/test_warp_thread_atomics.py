"""Atomics and TMA reductions where a block's warps run in threads of their own (kernels with
mbarriers or named barriers): many warps updating one address or one box lose nothing.

An update is a read and a write; a warp thread preempted between the two wrote back a value
that ignored the other warps' updates meanwhile (the attention backward's two consumer
warpgroups reduce dQ into the same box: one of their reductions went missing for some
schedules). Python switches threads every few milliseconds by default, which hid it; the tests
switch every microsecond, where an unguarded update loses most of them."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import dsl
from dsl import Int32, Tensor, f32, i32

WARPS, TIMES = 8, 40


@pytest.fixture
def preempting():
    """Thread switches every microsecond while the test runs."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def warp_threads(bar):
    """An mbarrier in the kernel: the interpreter runs each warp in its own thread."""
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()


@dsl.kernel(target="sm_90a")
def count(counter: Tensor[i32, 1], total: Tensor[f32, 1], times: Int32):
    smem = dsl.SharedAllocator()
    warp_threads(smem.array(dsl.u64, (1,)))
    for _ in range(times):
        dsl.atomic_add(counter, 0, 1)
        dsl.atomic_add(total, 0, 0.5)


@dsl.jit
def run_count(counter: Tensor[i32, 1], total: Tensor[f32, 1], times: Int32):
    count(counter, total, times).launch(grid=1, block=32 * WARPS)


@dsl.kernel(target="sm_90a")
def reduce_box(ty: dsl.TensorMap, times: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    warp_threads(smem.array(dsl.u64, (1,)))
    tile = smem.array(f32, (WARPS, 8, 32), swizzle=128)  # one tile of ones per warp
    t = dsl.thread_idx.x
    for k in dsl.static_range(8):
        tile[t // 32, k, t % 32] = 1.0
    dsl.fence_proxy_async()
    dsl.barrier()
    if t % 32 == 0:  # one thread of each warp reduces its tile into the same box, `times` times
        for _ in range(times):
            dsl.tma_reduce(ty, (0, 0), tile, (t // 32,))
            dsl.tma_store_commit()
        dsl.tma_store_wait(0)


@dsl.jit
def run_reduce_box(y: Tensor[f32, 2], times: Int32):
    reduce_box(dsl.tensor_map(y, box=(8, 32), swizzle=128), times).launch(grid=1, block=32 * WARPS)


def test_atomics_of_every_warp_thread_count(preempting):
    counter, total = np.zeros(1, np.int32), np.zeros(1, np.float32)
    dsl.interpret(run_count, counter, total, TIMES)
    assert counter[0] == 32 * WARPS * TIMES  # every lane of every warp, every time
    assert total[0] == 0.5 * 32 * WARPS * TIMES  # exact: sums of halves below 2**24


def test_tma_reductions_of_every_warp_thread_add_up(preempting):
    y = np.zeros((8, 32), np.float32)
    dsl.interpret(run_reduce_box, y, TIMES)
    np.testing.assert_array_equal(y, np.full((8, 32), WARPS * TIMES, np.float32))
