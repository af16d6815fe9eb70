"""c = a + b with 128-bit vector loads: four floats per thread, a scalar tail."""

import dsl
from dsl import Constexpr, Int32, Tensor, f32


@dsl.kernel
def vector_add(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], n: Int32):
    i = (dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x) * 4
    if i + 4 <= n:
        c.vstore(i, a.vload(i, 4) + b.vload(i, 4))
    else:
        for k in range(i, n):
            c[k] = a[k] + b[k]


@dsl.jit
def add(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], BLOCK: Constexpr[int] = 256):
    n = a.shape[0]
    vector_add(a, b, c, n).launch(grid=dsl.cdiv(n, BLOCK * 4), block=BLOCK)
