"""Warp and block reductions shared by the row-wise examples.

Plain Python helpers, even ones that take a function: kernels that call them get them
traced inline, so the shuffles and shared-memory traffic appear in the caller's IR at
these lines.
"""

import dsl

WARP = 32


def add(a, b):
    return a + b


def warp_reduce(v, combine):
    """Combines over the 32 lanes of a warp with butterfly shuffles; every lane gets it."""
    for k in dsl.static_range(5):
        v = combine(v, dsl.shfl_xor(v, 16 >> k))
    return v


def block_reduce(v, scratch, warps, combine, identity):
    """Combines over the block: per-warp results meet in `scratch` (32 slots: lane k of the
    first warp reads slot k)."""
    assert scratch.shape[0] >= WARP, "block_reduce needs a scratch array of at least 32 values"
    lane = dsl.thread_idx.x % WARP
    warp = dsl.thread_idx.x // WARP
    v = warp_reduce(v, combine)
    if lane == 0:
        scratch[warp] = v
    dsl.barrier()
    v = scratch[lane] if lane < warps else identity
    v = warp_reduce(v, combine)
    dsl.barrier()  # scratch is free again for the next reduction
    return v


def block_sum(v, scratch, warps):
    return block_reduce(v, scratch, warps, add, 0.0)


def block_max(v, scratch, warps):
    return block_reduce(v, scratch, warps, dsl.max, -3.0e38)
