"""Blocks whose warps wait for one another: one thread of the interpreter per warp.

Most kernels run every thread of a batch of blocks in lockstep (`execute`). That is one of
the schedules the GPU may choose only while no warp waits for another: a producer warp
that waits on an mbarrier for consumers to free a buffer, and consumers that wait for the
producer to fill it, each in their own loop, need the independent forward progress that
GPUs since Volta give. Kernels that use mbarriers or named barriers therefore run one block
at a time with each warp in its own Python thread (its lanes still in lockstep): a warp that
must wait blocks on the block's `BlockSync` until another warp's arrival, a TMA load's
completed bytes or a barrier lets it go on.

Waiting is exact, not polled: every state change happens under one lock and wakes the
waiters, who test their condition again. When every warp still running waits and none of
their conditions can become true, the block is deadlocked; on the GPU it would hang, here it
is a `LaunchError` that names each warp and where it waits. A fault in one warp stops the
others at their next wait; the first fault is the one reported.

Barrier counting follows PTX: `bar.sync` / `bar.arrive` count whole warps (a barrier of
`threads` threads completes when `threads / 32` warps arrived), `dsl.barrier()` waits for
every warp of the block that has not exited, and an mbarrier completes its phase when its
pending arrivals reach zero and its transaction count (`expect_tx` bytes, less the bytes
TMA delivered) is zero.

A cluster launch (`cluster=`) runs the blocks of one cluster together, every warp of each
in its own thread, under one `BlockSync`: what one block's warps do to another's
mbarriers (`mapa`, TMA multicast) and the cluster barrier are then the same waits. Barrier
ids and mbarrier addresses are per block (its rank in the cluster); the cluster barrier
waits for every warp of the cluster that has not exited.
"""

from __future__ import annotations

import ast
import linecache
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsl.interpreter.memory import LaneFault


class Stopped(BaseException):
    """Raised in a waiting warp when another warp has failed: the block is abandoned (a
    BaseException, so that no op turns it into an error of its own)."""


class Deadlock(LaneFault):
    """Every running warp waits and none can go on (a fault of each waiting warp)."""


@dataclass
class MBarrier:
    """An mbarrier's state: the arrivals a phase needs, those still pending, the transaction
    bytes still expected, and how many phases have completed."""

    count: int
    pending: int
    tx: int = 0
    phase: int = 0

    def arrive(self, lane: int, arrivals: int = 1, tx: int = 0) -> None:
        """`lane`'s arrival; one past the phase's count (its phase has had every arrival and
        waits for transaction bytes) is a fault of that lane: on the GPU it is undefined (two
        `mbarrier_expect_tx` for one barrier of count 1 faulted a kernel)."""
        if self.pending - arrivals < 0:
            raise LaneFault(f"an arrival on an mbarrier of count {self.count} whose phase has had all its "
                              f"arrivals (it waits for {self.tx} transaction bytes); give one mbarrier_expect_tx "
                              "the phase's total bytes, or init the barrier with one arrival per arriving thread", lane)
        self.tx += tx
        self.pending -= arrivals
        self._complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._complete()

    def _complete(self) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def done(self, parity: int) -> bool:
        """`mbarrier.try_wait.parity`: the phase of this parity has completed (the current
        phase has the other parity)."""
        return self.phase % 2 != parity % 2


@dataclass
class _Barrier:
    arrived: int = 0
    generation: int = 0


CLUSTER_BARRIER = -1  # the barrier id of the cluster barrier (a block's are 0 to 15)


@dataclass
class BlockSync:
    """The barriers and mbarriers of one block (or the blocks of one cluster), and who waits
    on what. Warps are numbered across the cluster: block rank x warps per block + warp."""

    warps: int  # per block
    blocks: int = 1  # in the cluster
    lock: threading.Condition = field(default_factory=threading.Condition)
    live: list[int] = field(default_factory=list)  # per block: warps that have not exited
    barriers: dict[tuple[int, int], _Barrier] = field(default_factory=dict)  # (rank, id) -> its state
    mbarriers: dict[tuple[int, int], MBarrier] = field(default_factory=dict)  # (rank, shared address)
    waiting: dict[int, tuple[Callable[[], bool], str]] = field(default_factory=dict)  # warp -> (ready, what)
    failed: BaseException | None = None
    windows: list[Any] = field(default_factory=list)  # per block: its `memory.SharedWindow`

    def __post_init__(self) -> None:
        self.live = [self.warps] * self.blocks

    @property
    def running(self) -> int:
        return sum(self.live)

    # --- waiting ------------------------------------------------------------------------------

    def wait_until(self, warp: int, lane: int, ready: Callable[[], bool], what: str) -> None:
        """Blocks warp `warp` until `ready()` (called with the lock held); `what` says what it
        waits for and where, for the deadlock report; `lane` is the lane that waits first."""
        if ready():
            return
        self.waiting[warp] = (ready, what)
        try:
            while not ready():
                if isinstance(self.failed, Deadlock):
                    raise Deadlock(self.failed.message, lane)
                if self.failed is not None:
                    raise Stopped
                self._check_deadlock()
                if self.failed is None:
                    self.lock.wait()
        finally:
            self.waiting.pop(warp, None)

    def _check_deadlock(self) -> None:
        """Marks the block deadlocked when every running warp waits on a condition that is false."""
        if self.running and len(self.waiting) >= self.running and not any(r() for r, _ in self.waiting.values()):
            waits = "; ".join(f"warp {w} {what}" for w, (_, what) in sorted(self.waiting.items()))
            group = "block" if self.blocks == 1 else "cluster"
            self.failed = Deadlock(f"deadlock: every warp of the {group} waits and none can go on ({waits}); "
                                   "on the GPU the kernel would hang", 0)
            self.lock.notify_all()

    def changed(self) -> None:
        self.lock.notify_all()

    def exited(self, rank: int = 0) -> None:
        """A warp of block `rank` has finished: block- and cluster-wide barriers stop counting it."""
        with self.lock:
            self.live[rank] -= 1
            for key, expected in (((rank, 0), self.live[rank]), ((0, CLUSTER_BARRIER), self.running)):
                whole = self.barriers.get(key)
                if whole is not None and whole.arrived and whole.arrived >= expected:
                    self._release(whole)
            self.lock.notify_all()
            if self.failed is None and self.waiting:
                self._check_deadlock()  # the waiters raise it

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if self.failed is None:
                self.failed = error
            self.lock.notify_all()

    # --- barriers -----------------------------------------------------------------------------

    def barrier(self, warp: int, lane: int, barrier_id: int, warps: int | None, wait: bool, what: str) -> None:
        """`bar.sync` (wait) or `bar.arrive` of one warp at `barrier_id` of its block, which
        completes when `warps` warps have arrived (None: every warp of the block that has not
        exited; `CLUSTER_BARRIER`: of the cluster)."""
        rank = warp // self.warps
        with self.lock:
            if barrier_id == CLUSTER_BARRIER:
                key, expected = (0, CLUSTER_BARRIER), self.running
            else:
                key, expected = (rank, barrier_id), self.live[rank] if warps is None else warps
            b = self.barriers.setdefault(key, _Barrier())
            b.arrived += 1
            if b.arrived >= expected:
                self._release(b)
                return
            if wait:
                generation = b.generation
                self.wait_until(warp, lane, lambda: b.generation != generation, what)

    def _release(self, b: _Barrier) -> None:
        b.arrived = 0
        b.generation += 1
        self.lock.notify_all()

    # --- mbarriers ----------------------------------------------------------------------------

    def mbarrier(self, address: int, lane: int, rank: int = 0) -> MBarrier:
        """Block `rank`'s mbarrier at shared `address`."""
        if not 0 <= rank < self.blocks:
            raise LaneFault(f"block rank {rank} is outside the cluster of {self.blocks} blocks", lane)
        found = self.mbarriers.get((rank, address))
        if found is None:
            where = f" of block rank {rank}" if self.blocks > 1 else ""
            raise LaneFault(f"the mbarrier at shared address {address:#x}{where} is used before dsl.mbarrier_init",
                            lane)
        return found


def run_block_by_warps(sync: BlockSync, run_warp: Callable[[int], None]) -> BaseException | None:
    """Runs `run_warp(w)` for every warp of the block (or cluster: w counts across its blocks),
    each in its own thread, and returns the first error one of them raised (None when every
    warp finished)."""
    errors: list[BaseException] = []  # in the order they happened

    def body(w: int) -> None:
        try:
            run_warp(w)
        except Stopped:
            pass
        except BaseException as err:
            errors.append(err)
            sync.fail(err)
        finally:
            sync.exited(w // sync.warps)

    threads = [threading.Thread(target=body, args=(w,), name=f"kdsl-interpreter-warp-{w}", daemon=True)
               for w in range(sync.warps * sync.blocks)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException as err:  # Ctrl-C while the block runs: the warps stop at their next wait
        sync.fail(err)
        raise
    return errors[0] if errors else None


def warp_index(st: Any) -> int:
    """The warp `st` runs, numbered across the cluster (one warp per `Lanes` in this mode)."""
    return st.rank * -(-st.threads // 32) + int(st.first) // 32


def waiting_at(info: Any, what: str) -> str:
    """How the deadlock report names a wait: "at dsl.barrier() (kernel.py:12)"."""
    where = f" ({info.where.file.rsplit('/', 1)[-1]}:{info.where.line})" if info.where is not None else ""
    return f"at {what}{where}"


def mbarrier_name(info: Any, address: int, window: Any = None) -> str:
    """How the deadlock report names the mbarrier an op waits on: as the kernel's source wrote
    it (`empty[s]`, from the call `dsl.mbarrier_wait(empty, s, phase)` the op's location points
    at), which is what its author reads, with the element it is where the array is a shared
    allocation of its own (`empty[s] (element 1)`); by its shared address where the source is
    not at hand."""
    args = _call_arguments(info.where) if info.where is not None else None
    if args is None or len(args) < 2:
        return f"the mbarrier at shared address {address:#x}"
    name = f"mbarrier {args[0]}[{args[1]}]"
    region = window.region_at(address) if window is not None else None
    if region is not None and region.name.startswith("shared array") and not args[1].isdigit():
        name += f" (element {(address - region.address) // 8})"  # a static array: its region starts it
    return name


def _call_arguments(where: Any) -> list[str] | None:
    """The source text of the positional arguments of the call at `where` (linecache holds the
    file the kernel was traced from, an editor's unsaved buffer included), or None."""
    lines = linecache.getlines(where.file)
    if not lines or where.end_line > len(lines):
        return None
    picked = lines[where.line - 1:where.end_line]
    if len(picked) == 1:
        picked = [picked[0][where.column:where.end_column]]
    else:
        picked = [picked[0][where.column:], *picked[1:-1], picked[-1][:where.end_column]]
    try:
        node = ast.parse("".join(picked).strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    return [ast.unparse(a) for a in node.args]
