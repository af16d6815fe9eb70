"""RMSNorm of f16 rows, one warp per row: y = x / sqrt(mean(x^2) + eps) * w.

A block holds WARPS warps, one row each, and the grid rounds the rows up, so the warps of the
last block whose rows are past the end return before they read anything: the `return`
under `if row >= rows` comes first, and the vector loads after it run only where the row
exists (moving them above the guard would read past the end of `x`). Each lane reads its 8
halves of every 256 columns with one 128-bit access, sums their squares in f32
(`(v * v).sum()`), the warp adds the 32 partial sums (`dsl.warp_reduce`), and a second pass
over the row (from L1 / L2 now) scales it.
"""

import dsl
from dsl import Float32, Tensor, f16, f32

WARPS = 4  # rows per block
LANE_COLS = 8  # halves per lane per 128-bit access


@dsl.kernel
def rmsnorm_rows(x: Tensor[f16, 2], w: Tensor[f16], y: Tensor[f16, 2], eps: Float32):
    row = dsl.block_idx.x * WARPS + dsl.thread_idx.x // 32
    lane = dsl.thread_idx.x % 32
    if row >= x.shape[0]:
        return  # the whole warp leaves: its row does not exist
    cols = x.shape[1]
    squares = 0.0
    for c in range(lane * LANE_COLS, cols, 32 * LANE_COLS):
        v = x.vload((row, c), LANE_COLS).to(f32)
        squares += (v * v).sum()
    scale = dsl.rsqrt(dsl.warp_reduce(squares, "sum") / dsl.cast(cols, f32) + eps)
    for c in range(lane * LANE_COLS, cols, 32 * LANE_COLS):
        v = x.vload((row, c), LANE_COLS).to(f32)
        y.vstore((row, c), (v * scale * w.vload(c, LANE_COLS).to(f32)).to(f16))


@dsl.jit
def run_rmsnorm(x: Tensor[f16, 2], w: Tensor[f16], y: Tensor[f16, 2], eps: Float32 = 1e-6):
    assert x.shape[1] % (32 * LANE_COLS) == 0, "the row length must be a multiple of 256"
    assert w.shape[0] == x.shape[1] and y.shape[0] == x.shape[0] and y.shape[1] == x.shape[1], \
        "shapes: x and y (rows, cols), w (cols,)"
    rmsnorm_rows(x, w, y, eps).launch(grid=dsl.cdiv(x.shape[0], WARPS), block=32 * WARPS)


if __name__ == "__main__":
    import torch

    x = torch.randn(4099, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    run_rmsnorm(x, w, y)
    expected = torch.nn.functional.rms_norm(x.float(), (4096,), w.float(), eps=1e-6)
    print("max error", (y.float() - expected).abs().max().item())
