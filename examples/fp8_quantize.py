"""Per-tensor fp8 quantization: amax = max |x| (an f32 atomic max), then q = x * (448 / amax).

`abs_max` reduces |x| per block (`dsl.warp_reduce`, then shared memory) and folds each
block's maximum into `amax[0]` with `dsl.atomic_max`, exact and NaN-propagating like
`torch.amax`. `quantize` scales by 448 / amax and converts eight values per thread to
e4m3 (`cvt.rn.satfinite.e4m3x2.f32`, sm_89+); `scale_inv[0] = amax / 448` dequantizes.
`amax` must hold 0 before the call (e.g. `torch.zeros(1)`).
"""

import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f8e4m3, f32

E4M3_MAX = 448.0
TINY = 1e-12  # the scale of an all-zero tensor stays finite


@dsl.kernel
def abs_max(x: Tensor[bf16], amax: Tensor[f32], n: Int32, BLOCK: Constexpr[int]):
    smem = dsl.SharedAllocator()
    partial = smem.array(f32, 32)
    tid = dsl.thread_idx.x
    m = 0.0
    full = n - n % 8
    for c in range((dsl.block_idx.x * BLOCK + tid) * 8, full, dsl.grid_dim.x * BLOCK * 8):
        v = dsl.abs(dsl.cast(x.vload(c, 8), f32))
        m = dsl.max(m, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
    if dsl.block_idx.x == 0:
        for k in range(full + tid, n, BLOCK):
            m = dsl.max(m, dsl.abs(dsl.cast(x[k], f32)))
    m = dsl.warp_reduce(m, "max")
    lane = tid % 32
    warp = tid // 32
    if lane == 0:
        partial[warp] = m
    dsl.barrier()
    if warp == 0:
        m = partial[lane] if lane < BLOCK // 32 else 0.0
        m = dsl.warp_reduce(m, "max")
        if lane == 0:
            dsl.atomic_max(amax, 0, m)


@dsl.kernel
def quantize(x: Tensor[bf16], q: Tensor[f8e4m3], amax: Tensor[f32], scale_inv: Tensor[f32], n: Int32):
    i = (dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x) * 8
    a = amax[0]
    scale = E4M3_MAX / dsl.max(a, TINY)
    if i == 0:
        scale_inv[0] = a / E4M3_MAX
    if i + 8 <= n:
        q.vstore(i, dsl.cast(dsl.cast(x.vload(i, 8), f32) * scale, f8e4m3))
    else:
        for k in range(i, n):
            q[k] = dsl.cast(dsl.cast(x[k], f32) * scale, f8e4m3)


@dsl.jit
def run_fp8_quantize(x: Tensor[bf16], q: Tensor[f8e4m3], amax: Tensor[f32], scale_inv: Tensor[f32],
                     BLOCK: Constexpr[int] = 256):
    n = x.shape[0]
    abs_max(x, amax, n, BLOCK).launch(grid=dsl.cdiv(n, BLOCK * 32), block=BLOCK)
    quantize(x, q, amax, scale_inv, n).launch(grid=dsl.cdiv(n, BLOCK * 8), block=BLOCK)
