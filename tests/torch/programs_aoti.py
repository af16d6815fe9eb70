"""The functional forms the AOTInductor tests export beside `programs.py`'s in-place functions
(a real file: kdsl reads its source). `scaled` allocates its output like an input, which the
C++ operator library can do; `scaled_by_function` allocates it with a Python function, which
it refuses."""

import dsl
import dsl.torch
from dsl import Float32, Int32, Tensor, f32


@dsl.kernel
def scale(x: Tensor[f32], y: Tensor[f32], a: Float32, n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = a * x[i]


@dsl.jit
def run_scale(x: Tensor[f32], y: Tensor[f32], a: Float32):
    scale(x, y, a, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], 128), block=128)


scaled = dsl.torch.op(run_scale, outputs={"y": "x"})  # torch.ops.kdsl.run_scale_functional: y = a x
scaled_by_function = dsl.torch.op(run_scale, outputs={"y": lambda x: x.new_empty(x.shape)}, name="run_scale_made")
