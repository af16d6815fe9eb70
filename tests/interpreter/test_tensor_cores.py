"""Tensor cores and warps that wait for one another, in the interpreter.

The fragment layouts are checked against plain-Python models of the PTX ISA's tables (each
lane's row and column), with integer data so the results are exact; the mbarrier tests need
the warps to run independently (a consumer that waits first must let the producer run), and a
kernel that would hang on the GPU is an error naming every warp and where it waits.
"""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Tensor, f16, f32, i8, i32
from dsl.interpreter import bits
from dsl.runtime.driver import LaunchError

RNG = np.random.default_rng(5)


def line_of(text: str) -> int:
    with open(__file__) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


# --- mma.sync, s8 m16n8k32: a0..a15 = rows g / g+8, columns 4q.. and 16+4q..; b0..b7 = K rows 4q.. and 16+4q..

@dsl.kernel(target="sm_90")
def mma_s8(a: Tensor[i8, 2], b_t: Tensor[i8, 2], c: Tensor[i32, 2], d: Tensor[i32, 2]):
    lane = dsl.thread_idx.x
    g, q = lane // 4, lane % 4
    fa = dsl.vector(*[a[g + 8 * ((j // 4) % 2), 4 * q + 16 * (j // 8) + j % 4] for j in dsl.static_range(16)])
    fb = dsl.vector(*[b_t[g, 4 * q + 16 * (j // 4) + j % 4] for j in dsl.static_range(8)])
    fc = dsl.vector(*[c[g + 8 * (j // 2), 2 * q + j % 2] for j in dsl.static_range(4)])
    out = dsl.mma_sync(fa, fb, fc)
    for j in dsl.static_range(4):
        d[g + 8 * (j // 2), 2 * q + j % 2] = out[j]


@dsl.jit
def run_mma_s8(a: Tensor[i8, 2], b_t: Tensor[i8, 2], c: Tensor[i32, 2], d: Tensor[i32, 2]):
    mma_s8(a, b_t, c, d).launch(grid=1, block=32)


def test_mma_sync_s8_is_exact_on_the_ptx_fragment_layout():
    a = RNG.integers(-128, 128, (16, 32), dtype=np.int8)
    b_t = RNG.integers(-128, 128, (8, 32), dtype=np.int8)
    c = RNG.integers(-(2**31), 2**31, (16, 8), dtype=np.int64).astype(np.int32)
    d = np.zeros((16, 8), dtype=np.int32)
    dsl.interpret(run_mma_s8, a, b_t, c, d)
    exact = a.astype(np.int64) @ b_t.astype(np.int64).T + c
    np.testing.assert_array_equal(d, ((exact + 2**31) % 2**32 - 2**31).astype(np.int32))  # s32 wraps


# --- ldmatrix x4 .trans: lane l gets column l // 4 of rows 2 (l % 4) and 2 (l % 4) + 1 of each matrix

@dsl.kernel(target="sm_90")
def load_fragments(x: Tensor[f16, 2], out: Tensor[f16, 2]):
    tile = dsl.SharedAllocator().array(f16, (16, 16))
    lane = dsl.thread_idx.x
    for k in dsl.static_range(8):
        tile[lane // 2, (lane % 2) * 8 + k] = x[lane // 2, (lane % 2) * 8 + k]
    dsl.barrier()
    words = dsl.ldmatrix(tile, (lane % 16, (lane // 16) * 8), count=4, transpose=True)
    for k in dsl.static_range(8):
        out[lane, k] = words[k]


@dsl.jit
def run_load_fragments(x: Tensor[f16, 2], out: Tensor[f16, 2]):
    load_fragments(x, out).launch(grid=1, block=32)


def test_ldmatrix_transposed_gives_each_lane_its_columns():
    x = RNG.integers(-1000, 1000, (16, 16)).astype(np.float16)
    out = np.zeros((32, 8), dtype=np.float16)
    dsl.interpret(run_load_fragments, x, out)
    expected = np.zeros((32, 8), dtype=np.float16)
    for lane in range(32):
        for i in range(4):  # matrix i: rows from lanes 8i..8i+7, i.e. tile rows 8 (i % 2).., columns 8 (i // 2)..
            m = x[8 * (i % 2):8 * (i % 2) + 8, 8 * (i // 2):8 * (i // 2) + 8]
            for h in range(2):
                expected[lane, 2 * i + h] = m[2 * (lane % 4) + h, lane // 4]
    np.testing.assert_array_equal(out, expected)


# --- mbarriers: a consumer warp that waits first, a producer warp that fills a one-slot buffer

@dsl.kernel(target="sm_90")
def handoff(x: Tensor[f32], y: Tensor[f32], rounds: dsl.Int32):
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, 32)
    full = smem.array(dsl.u64, (1,))
    empty = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    lane = t % 32
    if t == 0:
        dsl.mbarrier_init(full, 0, 1)
        dsl.mbarrier_init(empty, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.barrier()
    if t // 32 == 0:  # the consumer, warp 0, runs first
        for r in range(rounds):
            dsl.mbarrier_wait(full, 0, r % 2)
            y[r * 32 + lane] = buf[lane] * 2.0
            if lane == 0:
                dsl.mbarrier_arrive(empty, 0)
    else:
        for r in range(rounds):
            dsl.mbarrier_wait(empty, 0, (r % 2) ^ 1)  # a fresh barrier: the phase before the first is done
            buf[lane] = x[r * 32 + lane]
            if lane == 0:
                dsl.mbarrier_arrive(full, 0)


@dsl.jit
def run_handoff(x: Tensor[f32], y: Tensor[f32]):
    handoff(x, y, x.shape[0] // 32).launch(grid=2, block=64)


def test_warps_hand_a_buffer_to_each_other_through_mbarriers():
    x = RNG.standard_normal(32 * 7, dtype=np.float32)
    y = np.zeros_like(x)
    dsl.interpret(run_handoff, x, y)
    np.testing.assert_array_equal(y, 2 * x)


@dsl.kernel(target="sm_90")
def never_filled(y: Tensor[f32]):
    smem = dsl.SharedAllocator()
    full = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(full, 0, 1)
    dsl.barrier()
    if t >= 32:
        dsl.mbarrier_wait(full, 0, 0)  # nobody arrives: the first phase never completes
    y[t] = 1.0


@dsl.jit
def run_never_filled(y: Tensor[f32]):
    never_filled(y).launch(grid=1, block=96)


def test_a_wait_that_can_never_end_is_a_deadlock_error_not_a_hang():
    y = np.zeros(96, dtype=np.float32)
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_never_filled, y)
    message = str(caught.value).splitlines()[0]
    line = line_of("nobody arrives")
    assert "deadlock: every warp of the block waits and none can go on (" in message
    assert (f"warp 1 at dsl.mbarrier_wait (test_tensor_cores.py:{line}) for mbarrier full[0] to complete its "
            "phase of parity 0" in message
            and f"warp 2 at dsl.mbarrier_wait (test_tensor_cores.py:{line})" in message)
    assert "on the GPU the kernel would hang" in message
    assert caught.value.diagnostic.code == "DSL601" and caught.value.diagnostic.range.line == line
    np.testing.assert_array_equal(y[:32], 1.0)  # warp 0 finished: exited warps are not waited for


@dsl.kernel(target="sm_90")
def short_barrier(y: Tensor[f32]):
    t = dsl.thread_idx.x
    dsl.named_barrier(1, 96)  # 96 threads, but the block has only 64
    y[t] = 1.0


@dsl.jit
def run_short_barrier(y: Tensor[f32]):
    short_barrier(y).launch(grid=1, block=64)


def test_a_named_barrier_counts_warps():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_short_barrier, np.zeros(64, dtype=np.float32))
    message = str(caught.value).splitlines()[0]
    assert (f"warp 0 at dsl.named_barrier (test_tensor_cores.py:{line_of('96 threads, but')}) (barrier 1, 96 threads)"
            in message)


@dsl.kernel(target="sm_90")
def uninitialized(y: Tensor[f32]):
    smem = dsl.SharedAllocator()
    bar = smem.array(dsl.u64, (2,))
    dsl.mbarrier_arrive(bar, 1)  # never initialized
    y[dsl.thread_idx.x] = 1.0


@dsl.jit
def run_uninitialized(y: Tensor[f32]):
    uninitialized(y).launch(grid=1, block=32)


def test_an_mbarrier_used_before_init_is_a_fault_of_the_thread():
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_uninitialized, np.zeros(32, dtype=np.float32))
    message = str(caught.value).splitlines()[0]
    assert "is used before dsl.mbarrier_init by thread (0, 0, 0) of block (0, 0, 0)" in message
    assert caught.value.diagnostic.range.line == line_of("# never initialized")


@dsl.kernel(target="sm_90")
def pass_along(y: Tensor[i32]):
    """Each block of a cluster of 4 waits for the one before it, which arrives on its mbarrier."""
    smem = dsl.SharedAllocator()
    bar = smem.array(dsl.u64, (1,))
    rank = dsl.cluster_rank()
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
    dsl.cluster_barrier()  # every block's mbarrier exists before any block arrives on another's
    if rank > 0:
        dsl.mbarrier_wait(bar, 0, 0)
    if t == 0:
        y[dsl.block_idx.x] = dsl.atomic_add(y, 4, 1)  # the order the blocks got here in
        if rank < 3:
            dsl.mbarrier_arrive(bar, 0, cta=rank + 1)
    dsl.cluster_barrier()  # no block exits while another may still arrive on its mbarrier


@dsl.jit
def run_pass_along(y: Tensor[i32]):
    pass_along(y).launch(grid=4, block=64, cluster=(4, 1, 1))


def test_blocks_of_a_cluster_run_together_and_reach_each_others_mbarriers():
    y = np.zeros(5, dtype=np.int32)
    dsl.interpret(run_pass_along, y)
    np.testing.assert_array_equal(y, [0, 1, 2, 3, 4])  # block r ran after block r - 1 let it


@dsl.jit
def run_pass_along_without_clusters(y: Tensor[i32]):
    pass_along(y).launch(grid=4, block=64)


def test_without_a_cluster_another_blocks_mbarrier_is_a_fault():
    """Launched without clusters every block is rank 0 of a cluster of one; the first one
    arrives on rank 1, which does not exist."""
    with pytest.raises(LaunchError) as caught:
        dsl.interpret(run_pass_along_without_clusters, np.zeros(5, dtype=np.int32))
    assert "block rank 1 is outside the cluster of 1 blocks" in str(caught.value).splitlines()[0]


@dsl.jit
def run_in_uneven_clusters(y: Tensor[i32]):
    pass_along(y).launch(grid=y.shape[0] - 1, block=64, cluster=(4, 1, 1))  # a run-time grid (DSL204 checks fixed ones)


def test_a_grid_of_partial_clusters_is_refused_as_the_driver_refuses_it():
    with pytest.raises(LaunchError, match=r"the grid \(6, 1, 1\) is not made of whole clusters of \(4, 1, 1\)"):
        dsl.interpret(run_in_uneven_clusters, np.zeros(7, dtype=np.int32))


@dsl.kernel(target="sm_90")
def tma_copy(tx: dsl.TensorMap, ty: dsl.TensorMap, z: Tensor[dsl.bf16, 2]):
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(dsl.bf16, (64, 64), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    t = dsl.thread_idx.x
    if t == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
        dsl.mbarrier_expect_tx(bar, 0, 64 * 64 * 2)
        dsl.tma_load(tile, (), tx, (0, 0), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)
    for r in range(2 * t, 2 * t + 2):  # the tile as the array indexes it (its own swizzle)
        for c in range(64):
            z[r, c] = tile[r, c]
    if t == 0:
        dsl.tma_store(ty, (0, 0), tile, ())
        dsl.tma_store_commit()
        dsl.tma_store_wait(0)


@dsl.jit
def run_tma_copy(x: Tensor[dsl.bf16, 2], y: Tensor[dsl.bf16, 2], z: Tensor[dsl.bf16, 2]):
    tx = dsl.tensor_map(x, box=(64, 64), swizzle=128)
    ty = dsl.tensor_map(y, box=(64, 64), swizzle=128)
    tma_copy(tx, ty, z).launch(grid=1, block=32, smem=64 * 64 * 2 + 1024)


def test_tma_writes_the_swizzle_that_shared_arrays_index():
    """A TMA load into a 128-byte swizzled array, read back through the array's indexing and
    by a TMA store: both give the tensor's bits."""
    x = RNG.integers(0, 1 << 16, (64, 64)).astype(np.uint16)
    y, z = np.zeros_like(x), np.zeros_like(x)
    dsl.interpret(run_tma_copy, bits(x, dsl.bf16), bits(y, dsl.bf16), bits(z, dsl.bf16))
    np.testing.assert_array_equal(z, x)
    np.testing.assert_array_equal(y, x)


def test_tma_reductions_add_and_take_the_max_of_every_blocks_tile_inside_the_tensor_only():
    """Four blocks reduce their tiles into one 32 x 32 box that hangs over y's edges: inside,
    f32 adds up (integer values: exact in any order) and i32 takes the max; outside, nothing."""
    from tests.runtime.tensor_core_kernels import run_tma_reductions

    xf = RNG.integers(-50, 50, (4, 32, 32)).astype(np.float32)
    xi = RNG.integers(-1000, 1000, (4, 32, 32)).astype(np.int32)
    yf = RNG.integers(-50, 50, (48, 40)).astype(np.float32)
    yi = RNG.integers(-1000, 1000, (48, 40)).astype(np.int32)
    want_f, want_i = yf.copy(), yi.copy()
    want_f[24:, 16:] += xf.sum(axis=0)[:24, :24]
    want_i[24:, 16:] = np.maximum(yi[24:, 16:], xi.max(axis=0)[:24, :24])
    dsl.interpret(run_tma_reductions, xf, yf, xi, yi, 24, 16)
    np.testing.assert_array_equal(yf, want_f)
    np.testing.assert_array_equal(yi, want_i)


@dsl.kernel(target="sm_90")
def arrive_twice(tx: dsl.TensorMap):
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(f32, (32, 32), swizzle=128)
    bar = smem.array(dsl.u64, (1,))
    if dsl.thread_idx.x == 0:
        dsl.mbarrier_init(bar, 0, 1)
        dsl.fence_mbarrier_init()
        dsl.mbarrier_expect_tx(bar, 0, 2048)  # each one arrives: two arrivals on a barrier of count 1
        dsl.mbarrier_expect_tx(bar, 0, 2048)
        dsl.tma_load(tile, (), tx, (0, 0), bar, 0)
    dsl.mbarrier_wait(bar, 0, 0)


@dsl.jit
def run_arrive_twice(x: Tensor[f32, 2]):
    arrive_twice(dsl.tensor_map(x, box=(32, 32), swizzle=128)).launch(grid=1, block=32, smem=32 * 32 * 4 + 1024)


def test_a_second_arrival_in_a_phase_that_has_had_its_count_is_refused():
    """On the GPU the second `mbarrier_expect_tx` of a count-1 barrier, while its phase waits for
    the TMA's bytes, is an arrival the phase has no room for (a kernel faulted): refused, named."""
    with pytest.raises(LaunchError, match=r"an arrival on an mbarrier of count 1 whose phase has had all its arrivals "
                                          r"\(it waits for 2048 transaction bytes\)"):
        dsl.interpret(run_arrive_twice, np.zeros((32, 32), dtype=np.float32))
