"""Kernels with a planted cause, for the profiler's tests: each has one line the GPU's counters
must single out (run by `kdsl profile tests/profiling/planted.py::run_...`)."""

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, f32

N = 1 << 24


def gather(t, i, n):
    """A helper traced inline: its line is where the strided load's counters must land."""
    return t[(i * 33) % n]  # strided: every lane of a warp in another 128-byte segment


@dsl.kernel
def strided(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        a = x[i]  # coalesced
        b = gather(y, i, n)
        out[i] = a + b


@dsl.jit(examples=[(dsl.TensorSpec(f32, shape=(N,)), dsl.TensorSpec(f32, shape=(N,)), dsl.TensorSpec(f32, shape=(N,)))])
def run_strided(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32]):
    n = x.shape[0]
    strided(x, y, out, n).launch(grid=dsl.cdiv(n, 256), block=256)


@dsl.kernel
def bank_conflict(x: Tensor[f32], out: Tensor[f32]):
    smem = dsl.SharedAllocator()
    tile = smem.array(f32, 32 * 32)
    t = dsl.thread_idx.x
    base = dsl.block_idx.x * 1024
    for k in dsl.static_range(32):
        tile[k * 32 + t] = x[base + k * 32 + t]  # row-wise: conflict-free
    dsl.barrier()
    acc = 0.0
    for k in dsl.static_range(32):
        acc += tile[t * 32 + k]  # column-wise: all 32 lanes in one bank
    out[dsl.block_idx.x * 32 + t] = acc


@dsl.jit(examples=[(dsl.TensorSpec(f32, shape=(N,)), dsl.TensorSpec(f32, shape=(N // 32,)))])
def run_bank_conflict(x: Tensor[f32], out: Tensor[f32]):
    bank_conflict(x, out).launch(grid=x.shape[0] // 1024, block=32)


@dsl.kernel
def fma_chain(x: Tensor[f32], out: Tensor[f32], a: Float32, STEPS: Constexpr[int]):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    v = x[i]
    w = v * 0.5
    for _ in range(STEPS):
        v = dsl.fma(v, a, w)
        w = dsl.fma(w, a, v)
    out[i] = v + w


@dsl.jit(examples=[(dsl.TensorSpec(f32, shape=(1 << 20,)), dsl.TensorSpec(f32, shape=(1 << 20,)), 0.999)])
def run_fma_chain(x: Tensor[f32], out: Tensor[f32], a: Float32, STEPS: Constexpr[int] = 4096):
    fma_chain(x, out, a, STEPS).launch(grid=x.shape[0] // 256, block=256)
