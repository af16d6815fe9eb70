"""An int8 GEMM on warp-level tensor cores (sm_80+): `c = a @ b_t.T`, int8 inputs, int32 results.

The bf16 GEMM of `matmul_mma.py` with 8-bit data: each block of 4 warps computes a 128x128
tile of C, each warp a 64x64 quarter as 4 x 8 `mma.sync` m16n8k32 tiles (32 accumulator
fragments of `vector<4xi32>`). K is walked in steps of 64 (64 bytes per row, as the bf16
GEMM's 32) through a 4-stage ring of 64-byte swizzled shared-memory buffers filled by
`cp.async`. `ldmatrix` reads the int8 tiles as they are: it moves 16-byte rows, and on 8-bit
data lane `l` receives bytes 4 (l % 4) .. 4 (l % 4) + 3 of row l // 4 of each 8x16 matrix,
which is the layout mma.sync m16n8k32 wants for A and for B stored N x K (`b_t`, the layout
of a `torch.nn.Linear` weight). Sums wrap modulo 2^32, as the s32 accumulators do.

    python examples/matmul_int8_mma.py     # on a GPU: checks against torch and prints TOP/s
"""

from typing import Any

import dsl
from dsl import Int32, Tensor, i8, i32

BM, BN, BK = 128, 128, 64
STAGES = 4
THREADS = 128


def load_stage(tiles: Any, stage: Any, kt: Any) -> None:
    """Starts the copies of K tile `kt` of A and B into ring buffer `stage` (16 bytes per copy)."""
    sa, sb, a, b_t, tid, m0, n0 = tiles
    for i in dsl.static_range(BM * BK // 16 // THREADS):
        chunk = tid + i * THREADS
        row = chunk // (BK // 16)
        col = (chunk % (BK // 16)) * 16
        dsl.cp_async(sa, (stage, row, col), a, (m0 + row, kt * BK + col))
        dsl.cp_async(sb, (stage, row, col), b_t, (n0 + row, kt * BK + col))


@dsl.kernel(known_block_size=[THREADS, 1, 1], minnctapersm=2)  # two blocks per SM overlap each other's waits
def matmul_int8_kernel(a: Tensor[i8, 2], b_t: Tensor[i8, 2], c: Tensor[i32, 2], K: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.i8, (STAGES, BM, BK), swizzle=64)
    sb = smem.array(dsl.i8, (STAGES, BN, BK), swizzle=64)
    tid = dsl.thread_idx.x
    lane = dsl.lane_id()
    warp = tid // 32
    m0 = dsl.block_idx.y * BM
    n0 = dsl.block_idx.x * BN
    wm = (warp // 2) * 64  # this warp's 64x64 quarter of the tile
    wn = (warp % 2) * 64
    k_tiles = K // BK
    tiles = (sa, sb, a, b_t, tid, m0, n0)

    for s in dsl.static_range(STAGES - 1):
        load_stage(tiles, s, s)
        dsl.cp_async_commit()

    acc = [dsl.zeros(dsl.i32, 4) for _ in dsl.static_range(32)]
    for kt in range(k_tiles):
        dsl.cp_async_wait(STAGES - 2)
        dsl.barrier()
        stage = kt % STAGES
        for kk in dsl.static_range(BK // 32):
            # A, 16 rows x 32 bytes: lanes 0-15 name rows 0-15 at byte 0, lanes 16-31 at byte 16
            fa = [dsl.ldmatrix(sa, (stage, wm + mi * 16 + lane % 16, kk * 32 + (lane // 16) * 16))
                  for mi in dsl.static_range(4)]
            for nj in dsl.static_range(4):  # two n8 tiles per ldmatrix.x4: (n 0-7, k 0-15 / 16-31), then n 8-15
                pair = dsl.ldmatrix(sb, (stage, wn + nj * 16 + (lane // 16) * 8 + lane % 8,
                                         kk * 32 + ((lane // 8) % 2) * 16))
                for half in dsl.static_range(2):
                    fb = pair[8 * half:8 * half + 8]
                    for mi in dsl.static_range(4):
                        k = mi * 8 + nj * 2 + half
                        acc[k] = dsl.mma_sync(fa[mi], fb, acc[k])
        following = kt + STAGES - 1
        if following < k_tiles:
            load_stage(tiles, following % STAGES, following)
        dsl.cp_async_commit()

    g = lane // 4
    q = lane % 4
    for mi in dsl.static_range(4):
        for nt in dsl.static_range(8):
            frag = acc[mi * 8 + nt]
            row = m0 + wm + mi * 16 + g
            col = n0 + wn + nt * 8 + 2 * q
            c.vstore((row, col), frag[0:2])
            c.vstore((row + 8, col), frag[2:4])


@dsl.jit
def matmul_int8_mma(a: Tensor[i8, 2], b_t: Tensor[i8, 2], c: Tensor[i32, 2]):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert M % BM == 0 and N % BN == 0 and K % BK == 0, "M and N must be multiples of 128, K of 64"
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    matmul_int8_kernel(a, b_t, c, K).launch(grid=(N // BN, M // BM), block=THREADS)


if __name__ == "__main__":
    import torch

    M = N = K = 4096
    a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
    b_t = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8)
    c = torch.empty(M, N, device="cuda", dtype=torch.int32)
    matmul_int8_mma(a, b_t, c)
    expected = (a.double() @ b_t.T.double()).to(torch.int32)  # exact: every sum is below 2**53
    print("mismatches", (c != expected).sum().item())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        matmul_int8_mma(a, b_t, c)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{2 * M * N * K / ms / 1e9:.0f} TOP/s")
