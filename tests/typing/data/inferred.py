"""Correct kernel code whose types pyright and mypy must infer (each `reveal_type` is
checked by `test_inference.py` through the comment that ends its line). Never run."""

from typing_extensions import reveal_type

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, bf16, f16, f32, f64, i64, u32


@dsl.kernel
def k(x: Tensor[f32], y: Tensor[f32, 2], a: Float32, n: Int32, BLOCK: Constexpr[int]):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    reveal_type(dsl.thread_idx.x)  # thread_idx
    reveal_type(i)  # index_arithmetic
    reveal_type(i + 1)  # int_literal
    reveal_type(1 + i)  # reflected_int_literal
    reveal_type(i < n)  # comparison
    reveal_type(i + dsl.cast(i, i64))  # widened_int
    reveal_type(dsl.cast(i, i64) - i)  # widened_int_left
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
    reveal_type(0.5 * h)  # reflected_float_literal
    reveal_type(dsl.cast(h, f32) + dsl.cast(h, f64))  # widened_float
    reveal_type(h / dsl.cast(h, f32))  # widened_half
    reveal_type(dsl.exp(h))  # math
    reveal_type(f32(i))  # cast_call
    reveal_type(i.to(f32))  # to
    reveal_type(dsl.bitcast(f32(i), u32))  # bitcast_same_width
    reveal_type(dsl.bitcast(f64(i), f16))  # bitcast_to_lanes
    v = dsl.vector(f32(i), f32(n))
    reveal_type(v[0:1])  # vector_lanes
    smem = dsl.SharedAllocator()
    tile = smem.array(f32, (32, 33))
    reveal_type(tile[0, i])  # shared_element
    acc = 0.0
    acc += tile[0, i]
    reveal_type(acc)  # accumulator
    partial = [0.0] * 4
    for q in dsl.static_range(4):
        partial[q] += tile[q, i] * a
    reveal_type(partial[0])  # float_list_element
    lanes = ()
    for q in dsl.static_range(4):
        lanes = lanes + (tile[q, i],)
    reveal_type(lanes)  # grown_tuple
    if i < n:
        w = tile[0, i]
    else:
        w = 0.0
    y[i, 0] = a * x[i] + tile[0, i] + w + sum(partial) + sum(lanes)


@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32, 2], a: Float32 = 1.0, BLOCK: Constexpr[int] = 128):
    n = x.shape[0]
    k(x, y, a, n, BLOCK).launch(grid=min(dsl.sm_count(), dsl.cdiv(n, BLOCK)), block=BLOCK)
    reveal_type(dsl.cdiv(n, BLOCK))  # cdiv
    reveal_type(min(dsl.sm_count(), dsl.cdiv(n, BLOCK)))  # host_min
