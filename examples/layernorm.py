"""Row layer norm: mean and variance in one pass (sum and sum of squares), then scale."""

from reductions import block_sum

import dsl
from dsl import Constexpr, Float32, Tensor, f32


@dsl.kernel
def layernorm(x: Tensor[f32, 2], w: Tensor[f32], b: Tensor[f32], y: Tensor[f32, 2], eps: Float32,
              BLOCK: Constexpr[int]):
    row = dsl.block_idx.x
    cols = x.shape[1]
    smem = dsl.SharedAllocator()
    scratch = smem.array(f32, 32)
    s = 0.0
    sq = 0.0
    for c in range(dsl.thread_idx.x * 4, cols, BLOCK * 4):
        v = x.vload((row, c), 4)
        s += v[0] + v[1] + v[2] + v[3]
        sq += v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]
    n = dsl.cast(cols, f32)
    mean = block_sum(s, scratch, BLOCK // 32) / n
    var = block_sum(sq, scratch, BLOCK // 32) / n - mean * mean
    rstd = dsl.rsqrt(var + eps)
    for c in range(dsl.thread_idx.x * 4, cols, BLOCK * 4):
        v = x.vload((row, c), 4)
        y.vstore((row, c), (v - mean) * rstd * w.vload(c, 4) + b.vload(c, 4))


@dsl.jit
def run_layernorm(x: Tensor[f32, 2], w: Tensor[f32], b: Tensor[f32], y: Tensor[f32, 2], eps: Float32 = 1e-5,
                  BLOCK: Constexpr[int] = 512):
    layernorm(x, w, b, y, eps, BLOCK).launch(grid=x.shape[0], block=BLOCK)
