"""The debugger itself: runs a program on the interpreter and stops it where the user asks.

`DebugSession` is what a protocol front end (`lsp.dap`) drives. It runs the program on a
thread of its own, attached to the interpreter (`dsl.interpreter.stepping`); the interpreter
calls it at every kernel launch, at the step marker of every kernel statement and at every
fault, and the session decides there whether to stop. Stopping blocks the program's thread
until the front end resumes it, so the stopped state (the batch's lanes, the marker's value
slots) stays put while the client reads it.

The focus thread. A stop shows one thread, the focus thread (block and thread indices, from
the launch configuration or `set_focus`). The interpreter runs a batch of blocks in lockstep,
so at a marker the whole batch is at the same statement; which of its threads are there is
the active mask. Hence:
- a breakpoint without a condition is the focus block's: it stops when a thread of that block
  is at the line, showing the focus thread, or the first thread of the block that is there
  when the focus thread is not (the focus moves to it, and the stop says so);
- a breakpoint with a condition stops when any thread at the line satisfies it (the condition
  picks threads: `dsl.block_idx.x == 3 and i > 4`); the focus moves to the first that does,
  unless the focus thread is one of them;
- `next`, `step_in` and `step_out` follow the focus thread: they stop at the next statement
  the focus thread executes (in the same frame or an outer one, in any frame, in an outer
  frame); past the kernel's end they stop at its launch in the jit function;
- a fault (out-of-bounds access, divergent barrier; `DSL601`) stops on its line with the
  faulting thread as the focus, when the `faults` exception filter is on (the default).

Kernels whose warps wait for one another run one warp per Python thread (`scheduling`): there
only the focus thread's warp stops; the others go on until they wait for it.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsl.debugger.breakpoints import Breakpoint, BreakpointTable
from dsl.debugger.evaluate import Dim3, ThreadView, condition_mask, evaluate, nest
from dsl.debugger.thread_values import format_value, lane_values, scalar, shared_contents, tensor_contents
from dsl.debugger.variables import References, Variable, array_variable, leaf, list_variable
from dsl.interpreter import stepping
from dsl.interpreter.lanes import WARP
from dsl.interpreter.stepping import LaunchInfo, NamedValue, StepMarker

Event = Callable[[str, dict[str, Any]], None]


class DebugTerminated(BaseException):
    """Raised in the program's thread to end it (a BaseException: user code's `except Exception`
    must not swallow it)."""


class LaunchConfigError(ValueError):
    """A launch configuration the session cannot run: the message says what to change."""


@dataclass
class LaunchConfig:
    program: str
    function: str | None = None
    example: int = 0
    args: list[str] = field(default_factory=list)
    block: tuple[int, int, int] = (0, 0, 0)
    thread: tuple[int, int, int] = (0, 0, 0)
    stop_on_entry: bool = False
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, arguments: dict[str, Any]) -> LaunchConfig:
        """A DAP `launch` request's arguments, checked."""
        program = arguments.get("program")
        if not isinstance(program, str) or not program:
            raise LaunchConfigError("the launch configuration needs \"program\": the Python file to debug")
        cwd = arguments.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise LaunchConfigError("\"cwd\" must be a folder path")
        path = os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(program)))
        if not os.path.isfile(path):
            raise LaunchConfigError(f"\"program\": no such file {path}")
        function = arguments.get("function")
        if function is not None and (not isinstance(function, str) or not function.isidentifier()):
            raise LaunchConfigError("\"function\" must name a @dsl.jit function of the program")
        example = arguments.get("example", 0)
        if isinstance(example, bool) or not isinstance(example, int) or example < 0:
            raise LaunchConfigError("\"example\" must be an index into the function's examples= (0, 1, ...)")
        args = arguments.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise LaunchConfigError("\"args\" must be a list of strings (the script's command line)")
        env = arguments.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise LaunchConfigError("\"env\" must map variable names to strings")
        return cls(path, function, example, list(args), dim3(arguments.get("block", [0, 0, 0]), "block"),
                   dim3(arguments.get("thread", [0, 0, 0]), "thread"), bool(arguments.get("stopOnEntry", False)),
                   cwd, dict(env))


def dim3(value: Any, what: str) -> tuple[int, int, int]:
    """`[x]`, `[x, y]` or `[x, y, z]` (or an int) of non-negative ints, as a 3-tuple."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if (not isinstance(value, list | tuple) or not 1 <= len(value) <= 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)):
        raise LaunchConfigError(f"\"{what}\" must be [x, y, z] of non-negative integers, not {value!r}")
    padded = [*value, 0, 0][:3]
    return (padded[0], padded[1], padded[2])


@dataclass
class Stop:
    """Where the program is stopped and what is shown there."""

    reason: str  # "breakpoint", "step", "entry", "pause", "exception"
    description: str
    marker: StepMarker | None  # None: stopped at a launch in the jit function
    lanes: Any  # the batch's `Lanes` (None at a launch)
    lane: int | None  # the focus thread's lane in the batch
    launch: LaunchInfo | None
    breakpoints: list[int] = field(default_factory=list)
    fault: Any = None  # the `RunError` of an exception stop
    fault_line: int | None = None
    after_launch: bool = False  # at the launch line, the kernel finished


@dataclass
class _Step:
    kind: str  # "next", "in", "out"
    depth: int
    at_launch: bool  # started from a stop at a launch line (before or after the kernel ran)
    after_launch: bool = False  # started from a stop after the kernel finished


class DebugSession:
    """One debugged program (see the module docstring). Thread-safe: the front end calls it
    from its own thread while the program runs on another."""

    def __init__(self, send: Event):
        self._send = send
        self.breakpoints = BreakpointTable()
        self.break_on_faults = True
        self.config: LaunchConfig | None = None
        self.focus_block: tuple[int, int, int] = (0, 0, 0)
        self.focus_thread: tuple[int, int, int] = (0, 0, 0)
        self._cv = threading.Condition()
        self._stop_lock = threading.Lock()  # one stop at a time (warps on their own threads)
        self.stop: Stop | None = None
        self._command: str | None = None
        self._stepping: _Step | None = None
        self._pause = False
        self._terminating = False
        self._entry_pending = False
        self._launch: LaunchInfo | None = None
        self._faulted: LaunchInfo | None = None  # the launch a fault stop was made in
        self._last: dict[int, tuple[StepMarker, Any]] = {}  # per program thread: its latest marker
        self.refs = References()
        self._thread: threading.Thread | None = None
        self.exit_code: int | None = None

    # ----- front end: configuration and control ------------------------------------------------
    def configure(self, config: LaunchConfig) -> None:
        """Takes the launch configuration (checked: an unknown function is refused here)."""
        self.config = config
        self.focus_block, self.focus_thread = config.block, config.thread
        self._entry_pending = config.stop_on_entry
        if config.function is not None:
            self._check_function(config)

    @staticmethod
    def _check_function(config: LaunchConfig) -> None:
        import ast

        with open(config.program, encoding="utf-8") as f:
            try:
                tree = ast.parse(f.read())
            except SyntaxError as err:
                raise LaunchConfigError(f"{config.program} does not parse: {err.msg} (line {err.lineno})") from None
        jits = []
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                    (d.func if isinstance(d, ast.Call) else d).__dict__.get("attr", getattr(
                        d.func if isinstance(d, ast.Call) else d, "id", "")) in ("jit", "autotune")
                    for d in node.decorator_list):
                jits.append(node.name)
        if config.function not in jits:
            known = f" (its jit functions: {', '.join(jits)})" if jits else " (it has none)"
            raise LaunchConfigError(f"no @dsl.jit function '{config.function}' in {config.program}{known}")

    def start(self) -> None:
        """Runs the launched program (after `configurationDone`)."""
        assert self.config is not None
        self._thread = threading.Thread(target=self._run, name="kdsl-debuggee", daemon=True)
        self._thread.start()

    def resume(self, command: str) -> None:
        """`continue`, `next`, `in`, `out` from a stop."""
        with self._cv:
            stop = self.stop
            if stop is None:
                return
            if command in ("next", "in", "out"):
                depth = stop.marker.depth if stop.marker is not None else -1
                self._stepping = _Step(command, depth, stop.marker is None, stop.after_launch)
            else:
                self._stepping = None
            self._command = command
            self._cv.notify_all()

    def pause(self) -> None:
        with self._cv:
            self._pause = True

    def terminate(self) -> None:
        with self._cv:
            self._terminating = True
            self._command = "terminate"
            self._cv.notify_all()

    def wait(self, timeout: float) -> bool:
        """Waits for the program's thread to end; whether it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def set_focus(self, block: tuple[int, int, int], thread: tuple[int, int, int]) -> str:
        """Moves the focus thread; while stopped in a kernel the stop shows it from now on."""
        launch = self._launch
        if launch is not None:
            for what, got, limit in (("block", block, launch.grid), ("thread", thread, launch.block)):
                if any(g >= n for g, n in zip(got, limit)):
                    raise LaunchConfigError(f"{what} {got} is outside this launch's {what} range {limit}")
        with self._cv:
            self.focus_block, self.focus_thread = block, thread
            stop = self.stop
            if stop is not None and stop.lanes is not None:
                lane = self._lane_of(stop.lanes, block, thread)
                stop.lane = lane
                self.refs.clear()
                if lane is None:
                    return (f"block {block} is not among the blocks now running "
                            f"({_describe_blocks(stop.lanes.block_ids)}); the focus applies from its next stop")
                if not stop.lanes.active()[lane]:
                    return f"thread {thread} of block {block} is not at this statement (it took another path)"
        return f"focus: thread {thread} of block {block}"

    # ----- the program's thread ------------------------------------------------------------------
    def _run(self) -> None:
        config = self.config
        assert config is not None
        code = 0
        stepping.attach(self)
        saved_cwd, saved_argv, saved_path = os.getcwd(), list(sys.argv), list(sys.path)
        os.environ.update(config.env)
        try:
            if config.cwd:
                os.chdir(config.cwd)
            sys.path.insert(0, os.path.dirname(config.program))
            if config.function is not None:
                code = self._run_function(config)
            else:
                code = self._run_script(config)
        except DebugTerminated:
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                self.output(f"{exc.code}\n", "stderr")
        except BaseException as exc:  # the program's own error: shown as Python shows it, never ours
            self.output(_user_traceback(exc, config.program), "stderr")
            code = 1
        finally:
            stepping.detach(self)
            os.chdir(saved_cwd)
            sys.argv[:] = saved_argv
            sys.path[:] = saved_path
            self.exit_code = code
            self._send("exited", {"exitCode": code})
            self._send("terminated", {})

    def _run_function(self, config: LaunchConfig) -> int:
        from dsl.interpreter.run import run_function

        with open(config.program, encoding="utf-8") as f:
            source = f.read()
        sys.argv[:] = [config.program]
        result = run_function(source, config.program, config.function or "", example=config.example)
        if self._terminating:
            raise DebugTerminated
        for d in result.get("diagnostics", ()):
            self.output(_diagnostic_line(d) + "\n", "stderr", d)
        text = result.get("message", "")
        if not result.get("diagnostics"):
            self.output(f"{config.function}: {text}\n", "console" if result.get("ok") else "stderr")
        return 0 if result.get("ok") else 1

    def _run_script(self, config: LaunchConfig) -> int:
        import runpy

        import dsl

        sys.argv[:] = [config.program, *config.args]
        with dsl.interpret():
            try:
                runpy.run_path(config.program, run_name="__main__")
            except DebugTerminated:
                raise
            except Exception as exc:
                from dsl.diagnostics import CompileError

                if isinstance(exc, CompileError):
                    for d in exc.diagnostics:
                        self.output(d.format() + "\n", "stderr", d.to_dict())
                    return 1
                raise
        return 0

    def output(self, text: str, category: str = "console", diagnostic: dict | None = None) -> None:
        body: dict[str, Any] = {"category": category, "output": text}
        if diagnostic is not None and diagnostic.get("range"):
            rng = diagnostic["range"]
            body.update(source={"path": rng.get("file")}, line=rng.get("line"), column=rng.get("column", 0) + 1)
        self._send("output", body)

    # ----- the interpreter's hook (program thread) -------------------------------------------------
    def launch(self, info: LaunchInfo) -> None:
        """Before a kernel launch runs: a breakpoint on its line in the jit function, a step to it."""
        self._check_terminate()
        self._launch = info
        step = self._stepping
        if step is not None and step.after_launch and step.kind in ("next", "in"):
            self._stop_at(Stop("step", f"launching '{info.kernel}'", None, None, None, info))
            return
        where = info.where
        for bp in self.breakpoints.at(where.file, where.line) if where is not None else []:
            if not bp.launches or not bp.counts():
                continue
            if bp.log_message is not None:
                self.output(bp.log_message + "\n", "console")
                continue
            self._stop_at(Stop("breakpoint", f"launching '{info.kernel}' (grid {info.grid}, block {info.block})",
                               None, None, None, info, [bp.id]))
            return

    def launch_done(self, info: LaunchInfo) -> None:
        """After a launch: a step that left the kernel (or went over its launch) stops at the launch."""
        self._check_terminate()
        step = self._stepping
        self._last.pop(threading.get_ident(), None)
        if step is not None and not step.after_launch and (not step.at_launch or step.kind == "next"):
            self._stop_at(Stop("step", f"kernel '{info.kernel}' finished", None, None, None, info, after_launch=True))
        if self._launch is info:
            self._launch = None

    def step(self, marker: StepMarker, st: Any) -> None:
        self._check_terminate()
        self._last[threading.get_ident()] = (marker, st)
        active = st.active()
        focus = self._lane_of(st, self.focus_block, self.focus_thread)
        focus_active = focus is not None and bool(active[focus])
        if self._entry_pending and (focus_active or focus is None):
            lane = focus if focus_active else self._first_in_focus_block(st, active)
            if lane is not None or focus is None:
                self._entry_pending = False
                self._stop_at(self._stop_for("entry", "stopped at the kernel's first statement", marker, st,
                                             lane if lane is not None else int(np.flatnonzero(active)[0])))
                return
        if self._pause:
            self._pause = False
            lane = focus if focus_active else int(np.flatnonzero(active)[0])
            self._stop_at(self._stop_for("pause", "paused", marker, st, lane))
            return
        step = self._stepping
        if step is not None and focus_active and not step.after_launch and (
                step.kind == "in" or
                (not step.at_launch and step.kind == "next" and marker.depth <= step.depth) or
                (not step.at_launch and step.kind == "out" and marker.depth < step.depth)):
            self._stop_at(self._stop_for("step", "", marker, st, focus))
            return
        for bp in self.breakpoints.at(marker.file, marker.line):
            if bp.launches:
                continue
            lane = self._breakpoint_lane(bp, marker, st, active, focus, focus_active)
            if lane is None or not bp.counts():
                continue
            if bp.log_message is not None:
                self.output(self._log_text(bp, marker, st, lane) + "\n", "console")
                continue
            moved = "" if lane == focus else " (the focus thread is not here: focus moved to " + _where(st, lane) + ")"
            self._stop_at(self._stop_for("breakpoint", f"breakpoint at line {bp.line}{moved}", marker, st, lane,
                                         [bp.id]))
            return

    def fault(self, error: Any, st: Any) -> None:
        """A fault: stop on its line, once a launch (a deadlock faults every waiting warp)."""
        if not self.break_on_faults or self._terminating:
            return
        with self._cv:
            if self._faulted is not None and self._faulted is self._launch:
                return
            self._faulted = self._launch
        lane = error.lane
        last = self._last.get(threading.get_ident())
        marker = last[0] if last is not None and last[1] is st else None
        if lane is None:
            lane = self._lane_of(st, self.focus_block, self.focus_thread) or int(np.flatnonzero(st.active())[0])
        stop = self._stop_for("exception", f"DSL601: {error.message}", marker, st, lane)
        stop.fault = error
        stop.fault_line = error.where.line if error.where is not None else None
        self._stop_at(stop)

    # ----- deciding and stopping -------------------------------------------------------------------
    def _breakpoint_lane(self, bp: Breakpoint, marker: StepMarker, st: Any, active: np.ndarray, focus: int | None,
                         focus_active: bool) -> int | None:
        """The lane a breakpoint stops with, or None when it does not stop here."""
        if bp.condition is None:
            if focus_active:
                return focus
            if st.first is not None and focus is None:  # one warp running alone: the focus thread's warp stops
                return None
            return self._first_in_focus_block(st, active)
        candidates = np.flatnonzero(active)
        try:
            mask = condition_mask(bp.condition, self._namespace(marker, st, candidates, marker.depth),
                                  lambda k: self._namespace(marker, st, int(candidates[k]), marker.depth),
                                  len(candidates))
        except Exception as exc:
            self.output(f"breakpoint condition '{bp.condition}' at line {bp.line} failed: "
                        f"{type(exc).__name__}: {exc}; stopping there\n", "stderr")
            return focus if focus_active else int(candidates[0])
        hits = candidates[mask]
        if not hits.size:
            return None
        return focus if focus_active and focus in hits else int(hits[0])

    def _first_in_focus_block(self, st: Any, active: np.ndarray) -> int | None:
        position = _block_position(st, self.focus_block)
        if position is None:
            return None
        lanes = np.flatnonzero(active & (st.block_of == position))
        return int(lanes[0]) if lanes.size else None

    def _stop_for(self, reason: str, description: str, marker: StepMarker, st: Any, lane: int,
                  breakpoints: list[int] | None = None) -> Stop:
        return Stop(reason, description, marker, st, lane, self._launch, breakpoints or [])

    def _stop_at(self, stop: Stop) -> None:
        """Blocks the program's thread at `stop` until the front end resumes it."""
        with self._stop_lock:
            self._check_terminate()
            if stop.lanes is not None and stop.lane is not None:
                self.focus_thread, self.focus_block = stop.lanes.coordinates(stop.lane)
            sys.stdout.flush()
            sys.stderr.flush()
            with self._cv:
                self.stop = stop
                self._command = None
                self._pause = False
                self._stepping = None
            body: dict[str, Any] = {"reason": stop.reason, "threadId": self.focus_warp_id(), "allThreadsStopped": True}
            if stop.description:
                body["description"] = stop.description
            if stop.fault is not None:
                body["text"] = stop.fault.message
            if stop.breakpoints:
                body["hitBreakpointIds"] = stop.breakpoints
            self._send("stopped", body)
            with self._cv:
                while self._command is None:
                    self._cv.wait()
                self.stop = None
                self.refs.clear()
            self._check_terminate()
            self._send("continued", {"threadId": self.focus_warp_id(), "allThreadsContinued": True})

    def _check_terminate(self) -> None:
        if self._terminating:
            raise DebugTerminated

    def _log_text(self, bp: Breakpoint, marker: StepMarker, st: Any, lane: int) -> str:
        import re

        namespace = self._namespace(marker, st, lane, marker.depth)

        def part(m: re.Match) -> str:
            try:
                return format_value(scalar(evaluate(m.group(1), namespace)))
            except Exception as exc:
                return f"<{type(exc).__name__}: {exc}>"

        return re.sub(r"\{([^{}]+)\}", part, bp.log_message or "")

    @staticmethod
    def _lane_of(st: Any, block: tuple[int, int, int], thread: tuple[int, int, int]) -> int | None:
        """The lane of thread `thread` of block `block` in this batch, or None."""
        position = _block_position(st, block)
        bx, by, bz = st.block_dim
        if position is None or not all(t < n for t, n in zip(thread, (bx, by, bz))):
            return None
        linear = thread[0] + bx * (thread[1] + by * thread[2])
        if st.first is not None:
            lane = linear - st.first
            return lane if 0 <= lane < st.n else None
        return position * st.threads + linear

    # ----- what the front end reads while stopped ----------------------------------------------
    def focus_warp_id(self) -> int:
        bx, by, _ = self._launch.block if self._launch is not None else (1, 1, 1)
        t = self.focus_thread
        return (t[0] + bx * (t[1] + by * t[2])) // WARP + 1

    def threads(self) -> list[dict[str, Any]]:
        """DAP threads: the warps of the focus block while in a kernel, else the program."""
        launch = self._launch
        if launch is None:
            return [{"id": 1, "name": "host (jit function)"}]
        count = int(np.prod(launch.block))
        focus = self.focus_warp_id()
        out = []
        for w in range(-(-count // WARP)):
            first, last = w * WARP, min(count, (w + 1) * WARP) - 1
            mark = " (focus)" if w + 1 == focus else ""
            out.append({"id": w + 1, "name": f"warp {w} · threads {first}-{last} of block {self.focus_block}{mark}"})
        return out

    def _lane_for_warp(self, warp_id: int) -> int | None:
        """The lane a warp's stack shows: the focus thread's in its warp, else its first active thread."""
        stop = self.stop
        if stop is None or stop.lanes is None:
            return None
        if warp_id == self.focus_warp_id() or stop.lane is None:
            return stop.lane
        st = stop.lanes
        position = _block_position(st, self.focus_block)
        if position is None:
            return stop.lane
        lanes = np.flatnonzero(st.block_of == position)
        linear = st.linear[lanes]
        in_warp = lanes[(linear // WARP) == warp_id - 1]
        if not in_warp.size:
            return stop.lane
        active = in_warp[st.active()[in_warp]]
        return int(active[0]) if active.size else int(in_warp[0])

    def stack(self, warp_id: int) -> list[dict[str, Any]]:
        """Frames, innermost first: `{id, name, file, line}`; the id encodes the warp and depth."""
        stop = self.stop
        if stop is None:
            return []
        frames = []
        if stop.marker is not None:
            entries = list(stop.marker.stack)
            for depth in range(len(entries) - 1, -1, -1):
                entry = entries[depth]
                line = stop.fault_line if depth == len(entries) - 1 and stop.fault_line else entry.line
                lane = self._lane_for_warp(warp_id)
                where = f" · {_where(stop.lanes, lane)}" if lane is not None and depth == len(entries) - 1 else ""
                frames.append({"id": warp_id * 1000 + depth + 1, "name": f"{entry.function}{where}",
                               "file": entry.file, "line": line})
        launch = stop.launch
        if launch is not None and launch.where is not None:
            done = " (finished)" if stop.after_launch else ""
            frames.append({"id": warp_id * 1000, "name": f"launch of {launch.kernel}{done}",
                           "file": launch.where.file, "line": launch.where.line})
        return frames

    def scopes(self, frame_id: int) -> list[Variable]:
        stop = self.stop
        if stop is None:
            return []
        warp_id, depth = divmod(frame_id, 1000)
        if depth == 0 or stop.marker is None:
            return [Variable("Launch", "", "", self.refs.add(lambda: self._launch_variables(stop)))]
        lane = self._lane_for_warp(warp_id)
        out = [Variable("Locals", "", "", self.refs.add(lambda: self._locals(stop, lane, depth - 1)))]
        if lane is not None:
            out.append(Variable("Thread", "", "", self.refs.add(lambda: self._thread_variables(stop, lane))))
        return out

    def variables(self, reference: int) -> list[Variable] | None:
        return self.refs.children(reference)

    def evaluate(self, expression: str, frame_id: int | None) -> Variable:
        """`expression` in the scope of frame `frame_id` (default: the focus thread's innermost)."""
        stop = self.stop
        if stop is None:
            raise LaunchConfigError("the program is running; expressions are evaluated while it is stopped")
        if stop.marker is None:
            namespace = self._launch_namespace(stop)
        else:
            warp_id, depth = divmod(frame_id, 1000) if frame_id else (self.focus_warp_id(), stop.marker.depth + 1)
            lane = self._lane_for_warp(warp_id)
            if depth == 0:
                namespace = self._launch_namespace(stop)
            else:
                if lane is None:
                    raise LaunchConfigError("the focus thread is not running here")
                namespace = self._namespace(stop.marker, stop.lanes, lane, depth - 1)
        value = evaluate(expression, namespace)
        return self._as_variable("result", value, expression)

    # ----- building scopes ---------------------------------------------------------------------------
    def _namespace(self, marker: StepMarker, st: Any, lanes: Any, depth: int) -> dict[str, Any]:
        """The names of frame `depth` for one lane (an int) or for several (an index array)."""
        one = isinstance(lanes, int | np.integer)
        items: list[tuple[str, Any]] = []
        for value in marker.values:
            if value.depth != depth:
                continue
            raw = st.v[value.slot]
            if value.shared is not None:
                lane = int(lanes) if one else int(lanes[0])
                items.append((value.name, shared_contents(value, raw, lane, _lane_base(raw))))
                continue
            data = lane_values(value, raw, st.n)[lanes]
            items.append((value.name, _bf16_as_float(data, value) if not one else _element(data, value)))
        out = nest(items)
        prefix = f"{depth}:"
        for key, param in marker.tensors.items():
            if key.startswith(prefix):
                array = tensor_contents(st.args.get(param))
                if array is not None:
                    out[key[len(prefix):]] = array
        out.update({k[len(prefix):]: v for k, v in marker.constants.items() if k.startswith(prefix)})
        thread = tuple(axis[lanes] for axis in st.thread)
        block = tuple(np.broadcast_to(np.asarray(b), (st.n,))[lanes] for b in st.block)
        view = ThreadView(Dim3(*_ints(thread, one)), Dim3(*_ints(block, one)), Dim3(*st.block_dim),
                          Dim3(*st.grid_dim), st.linear[lanes] if not one else int(st.linear[lanes]))
        out["dsl"] = view
        return out

    def _locals(self, stop: Stop, lane: int | None, depth: int) -> list[Variable]:
        marker, st = stop.marker, stop.lanes
        assert marker is not None
        if lane is None:
            return [leaf("(focus thread)", "not among the blocks now running")]
        groups: dict[str, list[tuple[str, NamedValue]]] = {}
        for value in marker.values:
            if value.depth == depth:
                base = value.name.split("[", 1)[0]
                groups.setdefault(base, []).append((value.name[len(base):], value))
        out = []
        for base, members in groups.items():
            if len(members) == 1 and members[0][0] == "":
                out.append(self._named_variable(base, members[0][1], stop, lane, base))
            else:
                out.append(list_variable(self.refs, base, [(label, v) for label, v in members], base,
                                         lambda label, v, ev, base=base: self._named_variable(
                                             label or base, v, stop, lane, ev or None)))
        prefix = f"{depth}:"
        for key, param in marker.tensors.items():
            if key.startswith(prefix):
                array = tensor_contents(st.args.get(param))
                name = key[len(prefix):]
                if array is not None:
                    out.append(array_variable(self.refs, name, array, f"Tensor[{array.dtype}]", name))
        for key, value in marker.constants.items():
            if key.startswith(prefix):
                out.append(leaf(key[len(prefix):], value, f"constexpr {type(value).__name__}", key[len(prefix):]))
        if not st.active()[lane]:
            out.insert(0, leaf("(focus thread)", "not at this statement: the values are from before it"))
        return out

    def _named_variable(self, label: str, value: NamedValue, stop: Stop, lane: int, evaluate_name: str | None
                        ) -> Variable:
        st = stop.lanes
        raw = st.v[value.slot]
        if value.shared is not None:
            contents = shared_contents(value, raw, lane, _lane_base(raw))
            return array_variable(self.refs, label, contents, f"shared {value.shared[0]}{list(value.shared[1])}",
                                  evaluate_name)
        data = _bf16_as_float(lane_values(value, raw, st.n), value)
        mine = scalar(data[lane])
        kind = value.dtype + (f"x{value.lane_type.width}" if value.lane_type.width else "")
        text = format_value(mine)
        warp_lanes, block_lanes = _warp_and_block(st, lane)
        active = st.active()

        def across() -> list[Variable]:
            warp = data[warp_lanes]
            block = data[block_lanes]
            thread, blk = st.coordinates(lane)
            return [array_variable(self.refs, f"warp {int(st.linear[lane]) // WARP} (by lane)", warp, kind, None,
                                   active[warp_lanes]),
                    array_variable(self.refs, f"block {blk} (by thread)", block, kind, None, active[block_lanes],
                                   labels=[_thread_label(st, g) for g in block_lanes])]

        return Variable(label, text, kind, self.refs.add(across), evaluate_name)

    def _thread_variables(self, stop: Stop, lane: int) -> list[Variable]:
        st = stop.lanes
        thread, block = st.coordinates(lane)
        linear = int(st.linear[lane])
        active = st.active()
        _, block_lanes = _warp_and_block(st, lane)
        return [leaf("thread_idx", str(thread)), leaf("block_idx", str(block)),
                leaf("block_dim", str(tuple(st.block_dim))), leaf("grid_dim", str(tuple(st.grid_dim))),
                leaf("lane_id", linear % WARP), leaf("warp_id", linear // WARP),
                leaf("at this statement", f"{int(active[block_lanes].sum())} of the block's {len(block_lanes)} "
                     f"threads{'' if active[lane] else '; not this one'}")]

    def _launch_variables(self, stop: Stop) -> list[Variable]:
        launch = stop.launch
        if launch is None:
            return []
        out = [leaf("kernel", launch.kernel), leaf("grid", str(launch.grid)), leaf("block", str(launch.block)),
               leaf("smem", launch.smem)]
        for name, value in self._launch_namespace(stop).items():
            if name not in ("kernel", "grid", "block", "smem"):
                out.append(self._as_variable(name, value, name))
        return out

    def _launch_namespace(self, stop: Stop) -> dict[str, Any]:
        launch = stop.launch
        if launch is None:
            return {}
        out: dict[str, Any] = {"kernel": launch.kernel, "grid": launch.grid, "block": launch.block,
                               "smem": launch.smem}
        for name, value in launch.names.items():
            array = tensor_contents(value)
            if array is not None:
                out[name] = array
            elif not hasattr(value, "region"):
                arr = np.asarray(value)
                out[name] = arr.item() if arr.ndim == 0 and arr.dtype != object else value
        return out

    def _as_variable(self, name: str, value: Any, evaluate_name: str | None) -> Variable:
        if isinstance(value, np.ndarray) and value.ndim >= 1:
            return array_variable(self.refs, name, value, f"{value.dtype}{list(value.shape)}", evaluate_name)
        if isinstance(value, list | tuple) and value and not isinstance(value[0], int | float | np.generic):
            items = [(f"[{i}]", v) for i, v in enumerate(value)]
            return list_variable(self.refs, name, items, evaluate_name or name,
                                 lambda label, v, ev: self._as_variable(label, v, ev or None))
        return leaf(name, scalar(value) if isinstance(value, np.generic) else value, type(value).__name__,
                    evaluate_name)


def _element(data: np.ndarray, value: NamedValue) -> Any:
    if value.dtype == "bf16":
        return np.float32(data) if data.ndim == 0 else data.astype(np.float32)
    return data


def _bf16_as_float(data: np.ndarray, value: NamedValue) -> np.ndarray:
    return data.astype(np.float32) if value.dtype == "bf16" else data


def _ints(values: tuple, one: bool) -> tuple:
    return tuple(int(v) for v in values) if one else values


def _lane_base(raw: Any) -> Any:
    region = getattr(raw, "region", None)
    return getattr(region, "lane_base", None)


def _block_position(st: Any, block: tuple[int, int, int]) -> int | None:
    try:
        return st.block_ids.index(tuple(block))
    except ValueError:
        return None


def _warp_and_block(st: Any, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """The lanes of `lane`'s warp and of its block, in thread order."""
    block_lanes = np.flatnonzero(st.block_of == st.block_of[lane])
    warp_lanes = block_lanes[(st.linear[block_lanes] // WARP) == int(st.linear[lane]) // WARP]
    return warp_lanes, block_lanes


def _thread_label(st: Any, lane: int) -> str:
    thread, _ = st.coordinates(int(lane))
    bx, by, bz = st.block_dim
    return f"[{thread[0]}]" if by == bz == 1 else f"{thread}"


def _where(st: Any, lane: int) -> str:
    thread, block = st.coordinates(lane)
    return f"thread {thread} of block {block}"


def _describe_blocks(ids: list[tuple[int, int, int]]) -> str:
    return f"{ids[0]}" if len(ids) == 1 else f"{ids[0]} to {ids[-1]}"


def _diagnostic_line(d: dict[str, Any]) -> str:
    rng = d.get("range") or {}
    return f"{rng.get('file', '?')}:{rng.get('line', 0)}:{rng.get('column', 0) + 1}: {d.get('code', '')} " \
           f"{d.get('message', '')}".rstrip()


def _user_traceback(exc: BaseException, program: str) -> str:
    """The traceback as the user's code made it: kdsl's own frames (and the launcher it
    generated) are left out, as they are from a program's own tracebacks."""
    own = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
           os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lsp") + os.sep)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(own) and not f.filename.startswith(("<kdsl", "<frozen runpy"))
              and "runpy.py" not in f.filename]
    return "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) + "".join(
        traceback.format_exception_only(type(exc), exc))
