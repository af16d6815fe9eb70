import dsl
from dsl import Tensor, f32


@dsl.kernel
def scale(x: Tensor[f32], n: dsl.Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * 2.0


@dsl.jit
def run(x: Tensor[f32]):
    n = x.shape[0]
    scale(x, n).launch(grid=dsl.cdiv(n, 128), block=128)
    scale(x, n).launch(grid=dsl.cdiv(n, 512), block=512)
