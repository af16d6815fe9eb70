"""An int8 GEMM on Hopper's warpgroup MMA: `c = a @ b_t.T`, int8 x int8 into int32 (sums wrap
modulo 2^32, as torch._int_mm's do).

`gemm_hopper.py`'s structure with 8-bit tiles: a producer warpgroup streams 128x128 tiles of A and
256x128 tiles of B (128 bytes of K per swizzled row, so a K tile is 128 elements) into a 4-stage
mbarrier ring with TMA, and two consumer warpgroups multiply with wgmma's s8 form
(m64n256k32: 32 of K per instruction, both operands K-major, which is why B comes as `b_t`,
N x K) into 64x256 i32 accumulators. The tile walk and the buffer release are gemm_hopper's
(imported). The epilogue differs: an i32 C tile would need 128 KiB of shared memory beside the
ring, so each thread stores its accumulator pairs straight to global memory (8 bytes per store,
every 32-byte sector whole), skipping rows past M (an M of 16 reads a tile of zeros below it).
The two roles' loops are helpers (`load_stages`, `multiply_tile`) that `gemm_fp8.py` shares: any
8-bit pair of K-major tiles goes through the same ring.

    python examples/gemm_int8_hopper.py     # on an H100 / H200: checks against an exact int64 product, prints TOP/s
"""

from typing import Any

from gemm_hopper import BM, CONSUMERS, THREADS, init_ring, release, tile_coordinates

import dsl
from dsl import Int32, Tensor, i8, i32

BN, BK = 256, 128  # BK: 128 bytes of 8-bit K per swizzled row
SMEM = 227 * 1024 - 1024
STAGES = SMEM // ((BM + BN) * BK)  # 4


def load_stages(sa: Any, sb: Any, ta: Any, tb: Any, full: Any, empty: Any, units: Any, tiles_m: Any, tiles_n: Any,
                k_tiles: Any, BN: int, STAGES: int) -> None:
    """The producer thread: for each of this block's tiles, the K tiles of A (BM x BK) and B (BN x BK)
    into the ring by TMA, each stage once its consumers have freed it."""
    step = 0
    for unit in range(dsl.block_idx.x, units, dsl.grid_dim.x):
        pm, pn = tile_coordinates(unit, tiles_m, tiles_n)
        for kt in range(k_tiles):
            s = step % STAGES
            dsl.mbarrier_wait(empty, s, ((step // STAGES) % 2) ^ 1)
            dsl.mbarrier_expect_tx(full, s, (BM + BN) * BK)  # whole boxes, zero-filled rows too
            dsl.tma_load(sa, (s,), ta, (pm * BM, kt * BK), full, s)
            dsl.tma_load(sb, (s,), tb, (pn * BN, kt * BK), full, s)
            step += 1


def multiply_tile(acc: Any, sa: Any, sb: Any, full: Any, empty: Any, step: Any, k_tiles: Any, row0: Any,
                  lane: Any, STAGES: int) -> Any:
    """One consumer's K loop over a tile: `acc` plus its 64 rows of A times the B tile, each stage
    released once the wgmma after it has been issued (so the one reading it is done). Returns the
    waited accumulator and the ring position after the tile."""
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
    return acc, step


def store_rows(acc: Any, c: Any, t: Any, row0: Any, col0: Any, M: Any) -> None:
    """One consumer's 64 x BN i32 accumulator into c, by the wgmma layout (rows past M skipped)."""
    warp, g, q = t // 32, (t % 32) // 4, t % 4
    for half in dsl.static_range(2):  # rows g and g + 8 of this warp's 16
        row = row0 + 16 * warp + g + 8 * half
        if row < M:
            for j in dsl.static_range(BN // 8):
                c.vstore((row, col0 + 8 * j + 2 * q), dsl.vector(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]))


@dsl.kernel(target="sm_90a", known_block_size=[THREADS, 1, 1], minnctapersm=1)
def gemm_int8_kernel(ta: dsl.TensorMap, tb: dsl.TensorMap, c: Tensor[i32, 2], M: Int32, N: Int32, K: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.i8, (STAGES, BM, BK), swizzle=128)
    sb = smem.array(dsl.i8, (STAGES, BN, BK), swizzle=128)
    full = smem.array(dsl.u64, (STAGES,))
    empty = smem.array(dsl.u64, (STAGES,))
    tid = dsl.thread_idx.x
    warpgroup = tid // 128
    lane = tid % 32
    init_ring(full, empty, tid, STAGES, CONSUMERS)

    tiles_m = dsl.cdiv(M, BM)
    tiles_n = N // BN
    units = tiles_m * tiles_n
    k_tiles = K // BK
    if warpgroup == 0:
        dsl.setmaxnreg(40, increase=False)
        if tid == 0:
            load_stages(sa, sb, ta, tb, full, empty, units, tiles_m, tiles_n, k_tiles, BN, STAGES)
    else:
        dsl.setmaxnreg(232, increase=True)
        row0 = (warpgroup - 1) * 64
        step = 0
        for unit in range(dsl.block_idx.x, units, dsl.grid_dim.x):
            pm, pn = tile_coordinates(unit, tiles_m, tiles_n)
            acc, step = multiply_tile(dsl.zeros(dsl.i32, BN // 2), sa, sb, full, empty, step, k_tiles, row0, lane,
                                      STAGES)
            store_rows(acc, c, tid % 128, pm * BM + row0, pn * BN, M)


@dsl.jit
def gemm_int8_hopper(a: Tensor[i8, 2], b_t: Tensor[i8, 2], c: Tensor[i32, 2]):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert N % BN == 0 and K % BK == 0, "N must be a multiple of 256 and K of 128"
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    ta = dsl.tensor_map(a, box=(BM, BK), swizzle=128)
    tb = dsl.tensor_map(b_t, box=(BN, BK), swizzle=128)
    units = dsl.cdiv(M, BM) * (N // BN)
    gemm_int8_kernel(ta, tb, c, M, N, K).launch(grid=dsl.min(units, dsl.sm_count()), block=THREADS)


if __name__ == "__main__":
    import torch

    M = N = K = 4096
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b_t = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    c = torch.empty(M, N, device="cuda", dtype=torch.int32)
    gemm_int8_hopper(a, b_t, c)
    print("mismatches", (c != (a.long() @ b_t.long().T).int()).sum().item())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        gemm_int8_hopper(a, b_t, c)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{2 * M * N * K / ms / 1e9:.0f} TOP/s")
