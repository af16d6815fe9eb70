"""Another `run_saxpy` (a different module, the same name): its operator is qualified by module."""

import dsl
from dsl import Float32, Tensor, f32


@dsl.kernel
def twice(x: Tensor[f32], y: Tensor[f32], a: Float32, n: dsl.Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = 2.0 * a * x[i]


@dsl.jit
def run_saxpy(x: Tensor[f32], y: Tensor[f32], a: Float32):
    twice(x, y, a, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 64), block=64)
