"""Running one kernel launch: the grid's blocks in batches, every thread of a batch in lockstep.

Blocks are independent on the GPU until they touch the same global memory, and the order the
hardware runs them in is unspecified, so the interpreter runs them in batches of up to
`LANES_PER_BATCH` threads (whole blocks, in block-index order; fewer for kernels with many
values, so that a batch's values stay within `BATCH_VALUES`): one NumPy operation then serves
thousands of threads. Each block of a batch has its own copy of the shared arrays.
Threads of a batch run in lockstep, which is one of the schedules the GPU may choose.

A failure inside the kernel becomes a `LaunchError` (DSL601), as a fault on the GPU does,
naming the kernel, the launch, the thread and block, and the Python line of the op that failed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from dsl.diagnostics import Diagnostic, Related, SourceRange
from dsl.interpreter.lanes import Lanes
from dsl.interpreter.memory import UNINITIALIZED, Region
from dsl.interpreter.program import Program, RunError
from dsl.runtime.driver import LaunchError

LANES_PER_BATCH = 16384
BATCH_VALUES = 1 << 23  # lanes x value slots a batch may hold (about 64 MB of 8-byte values, at most)


def kernel_fault(message: str, *, kernel: str, grid: tuple, block: tuple, smem: int, where: SourceRange | None,
                 launch: SourceRange | None) -> LaunchError:
    """The error a GPU run would give (DSL601), pointing at the op that failed, with the launch
    as related information; a `LaunchError`, so programs catch it as they catch a GPU fault."""
    err = LaunchError(message, kernel=kernel, grid=grid, block=block, smem=smem, range=where or launch)
    if where is not None and launch is not None and err.diagnostic is not None:
        err.diagnostic = Diagnostic.make("DSL601", err.diagnostic.message, where,
                                         related=[Related(launch, f"kernel '{kernel}' launched here")])
    return err


def _blocks(grid: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
    gx, gy, gz = grid
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                yield (x, y, z)


def _shared_regions(program: Program, blocks: int, smem: int, lanes: Lanes) -> dict[str, Region]:
    regions = {}
    for symbol, decl in program.shared.items():
        size = decl.size if decl.size is not None else smem
        slot = -(-max(size, 1) // max(decl.align, 16)) * max(decl.align, 16)
        data = np.full(slot * blocks, UNINITIALIZED, dtype=np.uint8)
        line = f" ({decl.where.file.rsplit('/', 1)[-1]}:{decl.where.line})" if decl.where else ""
        name = "dynamic shared memory" if decl.size is None else f"shared array{line}"
        region = Region(data, size, name, address=0, space=3)
        if blocks > 1:
            region.lane_base = lanes.block_of * slot
        regions[symbol] = region
    return regions


def run_launch(program: Program, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
               args: list[Any], names: dict[str, Any], *, kernel: str, launch: SourceRange | None,
               out: Any = None, breakpoints: Any = None) -> None:
    """Runs every block of the grid; `args` are the kernel's flat parameter values (already
    interpreter values), `names` the kernel parameters by name (for breakpoints)."""
    threads = math.prod(block)
    if threads == 0 or math.prod(grid) == 0:
        return
    per_batch = max(1, min(LANES_PER_BATCH, BATCH_VALUES // max(program.slots, 1)) // threads)
    pending = _blocks(grid)
    with np.errstate(all="ignore"):
        while True:
            ids = [b for _, b in zip(range(per_batch), pending)]
            if not ids:
                return
            st = Lanes(program.slots, block, grid, ids)
            st.shared = _shared_regions(program, len(ids), smem, st)
            st.args, st.out, st.breakpoints = names, out, breakpoints
            for (slot, _), value in zip(program.params, args):
                st.v[slot] = value
            try:
                program.body.run(st)
            except RunError as err:
                where = ""
                if err.lane is not None:
                    thread, blk = st.coordinates(err.lane)
                    where = f" by thread {thread} of block {blk}"
                raise kernel_fault(f"{err.message}{where}", kernel=kernel, grid=grid, block=block, smem=smem,
                                  where=err.where, launch=launch) from None
