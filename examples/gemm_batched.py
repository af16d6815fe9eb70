"""A batched Hopper bf16 GEMM: `c[b] = a[b] @ b_t[b].T` for a (B, M, K), b_t (B, N, K), c (B, M, N),
f32 accumulation, as `torch.bmm(a, b_t.transpose(1, 2))`.

It is `gemm_hopper.py`'s kernel with a batch coordinate: the tensor maps are 3-D with boxes one
batch entry deep (`box=(1, 128, 64)`), so every TMA load and store names `(b, row, k)` and clips at
the bounds of its own batch entry (M need not be a multiple of 128: rows past M read as zeros and
are not written, never spilling into the next entry). Blocks are persistent over all B x tiles_m x
tiles_n output tiles at once, entry after entry, each entry in gemm_hopper's grouped order: a
batch of small products (16 x 1024^3 is 32 tiles per entry) still fills every SM, and the blocks
running at one time mostly share an entry's A and B tiles in L2. Pipeline, warp specialization,
register split and the tile-index walk are gemm_hopper's (imported, not copied); only the
epilogue is restated here, because its TMA stores take the batch coordinate.

`batched_matmul(a, b_t, c)` picks the tile width BN (256, or 128 where that leaves fewer idle SMs
in the last wave) and calls the `gemm_batched` jit function.

    python examples/gemm_batched.py     # on an H100 / H200: checks against torch.bmm, prints TFLOP/s
"""

from typing import Any

from gemm_hopper import BK, BM, CONSUMERS, THREADS, init_ring, release, stages_for, tile_coordinates

import dsl
from dsl import Constexpr, Int32, Tensor, bf16


def store_tile(acc: Any, sc: Any, tc: Any, consumer: Any, t: Any, batch: Any, row: Any, col: Any, BN: int) -> None:
    """One consumer's 64 x BN accumulator as bf16 into its shared C tile, then TMA stores into
    batch entry `batch` (gemm_hopper's epilogue with a 3-D store). The stores overlap the next
    tile; the shared tile is rewritten only after they have read it."""
    barrier_id = 1 + consumer  # the consumer warpgroup's own barrier: the other one runs on
    if t == 0:
        dsl.tma_store_wait(0)
    dsl.named_barrier(barrier_id, 128)
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    for j in dsl.static_range(BN // 8):
        for half in dsl.static_range(2):  # rows g and g + 8 of this warp's 16
            pair = dsl.vector(dsl.cast(acc[4 * j + 2 * half], dsl.bf16), dsl.cast(acc[4 * j + 2 * half + 1], dsl.bf16))
            sc.vstore((consumer, j // 8, 16 * warp + g + 8 * half, (j % 8) * 8 + 2 * q), pair)
    dsl.fence_proxy_async()  # the writes above, before the TMA reads them
    dsl.named_barrier(barrier_id, 128)
    if t == 0:
        for chunk in dsl.static_range(BN // 64):
            dsl.tma_store(tc, (batch, row, col + 64 * chunk), sc, (consumer, chunk))
        dsl.tma_store_commit()


def unit_coordinates(unit: Any, tiles_m: Any, tiles_n: Any) -> Any:
    """The (batch entry, tile row, tile column) of persistent work unit `unit`: entries one after
    another, each walked in gemm_hopper's grouped order."""
    per_entry = tiles_m * tiles_n
    pm, pn = tile_coordinates(unit % per_entry, tiles_m, tiles_n)
    return unit // per_entry, pm, pn


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def gemm_batched_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, tc: dsl.TensorMap, batches: Int32, M: Int32,
                        N: Int32, K: Int32, BN: Constexpr[int], STAGES: Constexpr[int]):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (STAGES, BM, BK), swizzle=128)
    sb = smem.array(dsl.bf16, (STAGES, BN, BK), swizzle=128)
    sc = smem.array(dsl.bf16, (CONSUMERS, BN // 64, 64, 64), swizzle=128)  # each consumer's C tile
    full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    warpgroup = tid // 128
    lane = tid % 32
    init_ring(full, empty, tid, STAGES, CONSUMERS)

    tiles_m = dsl.cdiv(M, BM)
    tiles_n = N // BN
    units = batches * tiles_m * tiles_n
    k_tiles = K // BK
    if warpgroup == 0:
        dsl.setmaxnreg(40, increase=False)
        if tid == 0:
            step = 0
            for unit in range(dsl.block_idx.x, units, dsl.grid_dim.x):
                b, pm, pn = unit_coordinates(unit, tiles_m, tiles_n)
                for kt in range(k_tiles):
                    s = step % STAGES
                    dsl.mbarrier_wait(empty, s, ((step // STAGES) % 2) ^ 1)
                    dsl.mbarrier_expect_tx(full, s, (BM + BN) * BK * 2)  # whole boxes, clipped rows too
                    dsl.tma_load(sa, (s,), ta, (b, pm * BM, kt * BK), full, s)
                    dsl.tma_load(sb, (s,), tb, (b, pn * BN, kt * BK), full, s)
                    step += 1
    else:
        dsl.setmaxnreg(232, increase=True)
        row0 = (warpgroup - 1) * 64
        step = 0
        for unit in range(dsl.block_idx.x, units, dsl.grid_dim.x):
            b, pm, pn = unit_coordinates(unit, tiles_m, tiles_n)
            acc = dsl.zeros(dsl.f32, BN // 2)
            for kt in range(k_tiles):
                s = step % STAGES
                dsl.mbarrier_wait(full, s, (step // STAGES) % 2)
                acc = dsl.wgmma(acc, sa, (s, row0), sb, (s, 0))
                acc = dsl.wgmma_wait(acc, pending=1)  # the previous step's wgmma is done ...
                if kt > 0 and lane == 0:
                    release(empty, (step + STAGES - 1) % STAGES, 1)  # ... so its buffer is free
                step += 1
            acc = dsl.wgmma_wait(acc, pending=0)
            if lane == 0:
                release(empty, (step + STAGES - 1) % STAGES, 1)
            store_tile(acc, sc, tc, warpgroup - 1, tid % 128, b, pm * BM + row0, pn * BN, BN)
        if tid % 128 == 0:
            dsl.tma_store_wait(0)  # the last tile's stores have read their shared memory


@dsl.jit
def gemm_batched(a: Tensor[bf16, 3], b_t: Tensor[bf16, 3], c: Tensor[bf16, 3], BN: Constexpr[int] = 256):
    batches, M, K = a.shape[0], a.shape[1], a.shape[2]
    N = b_t.shape[1]
    assert N % BN == 0 and K % BK == 0, "N must be a multiple of BN and K of 64"
    assert b_t.shape[0] == batches and b_t.shape[2] == K, "shapes: a (B, M, K), b_t (B, N, K)"
    assert c.shape[0] == batches and c.shape[1] == M and c.shape[2] == N, "shapes: c (B, M, N)"
    ta = dsl.tensor_map(a, box=(1, BM, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(1, BN, BK), swizzle=128)
    tc = dsl.tensor_map(c, box=(1, 64, 64), swizzle=128)
    units = batches * dsl.cdiv(M, BM) * (N // BN)
    gemm_batched_kernel(ta, tb, tc, batches, M, N, K, BN, stages_for(BN)).launch(
        grid=dsl.min(units, dsl.sm_count()), block=THREADS)


def choose_bn(batches: int, M: int, N: int, sm_count: int) -> int:
    """256 (the most work per byte of shared memory) unless 128-wide tiles fill the waves of the
    persistent grid clearly better; 128 or 64 where N is no multiple of 256 (or 128)."""
    fits = [bn for bn in (256, 128) if N % bn == 0] or [64]
    if N % 64:
        raise ValueError(f"N={N} must be a multiple of 64")

    def fill(bn: int) -> float:  # the busy fraction of the SMs over the waves the tiles take
        tiles = batches * -(-M // BM) * (N // bn)
        return tiles / (-(-tiles // sm_count) * sm_count)

    best = fits[0]
    for bn in fits[1:]:
        if fill(bn) > fill(best) * 1.1:  # a narrower tile costs ~10% per tile; take it only for more
            best = bn
    return best


def batched_matmul(a: Any, b_t: Any, c: Any, BN: int | None = None) -> int:
    """c[b] = a[b] @ b_t[b].T with the tile width from `choose_bn` (or `BN`); returns the width used."""
    bn = BN if BN is not None else choose_bn(a.shape[0], a.shape[1], b_t.shape[1], dsl.sm_count())
    gemm_batched(a, b_t, c, BN=bn)
    return bn


if __name__ == "__main__":
    import torch

    B, M, N, K = 16, 1024, 1024, 1024
    a = torch.randn(B, M, K, device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn(B, N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(B, M, N, device="cuda", dtype=torch.bfloat16)
    bn = batched_matmul(a, b_t, c)
    expected = torch.bmm(a, b_t.transpose(1, 2))
    print("BN", bn, "max error", (c.float() - expected.float()).abs().max().item())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        batched_matmul(a, b_t, c, BN=bn)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{2 * B * M * N * K / ms / 1e9:.0f} TFLOP/s")
