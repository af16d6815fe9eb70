"""Warp and block reductions shared by the row-wise examples.

Plain Python helpers: kernels that call them get them traced inline, so the shuffles
and shared-memory traffic appear in the caller's IR at these lines.
"""

import dsl

WARP = 32


def warp_sum(v):
    """Sum over the 32 lanes of a warp with butterfly shuffles; every lane gets it."""
    for k in dsl.static_range(5):
        v = v + dsl.shfl_xor(v, 16 >> k)
    return v


def warp_max(v):
    for k in dsl.static_range(5):
        v = dsl.max(v, dsl.shfl_xor(v, 16 >> k))
    return v


def block_sum(v, scratch, warps):
    """Sum over the block: warp sums meet in `scratch` (one slot per warp)."""
    lane = dsl.thread_idx.x % WARP
    warp = dsl.thread_idx.x // WARP
    v = warp_sum(v)
    if lane == 0:
        scratch[warp] = v
    dsl.barrier()
    v = scratch[lane] if lane < warps else 0.0
    v = warp_sum(v)
    dsl.barrier()
    return v


def block_max(v, scratch, warps):
    lane = dsl.thread_idx.x % WARP
    warp = dsl.thread_idx.x // WARP
    v = warp_max(v)
    if lane == 0:
        scratch[warp] = v
    dsl.barrier()
    v = scratch[lane] if lane < warps else -3.0e38
    v = warp_max(v)
    dsl.barrier()
    return v
