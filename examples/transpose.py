"""out = x.T through a padded 32x32 shared-memory tile: coalesced reads and writes."""

import dsl
from dsl import Tensor, f32

TILE = 32
ROWS = 8  # each thread moves TILE // ROWS elements


@dsl.kernel(known_block_size=[TILE, ROWS, 1])
def transpose(x: Tensor[f32, 2], out: Tensor[f32, 2]):
    smem = dsl.SharedAllocator()
    tile = smem.array(f32, (TILE, TILE + 1))  # +1 column: no bank conflicts
    rows = x.shape[0]
    cols = x.shape[1]
    tx = dsl.thread_idx.x
    ty = dsl.thread_idx.y
    c = dsl.block_idx.x * TILE + tx
    for k in dsl.static_range(0, TILE, ROWS):
        r = dsl.block_idx.y * TILE + ty + k
        if r < rows and c < cols:
            tile[ty + k, tx] = x[r, c]
    dsl.barrier()
    c = dsl.block_idx.y * TILE + tx
    for k in dsl.static_range(0, TILE, ROWS):
        r = dsl.block_idx.x * TILE + ty + k
        if r < cols and c < rows:
            out[r, c] = tile[tx, ty + k]


@dsl.jit
def run_transpose(x: Tensor[f32, 2], out: Tensor[f32, 2]):
    grid = (dsl.cdiv(x.shape[1], TILE), dsl.cdiv(x.shape[0], TILE))
    transpose(x, out).launch(grid=grid, block=(TILE, ROWS, 1))
