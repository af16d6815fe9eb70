"""Kernels the debugger's tests stop in. The tests name these lines: keep them where they are."""

import dsl
from dsl import Int32, Tensor, f32, i32


def scaled(v, k):
    w = v * k
    return w + 1


@dsl.kernel
def steps(x: Tensor[i32], out: Tensor[i32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    acc = 0
    pair = [i, i + 1]
    for k in range(3):
        acc += scaled(x[i], k)
    # nothing to stop at on this line

    out[i] = acc + pair[1] - pair[0]


@dsl.kernel
def shared_sum(x: Tensor[f32], out: Tensor[f32]):
    smem = dsl.SharedAllocator()
    tile = smem.array(f32, 64)
    t = dsl.thread_idx.x
    tile[t] = x[dsl.block_idx.x * 64 + t] * 2.0
    dsl.barrier()
    if t == 0:
        s = 0.0
        for k in range(64):
            s += tile[k]
        out[dsl.block_idx.x] = s


@dsl.kernel
def out_of_bounds(x: Tensor[f32], out: Tensor[f32]):
    i = dsl.thread_idx.x
    out[i] = x[i + 60]


@dsl.jit(examples=[(dsl.TensorSpec(i32, (4096,)), dsl.TensorSpec(i32, (4096,)))])
def run_steps(x: Tensor[i32], out: Tensor[i32]):
    n = x.shape[0]
    steps(x, out, n).launch(grid=dsl.cdiv(n, 64), block=64)


@dsl.jit
def run_shared_sum(x: Tensor[f32], out: Tensor[f32]):
    shared_sum(x, out).launch(grid=x.shape[0] // 64, block=64)


@dsl.jit
def run_out_of_bounds(x: Tensor[f32], out: Tensor[f32]):
    out_of_bounds(x, out).launch(grid=1, block=64)


@dsl.kernel
def divergent_barrier(out: Tensor[f32]):
    t = dsl.thread_idx.x
    if t < 16:
        dsl.barrier()
    dsl.barrier()
    out[t] = 1.0


@dsl.jit
def run_divergent_barrier(out: Tensor[f32]):
    divergent_barrier(out).launch(grid=1, block=64)


@dsl.kernel
def by_warps(out: Tensor[i32]):
    t = dsl.thread_idx.x
    v = t * 2
    dsl.named_barrier(1, 64)
    out[t] = v + t // 32


@dsl.jit
def run_by_warps(out: Tensor[i32]):
    by_warps(out).launch(grid=1, block=64)
