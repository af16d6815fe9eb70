"""Exact GELU in bf16: y = x * 0.5 * (1 + erf(x / sqrt(2))), computed in f32 as torch does.

Eight bf16 values per thread (128-bit loads and stores) and a scalar tail. `dsl.erf` is
libdevice's erff, the function torch's CUDA kernel calls, in the same order of operations,
so the result matches `torch.nn.functional.gelu(x, approximate="none")` on bf16 tensors.
"""

import dsl
from dsl import Constexpr, Int32, Tensor, bf16, f32

SQRT1_2 = 0.7071067811865476


def gelu(v):
    return v * 0.5 * (1.0 + dsl.erf(v * SQRT1_2))


@dsl.kernel
def gelu_bf16(x: Tensor[bf16], y: Tensor[bf16], n: Int32):
    i = (dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x) * 8
    if i + 8 <= n:
        y.vstore(i, dsl.cast(gelu(dsl.cast(x.vload(i, 8), f32)), bf16))
    else:
        for k in range(i, n):
            y[k] = dsl.cast(gelu(dsl.cast(x[k], f32)), bf16)


@dsl.jit
def run_gelu_bf16(x: Tensor[bf16], y: Tensor[bf16], BLOCK: Constexpr[int] = 256):
    n = x.shape[0]
    gelu_bf16(x, y, n).launch(grid=dsl.cdiv(n, BLOCK * 8), block=BLOCK)
