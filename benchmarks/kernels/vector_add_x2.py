"""c = a + b with two 128-bit loads per operand per thread (8 floats), coalesced by block."""

import dsl
from dsl import Constexpr, Int32, Tensor, f32


@dsl.kernel
def vector_add_x2(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], n: Int32):
    base = dsl.block_idx.x * dsl.block_dim.x * 8 + dsl.thread_idx.x * 4
    j = base + dsl.block_dim.x * 4
    if j + 4 <= n:
        va0 = a.vload(base, 4)
        vb0 = b.vload(base, 4)
        va1 = a.vload(j, 4)
        vb1 = b.vload(j, 4)
        c.vstore(base, va0 + vb0)
        c.vstore(j, va1 + vb1)
    else:
        for k in range(base, dsl.min(base + 4, n)):
            c[k] = a[k] + b[k]
        for k in range(j, dsl.min(j + 4, n)):
            c[k] = a[k] + b[k]


@dsl.jit
def add_x2(a: Tensor[f32], b: Tensor[f32], c: Tensor[f32], BLOCK: Constexpr[int] = 256):
    n = a.shape[0]
    vector_add_x2(a, b, c, n).launch(grid=dsl.cdiv(n, BLOCK * 8), block=BLOCK)
