"""Correct kernel code whose types pyright and mypy must infer (each `reveal_type` is
checked by `test_inference.py` through the comment that ends its line). Never run."""

from typing_extensions import reveal_type

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f16, f32, f64, i64


@dsl.kernel
def k(x: Tensor[f32], y: Tensor[f32, 2], a: Float32, n: Int32, BLOCK: Constexpr[int]):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    reveal_type(dsl.thread_idx.x)  # thread_idx
    reveal_type(i)  # index_arithmetic
    reveal_type(i + 1)  # int_literal
    reveal_type(1 + i)  # reflected_int_literal
    reveal_type(i < n)  # comparison
    reveal_type(i + dsl.cast(i, i64))  # widened_int
    reveal_type(BLOCK)  # constexpr
    reveal_type(a)  # float_parameter
    reveal_type(x[i])  # tensor_element
    reveal_type(y[i, 0])  # tensor2_element
    reveal_type(x.vload(i, 4))  # vector_load
    reveal_type(x.shape[0])  # shape
    h = dsl.cast(a, f16)
    reveal_type(h)  # cast
    reveal_type(h + dsl.cast(a, bf16))  # f16_with_bf16
    reveal_type(h * 0.5)  # float_literal
    reveal_type(dsl.cast(h, f32) + dsl.cast(h, f64))  # widened_float
    reveal_type(dsl.exp(h))  # math
    reveal_type(f32(i))  # cast_call
    reveal_type(i.to(f32))  # to
    smem = dsl.SharedAllocator()
    tile = smem.array(f32, (32, 33))
    reveal_type(tile[0, i])  # shared_element
    acc = 0.0
    acc += tile[0, i]
    reveal_type(acc)  # accumulator
    y[i, 0] = a * x[i] + tile[0, i]


@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32, 2], a: Float32 = 1.0, BLOCK: Constexpr[int] = 128):
    n = x.shape[0]
    k(x, y, a, n, BLOCK).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
    reveal_type(dsl.cdiv(n, BLOCK))  # cdiv
