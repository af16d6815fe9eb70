"""Where a debugger attaches to the interpreter: launches, step markers and faults.

A debug session (`dsl.debugger`) attaches one `StepHook` for the whole process. While one is
attached, the interpreter compiles jit functions with step markers (`dsl.frontend.debug_steps`)
and calls the hook:

- `launch(info)` before a kernel launch runs and `launch_done(info)` after it;
- `step(marker, lanes)` at each marker a batch of blocks reaches (the batch's lanes run in
  lockstep: one call serves every thread of the batch that is at the statement);
- `fault(error, lanes)` when an op fails (an out-of-bounds access, a divergent barrier),
  before the error unwinds, so the debugger can stop on the faulting line with its state.

The hook runs on the thread that runs the kernel; it stops the program by blocking there.
Kernels whose warps run in threads of their own (`scheduling`) call it from each warp's thread.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from dsl.diagnostics import SourceRange


@dataclass(frozen=True)
class StackEntry:
    """One frame of a marker's inline call stack: a function and the line it is at."""

    function: str
    file: str
    line: int


@dataclass(frozen=True)
class NamedValue:
    """A name a marker carries: its frame depth, Python name, element path and value slot."""

    depth: int
    name: str  # "x", or an element: "acc[1]", "acc[1][0]"
    slot: int
    lane_type: Any  # `values.LaneType`
    dtype: str  # the DSL type ("u32", "bf16"; "ptr" for a shared array's base)
    shared: tuple[str, tuple[int, ...], int] | None = None  # (dtype, shape, swizzle) of a shared array


@dataclass(frozen=True)
class StepMarker:
    """A statement's step marker, decoded once when the program is built."""

    where: SourceRange | None
    stack: tuple[StackEntry, ...]
    values: tuple[NamedValue, ...]
    constants: dict[str, Any] = field(default_factory=dict)  # "D:name" -> value
    tensors: dict[str, str] = field(default_factory=dict)  # "D:name" -> kernel parameter name

    @property
    def line(self) -> int:
        return self.stack[-1].line if self.stack else (self.where.line if self.where else 0)

    @property
    def file(self) -> str:
        return self.stack[-1].file if self.stack else (self.where.file if self.where else "")

    @property
    def depth(self) -> int:
        return len(self.stack) - 1


@dataclass
class LaunchInfo:
    """A kernel launch as the debugger sees it."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    names: dict[str, Any]  # kernel parameter -> its interpreter value (tensors: `Pointer`s)
    where: SourceRange | None  # the launch in the jit function
    program: Any = None


class StepHook(Protocol):
    def launch(self, info: LaunchInfo) -> None: ...

    def launch_done(self, info: LaunchInfo) -> None: ...

    def step(self, marker: StepMarker, lanes: Any) -> None: ...

    def fault(self, error: Any, lanes: Any) -> None: ...


_lock = threading.Lock()
_hook: StepHook | None = None


def attach(hook: StepHook) -> None:
    """Makes `hook` the process's debugger (one at a time)."""
    global _hook
    with _lock:
        if _hook is not None and _hook is not hook:
            raise RuntimeError("a debugger is already attached to the interpreter")
        _hook = hook


def detach(hook: StepHook) -> None:
    global _hook
    with _lock:
        if _hook is hook:
            _hook = None


def current() -> StepHook | None:
    """The attached debugger, or None."""
    return _hook
