"""Running one kernel launch: the grid's blocks in batches, every thread of a batch in lockstep.

Blocks are independent on the GPU until they touch the same global memory, and the order the
hardware runs them in is unspecified, so the interpreter runs them in batches of up to
`LANES_PER_BATCH` threads (whole blocks, in block-index order; fewer for kernels with many
values, so that a batch's values stay within `BATCH_VALUES`): one NumPy operation then serves
thousands of threads. Each block of a batch has its own copy of the shared arrays.
Threads of a batch run in lockstep, which is one of the schedules the GPU may choose. Kernels
whose warps wait for one another (mbarriers, named barriers) and cluster launches run one
block (or cluster) at a time instead, one thread per warp (`scheduling`).

A failure inside the kernel becomes a `LaunchError` (DSL601), as a fault on the GPU does,
naming the kernel, the launch, the thread and block, and the Python line of the op that failed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from dsl.diagnostics import Diagnostic, Related, SourceRange
from dsl.interpreter import stepping
from dsl.interpreter.lanes import Lanes
from dsl.interpreter.memory import SHARED_ALIGN, SHARED_BASE, UNINITIALIZED, Region, SharedWindow
from dsl.interpreter.program import Program, RunError
from dsl.interpreter.scheduling import BlockSync, run_block_by_warps
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


def _shared_regions(program: Program, blocks: int, smem: int, lanes: Lanes | None) -> dict[str, Region]:
    """Each shared array of the kernel, one slot per block of the batch, at its own address."""
    regions = {}
    address = SHARED_BASE
    for symbol, decl in program.shared.items():
        size = decl.size if decl.size is not None else smem
        slot = -(-max(size, 1) // max(decl.align, 16)) * max(decl.align, 16)
        data = np.full(slot * blocks, UNINITIALIZED, dtype=np.uint8)
        line = f" ({decl.where.file.rsplit('/', 1)[-1]}:{decl.where.line})" if decl.where else ""
        name = "dynamic shared memory" if decl.size is None else f"shared array{line}"
        align = max(SHARED_ALIGN, decl.align)
        address = -(-address // align) * align
        region = Region(data, size, name, address=address, space=3)
        address += max(size, 1)
        if blocks > 1 and lanes is not None:
            region.lane_base = lanes.block_of * slot
        regions[symbol] = region
    return regions


def run_launch(program: Program, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
               args: list[Any], names: dict[str, Any], *, kernel: str, launch: SourceRange | None,
               out: Any = None, breakpoints: Any = None, cluster: tuple[int, int, int] | None = None) -> None:
    """Runs every block of the grid; `args` are the kernel's flat parameter values (already
    interpreter values), `names` the kernel parameters by name (for breakpoints); `cluster`:
    the blocks of each cluster run together (`scheduling`)."""
    threads = math.prod(block)
    if threads == 0 or math.prod(grid) == 0:
        return
    hook = stepping.current()
    if hook is None:
        _run_launch(program, grid, block, smem, args, names, kernel=kernel, launch=launch, out=out,
                    breakpoints=breakpoints, cluster=cluster)
        return
    info = stepping.LaunchInfo(kernel, grid, block, smem, names, launch, program)
    hook.launch(info)
    _run_launch(program, grid, block, smem, args, names, kernel=kernel, launch=launch, out=out,
                breakpoints=breakpoints, cluster=cluster)
    hook.launch_done(info)


def _run_launch(program: Program, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
                args: list[Any], names: dict[str, Any], *, kernel: str, launch: SourceRange | None,
                out: Any, breakpoints: Any, cluster: tuple[int, int, int] | None) -> None:
    threads = math.prod(block)
    if program.independent_warps or (cluster is not None and math.prod(cluster) > 1):
        _run_by_warps(program, grid, block, smem, args, names, kernel=kernel, launch=launch, out=out,
                      breakpoints=breakpoints, cluster=cluster or (1, 1, 1))
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
            st.window = SharedWindow(list(st.shared.values()))
            _start(st, program, args, names, out, breakpoints)
            try:
                program.body.run(st)
            except RunError as err:
                _tell_debugger(err, st)
                raise _fault(err, st, kernel, grid, block, smem, launch) from None


def _tell_debugger(err: RunError, st: Lanes) -> None:
    """A fault, to the attached debugger (if one is) while the failing lanes' state is at hand."""
    hook = stepping.current()
    if hook is not None:
        hook.fault(err, st)


def _start(st: Lanes, program: Program, args: list[Any], names: dict[str, Any], out: Any, breakpoints: Any) -> None:
    st.args, st.out, st.breakpoints = names, out, breakpoints
    for (slot, _), value in zip(program.params, args):
        st.v[slot] = value


def _fault(err: RunError, st: Lanes, kernel: str, grid: tuple, block: tuple, smem: int,
           launch: SourceRange | None) -> LaunchError:
    where = ""
    if err.lane is not None:
        thread, blk = st.coordinates(err.lane)
        where = f" by thread {thread} of block {blk}"
    return kernel_fault(f"{err.message}{where}", kernel=kernel, grid=grid, block=block, smem=smem,
                        where=err.where, launch=launch)


def _clusters(grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> Iterator[list[tuple[int, int, int]]]:
    """The blocks of each cluster, by rank (x fastest), cluster after cluster."""
    cx, cy, cz = cluster
    gx, gy, gz = grid
    for z in range(0, gz, cz):
        for y in range(0, gy, cy):
            for x in range(0, gx, cx):
                yield [(x + i, y + j, z + k) for k in range(cz) for j in range(cy) for i in range(cx)]


def _run_by_warps(program: Program, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int,
                  args: list[Any], names: dict[str, Any], *, kernel: str, launch: SourceRange | None,
                  out: Any, breakpoints: Any, cluster: tuple[int, int, int] = (1, 1, 1)) -> None:
    """One block (or cluster of blocks) after another, each warp in its own thread (`scheduling`)."""
    threads = math.prod(block)
    warps = -(-threads // 32)
    for members in _clusters(grid, cluster):
        shared = [_shared_regions(program, 1, smem, None) for _ in members]
        sync = BlockSync(warps, len(members))
        sync.windows = [SharedWindow(list(s.values())) for s in shared]

        def run_warp(w: int, members: list = members, shared: list = shared, sync: BlockSync = sync) -> None:
            rank, first = divmod(w, warps)
            st = Lanes(program.slots, block, grid, [members[rank]], first=32 * first)
            st.shared, st.window, st.sync, st.rank = shared[rank], sync.windows[rank], sync, rank
            _start(st, program, args, names, out, breakpoints)
            with np.errstate(all="ignore"):
                try:
                    program.body.run(st)
                except RunError as err:
                    _tell_debugger(err, st)
                    raise _fault(err, st, kernel, grid, block, smem, launch) from None

        error = run_block_by_warps(sync, run_warp)
        if error is not None:
            raise error
