"""Kernel code with one mistake per marked line, each of which the DSL rejects too;
`test_mistakes.py` expects exactly these errors from pyright and mypy. Never run."""

from typing import Any

import dsl
from dsl import Float32, Int32, Tensor, f8e4m3, f32, u32


@dsl.kernel
def scale(x: Tensor[f32], y: Tensor[f32, 2], a: Float32, n: Int32):
    i = dsl.thread_idx.x
    x[i] = x[i] * a
    dsl.barier()  # unknown_name
    i + dsl.cast(a, f32)  # int_with_float
    i + dsl.cast(i, u32)  # mixed_signedness
    i / 2  # int_division
    i + 1.5  # float_literal_with_int
    1.5 * i  # reflected_float_literal_with_int
    dsl.cast(a, f8e4m3) * 2  # fp8_arithmetic
    y[i] = a  # rank_mismatch_store
    x[i] = y[i]  # rank_mismatch_load


@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32, 2], a: Float32):
    scale(x, y, a).launch(grid=1, block=32)  # missing_argument
    scale(x, y, a, 1, 2).launch(grid=1, block=32)  # extra_argument


def host(x: Any, y: Any) -> None:
    run(x, y, 2.0)
    run(x, y)  # jit_missing_argument
    run(x, y, 2.0, 1)  # jit_extra_argument
    run(x, y, b=2.0)  # jit_unknown_keyword
