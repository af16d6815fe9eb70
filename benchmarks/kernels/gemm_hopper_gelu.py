"""The Hopper GEMM of `examples/gemm_hopper.py` with a fused epilogue: `gelu(a @ b_t.T + bias)`.

The mainloop is the example's (its helpers are imported); the epilogue adds the bias (bf16, one
per output column) to every f32 accumulator element and applies the exact GELU,
`x * 0.5 * (1 + erf(x / sqrt(2)))`, before the bf16 store: 128 `dsl.erf` per consumer thread
with BN=256. This is the kernel whose cold compile `benchmarks/compile_gemm_epilogue.py`
measures against the plain GEMM.
"""

from typing import Any

from gemm_hopper import BK, BM, CONSUMERS, THREADS, release, stages_for, tile_coordinates

import dsl
from dsl import Constexpr, Int32, Tensor, bf16

SQRT_HALF = 0.7071067811865476


def gelu(x: Any) -> Any:
    """Exact GELU (erf), as torch.nn.functional.gelu computes it by default."""
    return x * 0.5 * (1.0 + dsl.erf(x * SQRT_HALF))


def store_tile_gelu(acc: Any, bias: Any, sc: Any, tc: Any, consumer: Any, t: Any, row: Any, col: Any,
                    BN: int) -> None:
    """The example's epilogue with `gelu(acc + bias)` on each element before it is rounded to bf16."""
    barrier_id = 1 + consumer
    if t == 0:
        dsl.tma_store_wait(0)
    dsl.named_barrier(barrier_id, 128)
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    for j in dsl.static_range(BN // 8):
        b = bias.vload(col + 8 * j + 2 * q, 2).to(dsl.f32)
        for half in dsl.static_range(2):  # rows g and g + 8 of this warp's 16
            lo = gelu(acc[4 * j + 2 * half] + b[0])
            hi = gelu(acc[4 * j + 2 * half + 1] + b[1])
            pair = dsl.vector(dsl.cast(lo, dsl.bf16), dsl.cast(hi, dsl.bf16))
            sc.vstore((consumer, j // 8, 16 * warp + g + 8 * half, (j % 8) * 8 + 2 * q), pair)
    dsl.fence_proxy_async()
    dsl.named_barrier(barrier_id, 128)
    if t == 0:
        for chunk in dsl.static_range(BN // 64):
            dsl.tma_store(tc, (row, col + 64 * chunk), sc, (consumer, chunk))
        dsl.tma_store_commit()


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def gemm_gelu_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, tc: dsl.TensorMap, bias: Tensor[bf16],
                     M: Int32, N: Int32, K: Int32,
                BN: Constexpr[int], STAGES: Constexpr[int], CLUSTER: Constexpr[int]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (STAGES, BM, BK), swizzle=128)
    sb = smem.array(dsl.bf16, (STAGES, BN, BK), swizzle=128)
    sc = smem.array(dsl.bf16, (CONSUMERS, BN // 64, 64, 64), swizzle=128)  # each consumer's C tile
    full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    warpgroup = tid // 128
    lane = tid % 32
    rank = dsl.cluster_rank() if CLUSTER > 1 else 0
    if tid == 0:
        for s in dsl.static_range(STAGES):
            dsl.mbarrier_init(full, s, 1)
            dsl.mbarrier_init(empty, s, 4 * CONSUMERS * CLUSTER)  # one arrival per consumer warp of the cluster
        dsl.fence_mbarrier_init()
    if CLUSTER > 1:
        dsl.cluster_barrier()  # every block's barriers exist before any block multicasts into it
    else:
        dsl.barrier()

    # The blocks of a cluster take CLUSTER consecutive tile rows of one tile column: they
    # share its B tiles, each loading 1/CLUSTER of them for all (TMA multicast).
    tiles_m = dsl.cdiv(M, BM)
    tiles_n = N // BN
    groups_m = dsl.cdiv(tiles_m, CLUSTER)
    units = groups_m * tiles_n
    first = dsl.block_idx.x // CLUSTER
    clusters = dsl.grid_dim.x // CLUSTER
    k_tiles = K // BK
    if warpgroup == 0:
        dsl.setmaxnreg(40, increase=False)
        if tid == 0:
            step = 0
            for unit in range(first, units, clusters):
                gm, pn = tile_coordinates(unit, groups_m, tiles_n)
                pm = gm * CLUSTER + rank
                for kt in range(k_tiles):
                    s = step % STAGES
                    dsl.mbarrier_wait(empty, s, ((step // STAGES) % 2) ^ 1)
                    dsl.mbarrier_expect_tx(full, s, (BM + BN) * BK * 2)
                    dsl.tma_load(sa, (s,), ta, (pm * BM, kt * BK), full, s)
                    if CLUSTER > 1:
                        part = rank * (BN // CLUSTER)
                        dsl.tma_load(sb, (s, part, 0), tb, (pn * BN + part, kt * BK), full, s,
                                     multicast=(1 << CLUSTER) - 1)
                    else:
                        dsl.tma_load(sb, (s,), tb, (pn * BN, kt * BK), full, s)
                    step += 1
    else:
        dsl.setmaxnreg(232, increase=True)
        row0 = (warpgroup - 1) * 64
        step = 0
        for unit in range(first, units, clusters):
            gm, pn = tile_coordinates(unit, groups_m, tiles_n)
            pm = gm * CLUSTER + rank
            acc = dsl.zeros(dsl.f32, BN // 2)
            for kt in range(k_tiles):
                s = step % STAGES
                dsl.mbarrier_wait(full, s, (step // STAGES) % 2)
                acc = dsl.wgmma(acc, sa, (s, row0), sb, (s, 0))
                acc = dsl.wgmma_wait(acc, pending=1)  # the previous step's wgmma is done ...
                if kt > 0 and lane == 0:
                    release(empty, (step + STAGES - 1) % STAGES, CLUSTER)  # ... so its buffer is free
                step += 1
            acc = dsl.wgmma_wait(acc, pending=0)
            if lane == 0:
                release(empty, (step + STAGES - 1) % STAGES, CLUSTER)
            store_tile_gelu(acc, bias, sc, tc, warpgroup - 1, tid % 128, pm * BM + row0, pn * BN, BN)
        if tid % 128 == 0:
            dsl.tma_store_wait(0)  # the last tile's stores have read their shared memory
    if CLUSTER > 1:
        dsl.cluster_barrier()  # no block exits while another may still write into it


@dsl.jit
def gemm_hopper_gelu(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], bias: Tensor[bf16], c: Tensor[bf16, 2],
                     BN: Constexpr[int] = 256, CLUSTER: Constexpr[int] = 1):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert N % BN == 0 and K % BK == 0, "N must be a multiple of BN and K of 64"
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    assert bias.shape[0] == N, "bias has N elements"
    ta = dsl.tensor_map(a, box=(BM, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(BN // CLUSTER, BK), swizzle=128)
    tc = dsl.tensor_map(c, box=(64, 64), swizzle=128)
    units = dsl.cdiv(dsl.cdiv(M, BM), CLUSTER) * (N // BN)
    grid = dsl.min(units, dsl.sm_count() // CLUSTER) * CLUSTER
    kernel = gemm_gelu_kernel(ta, tb, tc, bias, M, N, K, BN, stages_for(BN), CLUSTER)
    if CLUSTER > 1:
        kernel.launch(grid=grid, block=THREADS, cluster=(CLUSTER, 1, 1))
    else:
        kernel.launch(grid=grid, block=THREADS)
