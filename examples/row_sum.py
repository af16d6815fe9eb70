"""out[r] = sum(x[r, :]): one block per row, shared memory and warp shuffles."""

from reductions import block_sum

import dsl
from dsl import Constexpr, Tensor, f32


@dsl.kernel
def row_sum(x: Tensor[f32, 2], out: Tensor[f32], BLOCK: Constexpr[int]):
    row = dsl.block_idx.x
    cols = x.shape[1]
    smem = dsl.SharedAllocator()
    scratch = smem.array(f32, 32)
    acc = 0.0
    for c in range(dsl.thread_idx.x * 4, cols, BLOCK * 4):
        v = x.vload((row, c), 4)
        acc += v[0] + v[1] + v[2] + v[3]
    total = block_sum(acc, scratch, BLOCK // 32)
    if dsl.thread_idx.x == 0:
        out[row] = total


@dsl.jit
def run_row_sum(x: Tensor[f32, 2], out: Tensor[f32], BLOCK: Constexpr[int] = 512):
    row_sum(x, out, BLOCK).launch(grid=x.shape[0], block=BLOCK)
