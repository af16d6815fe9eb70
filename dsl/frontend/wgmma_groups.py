"""Reads of wgmma accumulators that may still be in flight (DSL305), found in the traced IR.

`dsl.wgmma` issues asynchronous MMAs and commits them as one group; `wgmma.wait_group N`
returns once at most N groups are pending. Until a wait retires its group, an accumulator's
registers belong to the tensor cores: reading them is a race on the GPU (a partial sum, or
registers the compiler reuses), which no test on the CPU would see if nothing modelled it.
The DSL puts the wait in the data flow, `acc = dsl.wgmma_wait(acc, pending)`, so the rule is
one of values: only what comes out of a wait that retired its group may be read. A value
that was not passed through the wait is still in flight after it (the compiler may move a
read of it before the wait: nothing orders them).

The check runs on the kernel's traced `gpu.func`, after tracing, so every way of reading
counts (arithmetic, conversions, stores, shuffles, prints, helpers). Each SSA value that may
be in flight carries a lower bound on the groups committed after its own ("age"):

- `wgmma.mma_async` results are in flight and not yet committed (age -1); `commit_group`
  ages every in-flight value by one; a value leaving `wait_group N` is ready when its age is
  at least N (its group is older than the N that may still run), else still in flight.
- Moving a value is no read: lanes extracted and assembled again (`vector.extract`,
  `vector.from_elements`, `llvm.extractvalue`), selects, results of run-time `if`s and loops,
  and the accumulator operand of the next `wgmma.mma_async` (the hardware orders MMAs into
  one accumulator). Any other use is a read: DSL305 at that op's Python range.

Unrolled loops (`dsl.static_range`) are straight-line IR, so they are exact. Where paths join
(the branches of a run-time `if`, a run-time loop's entry and its back edge) a value is in
flight if it may be on any path, with the smaller age: a run-time loop is taken to run any
number of times, zero included, and its body is followed to a fixed point. So the count is
exact whenever each path between an issue and its wait commits the same groups (the
pipelined examples: `wait(pending=1)` in the loop after issuing the next group); a kernel
whose paths commit different numbers of groups is held to the path that commits the fewest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl.diagnostics import SourceRange

_WAIT = re.compile(r"wgmma\.wait_group\.sync\.aligned (\d+);")
_AGE_CAP = 1 << 10  # ages past any `pending` anyone writes: keeps loop fixed points finite
_MOVES = frozenset({"vector.extract", "vector.from_elements", "llvm.extractvalue", "arith.select"})


@dataclass(frozen=True)
class InFlight:
    """What is known of a value that may be in flight: its group's place in the count of commits
    (its age is the path's commits minus `stamp`), where it was issued, and a wait that left it
    in flight."""

    stamp: int
    issued: SourceRange | None  # the `dsl.wgmma` that issued it
    waited: tuple[SourceRange | None, int] | None = None  # (where, pending)


class State:
    """The values that may be in flight on one path, and the groups the path has committed.

    Ages are kept as stamps against the path's count, so a commit costs nothing; a join
    rebases both sides onto a count of 0, keeping each value's smaller age."""

    __slots__ = ("commits", "facts")

    def __init__(self, facts: dict[Any, InFlight] | None = None, commits: int = 0):
        self.facts: dict[Any, InFlight] = facts if facts is not None else {}  # ir.Value or (ir.Value, field)
        self.commits = commits

    def copy(self) -> State:
        return State(dict(self.facts), self.commits)

    def get(self, key: Any) -> InFlight | None:
        return self.facts.get(key)

    def age(self, fact: InFlight) -> int:
        return self.commits - fact.stamp

    def bind(self, key: Any, fact: InFlight | None) -> None:
        if fact is None:
            self.facts.pop(key, None)
        else:
            self.facts[key] = fact

    def younger(self, a: InFlight | None, b: InFlight | None) -> InFlight | None:
        """Of two facts of this path, the one with the smaller age (the later stamp)."""
        if a is None or b is None:
            return a or b
        return a if a.stamp >= b.stamp else b

    def join(self, other: State) -> State:
        """Either path: a value is in flight if it is on one, with the smaller age."""
        out: dict[Any, InFlight] = {}
        for side in (self, other):
            rebased: dict[int, InFlight] = {}  # the lanes of one accumulator share one fact
            for key, fact in side.facts.items():
                moved = rebased.get(id(fact))
                if moved is None:
                    moved = rebased[id(fact)] = side.rebased(fact)
                known = out.get(key)
                if known is None or moved.stamp > known.stamp:
                    out[key] = moved
        return State(out)

    def rebased(self, fact: InFlight) -> InFlight:
        """`fact` on a count of 0 commits (its age unchanged, up to the cap)."""
        stamp = -min(self.age(fact), _AGE_CAP)
        return fact if stamp == fact.stamp else InFlight(stamp, fact.issued, fact.waited)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.commits == other.commits and self.facts == other.facts

    __hash__ = None  # type: ignore[assignment]


def source_range(loc: Any) -> SourceRange | None:
    """The Python range of an op's location (a helper's own line for an inlined call)."""
    while loc.is_a_callsite():
        loc = loc.callee
    if loc.is_a_fused():
        locs = list(loc.locations)
        return source_range(locs[0]) if locs else None
    if not loc.is_a_file():
        return None
    return SourceRange(loc.filename, loc.start_line, loc.start_col - 1, loc.end_line, loc.end_col - 1)


def _asm_text(op: Any) -> str:
    return ir.StringAttr(op.attributes["asm_string"]).value


def _outputs(op: Any) -> list[Any]:
    """The keys of an inline-asm op's register outputs: its result, or each field of its struct."""
    outs = sum(1 for c in ir.StringAttr(op.attributes["constraints"]).value.split(",") if c.startswith("="))
    if not op.results:
        return []
    result = op.results[0]
    return [(result, k) for k in range(outs)] if str(result.type).startswith("!llvm.struct") else [result]


class _Analysis:
    def __init__(self) -> None:
        self.reads: dict[SourceRange, InFlight] = {}  # each read's range, first found, and what it read

    # ----- blocks and structured control flow -------------------------------------------------
    def block(self, block: Any, state: State) -> tuple[State, list[InFlight | None]]:
        """`state` after the block's ops (changed in place), and what its terminator passes on;
        the block's own values are dropped at its end (nothing outside can name them)."""
        passed: list[InFlight | None] = []
        own = set(block.arguments)
        for op in block.operations:
            if op.name in ("scf.yield", "scf.condition"):
                passed = [state.get(v) for v in list(op.operands)[1 if op.name == "scf.condition" else 0:]]
                break
            self.op(op, state)
            own.update(op.results)
        state.facts = {key: fact for key, fact in state.facts.items()
                       if (key[0] if isinstance(key, tuple) else key) not in own}
        return state, passed

    def op(self, op: Any, state: State) -> None:
        name = op.name
        handler = {"scf.for": self._for, "scf.if": self._if, "scf.while": self._while,
                   "llvm.inline_asm": self._asm}.get(name)
        if handler is not None:
            handler(op, state)
        elif name in _MOVES:
            self._move(op, state)
        elif "kdsl.breakpoint" in op.attributes or name == "llvm.intr.dbg.value":
            return  # `breakpoint()`'s marker or a debug build's variable record: shows values, reads none
        else:
            self._reads(op, list(op.operands), state)
            for region in op.regions:  # no other op of the tracer has regions; be safe
                for block in region.blocks:
                    _become(state, self.block(block, state.copy())[0])

    def _if(self, op: Any, state: State) -> None:
        then_state, then_out = self.block(op.regions[0].blocks[0], state.copy())
        if len(op.regions) > 1 and len(op.regions[1].blocks):
            else_state, else_out = self.block(op.regions[1].blocks[0], state.copy())
        else:
            else_state, else_out = state.copy(), []
        joined = then_state.join(else_state)
        for k, result in enumerate(op.results):
            joined.bind(result, _younger((then_state, _at(then_out, k)), (else_state, _at(else_out, k))))
        _become(state, joined)

    def _for(self, op: Any, state: State) -> None:
        inits = list(op.operands)[3:]
        body = op.regions[0].blocks[0]
        carried = list(body.arguments)[1:]  # after the induction variable
        entry = state.copy()
        for arg, init in zip(carried, inits):
            entry.bind(arg, state.get(init))
        end, out = self._fixed_point(body, carried, entry.join(entry))
        after = state.join(end)  # zero trips, or some
        for k, (result, init) in enumerate(zip(op.results, inits)):
            after.bind(result, _younger((state, state.get(init)), (end, _at(out, k))))
        _become(state, after)

    def _fixed_point(self, body: Any, carried: list[Any], entry: State) -> tuple[State, list[InFlight | None]]:
        """The body's end state and yields for any number of trips: its entry is joined with its
        own back edge until nothing changes (facts only grow younger or appear, so this ends)."""
        head = entry
        while True:
            end, out = self.block(body, head.copy())
            joined = entry.join(_carried(end, carried, out))
            if joined == head:
                return end, out
            head = joined

    def _while(self, op: Any, state: State) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        entry = state.copy()
        for arg, init in zip(before.arguments, op.operands):
            entry.bind(arg, state.get(init))
        entry = entry.join(entry)
        head = entry
        while True:
            tested, passed = self.block(before, head.copy())
            end, out = self.block(after, _carried(tested, list(after.arguments), passed))
            joined = entry.join(_carried(end, list(before.arguments), out))
            if joined == head:
                break
            head = joined
        for k, result in enumerate(op.results):
            tested.bind(result, _at(passed, k))
        _become(state, tested)

    # ----- values ---------------------------------------------------------------------------
    def _move(self, op: Any, state: State) -> None:
        operands = list(op.operands)
        if op.name == "llvm.extractvalue":
            (k,) = ir.DenseI64ArrayAttr(op.attributes["position"])
            fact = state.get((operands[0], k)) or state.get(operands[0])
        elif op.name == "vector.extract":
            fact = state.get(operands[0])
        else:  # from_elements joins its lanes; a select its two values (never its condition)
            fact = None
            for v in operands[1:] if op.name == "arith.select" else operands:
                fact = state.younger(fact, state.get(v))
        state.bind(op.results[0], fact)

    def _asm(self, op: Any, state: State) -> None:
        text = _asm_text(op)
        outputs = _outputs(op)
        operands = list(op.operands)
        if "wgmma.mma_async" in text:  # the last operands are the accumulators, tied to the outputs
            self._reads(op, operands[:len(operands) - len(outputs)], state)
            fact = InFlight(state.commits + 1, source_range(op.location))  # age -1 until its commit
            for key in outputs:
                state.bind(key, fact)
        elif text.startswith("wgmma.commit_group"):
            state.commits += 1
        elif (m := _WAIT.fullmatch(" ".join(text.split()))) is not None:
            pending = int(m.group(1))
            where = source_range(op.location)
            for key, value in zip(outputs, operands):
                fact = state.get(value)
                if fact is not None and state.age(fact) < pending:  # among the `pending` newest: still running
                    fact = InFlight(fact.stamp, fact.issued, (where, pending))
                else:
                    fact = None
                state.bind(key, fact)
        else:
            self._reads(op, operands, state)

    def _reads(self, op: Any, operands: list[Any], state: State) -> None:
        for value in operands:
            fact = state.get(value)
            if fact is not None:
                where = _read_range(op, value)
                if where is not None:
                    self.reads.setdefault(where, fact)
                return


def _become(state: State, other: State) -> None:
    state.facts, state.commits = other.facts, other.commits


def _carried(state: State, args: list[Any], passed: list[InFlight | None]) -> State:
    """`state` with the region arguments `args` bound to what its terminator passed on."""
    out = state.copy()
    for k, arg in enumerate(args):
        out.bind(arg, _at(passed, k))
    return out


def _younger(*sides: tuple[State, InFlight | None]) -> InFlight | None:
    """The youngest of facts of different paths, on the count of 0 that `State.join` gives."""
    best = None
    for side, fact in sides:
        if fact is not None:
            rebased = side.rebased(fact)
            best = rebased if best is None or rebased.stamp > best.stamp else best
    return best


def _read_range(op: Any, value: Any) -> SourceRange | None:
    """Where `op` reads `value`: the user's own lane access when it is on the op's line (`acc[1]`
    in `c[t, 5] = acc[1]`, whose store is at `c[t, 5]`), else the op's range."""
    where = source_range(op.location)
    owner = value.owner if isinstance(value, ir.OpResult) else None
    if where is None or owner is None or owner.name not in ("vector.extract", "vector.from_elements"):
        return where
    lanes = source_range(owner.location)
    return lanes if lanes is not None and lanes.file == where.file and lanes.line == where.line else where


def _at(items: list[InFlight | None], k: int) -> InFlight | None:
    return items[k] if k < len(items) else None


def early_reads(func: Any) -> dict[SourceRange, InFlight]:
    """Every read, in the `gpu.func` `func`, of a wgmma accumulator that may be in flight."""
    analysis = _Analysis()
    analysis.block(func.regions[0].blocks[0], State())
    return analysis.reads
