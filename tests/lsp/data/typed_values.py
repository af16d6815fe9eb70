import dsl
from dsl import Constexpr, Int32, Tensor, f32

TILE = 32


@dsl.kernel
def row_sum(x: Tensor[f32, 2], out: Tensor[f32, 1], n: Int32, WIDTH: Constexpr[int]):
    row = dsl.block_idx.x
    lane = dsl.thread_idx.x
    smem = dsl.SharedAllocator()
    buf = smem.array(f32, TILE)
    steps = WIDTH // TILE
    acc = 0.0
    for j in range(lane, n, TILE):
        acc += x[row, j]
    v = x.vload((row, 0), 4)
    buf[lane] = acc + v[0]
    dsl.barrier()
    if lane == 0:
        total = buf[0] * steps
        out[row] = total


@dsl.jit
def run_row_sum(x: Tensor[f32, 2], out: Tensor[f32, 1], BLOCK: Constexpr[int] = 32):
    rows = x.shape[0]
    row_sum(x, out, x.shape[1], 128).launch(grid=rows, block=BLOCK)
