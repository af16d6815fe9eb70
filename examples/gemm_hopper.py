"""A Hopper bf16 GEMM: TMA loads, warpgroup MMA, a multi-stage mbarrier pipeline, warp
specialization and a persistent tile scheduler. `c = a @ b_t.T` with f32 accumulation.

Each block runs three warpgroups. The producer (warpgroup 0) gives up registers
(`setmaxnreg`) and one of its threads streams 128x64 tiles of A and 256x64 tiles of B into a
ring of STAGES shared-memory buffers with TMA; each buffer's `full` mbarrier completes when
its bytes have landed. The two consumers (warpgroups 1 and 2) take the registers, and each
multiplies its 64 rows of the A tile by the B tile with `wgmma` into a 64x256 f32
accumulator (128 registers per thread); after each K step they wait for the previous
step's wgmma and release its buffer through its `empty` mbarrier; a finished tile goes to
shared memory as bf16 and out by TMA stores, which overlap the next tile. Blocks are persistent:
one per SM, walking the output tiles in groups of 8 tile rows so that neighbouring blocks
share A and B tiles in L2. The shared tiles are 128-byte swizzled, as TMA writes and wgmma
reads them. `b_t` is B transposed (N x K, K contiguous), like a `torch.nn.Linear` weight.
`BN` is the tile width: 256 for large products; 64 or 128 give more tiles where N is small.
For the small M of decode call `matmul` in `examples/gemm_small_m.py` (swapped operands,
split-K), which calls this kernel where its 128 x BN tiles fill the GPU. `CLUSTER=2` launches
clusters of two blocks that take neighbouring tile rows: each loads half of their common B
tile and multicasts it to both, halving B's trips through L2.

    python examples/gemm_hopper.py     # on an H100 / H200: checks against torch, prints TFLOP/s
"""

from typing import Any

import dsl
from dsl import Constexpr, Int32, Tensor, bf16

BM, BK = 128, 64
GROUP_M = 8
CONSUMERS = 2
THREADS = 128 * (1 + CONSUMERS)
SMEM = 227 * 1024 - 1024  # per block, less room for the mbarriers


def stages_for(bn: int) -> int:
    """As many pipeline stages as shared memory holds beside the epilogue's C tile (3 with
    BN=256, 6 with 128, 9 with 64)."""
    return (SMEM - BM * bn * 2) // ((BM + bn) * BK * 2)


def tile_coordinates(tile: Any, tiles_m: Any, tiles_n: Any) -> Any:
    """The (row, column) of output tile `tile`, walking GROUP_M tile rows at a time."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = dsl.min(tiles_m - first_m, GROUP_M)
    within = tile % per_group
    return first_m + within % rows, within // rows


def init_ring(full: Any, empty: Any, tid: Any, stages: int, consumers: int) -> None:
    """Thread 0 readies the ring's barriers, and the block waits for it: each stage is `full` at
    the producer's one arrival (with its TMA bytes) and `empty` at one arrival per consumer warp."""
    if tid == 0:
        for s in dsl.static_range(stages):
            dsl.mbarrier_init(full, s, 1)
            dsl.mbarrier_init(empty, s, 4 * consumers)  # one arrival per consumer warp
        dsl.fence_mbarrier_init()
    dsl.barrier()


def release(empty: Any, stage: Any, cluster: int) -> None:
    """This warp is done with `stage`: tell the producer of every block of the cluster (each
    multicasts into this block's buffer)."""
    if cluster == 1:
        dsl.mbarrier_arrive(empty, stage)
    else:
        for r in dsl.static_range(cluster):
            dsl.mbarrier_arrive(empty, stage, cta=r)


def silu_times(gate: Any, up: Any) -> Any:
    """silu(gate) * up in f32 from two accumulator elements, each first rounded to bf16 as the
    unfused path's GEMM output is (`examples/pytorch/llama_layer.py`'s swiglu_kernel), so both
    paths give the same bits."""
    g, u = dsl.cast(dsl.cast(gate, dsl.bf16), dsl.f32), dsl.cast(dsl.cast(up, dsl.bf16), dsl.f32)
    return dsl.cast(g / (1.0 + dsl.exp(-g)) * u, dsl.bf16)


def store_tile(acc: Any, sc: Any, tc: Any, consumer: Any, t: Any, row: Any, col: Any, BN: int,
               SWIGLU: bool) -> None:
    """The epilogue of one consumer: its 64 x BN accumulator as bf16 into its shared C tile,
    then TMA stores of it (rows past M are not written). The stores run while the consumer
    goes on with its next tile; the tile is rewritten only after they have read it.

    With `SWIGLU` the B rows alternate eight gate rows and eight up rows (`interleave_gate_up`),
    so a thread holds gate column c and up column c in neighbouring 8-column groups of its
    fragment: the tile stored is silu(gate) * up, 64 x BN / 2, at column col / 2."""
    barrier_id = 1 + consumer  # the consumer warpgroup's own barrier: the other one runs on
    if t == 0:
        dsl.tma_store_wait(0)
    dsl.named_barrier(barrier_id, 128)
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    groups = BN // 16 if SWIGLU else BN // 8  # 8-column groups of the stored tile
    for j in dsl.static_range(groups):
        for half in dsl.static_range(2):  # rows g and g + 8 of this warp's 16
            if SWIGLU:
                gate, up = 8 * j + 2 * half, 8 * j + 4 + 2 * half  # groups 2j (gate) and 2j + 1 (up)
                pair = dsl.vector(silu_times(acc[gate], acc[up]), silu_times(acc[gate + 1], acc[up + 1]))
            else:
                pair = dsl.vector(dsl.cast(acc[4 * j + 2 * half], dsl.bf16),
                                  dsl.cast(acc[4 * j + 2 * half + 1], dsl.bf16))
            sc.vstore((consumer, j // 8, 16 * warp + g + 8 * half, (j % 8) * 8 + 2 * q), pair)
    dsl.fence_proxy_async()  # the writes above, before the TMA reads them
    dsl.named_barrier(barrier_id, 128)
    if t == 0:
        out_col = col // 2 if SWIGLU else col
        for chunk in dsl.static_range(groups // 8):
            dsl.tma_store(tc, (row, out_col + 64 * chunk), sc, (consumer, chunk))
        dsl.tma_store_commit()


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def gemm_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, tc: dsl.TensorMap, M: Int32, N: Int32, K: Int32,
                BN: Constexpr[int], STAGES: Constexpr[int], CLUSTER: Constexpr[int], SWIGLU: Constexpr[bool]):
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
            store_tile(acc, sc, tc, warpgroup - 1, tid % 128, pm * BM + row0, pn * BN, BN, SWIGLU)
        if tid % 128 == 0:
            dsl.tma_store_wait(0)  # the last tile's stores have read their shared memory
    if CLUSTER > 1:
        dsl.cluster_barrier()  # no block exits while another may still write into it


def launch_gemm(a: Any, b_t: Any, c: Any, BN: int, CLUSTER: int, SWIGLU: bool) -> None:
    """The tensor maps, the persistent grid (a block per SM, at most one per tile) and the launch."""
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    ta = dsl.tensor_map(a, box=(BM, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(BN // CLUSTER, BK), swizzle=128)
    tc = dsl.tensor_map(c, box=(64, 64), swizzle=128)
    units = dsl.cdiv(dsl.cdiv(M, BM), CLUSTER) * (N // BN)
    grid = dsl.min(units, dsl.sm_count() // CLUSTER) * CLUSTER
    kernel = gemm_kernel(ta, tb, tc, M, N, K, BN, stages_for(BN), CLUSTER, SWIGLU)
    if CLUSTER > 1:
        kernel.launch(grid=grid, block=THREADS, cluster=(CLUSTER, 1, 1))
    else:
        kernel.launch(grid=grid, block=THREADS)


@dsl.jit
def gemm_hopper(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], c: Tensor[bf16, 2], BN: Constexpr[int] = 256,
                CLUSTER: Constexpr[int] = 1):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert N % BN == 0 and K % BK == 0, "N must be a multiple of BN and K of 64"
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    launch_gemm(a, b_t, c, BN, CLUSTER, False)


@dsl.jit
def gemm_hopper_swiglu(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], out: Tensor[bf16, 2], BN: Constexpr[int] = 256):
    """out = silu(gate) * up of the product with a fused gate / up weight whose rows alternate
    eight gate rows and eight up rows (`interleave_gate_up`): a SwiGLU MLP's first GEMM and
    its activation in one kernel, out [M, N / 2] (half the bytes written, no second pass)."""
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert BN >= 128 and N % BN == 0 and K % BK == 0, "BN 128 or 256, N a multiple of BN and K of 64"
    assert b_t.shape[1] == K and out.shape[0] == M and out.shape[1] * 2 == N, \
        "shapes: a (M, K), b_t (N, K), out (M, N / 2)"
    launch_gemm(a, b_t, out, BN, 1, True)


def interleave_gate_up(w: Any) -> Any:
    """A fused [gate; up] weight (2I x K, gate rows first) with its rows reordered into
    alternating runs of eight gate rows and eight up rows, as `gemm_hopper_swiglu` reads it."""
    rows, k = w.shape
    return w.view(2, rows // 16, 8, k).transpose(0, 1).reshape(rows, k)


if __name__ == "__main__":
    import torch

    M = N = K = 8192
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    gemm_hopper(a, b_t, c)
    expected = a @ b_t.T
    print("max error", (c.float() - expected.float()).abs().max().item())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        gemm_hopper(a, b_t, c)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{2 * M * N * K / ms / 1e9:.0f} TFLOP/s")
