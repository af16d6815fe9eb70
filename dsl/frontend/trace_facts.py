"""What the tracer learnt about each name it bound, kept for the editor.

While tracing, the tracer knows things no static reading of the source can: the DSL type
each assignment produced (`i: i32`, `v: vector<4xf32>`), which names hold compile-time
values and what they are (`BLOCK = 256`), which ones a run-time loop carries, which are
shared-memory arrays, and which derive from the thread index (where divergence comes
from). `ValueFact` is one such fact per assignment target (or parameter); inlay hints and
semantic tokens read them from the compiler's report.

Recording happens only inside `recording()` (the module analysis opens one per function
it compiles); elsewhere (`dsl.compile`, a program's first call) the tracer skips it. It
is one dict store per traced assignment; whether a run-time value derives from the thread
index is found by walking its defining ops once, with every op's answer remembered, so
the walk costs at most one visit per op of the function.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from dsl.diagnostics import SourceRange
from dsl.frontend.values import Scalar, SharedArray, TensorRef, Vector, type_name
from dsl.language.types import DType
from dsl.records import Record

COMPILE_TIME = "compile-time"
RUN_TIME = "run-time"
SHARED = "shared"  # a shared-memory array
TENSOR = "tensor"  # a global-memory tensor

_THREAD_SOURCES = frozenset({"gpu.thread_id", "gpu.lane_id"})
_MAX_VALUE_TEXT = 40


@dataclass(frozen=True)
class ValueFact(Record):
    """What one name was bound to, at the range of the name where it was bound."""

    range: SourceRange
    name: str
    type: str  # "i32", "vector<4xf32>", "Tensor[f32, 1]", "shared f32[32, 33]", "int", ...
    kind: str  # COMPILE_TIME, RUN_TIME, SHARED or TENSOR
    value: str | None = None  # a compile-time value's repr (None when it varies or is long)
    carried: bool = False  # a run-time loop carries it
    thread: bool = False  # derives from the thread index (differs between the threads of a warp)
    parameter: bool = False


def describe(value: Any) -> tuple[str, str, str | None] | None:
    """(type, kind, value text) of what a name holds, or None for what no hint should show
    (functions, modules, the DSL's own objects)."""
    if isinstance(value, Scalar | Vector):
        return type_name(value), RUN_TIME, None
    if isinstance(value, SharedArray):
        shape = ", ".join(str(d) if isinstance(d, int) else "n" for d in value.shape)
        return f"shared {value.dtype.name}[{shape}]", SHARED, None
    if isinstance(value, TensorRef) or type(value).__name__ == "HostTensor":
        return f"Tensor[{value.dtype.name}, {value.rank}]", TENSOR, None
    if isinstance(value, bool | int | float):
        text = repr(value)
        return type(value).__name__, COMPILE_TIME, text if len(text) <= _MAX_VALUE_TEXT else None
    if isinstance(value, DType):
        return "dtype", COMPILE_TIME, value.name
    if isinstance(value, list | tuple):
        return _describe_sequence(value)
    return None


def _describe_sequence(items: list[Any] | tuple[Any, ...]) -> tuple[str, str, str | None] | None:
    word = type(items).__name__
    described = [describe(item) for item in items]
    if not items or any(d is None for d in described):
        return (f"{word} of {len(items)}", COMPILE_TIME, None) if not items else None
    kinds = {d[1] for d in described if d is not None}
    item_types = {d[0] for d in described if d is not None}
    of = item_types.pop() if len(item_types) == 1 else "mixed"
    kind = RUN_TIME if kinds != {COMPILE_TIME} else COMPILE_TIME
    text = repr(items) if kind == COMPILE_TIME else None
    return f"{word}[{len(items)} x {of}]", kind, text if text is not None and len(text) <= _MAX_VALUE_TEXT else None


class FactRecorder:
    """The facts of one compile, keyed by the range they are about."""

    def __init__(self) -> None:
        self._facts: dict[tuple[str, int, int], ValueFact] = {}
        self._carried: list[tuple[SourceRange, frozenset[str]]] = []
        self._thread_memo: dict[tuple[Any, int], bool] = {}  # (operation, result) -> derived, for one value

    def bind(self, rng: SourceRange, name: str, value: Any, *, device: bool, parameter: bool = False) -> None:
        """Records that `name` at `rng` was bound to `value` (device code when `device`)."""
        described = describe(value)
        if described is None:
            return
        type_text, kind, value_text = described
        thread = device and kind == RUN_TIME and self._derived(value)
        self.add(ValueFact(rng, name, type_text, kind, value_text, thread=thread, parameter=parameter))

    def add(self, fact: ValueFact) -> None:
        """Keeps one fact per range: a range traced again (an unrolled loop, a second
        specialization) keeps its type if it agrees, else lists both; a value that differs
        between the two is no longer one value."""
        key = (fact.range.file, fact.range.line, fact.range.column)
        old = self._facts.get(key)
        if old is None or old == fact:
            self._facts[key] = fact
            return
        if old.value is None and (old.type, old.kind) == (fact.type, fact.kind) and old.thread >= fact.thread \
                and old.carried >= fact.carried:
            return  # the n-th iteration of an unrolled loop: nothing new
        types_ = old.type if fact.type in old.type.split(" | ") else f"{old.type} | {fact.type}"
        kind = old.kind if old.kind == fact.kind else RUN_TIME
        value = old.value if old.value == fact.value and kind == COMPILE_TIME else None
        self._facts[key] = replace(old, type=types_, kind=kind, value=value, thread=old.thread or fact.thread,
                                   carried=old.carried or fact.carried)

    def carried_by(self, loop: SourceRange, names: Iterable[str]) -> None:
        """The names a run-time loop at `loop` carries from one iteration to the next."""
        self._carried.append((loop, frozenset(n for n in names if n.isidentifier() and not n.startswith("__"))))

    def facts(self) -> list[ValueFact]:
        """The facts, in source order, with the names a loop carries marked inside it."""
        out = []
        for fact in self._facts.values():
            inside = any(fact.name in names and _within(fact.range, loop) for loop, names in self._carried)
            out.append(replace(fact, carried=True) if inside and fact.kind == RUN_TIME else fact)
        return sorted(out, key=lambda f: (f.range.file, f.range.line, f.range.column))

    # -- derived from the thread index ----------------------------------------------------

    def _derived(self, value: Any) -> bool:
        """Whether a run-time value derives from the thread index. The answers per op last one
        question: every op reachable from a live value is alive, but between two questions
        the tracer may erase ops (a loop traced again) and MLIR reuse their memory."""
        if not isinstance(value, Scalar | Vector):
            return False
        self._thread_memo.clear()
        try:
            return self._value_derived(value.value)
        except Exception:  # an IR shape this walk does not know: no answer is a safe answer
            return False

    def _value_derived(self, value: Any) -> bool:
        """Whether an MLIR value depends on `gpu.thread_id` / `gpu.lane_id`, by data or by the
        condition or bounds of the `scf` op that produced it."""
        owner = value.owner
        if hasattr(owner, "operation"):  # an op's result
            return self._op_derived(owner.operation, value.result_number)
        parent = owner.owner  # a block argument: the op whose region the block is
        if parent is None:
            return False
        parent = parent.operation
        if parent.name == "scf.for":
            number = value.arg_number
            bounds = any(self._value_derived(v) for v in list(parent.operands)[:3])
            return bounds or (number > 0 and self._op_derived(parent, number - 1))
        if parent.name == "scf.while":
            return self._op_derived(parent, value.arg_number)
        return False

    def _op_derived(self, op: Any, result: int) -> bool:
        """Whether result `result` of `op` derives from the thread index; any result of an op
        without regions does when any operand does."""
        key = (op, result if len(op.regions) else -1)  # operations hash and compare by their pointer
        known = self._thread_memo.get(key)
        if known is not None:
            return known
        self._thread_memo[key] = False  # a cycle through a loop's body reads False
        derived = self._compute(op, result)
        self._thread_memo[key] = derived
        return derived

    def _compute(self, op: Any, result: int) -> bool:
        name = op.name
        if name in _THREAD_SOURCES:
            return True
        operands = list(op.operands)
        if not len(op.regions):
            return any(self._value_derived(v) for v in operands)
        if name == "scf.for":  # bounds, the init and the yielded value of this result
            if any(self._value_derived(v) for v in operands[:3]):
                return True
            inits = operands[3:]
            if result < len(inits) and self._value_derived(inits[result]):
                return True
            return self._yielded(op.regions[0], result)
        if name == "scf.if":  # the condition and both branches' yields of this result
            return self._value_derived(operands[0]) or any(self._yielded(r, result) for r in op.regions)
        if name == "scf.while":  # the init and the values the condition and the body pass on
            if result < len(operands) and self._value_derived(operands[result]):
                return True
            return any(self._yielded(r, result, condition=True) for r in op.regions)
        return any(self._value_derived(v) for v in operands)

    def _yielded(self, region: Any, result: int, condition: bool = False) -> bool:
        for block in region.blocks:
            ops = block.operations
            if len(ops) == 0:
                continue
            terminator = ops[len(ops) - 1].operation
            values = list(terminator.operands)
            if terminator.name == "scf.condition":
                if condition and self._value_derived(values[0]):
                    return True
                values = values[1:]
            if result < len(values) and self._value_derived(values[result]):
                return True
        return False


def _within(inner: SourceRange, outer: SourceRange) -> bool:
    return inner.file == outer.file and outer.line <= inner.line <= outer.end_line


_CURRENT: contextvars.ContextVar[FactRecorder | None] = contextvars.ContextVar("kdsl_fact_recorder", default=None)


def current() -> FactRecorder | None:
    """The recorder of the compile being traced, or None when nobody asked for facts."""
    return _CURRENT.get()


@contextlib.contextmanager
def recording() -> Iterator[FactRecorder]:
    """Collects the facts of everything traced inside; a recording inside another one also
    hands its facts to the outer one when it ends."""
    outer = _CURRENT.get()
    recorder = FactRecorder()
    token = _CURRENT.set(recorder)
    try:
        yield recorder
    finally:
        _CURRENT.reset(token)
        if outer is not None:
            replay(recorder.facts(), outer)


def replay(facts: Iterable[ValueFact] | None, recorder: FactRecorder | None = None) -> None:
    """Hands facts kept from an earlier compile (a cache hit) to the current recording."""
    recorder = recorder or _CURRENT.get()
    if recorder is not None and facts:
        for fact in facts:
            recorder.add(fact)
