"""A bf16 GEMM on warp-level tensor cores, as on sm_80: `c = a @ b_t.T` (f32 accumulation).

Each block of 4 warps computes a 128x128 tile of C; each warp a 64x64 quarter as 4 x 8
`mma.sync` m16n8k16 tiles (32 accumulator fragments of `vector<4xf32>`). K is walked in
steps of 32 through a 4-stage ring of shared-memory buffers filled by `cp.async` (each
thread copies 16-byte chunks), so the copies of the next stages overlap the MMAs of this
one. The buffers are 64-byte swizzled, which makes the 8 rows `ldmatrix` reads at once
fall in 8 different banks. `b_t` is B transposed (N x K, K contiguous), the layout of a
`torch.nn.Linear` weight.

    python examples/matmul_mma.py     # on a GPU: checks against torch and prints TFLOP/s
"""

from typing import Any

import dsl
from dsl import Int32, Tensor, bf16

BM, BN, BK = 128, 128, 32
STAGES = 4
THREADS = 128


def load_stage(tiles: Any, stage: Any, kt: Any) -> None:
    """Starts the copies of K tile `kt` of A and B into ring buffer `stage` (16 bytes per copy)."""
    sa, sb, a, b_t, tid, m0, n0 = tiles
    for i in dsl.static_range(BM * BK // 8 // THREADS):
        chunk = tid + i * THREADS
        row = chunk // (BK // 8)
        col = (chunk % (BK // 8)) * 8
        dsl.cp_async(sa, (stage, row, col), a, (m0 + row, kt * BK + col))
        dsl.cp_async(sb, (stage, row, col), b_t, (n0 + row, kt * BK + col))


@dsl.kernel(known_block_size=[THREADS, 1, 1], minnctapersm=2)  # two blocks per SM overlap each other's waits
def matmul_mma_kernel(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], c: Tensor[bf16, 2], K: Int32):
    smem = dsl.SharedAllocator(dynamic=True)
    sa = smem.array(dsl.bf16, (STAGES, BM, BK), swizzle=64)
    sb = smem.array(dsl.bf16, (STAGES, BN, BK), swizzle=64)
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

    acc = [dsl.zeros(dsl.f32, 4) for _ in dsl.static_range(32)]
    for kt in range(k_tiles):
        dsl.cp_async_wait(STAGES - 2)
        dsl.barrier()
        stage = kt % STAGES
        for kk in dsl.static_range(BK // 16):
            fa = [dsl.ldmatrix(sa, (stage, wm + mi * 16 + lane % 16, kk * 16 + (lane // 16) * 8))
                  for mi in dsl.static_range(4)]
            for nj in dsl.static_range(4):  # two n8 tiles per ldmatrix.x4
                pair = dsl.ldmatrix(sb, (stage, wn + nj * 16 + (lane // 16) * 8 + lane % 8,
                                         kk * 16 + ((lane // 8) % 2) * 8))
                for half in dsl.static_range(2):
                    fb = pair[4 * half:4 * half + 4]
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
            c.vstore((row, col), dsl.vector(dsl.cast(frag[0], dsl.bf16), dsl.cast(frag[1], dsl.bf16)))
            c.vstore((row + 8, col), dsl.vector(dsl.cast(frag[2], dsl.bf16), dsl.cast(frag[3], dsl.bf16)))


@dsl.jit
def matmul_mma(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], c: Tensor[bf16, 2]):
    M, K = a.shape[0], a.shape[1]
    N = b_t.shape[0]
    assert M % BM == 0 and N % BN == 0 and K % BK == 0, "M and N must be multiples of 128, K of 32"
    assert b_t.shape[1] == K and c.shape[0] == M and c.shape[1] == N, "shapes: a (M, K), b_t (N, K), c (M, N)"
    matmul_mma_kernel(a, b_t, c, K).launch(grid=(N // BN, M // BM), block=THREADS)


if __name__ == "__main__":
    import torch

    M = N = K = 4096
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b_t = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    matmul_mma(a, b_t, c)
    expected = (a.float() @ b_t.float().T)
    print("max error", (c.float() - expected).abs().max().item())
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        matmul_mma(a, b_t, c)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"{2 * M * N * K / ms / 1e9:.0f} TFLOP/s")
