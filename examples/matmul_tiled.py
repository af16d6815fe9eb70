"""C = A @ B in f32 on CUDA cores: 64x64 tiles of C per block, 8x8 of them per thread held as a
list of 64 accumulators, operands staged through shared memory 8 columns of K at a time.

`acc[i * TN + j] += av[i] * bv[j]` contracts to one FFMA per product; the list is carried
through the run-time loop over K as 64 separate registers.
"""

import dsl
from dsl import Int32, Tensor, f32

BM, BN, BK = 64, 64, 8  # the block's tile of C, and the K step
TM, TN = 8, 8  # each thread's tile of C
THREADS = (BM // TM) * (BN // TN)  # 64


@dsl.kernel(known_block_size=[BN // TN, BM // TM, 1])
def matmul_tiled(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2], M: Int32, N: Int32, K: Int32):
    tx, ty = dsl.thread_idx.x, dsl.thread_idx.y
    tid = ty * (BN // TN) + tx
    row0, col0 = dsl.block_idx.y * BM, dsl.block_idx.x * BN
    smem = dsl.SharedAllocator()
    a_tile = smem.array(f32, (BK, BM))  # A's tile, transposed: a_tile[k, m]
    b_tile = smem.array(f32, (BK, BN))
    acc = [0.0 for _ in dsl.static_range(TM * TN)]
    for k0 in range(0, K, BK):
        for q in dsl.static_range(BM * BK // THREADS):
            e = tid + q * THREADS
            r, kk = e // BK, e % BK
            a_tile[kk, r] = a[row0 + r, k0 + kk] if row0 + r < M and k0 + kk < K else 0.0
        for q in dsl.static_range(BK * BN // THREADS):
            e = tid + q * THREADS
            kk, cc = e // BN, e % BN
            b_tile[kk, cc] = b[k0 + kk, col0 + cc] if k0 + kk < K and col0 + cc < N else 0.0
        dsl.barrier()
        for k in dsl.static_range(BK):
            av = [a_tile[k, ty * TM + i] for i in dsl.static_range(TM)]
            bv = [b_tile[k, tx * TN + j] for j in dsl.static_range(TN)]
            for i in dsl.static_range(TM):
                for j in dsl.static_range(TN):
                    acc[i * TN + j] += av[i] * bv[j]
        dsl.barrier()
    for i in dsl.static_range(TM):
        for j in dsl.static_range(TN):
            r, col = row0 + ty * TM + i, col0 + tx * TN + j
            if r < M and col < N:
                c[r, col] = acc[i * TN + j]


@dsl.jit
def run_matmul_tiled(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    matmul_tiled(a, b, c, M, N, K).launch(grid=(dsl.cdiv(N, BN), dsl.cdiv(M, BM), 1),
                                         block=(BN // TN, BM // TM, 1))
