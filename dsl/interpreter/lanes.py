"""The state of one batch of thread blocks while the interpreter runs them in lockstep.

Every lane of every block of the batch is one entry of each value's array. `mask` says which
lanes execute the current op (None: all of them); pure ops compute every lane anyway and the
inactive lanes' results are simply never used, so only memory, warp and barrier operations
look at it. Lane `g` is thread `g % threads` of block `g // threads` of the batch; within a
block threads are numbered x fastest, then y, then z, and warps are 32 consecutive threads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

WARP = 32


class Lanes:
    """Values, active lanes and coordinates of the blocks being run."""

    __slots__ = ("args", "block", "block_dim", "block_ids", "block_of", "blocks", "breakpoints", "first", "grid_dim",
                 "lane", "linear", "mask", "n", "out", "rank", "shared", "skipped_barrier", "skipped_warp", "sync",
                 "thread", "threads", "v", "warp", "warps", "window")

    def __init__(self, slots: int, block_dim: tuple[int, int, int], grid_dim: tuple[int, int, int],
                 block_ids: list[tuple[int, int, int]], first: int | None = None):
        bx, by, bz = block_dim
        self.threads = bx * by * bz
        self.blocks = len(block_ids)
        self.first = first  # a warp's first thread when one warp runs alone (one block), else None
        if first is None:
            self.n = self.threads * self.blocks
            linear = np.tile(np.arange(self.threads, dtype=np.int64), self.blocks)
        else:
            self.n = min(WARP, self.threads - first)
            linear = np.arange(first, first + self.n, dtype=np.int64)
        self.v: list[Any] = [None] * slots
        self.mask: np.ndarray | None = None
        self.block_dim, self.grid_dim, self.block_ids = block_dim, grid_dim, block_ids
        self.linear = linear
        # each lane's block in the batch
        self.block_of = np.repeat(np.arange(self.blocks, dtype=np.int64), self.n // self.blocks)
        self.thread = (linear % bx, (linear // bx) % by, linear // (bx * by))
        ids = np.asarray(block_ids, dtype=np.int64)
        if self.blocks == 1:  # one block: its coordinates are uniform values
            self.block = tuple(np.asarray(ids[0, k]) for k in range(3))
        else:
            self.block = tuple(np.repeat(ids[:, k], self.threads) for k in range(3))
        warps_per_block = -(-self.threads // WARP) if first is None else 1
        self.lane = linear % WARP
        self.warp = self.block_of * warps_per_block + (linear // WARP if first is None else 0)  # in the batch
        self.warps = self.blocks * warps_per_block
        self.skipped_barrier: np.ndarray | None = None  # lanes that did not take part in a barrier
        self.skipped_warp: np.ndarray | None = None  # lanes that did not take part in a warp operation
        self.shared: dict[str, Any] = {}
        self.args: dict[str, Any] = {}  # kernel parameter name -> its value (breakpoints show tensors)
        self.out: Any = None  # where printf writes
        self.breakpoints: Any = None
        self.sync: Any = None  # the block's `scheduling.BlockSync` when its warps run one by one
        self.rank = 0  # the block's rank in its cluster (a launch without clusters: 0)
        self.window: Any = None  # `memory.SharedWindow`: shared memory by address (one per batch)

    def active(self) -> np.ndarray:
        """The active lanes as a full boolean array."""
        return np.ones(self.n, dtype=bool) if self.mask is None else self.mask

    def coordinates(self, lane: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(thread, block) coordinates of lane `lane`."""
        thread = tuple(int(axis[lane]) for axis in self.thread)
        return thread, self.block_ids[lane // self.threads]  # type: ignore[return-value]


def and_mask(mask: np.ndarray | None, cond: Any, lanes: int) -> np.ndarray:
    """`mask & cond` as a full boolean array (`cond` may be uniform)."""
    cond = np.broadcast_to(np.asarray(cond, dtype=bool), (lanes,))
    return cond.copy() if mask is None else mask & cond


def select(cond: Any, a: Any, b: Any, vector: bool) -> Any:
    """Per lane `a` where `cond`, else `b` (`cond` is per lane; vectors select whole lanes)."""
    from dsl.interpreter.memory import Pointer, merge_pointers

    if isinstance(a, tuple):
        return tuple(select(cond, x, y, vector) for x, y in zip(a, b))
    c = np.asarray(cond)
    if isinstance(a, Pointer):
        return merge_pointers(c, a, b)
    if vector and c.ndim == 1:
        c = c[:, None]
    return np.where(c, a, b)
