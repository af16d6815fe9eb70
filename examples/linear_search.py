"""For each row, the first column whose value exceeds a threshold (-1 when none): a run-time
loop left early with `return`, one row per thread."""

import dsl
from dsl import Constexpr, Float32, Int32, Tensor, f32, i32


@dsl.kernel
def first_above(x: Tensor[f32, 2], out: Tensor[i32], threshold: Float32, rows: Int32):
    row = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if row >= rows:
        return
    for c in range(x.shape[1]):
        if x[row, c] > threshold:
            out[row] = c
            return
    out[row] = -1


@dsl.jit
def run_first_above(x: Tensor[f32, 2], out: Tensor[i32], threshold: Float32, BLOCK: Constexpr[int] = 128):
    rows = x.shape[0]
    first_above(x, out, threshold, rows).launch(grid=dsl.cdiv(rows, BLOCK), block=BLOCK)
