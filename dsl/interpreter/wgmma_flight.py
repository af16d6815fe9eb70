"""wgmma accumulators in flight, in the interpreter: poisoned until the wait that retires them.

The interpreter computes a `wgmma.mma_async` when it is issued, but on the GPU the product
lands in the accumulator registers some time before the `wgmma.wait_group` that retires its
group: a kernel that reads them earlier races, and must fail here as it would be wrong there.
So what an issue writes into its result registers is not the product but a poisoned float, a
NaN whose payload is a ticket (which instruction, which register, which of its recent runs);
the product is kept beside the lanes. Tickets pass unchanged through everything that only
moves values (lane extraction, vectors built of lanes, struct fields, selects, loop-carried
and branch values: NumPy copies NaN payloads bit for bit), and are redeemed only by:

- the next `wgmma.mma_async` that accumulates into them (the hardware orders MMAs into one
  accumulator), and
- `wgmma.wait_group N`, for each lane whose group is older than the N most recent ones: the
  wait's results are the products; a value not passed through the wait keeps its ticket.

Every other op of a kernel that issues wgmma that takes a value a ticket can reach (found
once, when the kernel is built: `tracker_for`) is guarded (`InFlightTracker.wrap`): such an
operand holding a ticket, in a lane that executes the op, is a fault (DSL601) at that op,
which names the wgmma whose result it reads. The steps over K inside one `dsl.wgmma`, whose
results only the next step reads, need no tickets. The compiler refuses such reads before
anything runs (DSL305, `dsl/frontend/wgmma_groups.py`); this is the same rule where the IR
gets here by another road, and it checks the compiler's rule against the instructions'
semantics.

Groups are counted per lane (`commit_group` and `wait_group` are per warp, and lanes of a
batch may take different paths). A ticket names one of the last `GENERATIONS` runs of its
instruction: an accumulator kept in flight, unwaited, across more runs of the very
instruction that made it than that is not told apart from a newer one (no kernel that waits
in its pipeline does that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mlir import ir

from dsl.diagnostics import SourceRange
from dsl.interpreter.memory import LaneFault
from dsl.interpreter.program import OpInfo, Refusal, Step

GENERATIONS = 8  # runs of one instruction a ticket tells apart
_REGISTERS = 128  # accumulator registers of one wgmma (N = 256)
_INSTRUCTIONS = 2048  # wgmma.mma_async instructions of one kernel a ticket can name
_TAG, _TAG_MASK = 0x7FE00000, 0x7FF00000  # a quiet NaN with bit 21 set and bit 20 clear
_LOW = (1 << 20) - 1  # payload bits 0..19; payload bit 20 is the sign bit
_SLOT_KEY = "kdsl.interpreter.wgmma_groups"  # the hidden value slot of each batch's `Groups`
# ops that only move a value from one slot to another: tickets go through them unread
MOVES = frozenset({"vector.extract", "vector.from_elements", "llvm.extractvalue", "arith.select", "scf.for",
                   "scf.if", "scf.while"})


def registers(values: list[Any], lanes: int) -> np.ndarray:
    """Registers (a (lanes,) array, or a uniform 0-d one, each) as one (lanes, registers) float32 array."""
    try:
        return np.stack(values, axis=1).astype(np.float32, copy=False)
    except ValueError:  # uniform (0-d) values beside per-lane ones (an AxisError is one too)
        return np.stack([np.broadcast_to(np.asarray(v, dtype=np.float32), (lanes,)) for v in values], axis=1)


def _ticket_bits(payload: np.ndarray) -> np.ndarray:
    payload = payload.astype(np.uint32)
    return (_TAG | (payload & _LOW) | ((payload >> 20) << 31)).astype(np.uint32)


def _payload(bits: np.ndarray) -> np.ndarray:
    return (bits & _LOW) | ((bits >> 31) << 20)


def is_ticket(values: Any) -> np.ndarray:
    """Which entries of an array hold tickets (False for anything not float32)."""
    a = np.asarray(values)
    if a.dtype != np.float32:
        return np.zeros(a.shape, dtype=bool)
    return (a.view(np.uint32) & _TAG_MASK) == _TAG


@dataclass
class _Run:
    """One run of a wgmma instruction: its products and each lane's group."""

    products: np.ndarray  # (lanes, registers) float32
    group: np.ndarray  # (lanes,) int64: the id of the group each lane's issue joined


@dataclass
class Groups:
    """One batch's wgmma groups, per lane: committed and known complete (`retired`: every
    group with a smaller id), and the recent runs of each instruction."""

    committed: np.ndarray
    retired: np.ndarray
    runs: dict[tuple[int, int], _Run] = field(default_factory=dict)  # (instruction, generation) -> run
    counts: dict[int, int] = field(default_factory=dict)  # instruction -> its runs so far

    @classmethod
    def of(cls, st: Any, slot: int) -> Groups:
        groups = st.v[slot]
        if groups is None:
            groups = st.v[slot] = cls(np.zeros(st.n, dtype=np.int64), np.zeros(st.n, dtype=np.int64))
        return groups


class InFlightTracker:
    """For one kernel that issues wgmma: the ids of its wgmma instructions, the slot of each
    batch's `Groups`, and the guard on every other op's reads."""

    def __init__(self, builder: Any):
        self.slot = builder.slots.get(_SLOT_KEY)
        if self.slot is None:
            self.slot = builder.new_slot(_SLOT_KEY)
        self.issued_at: list[SourceRange | None] = []  # each instruction's Python range
        self.carriers: set[Any] = set()  # the values that may hold tickets (`tracker_for`)

    def instruction(self, info: OpInfo, count: int) -> int:
        """A new id for a wgmma instruction writing `count` registers (refused past the tickets' room)."""
        if len(self.issued_at) >= _INSTRUCTIONS or count > _REGISTERS:
            raise Refusal(f"the interpreter tracks at most {_INSTRUCTIONS} wgmma instructions of "
                          f"{_REGISTERS} registers per kernel", info.where)
        self.issued_at.append(info.where)
        return len(self.issued_at) - 1

    # ----- issue, commit, wait ----------------------------------------------------------------
    def issue(self, st: Any, op: int, products: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        """Records a run's products (one (lanes,) array per register) and returns the tickets
        that stand for them in the result registers."""
        groups = Groups.of(st, self.slot)
        number = groups.counts.get(op, 0)
        groups.counts[op] = number + 1
        generation = number % GENERATIONS
        groups.runs[(op, generation)] = _Run(registers(products, st.n), groups.committed.copy())
        codes = (op * _REGISTERS + np.arange(len(products))) * GENERATIONS + generation
        tickets = np.asfortranarray(np.broadcast_to(_ticket_bits(codes), (st.n, len(products)))).view(np.float32)
        return tuple(tickets[:, r] for r in range(len(products)))

    def commit(self, st: Any) -> None:
        groups = Groups.of(st, self.slot)
        groups.committed[st.active()] += 1

    def wait(self, st: Any, pending: int, values: list[Any]) -> list[Any]:
        """`wait_group pending` for the active lanes: each value with the lanes whose group it
        retired redeemed, the others still tickets."""
        groups = Groups.of(st, self.slot)
        active = st.active()
        groups.retired[active] = np.maximum(groups.retired, groups.committed - pending)[active]
        return self.redeem(st, values, lambda group: group < groups.retired)

    def redeem(self, st: Any, values: list[Any], ready: Callable[[np.ndarray], np.ndarray] | None = None) -> list[Any]:
        """`values` (registers, one (lanes,) array each) with their tickets replaced by the
        products they stand for: where `ready` says so of the lane's group, or everywhere (as
        the next wgmma into them does)."""
        rows = registers(values, st.n)
        out = self.redeem_rows(st, rows, ready)
        return values if out is rows else [out[:, k] for k in range(out.shape[1])]

    def redeem_rows(self, st: Any, rows: np.ndarray, ready: Callable[[np.ndarray], np.ndarray] | None = None
                    ) -> np.ndarray:
        """`redeem` of registers as one (lanes, registers) array (`rows` itself when it holds no
        ticket): one pass over all the registers of a run."""
        held = is_ticket(rows)
        if not held.any():
            return rows
        groups = Groups.of(st, self.slot)
        out = rows.copy()
        code = _payload(out.view(np.uint32)).astype(np.int64)
        run_of = np.where(held, code % GENERATIONS + (code // (GENERATIONS * _REGISTERS)) * GENERATIONS, -1)
        register = (code // GENERATIONS) % _REGISTERS
        for key in np.unique(run_of[held]):
            run = groups.runs.get((int(key) // GENERATIONS, int(key) % GENERATIONS))
            picked = run_of == key
            if run is None:
                raise LaneFault("a wgmma accumulator the interpreter no longer tracks", int(np.argmax(picked.any(1))))
            if ready is not None:
                picked &= ready(run.group)[:, None]
            lanes, columns = np.nonzero(picked)
            out[lanes, columns] = run.products[lanes, register[lanes, columns]]
        return out

    # ----- every other op -----------------------------------------------------------------------
    def wrap(self, info: OpInfo, step: Step) -> Step:
        """`step`, faulting first if an operand that may hold a ticket (a value that moves, op
        to op, from a wgmma or a wait: `carriers`) holds one in a lane that executes the op."""
        if info.name in MOVES or (info.name == "llvm.inline_asm" and "wgmma." in str(info.attr("asm_string"))):
            return step
        if info.attr("kdsl.breakpoint") is not None or info.name == "llvm.intr.dbg.value":
            return step  # `breakpoint()` shows in-flight values (as NaN), a variable record none: no read
        slots = [s for s, value in zip(info.args, info.op.operands) if value in self.carriers]
        if not slots:
            return step
        tracker = self

        def guarded(st: Any) -> None:
            for s in slots:
                held = is_ticket(st.v[s])
                if held.ndim == 2:  # a vector: (lanes, width)
                    held = held.any(axis=1)
                held = np.broadcast_to(held, (st.n,)) & st.active()
                if held.any():
                    lane = int(np.argmax(held))
                    raise LaneFault(tracker.message(st.v[s], lane), lane)
            step(st)

        return guarded

    def message(self, value: Any, lane: int) -> str:
        """What the fault says: which wgmma made the value `lane` reads."""
        row = np.asarray(value, dtype=np.float32)
        row = row.reshape(row.shape[0], -1)[min(lane, row.shape[0] - 1)] if row.ndim else row.reshape(1)
        tickets = row[is_ticket(row)].view(np.uint32)
        op = int(_payload(tickets[:1])[0]) // GENERATIONS // _REGISTERS if tickets.size else -1
        where = self.issued_at[op] if 0 <= op < len(self.issued_at) else None
        at = f" at {where.file.rsplit('/', 1)[-1]}:{where.line}" if where is not None else ""
        return (f"read of a wgmma accumulator still in flight: the dsl.wgmma{at} has not been waited for by a "
                "dsl.wgmma_wait that returned this value and retired its group (on the GPU the tensor cores may "
                "still be writing these registers)")


def tracker_for(func: Any, builder: Any) -> InFlightTracker | None:
    """A tracker for a `gpu.func` that issues wgmma, else None (and no op is guarded)."""
    ops: list[Any] = []

    def collect(op: Any) -> Any:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    func.operation.walk(collect)
    if not any(_is_asm(op, "wgmma.mma_async") for op in ops):
        return None
    tracker = InFlightTracker(builder)
    tracker.carriers = _carriers(ops)
    return tracker


def _is_asm(op: Any, instruction: str) -> bool:
    return op.name == "llvm.inline_asm" and instruction in ir.StringAttr(op.attributes["asm_string"]).value


def _carriers(ops: list[Any]) -> set[Any]:
    """Every value a ticket can reach: the results of wgmma and wait instructions, and what the
    moves (`MOVES`, region arguments, yields) pass them to, to a fixed point (loops)."""
    found: set[Any] = set()
    while True:
        before = len(found)
        for op in ops:
            found.update(_passed_on(op, found))
        if len(found) == before:
            return found


def _passed_on(op: Any, found: set[Any]) -> list[Any]:
    """The values `op` passes a ticket to, given the values in `found` may hold one."""
    name, operands = op.name, list(op.operands)
    if name == "llvm.inline_asm":
        return list(op.results) if _is_asm(op, "wgmma.mma_async") or _is_asm(op, "wgmma.wait_group") else []
    if name in ("llvm.extractvalue", "vector.extract"):
        return list(op.results) if operands[0] in found else []
    if name == "vector.from_elements":
        return list(op.results) if any(v in found for v in operands) else []
    if name == "arith.select":
        return list(op.results) if operands[1] in found or operands[2] in found else []
    held = [k for k, v in enumerate(operands) if v in found]
    if not held:
        return []
    if name == "scf.for":  # inits (after bounds and step) -> the body's carried arguments and the results
        body = op.regions[0].blocks[0].arguments
        return [x for k in held if k >= 3 for x in (body[k - 2], op.results[k - 3])]
    if name == "scf.while":  # inits -> the arguments of the before region
        return [op.regions[0].blocks[0].arguments[k] for k in held]
    if name in ("scf.yield", "scf.condition"):
        return _yielded_to(op, held)
    return []


def _yielded_to(terminator: Any, held: list[int]) -> list[Any]:
    """Where a region's terminator passes operand k: the parent's results, a loop's arguments."""
    parent = terminator.parent
    if terminator.name == "scf.condition":  # operand 0 is the condition
        after = parent.regions[1].blocks[0].arguments
        return [x for k in held if k >= 1 for x in (after[k - 1], parent.results[k - 1])]
    if parent.name == "scf.for":
        body = parent.regions[0].blocks[0].arguments
        return [x for k in held for x in (body[k + 1], parent.results[k])]
    if parent.name == "scf.while":  # the after region's yield -> the before region's arguments
        return [parent.regions[0].blocks[0].arguments[k] for k in held]
    return [parent.results[k] for k in held]  # scf.if


def feeds_only_mma(op: Any) -> bool:
    """Whether every register a wgmma instruction writes goes only into the next wgmma (the steps
    of one `dsl.wgmma` over K): nothing else can read them, so they need no tickets."""
    for use in op.results[0].uses:
        field = use.owner
        if field.name != "llvm.extractvalue":
            return False
        if not all(_is_asm(u.owner, "wgmma.mma_async") for u in field.results[0].uses):
            return False
    return True
