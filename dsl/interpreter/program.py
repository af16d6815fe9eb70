"""From a traced `gpu.func` to a `Program`: one Python closure per op, built once per kernel.

The compiler's own traced IR is walked with the MLIR bindings; each op becomes a step
`step(lanes)` that reads its operands from the lanes' value slots and writes its results
(`lanes.v`), so running a block of IR is a loop over a list of closures. The op makers live by
kind: `arith_ops` (integer and float arithmetic, math), `cast_ops` (conversions, bit casts,
vectors), `control_flow` (`scf`, whose regions run under masks), `gpu_ops` (threads, barriers,
warps, printf, breakpoints) and `llvm_ops` (memory, atomics, intrinsics, inline PTX).

An op no maker knows is refused here, before anything runs: `Refusal` names it and the
Python line that produced it, and becomes a DSL402 diagnostic, never an approximation. Every
refused op of a kernel is collected, so one attempt reports them all.
"""

from __future__ import annotations

import bdb
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsl.diagnostics import SourceRange
from dsl.interpreter.lanes import Lanes
from dsl.interpreter.values import LaneType, lane_type

Step = Callable[[Lanes], None]
Maker = Callable[["OpInfo"], Step]

_LOC_LINE = re.compile(r'loc\("-":(\d+):')
_ENUM = re.compile(r"#\w+<\w+\s+(\w+)>")


class Refusal(Exception):
    """An op the interpreter cannot run exactly as the GPU would (raised while building).

    A `secondary` refusal is one that follows from another (an address made for an
    instruction that is itself refused): it is reported only when nothing else is."""

    def __init__(self, message: str, where: SourceRange | None, secondary: bool = False):
        super().__init__(message)
        self.message = message
        self.where = where
        self.secondary = secondary


class RunError(Exception):
    """An op that failed while running: the message, where it is, and the lane (if one)."""

    def __init__(self, message: str, where: SourceRange | None, lane: int | None, op: str):
        super().__init__(message)
        self.message, self.where, self.lane, self.op = message, where, lane, op


@dataclass
class OpInfo:
    """One op as a maker sees it: operand and result slots and types, attributes, location."""

    op: Any
    name: str
    args: list[int]
    outs: list[int]
    arg_types: list[LaneType]
    out_types: list[LaneType]
    where: SourceRange | None
    builder: Builder

    def attr(self, name: str) -> Any:
        attrs = self.op.attributes
        return attrs[name] if name in attrs else None  # noqa: SIM401  (an MLIR attribute map, not a dict)

    def int_attr(self, name: str, default: int | None = None) -> int | None:
        a = self.attr(name)
        return default if a is None else int(a.value)

    def enum(self, name: str) -> str:
        """The case of an enum attribute: `#gpu<dim x>` -> "x"."""
        text = str(self.attr(name))
        m = _ENUM.search(text)
        return m.group(1) if m else text

    def refuse(self, why: str) -> Refusal:
        return Refusal(f"the interpreter cannot run '{self.name}': {why}", self.where)

    def flushes(self, t: LaneType) -> bool:
        """Whether f32 subnormals flush to zero here (a kernel compiled with `ftz=True`)."""
        return t.name == "f32" and self.builder.flush_to_zero


def registrar(table: dict[str, Maker]) -> Callable[..., Callable[[Maker], Maker]]:
    """`@register("arith.addi", ...)`: a decorator putting a maker into `table` under each name."""

    def register(*names: str) -> Callable[[Maker], Maker]:
        def put(fn: Maker) -> Maker:
            for name in names:
                table[name] = fn
            return fn

        return put

    return register


def unary(info: OpInfo, fn: Callable[[Any], Any]) -> Step:
    """The step of a one-operand, one-result op computing `fn(operand)`."""
    (a,), (o,) = info.args, info.outs

    def step(st: Lanes) -> None:
        st.v[o] = fn(st.v[a])

    return step


def binary(info: OpInfo, fn: Callable[[Any, Any], Any]) -> Step:
    """The step of a two-operand, one-result op computing `fn(a, b)`."""
    (a, b), (o,) = info.args, info.outs

    def step(st: Lanes) -> None:
        v = st.v
        v[o] = fn(v[a], v[b])

    return step


@dataclass
class SharedDecl:
    """A `llvm.mlir.global` in shared memory: its bytes (None: the launch's dynamic smem)."""

    symbol: str
    size: int | None
    align: int
    where: SourceRange | None


class Block:
    """A block's ops as steps; a failure is tagged with the op that failed."""

    __slots__ = ("infos", "steps")

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.infos: list[OpInfo] = []

    def run(self, st: Lanes) -> None:
        steps = self.steps
        i = 0
        try:
            for i in range(len(steps)):
                steps[i](st)
        except (RunError, bdb.BdbQuit):  # quitting pdb at a kernel breakpoint ends the program, as in Python
            raise
        except Exception as err:
            from dsl.interpreter.memory import LaneFault

            info = self.infos[i]
            if isinstance(err, LaneFault):
                raise RunError(err.message, info.where, err.lane, info.name) from None
            if isinstance(err, NotImplementedError):
                raise RunError(f"the interpreter cannot run '{info.name}' here: {err}", info.where, None,
                               info.name) from None
            raise RunError(f"internal interpreter error in '{info.name}': {type(err).__name__}: {err}", info.where,
                           None, info.name) from err


@dataclass
class Program:
    """A kernel ready to run: its parameter slots, body and shared arrays."""

    symbol: str
    params: list[tuple[int, LaneType]]  # entry block argument slots, in order
    body: Block
    slots: int
    shared: dict[str, SharedDecl] = field(default_factory=dict)
    where: SourceRange | None = None  # the kernel's def
    uses_shared: bool = False
    independent_warps: bool = False  # its warps wait for one another: run one thread per warp


class Builder:
    """Assigns value slots and turns ops into steps."""

    def __init__(self, source_map: Any, makers: dict[str, Maker], flush_to_zero: bool = False):
        self.ranges: dict[int, SourceRange] = dict(source_map.entries) if source_map is not None else {}
        self.makers = makers
        self.flush_to_zero = flush_to_zero  # `@kernel(ftz=True)`: f32 subnormals flush to zero
        self.slots: dict[Any, int] = {}
        self.shared: dict[str, SharedDecl] = {}
        self.uses_shared = False
        self.independent_warps = False  # set by the makers of mbarrier and named-barrier ops
        self.refusals: list[Refusal] = []  # every op refused, so one build reports them all
        self.in_flight: Any = None  # `wgmma_flight.InFlightTracker` of a kernel issuing wgmma: guards every step

    def new_slot(self, value: Any) -> int:
        slot = self.slots[value] = len(self.slots)
        return slot

    def slot(self, value: Any) -> int:
        return self.slots[value]

    def where(self, op: Any) -> SourceRange | None:
        m = _LOC_LINE.search(str(op.location))  # the op's line in the traced text -> its Python range
        return self.ranges.get(int(m.group(1)) - 1) if m is not None else None

    def block(self, block: Any) -> tuple[Block, OpInfo | None]:
        """The block's ops as steps, and its terminator (not made into a step)."""
        out = Block()
        terminator = None
        for view in block.operations:
            op = view.operation
            info = self.info(op)
            if op.name in ("scf.yield", "scf.condition", "gpu.return"):
                terminator = info
                continue
            maker = self.makers.get(op.name)
            try:
                if maker is None:
                    raise Refusal(f"the interpreter does not know the op '{op.name}'", info.where)
                step = maker(info)
                out.steps.append(self.in_flight.wrap(info, step) if self.in_flight is not None else step)
            except Refusal as refusal:
                self.refusals.append(refusal)
                out.steps.append(_refused)
            out.infos.append(info)
        return out, terminator

    def info(self, op: Any) -> OpInfo:
        args = [self.slot(v) for v in op.operands]
        outs = [self.new_slot(r) for r in op.results]
        try:
            arg_types = [lane_type(str(v.type)) for v in op.operands]
            out_types = [lane_type(str(r.type)) for r in op.results]
        except TypeError as err:
            raise Refusal(f"the interpreter cannot hold values of {err} ('{op.name}')", self.where(op)) from None
        return OpInfo(op, op.name, args, outs, arg_types, out_types, self.where(op), self)

    def region_block(self, region: Any) -> tuple[Block, list[int], OpInfo | None]:
        """(steps, argument slots, terminator) of a single-block region."""
        blocks = list(region.blocks)
        if len(blocks) != 1:
            raise Refusal("a region with more than one block", None)
        arg_slots = [self.new_slot(a) for a in blocks[0].arguments]
        body, term = self.block(blocks[0])
        return body, arg_slots, term


def build_program(func: Any, module_ops: list[Any], source_map: Any, makers: dict[str, Maker],
                  flush_to_zero: bool = False) -> Program:
    """The `Program` of one `gpu.func` (`module_ops`: the ops of its `gpu.module`)."""
    from dsl.interpreter.wgmma_flight import tracker_for

    builder = Builder(source_map, makers, flush_to_zero)
    builder.in_flight = tracker_for(func, builder)  # reads of accumulators before their wait fault
    for op in module_ops:
        op = op.operation
        if op.name == "llvm.mlir.global":
            space = int(op.attributes["addr_space"].value) if "addr_space" in op.attributes else 0
            symbol = op.attributes["sym_name"].value
            if space != 3:
                raise Refusal(f"the interpreter runs shared-memory globals only, not '{symbol}'", builder.where(op))
            ty = str(op.attributes["global_type"].value)
            align = int(op.attributes["alignment"].value) if "alignment" in op.attributes else 16
            builder.shared[symbol] = SharedDecl(symbol, _array_bytes(ty) or None, align, builder.where(op))
    entry = func.regions[0].blocks[0]
    params = [(builder.new_slot(a), lane_type(str(a.type))) for a in entry.arguments]
    body, _ = builder.block(entry)
    if builder.refusals:
        raise RefusedKernel(builder.refusals)
    symbol = func.attributes["sym_name"].value
    return Program(symbol, params, body, len(builder.slots), builder.shared, builder.where(func),
                   builder.uses_shared, builder.independent_warps)


class RefusedKernel(Exception):
    """Every distinct reason a kernel cannot be interpreted (first place each is met)."""

    def __init__(self, refusals: list[Refusal]):
        primary = [r for r in refusals if not r.secondary] or refusals
        seen: dict[str, Refusal] = {}
        for r in primary:
            seen.setdefault(r.message, r)
        self.refusals = list(seen.values())
        super().__init__("; ".join(seen))


def _refused(st: Lanes) -> None:  # never runs: a kernel with a refused op is not run
    raise AssertionError("a refused op ran")


def _array_bytes(text: str) -> int:
    m = re.fullmatch(r"!llvm\.array<(\d+) x (.+)>", text.strip())
    if m is None:
        raise Refusal(f"a shared global of type {text}", None)
    return int(m.group(1)) * lane_type(m.group(2)).nbytes
