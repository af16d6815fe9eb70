"""saxpy launched with a block of 128 where the kernel's contract says 256: DSL202 at `block=`."""

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, f32


@dsl.kernel(known_block_size=[256, 1, 1])
def saxpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i] + y[i]


@dsl.jit
def run_saxpy(x: Tensor[f32, 1], y: Tensor[f32, 1], a: Float32, BLOCK: Constexpr[int] = 128):
    n = x.shape[0]
    saxpy(x, y, a, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
