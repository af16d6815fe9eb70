"""Row softmax: an online max/sum pass, block reductions, then one normalizing pass."""

from reductions import block_max, block_sum

import dsl
from dsl import Constexpr, Tensor, f32


@dsl.kernel
def softmax(x: Tensor[f32, 2], y: Tensor[f32, 2], BLOCK: Constexpr[int]):
    row = dsl.block_idx.x
    cols = x.shape[1]
    smem = dsl.SharedAllocator()
    scratch = smem.array(f32, 32)
    m = -3.0e38
    s = 0.0
    for c in range(dsl.thread_idx.x * 4, cols, BLOCK * 4):
        v = x.vload((row, c), 4)
        m_new = dsl.max(m, dsl.max(dsl.max(v[0], v[1]), dsl.max(v[2], v[3])))
        e = dsl.exp(v - m_new)
        s = s * dsl.exp(m - m_new) + (e[0] + e[1] + e[2] + e[3])
        m = m_new
    row_max = block_max(m, scratch, BLOCK // 32)
    total = block_sum(s * dsl.exp(m - row_max), scratch, BLOCK // 32)
    inv = 1.0 / total
    for c in range(dsl.thread_idx.x * 4, cols, BLOCK * 4):
        v = x.vload((row, c), 4)
        y.vstore((row, c), dsl.exp(v - row_max) * inv)


@dsl.jit
def run_softmax(x: Tensor[f32, 2], y: Tensor[f32, 2], BLOCK: Constexpr[int] = 512):
    softmax(x, y, BLOCK).launch(grid=x.shape[0], block=BLOCK)
