"""Runs the user's modules in contained child processes, so nothing they do can hurt the caller.

Analysing a kdsl file means running its top-level statements (that is how decorators,
constants and example specs come to exist), and user code may hang, exit, crash the
interpreter, eat all memory or start processes of its own. The language server and
`kdsl lint` therefore never run it themselves: `AnalysisWorker` starts one warm helper
process (`lsp.zygote`, in a session of its own) that imports the compiler once and forks a
contained run process per module (`lsp.sandbox`), several at a time. Every way a run can
fail becomes a DSL002 diagnostic on line 1 of the file, never an exception.

The editor's "Run on GPU" is an operation of the same worker (`run_on_gpu`): a fresh
contained process forked for one `dsl.run_function` call, killed with its process tree when
it ends, times out or is cancelled, exactly like an analysis. Its every failure becomes an
`{ok: False, error, message}` answer, never an exception.

Who enforces what: the zygote enforces each run's time limit from its fork, kills the run's
process group and sweeps up what escaped it; cancelling an analysis (the document changed)
stops only that run (a warm one may first finish, its answer dropped: see `lsp.zygote`).
Each step of an analysis gets the whole limit (`{"progress": true}` restarts it). This class
only backs the zygote up: if a started run is not answered within its limit plus
`BACKSTOP_S` of its start or last progress, or the zygote dies, the whole session is stopped
(SIGTERM, which the zygote turns into killing everything, then SIGKILL to every process of
the session) and the next request starts a fresh one. Nothing here waits for end of file on
a pipe without a deadline, so a process holding one open cannot stretch a limit. The
protocol is described in `lsp.zygote`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsl.compiler.artifacts import FunctionReport, ModuleReport
from lsp import report_wire, sandbox
from lsp.analysis import confine_report, failure_diagnostic
from lsp.zygote import PROGRESS_CAP

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 4096
STARTUP_TIMEOUT_S = 60.0  # importing and warming up the compiler; not counted against a request
BACKSTOP_S = 5.0  # beyond a run's own limit, before the whole worker is presumed stuck
SANDBOXES = sandbox.SANDBOXES
_STDERR_TAIL_BYTES = 64 * 1024
_LINE_LIMIT = 1 << 30  # reports carry every IR stage; one JSON line can be large
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
# `python -c` puts the working directory (the user's workspace) first on sys.path; drop it
# before anything is imported, so a workspace's own `dsl/`, `lsp/` or `json.py` is never loaded.
_BOOT = (
    "import sys\n"
    "if sys.path and sys.path[0] == '': del sys.path[0]\n"
    f"sys.path.insert(0, {_PROJECT_ROOT!r})\n"
    "from lsp.zygote import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


_KNOWN_PATHS = 8  # paths whose function reports are kept, so the next report of each is a delta


@dataclass
class Analysis:
    """An analysis: its report, and the files of the modules the run imported, None when
    unknown (the run failed, or an import did): what a cache of the result depends on."""

    report: ModuleReport
    imported: list[str] | None = None


class WorkerFailure(Exception):
    """No report could be produced; `message` completes "Running this module for analysis ..."."""

    def __init__(self, message: str, line: int | None = None, kind: str = "internal"):
        super().__init__(message)
        self.message = message
        self.line = line
        self.kind = kind


class _Pending:
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, pids: dict[str, int]) -> None:
        self.path = path
        self.pids = pids  # where the run process's pid is noted when it starts
        self.started = asyncio.Event()
        self.progress = 0  # steps the run reported finished (each restarts its time limit)
        self.answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.on_traced: Any = None  # called with the report as tracing left it, if one comes


class AnalysisWorker:
    """The zygote process, driven from asyncio; `analyze` may be awaited by many tasks at once.

    `parallel` runs go at a time (more wait in the zygote); `keep_warm` run processes stay
    alive for the next version of their path (0 forks afresh for every request, as lint
    does). `sandbox="strict"` adds user and network namespaces (see `lsp.sandbox`).
    `views=False` asks for reports without stage texts (lint needs only diagnostics);
    `assemble=False` for reports compiled to PTX only, whose kernels' resources the caller
    finds itself (lint assembles many files' PTX in one ptxas run: `dsl.compiler.batch_assembly`).
    `analyze` never raises for anything user code does.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
        parallel: int = 2,
        keep_warm: int = 4,
        sandbox: str = SANDBOXES[0],
        views: bool = True,
        assemble: bool = True,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ):
        if sandbox not in SANDBOXES:
            raise ValueError(f"sandbox must be one of {SANDBOXES}, not {sandbox!r}")
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.parallel = parallel
        self.keep_warm = keep_warm
        self.sandbox = sandbox
        self._python = python
        self._env = env
        self._cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, _Pending] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr = bytearray()
        self._ids = itertools.count(1)
        self._start_lock = asyncio.Lock()
        self.views = views
        self.assemble = assemble
        self._known: OrderedDict[str, dict[str, FunctionReport]] = OrderedDict()  # path -> by digest
        self.restarts = 0  # zygotes started after the first; tests and logs read it
        self.run_pids: dict[str, int] = {}  # path -> the run process that last took it
        self.gpu_run_pids: dict[str, int] = {}  # path -> the process of its latest GPU run

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.returncode is None else None

    async def start(self) -> None:
        """Starts the zygote now instead of on the first request (hides the warm-up)."""
        await self._ensure_started()

    async def analyze(self, source: str, path: str, target: str | None = None) -> ModuleReport:
        return (await self.analysis(source, path, target)).report

    async def analysis(self, source: str, path: str, target: str | None = None,
                       on_traced: Callable[[ModuleReport], None] | None = None) -> Analysis:
        """The report, and what running the module imported (`Analysis.imported`). `on_traced`
        is called with the report as tracing left it when the run sends one (a file with many
        functions to compile), confined to this file like the report; never after the answer."""

        def traced(line: bytes) -> None:
            try:
                report = ModuleReport.from_dict(json.loads(line))
            except Exception as exc:  # a malformed one is dropped: the full report still comes
                log.warning("dropped a malformed traced report of %s: %s", path, exc)
                return
            on_traced(confine_report(report, path, source))  # type: ignore[misc]

        try:
            decoded = await self._analyze(source, path, target, traced if on_traced is not None else None)
        except WorkerFailure as failure:
            message = f"Running this module for analysis {failure.message}"
            if failure.line is not None:
                message += f" (at line {failure.line})"
            diagnostic = failure_diagnostic("DSL002", path, source, message + ".", failure.line)
            return Analysis(ModuleReport(path, diagnostics=[diagnostic]))
        return Analysis(confine_report(decoded.report, path, source), decoded.imported)

    async def tune_on_gpu(self, source: str, path: str, function: str, target: str | None = None) -> dict[str, Any]:
        """Tunes one `@dsl.autotune` function (`dsl.runtime.tune`, every config measured again) in a
        contained process of its own, exactly as `run_on_gpu` runs: a GPU run whose task is "tune".
        Answers `{function, ok, device, tunings, message}` or `run_on_gpu`'s failures."""
        return await self.run_on_gpu(source, path, function, target, task="tune")

    async def profile_on_gpu(self, source: str, path: str, function: str, device: int = 0) -> dict[str, Any]:
        """One call profiled under Nsight Compute (`dsl.profiling`) in a contained process of its
        own, as `run_on_gpu` runs: a GPU run whose task is "profile". Answers `{ok, message,
        profile}` (the report's JSON form, untrusted: the user's process wrote it) or
        `run_on_gpu`'s failures, with `error` "no_profiler" where there is no GPU or no ncu."""
        return await self.run_on_gpu(source, path, function, None, task="profile", device=device)

    async def interpret_on_cpu(self, source: str, path: str, function: str, target: str | None = None
                               ) -> dict[str, Any]:
        """`dsl.interpreter.run.run_function` in a contained process of its own, exactly as
        `run_on_gpu` runs: a run whose task is "interpret". Answers `{ok, message, correct,
        device}` (and `diagnostics`) or `run_on_gpu`'s failures."""
        return await self.run_on_gpu(source, path, function, target, task="interpret")

    async def run_on_gpu(self, source: str, path: str, function: str, target: str | None = None,
                         *, task: str = "run", device: int = 0) -> dict[str, Any]:
        """`dsl.run_function(source, path, function, device=device)` in a contained process of its own.

        Answers its dict (`ok, message, median_ms, bandwidth_gbs, correct`, `diagnostics` as
        `Diagnostic.to_dict()`s confined to `path`), or `{ok: False, error, message}` where
        `error` is "no_gpu", "error" (the module or the run raised), or how the process
        failed ("timeout", "memory", "crash", "exit", "sandbox", "internal"). Cancelling
        the call kills the process and everything it started."""
        request = {"op": "run", "task": task, "source": source, "path": path, "function": function, "target": target,
                   "device": device}
        try:
            answer = await self._request(request, path, self.gpu_run_pids)
            if isinstance(answer.get("result"), dict):
                result = _confined_result(answer["result"], path, source)
                if result.get("error") == "memory" and self.memory_mb > 0:
                    result["message"] = f"ran out of memory (limit {self.memory_mb} MB)"
                return result
            if "report_line" in answer:
                raise WorkerFailure("sent a report instead of a result")
            error = answer.get("error") or {}
            line = error.get("line")
            raise WorkerFailure(
                str(error.get("message", "failed")), line if isinstance(line, int) else None, str(error.get("kind"))
            )
        except WorkerFailure as failure:
            message = failure.message + (f" (at line {failure.line})" if failure.line is not None else "")
            return {"ok": False, "error": failure.kind, "message": message}

    async def close(self) -> None:
        """Ends the zygote (end of file on its stdin: it kills every run), forcing it if needed."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        await self._stop(proc, grace=5.0)

    # -- internals

    async def _analyze(self, source: str, path: str, target: str | None,
                       on_traced: Callable[[bytes], None] | None = None) -> report_wire.Decoded:
        # The function reports held for this path: the run process sends only the others.
        known = self._known.get(path, {})
        request = {"op": "analyze", "source": source, "path": path, "target": target, "views": self.views,
                   "assemble": self.assemble, "known": list(known)}
        answer = await self._request(request, path, self.run_pids, on_traced)
        if "report_line" in answer:
            try:
                decoded = report_wire.decode(answer["report_line"], known)
            except Exception as exc:
                raise WorkerFailure(f"sent a malformed report ({type(exc).__name__})") from None
            if self.keep_warm > 0:  # lint (no warm processes) analyses each file once
                self._known[path] = decoded.by_digest
                self._known.move_to_end(path)
                while len(self._known) > _KNOWN_PATHS:
                    self._known.popitem(last=False)
            return decoded
        error = answer.get("error") or {}
        line = error.get("line")
        raise WorkerFailure(str(error.get("message", "failed")), line if isinstance(line, int) else None)

    async def _request(self, request: dict[str, Any], path: str, pids: dict[str, int],
                       on_traced: Callable[[bytes], None] | None = None) -> dict[str, Any]:
        """Sends one request and awaits its answer; the limit counts from when a run takes it."""
        proc = await self._ensure_started()
        assert proc.stdin is not None
        rid = next(self._ids)
        pending = self._pending[rid] = _Pending(asyncio.get_running_loop(), path, pids)
        pending.on_traced = on_traced
        request = {"id": rid, **request}
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            await proc.stdin.drain()
            waiter = asyncio.ensure_future(pending.started.wait())
            try:
                await asyncio.wait([waiter, pending.answer], return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when the request is cancelled: no task left pending behind it
                waiter.cancel()
            answer = await self._backstop(proc, pending)
        except (ConnectionError, BrokenPipeError):
            raise WorkerFailure(self._death_message()) from None
        except asyncio.CancelledError:
            if not pending.answer.done() and proc.returncode is None and proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.write(json.dumps({"id": rid, "op": "cancel"}).encode() + b"\n")
            raise
        finally:
            self._pending.pop(rid, None)
        return answer

    async def _backstop(self, proc: asyncio.subprocess.Process, pending: _Pending) -> dict[str, Any]:
        """The answer, awaited up to the run's limit plus `BACKSTOP_S` since it started or last
        reported progress (as the zygote counts it), and never past the cap on progress."""
        loop = asyncio.get_running_loop()
        cap = loop.time() + self.timeout * PROGRESS_CAP + BACKSTOP_S
        seen = pending.progress
        while True:
            wait = min(self.timeout + BACKSTOP_S, cap - loop.time())
            try:
                return await asyncio.wait_for(asyncio.shield(pending.answer), max(wait, 0.0))
            except asyncio.TimeoutError:
                if pending.progress == seen or loop.time() >= cap:
                    await self._stop(proc, grace=1.0)
                    raise WorkerFailure(f"timed out after {self.timeout:g} s", kind="timeout") from None
                seen = pending.progress

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        async with self._start_lock:
            if self._proc is not None and self._proc.returncode is None:
                return self._proc
            if self._proc is not None:
                self.restarts += 1
            self._proc = await self._spawn()
            return self._proc

    async def _spawn(self) -> asyncio.subprocess.Process:
        env = dict(os.environ if self._env is None else self._env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._stderr.clear()
        self._tasks = [task for task in self._tasks if not task.done()]
        proc = await asyncio.create_subprocess_exec(
            self._python, "-c", _BOOT, "--timeout", str(self.timeout), "--memory-mb", str(self.memory_mb),
            "--parallel", str(self.parallel), "--keep-warm", str(self.keep_warm), "--sandbox", self.sandbox,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, cwd=self._cwd, limit=_LINE_LIMIT, start_new_session=True,
        )  # fmt: skip
        self._tasks.append(asyncio.ensure_future(self._drain_stderr(proc)))
        try:
            assert proc.stdout is not None
            hello = await asyncio.wait_for(proc.stdout.readline(), STARTUP_TIMEOUT_S)
            if not hello or not json.loads(hello).get("ready"):
                raise EOFError
        except (asyncio.TimeoutError, EOFError, ValueError):
            await self._stop(proc, grace=0.0)
            tail = self._stderr.decode("utf-8", "replace").strip().splitlines()
            detail = f": {tail[-1]}" if tail else ""
            raise WorkerFailure(f"could not start the analysis worker{detail}") from None
        self._tasks.append(asyncio.ensure_future(self._read_answers(proc)))
        return proc

    async def _read_answers(self, proc: asyncio.subprocess.Process) -> None:
        """Routes the zygote's lines to the waiting requests; at end of file fails them all."""
        assert proc.stdout is not None
        while True:
            try:
                raw = await proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                raw = b""
            if not raw:
                break
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            pending = self._pending.get(message.get("id")) if isinstance(message, dict) else None
            if isinstance(message, dict) and message.get("report_follows"):
                payload = await proc.stdout.readline()  # the report, one line, whoever it is for
                if pending is not None and not pending.answer.done():
                    pending.answer.set_result({"report_line": payload})
                continue
            if isinstance(message, dict) and message.get("traced_follows"):
                payload = await proc.stdout.readline()
                if pending is not None and not pending.answer.done() and pending.on_traced is not None:
                    pending.on_traced(payload)
                continue
            if pending is None:
                continue
            if "progress" in message:
                pending.progress += 1
            elif "started" in message:
                if isinstance(message["started"], int):
                    pending.pids[pending.path] = message["started"]
                pending.started.set()
            elif not pending.answer.done():
                pending.answer.set_result(message)
        await self._stop(proc, grace=1.0)
        failure = WorkerFailure(self._death_message(proc.returncode))
        for pending in list(self._pending.values()):
            if not pending.answer.done():
                pending.answer.set_exception(failure)

    def _death_message(self, returncode: int | None = None) -> str:
        from lsp.run_module import describe_exit

        kind, message = describe_exit(returncode, self._stderr.decode("utf-8", "replace"))
        if kind == "memory" and self.memory_mb > 0:
            return f"ran out of memory (limit {self.memory_mb} MB)"
        return "stopped: the analysis worker " + message

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Keeps the zygote's stderr pipe from filling up; remembers only the recent tail."""
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(8192):
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL_BYTES]

    async def _stop(self, proc: asyncio.subprocess.Process, *, grace: float) -> None:
        """Waits up to `grace` for the zygote to exit, then stops its whole session; never hangs."""
        if proc.returncode is None and grace > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_exited(proc), grace)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)  # the zygote kills its runs, then exits
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_exited(proc), 1.0)
        sandbox.kill_group(proc.pid)
        sandbox.kill_session(proc.pid)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(_exited(proc), 2.0)
        if proc is self._proc:
            self._proc = None


def _confined_result(result: dict[str, Any], path: str, source: str) -> dict[str, Any]:
    """A GPU run's answer as its own process wrote it (so it may say anything about the run),
    with its diagnostics, like a report's, speaking only about `path` (`confine_report`)."""
    from dsl.diagnostics import Diagnostic

    out = {key: value for key, value in result.items() if isinstance(key, str)}
    out["ok"] = out.get("ok") is True
    out["message"] = str(out.get("message", ""))
    if "diagnostics" in out:
        raw = out["diagnostics"] if isinstance(out["diagnostics"], list) else []
        diagnostics = []
        for item in raw:
            with contextlib.suppress(Exception):
                diagnostics.append(Diagnostic.from_dict(item))
        report = confine_report(ModuleReport(path, diagnostics=diagnostics), path, source)
        out["diagnostics"] = [d.to_dict() for d in report.diagnostics]
    return out


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """The process has exited (its return code is known), whoever still holds its pipes."""
    while proc.returncode is None:
        await asyncio.sleep(0.02)
