"""Kernel code with one mistake per marked line, each of which the DSL rejects too;
`test_mistakes.py` expects exactly these errors from pyright and mypy. Never run."""

import dsl
from dsl import Float32, Int32, Tensor, f32, u32


@dsl.kernel
def scale(x: Tensor[f32], a: Float32, n: Int32):
    i = dsl.thread_idx.x
    x[i] = x[i] * a
    dsl.barier()  # unknown_name
    i + dsl.cast(a, f32)  # int_with_float
    i + dsl.cast(i, u32)  # mixed_signedness
    i / 2  # int_division
    i + 1.5  # float_literal_with_int


@dsl.jit
def run(x: Tensor[f32], a: Float32):
    scale(x, a).launch(grid=1, block=32)  # missing_argument
    scale(x, a, 1, 2).launch(grid=1, block=32)  # extra_argument
