"""Row softmax autotuned over its block size: the first call with a new shape of `x` runs each
config on the call's own arrays and keeps the fastest, remembered on disk for this GPU (so a
new process with the same shape runs no trial). `kdsl tune examples/softmax_autotuned.py`
tunes it ahead of time for the shape of `examples=`; `kdsl build` then compiles the recorded
choice.

`restore=[]`: every call overwrites all of `y`, so nothing needs putting back between trials
(the default restores every tensor the kernel writes).
"""

from reductions import block_max, block_sum

import dsl
from dsl import Constexpr, Tensor, f32


@dsl.kernel
def softmax_rows(x: Tensor[f32, 2], y: Tensor[f32, 2], BLOCK: Constexpr[int]):
    row = dsl.block_idx.x
    cols = x.shape[1]
    scratch = dsl.SharedAllocator().array(f32, 32)
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


ROWS = dsl.TensorSpec(f32, shape=(4096, 4096))  # the shape `kdsl tune` and `kdsl build` use


@dsl.autotune(configs=[dsl.Config(BLOCK=128), dsl.Config(BLOCK=256), dsl.Config(BLOCK=512),
                       dsl.Config(BLOCK=1024)], key=["x"], restore=[])
@dsl.jit(examples=[(ROWS, ROWS)])
def run_softmax_autotuned(x: Tensor[f32, 2], y: Tensor[f32, 2], BLOCK: Constexpr[int] = 512):
    softmax_rows(x, y, BLOCK).launch(grid=x.shape[0], block=BLOCK)
