"""Runs the user's module in a child process, so nothing it does can hurt the caller.

Analysing a kdsl file means running its top-level statements (that is how decorators,
constants and example specs come to exist), and user code may hang, exit, crash the
interpreter or eat all memory. The language server and `kdsl lint` therefore never run it
themselves. A child (`python -m lsp.worker`) imports the compiler once and stays warm, so
its in-memory kernel cache survives between requests, and answers one request at a time
over JSON lines. The parent enforces the time limit: it kills the child and starts a fresh
one lazily for the next request. The child limits its own address space. Every way the
child can fail becomes a DSL002 diagnostic on line 1 of the file, never an exception.

Protocol, one JSON object per line:

    child  -> parent  {"ready": true, "pid": 123}                      once, after warm-up
    parent -> child   {"id": 1, "op": "analyze", "source": "...", "path": "...", "target": null}
    child  -> parent  {"id": 1, "report": ModuleReport.to_dict()}
                   or {"id": 1, "error": {"kind": "memory" | "exit" | "internal", "message": "...",
                                          "line": 3 | null}}

The child keeps the protocol on private duplicates of fds 0 and 1 and points fds 0 and 1
at /dev/null and stderr, so `print`, `input()` and C-level writes in user code cannot
corrupt it. The parent keeps the tail of the child's stderr: faulthandler writes the
Python stack there on a crash, or when the parent asks (SIGUSR1) before killing a child
that ran out of time, which is how a DSL002 can point at the line that was running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsl.compiler.artifacts import ModuleReport
from lsp.analysis import failure_diagnostic

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 4096
STARTUP_TIMEOUT_S = 60.0  # importing the compiler; not counted against a request's limit
_STDERR_TAIL_BYTES = 64 * 1024
_DUMP_GRACE_S = 0.2  # time faulthandler gets to write the stack of a timed-out child
_LINE_LIMIT = 1 << 30  # reports carry every IR stage; one JSON line can be large
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


# --------------------------------------------------------------------------- child side


def _user_line(tb: Any, path: str) -> int | None:
    """The innermost line of `path` in a traceback, if the failure happened in user code."""
    line = None
    for frame in traceback.extract_tb(tb):
        if frame.filename == path:
            line = frame.lineno
    return line


@contextlib.contextmanager
def _module_dir_on_path(path: str) -> Iterator[None]:
    """Lets the analysed module import its siblings, as it could when run as a script."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def _serve(request: dict[str, Any]) -> dict[str, Any]:
    import dsl

    rid = request.get("id")
    if request.get("op") == "ping":
        return {"id": rid, "ok": True}
    if request.get("op") != "analyze":
        return {"id": rid, "error": {"kind": "internal", "message": f"unknown op {request.get('op')!r}"}}
    path = request["path"]
    try:
        with _module_dir_on_path(path):
            report = dsl.analyze_source(request["source"], path, target=request.get("target"))
        return {"id": rid, "report": report.to_dict()}
    except MemoryError as exc:
        kind, message, tb = "memory", "ran out of memory", exc.__traceback__
    except SystemExit as exc:
        kind, message, tb = "exit", f"called sys.exit({exc.code!r})", exc.__traceback__
    except BaseException as exc:
        kind, tb = "internal", exc.__traceback__
        message = f"failed inside the analyzer: {type(exc).__name__}: {exc}"
        traceback.print_exc()
    return {"id": rid, "error": {"kind": kind, "message": message, "line": _user_line(tb, path)}}


def _die_with_parent() -> None:
    """Linux: the kernel kills this child if the parent dies, even while user code hangs."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _limit_memory(memory_mb: int) -> None:
    if memory_mb <= 0:
        return
    import resource

    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lsp.worker", description="kdsl analysis worker")
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB)
    args = parser.parse_args(argv)

    # Take the protocol off fds 0/1 before any user code can touch them.
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr

    import faulthandler

    faulthandler.enable()
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent; we die with it
    _die_with_parent()

    import dsl  # noqa: F401 - warm up once; every request reuses it and its kernel cache

    _limit_memory(args.memory_mb)

    def send(message: dict[str, Any]) -> None:
        proto_out.write(json.dumps(message).encode() + b"\n")
        proto_out.flush()

    send({"ready": True, "pid": os.getpid()})
    for raw in proto_in:
        try:
            request = json.loads(raw)
        except ValueError:
            continue
        response = _serve(request)
        try:
            send(response)
        except MemoryError:
            response = {"id": request.get("id"), "error": {"kind": "memory", "message": "ran out of memory"}}
            send(response)
        if response.get("error", {}).get("kind") == "memory":
            return 0  # the heap may be fragmented or half-freed; a fresh child is cheaper
    return 0


# -------------------------------------------------------------------------- parent side

_FRAME = re.compile(r'File "(?P<file>.*)", line (?P<line>\d+)')
_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g}"


def _describe_exit(returncode: int | None, stderr: str) -> str:
    if any(marker in stderr for marker in _OUT_OF_MEMORY):
        return "ran out of memory"
    if returncode is None:
        return "stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by signal {name}"
    return f"exited with code {returncode}"


def _crash_line(stderr: str, path: str) -> int | None:
    """The innermost frame of `path` in a faulthandler dump (it lists the newest call first)."""
    for match in _FRAME.finditer(stderr):
        if match["file"] == path:
            return int(match["line"])
    return None


class WorkerFailure(Exception):
    """The child could not produce a report; `message` completes "Running this module ..."."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


class AnalysisWorker:
    """One warm child process, driven from asyncio; requests are served one at a time.

    `analyze` never raises for anything user code does: it returns a `ModuleReport` whose
    only diagnostic is a DSL002 when the child failed. If the awaiting task is cancelled
    (the document changed), the child is killed and a fresh one starts on the next request.
    """

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        memory_mb: int = DEFAULT_MEMORY_MB,
        python: str = sys.executable,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ):
        self.timeout = timeout
        self.memory_mb = memory_mb
        self._python = python
        self._env = env
        self._cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = bytearray()
        self._drains: dict[asyncio.subprocess.Process, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.restarts = 0  # children started after the first; tests and logs read it

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.returncode is None else None

    async def start(self) -> None:
        """Starts the child now instead of on the first request (hides the warm-up)."""
        async with self._lock:
            await self._ensure_started()

    async def analyze(self, source: str, path: str, target: str | None = None) -> ModuleReport:
        async with self._lock:
            try:
                return await self._analyze(source, path, target)
            except WorkerFailure as failure:
                message = f"Running this module for analysis {failure.message}"
                if failure.line is not None:
                    message += f" (at line {failure.line})"
                diagnostic = failure_diagnostic("DSL002", path, source, message + ".", failure.line)
                return ModuleReport(path, diagnostics=[diagnostic])
            except asyncio.CancelledError:
                self._kill_now()
                raise

    async def close(self) -> None:
        """Asks the child to finish (EOF on its stdin), killing it if it does not."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 2.0)
            except asyncio.TimeoutError:
                proc.kill()
        await self._reap(proc)

    # -- internals

    async def _analyze(self, source: str, path: str, target: str | None) -> ModuleReport:
        proc = await self._ensure_started()
        assert proc.stdin is not None and proc.stdout is not None
        rid = next(self._ids)
        self._stderr.clear()
        request = {"id": rid, "op": "analyze", "source": source, "path": path, "target": target}
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            await proc.stdin.drain()
            response = await asyncio.wait_for(self._read_response(proc, rid), self.timeout)
        except asyncio.TimeoutError:
            line = await self._dump_and_kill(proc, path)
            raise WorkerFailure(f"timed out after {_format_seconds(self.timeout)} s", line) from None
        except (ConnectionError, EOFError, asyncio.IncompleteReadError, ValueError):
            raise await self._died(proc, path) from None
        if "report" in response:
            return ModuleReport.from_dict(response["report"])
        error = response.get("error") or {}
        if error.get("kind") == "memory":
            await self._reap(proc)  # the child exits by itself after running out of memory
            message = (
                f"ran out of memory (limit {self.memory_mb} MB)"
                if self.memory_mb > 0
                else "ran out of memory"
            )
            raise WorkerFailure(message, error.get("line"))
        raise WorkerFailure(error.get("message", "failed"), error.get("line"))

    async def _read_response(self, proc: asyncio.subprocess.Process, rid: int) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise EOFError
            message = json.loads(raw)
            if message.get("id") == rid:
                return message

    async def _ensure_started(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        if self._proc is not None:
            await self._reap(self._proc)
            self.restarts += 1
        env = dict(os.environ if self._env is None else self._env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._stderr.clear()
        proc = await asyncio.create_subprocess_exec(
            self._python, "-m", "lsp.worker", "--memory-mb", str(self.memory_mb),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, cwd=self._cwd, limit=_LINE_LIMIT,
        )  # fmt: skip
        self._proc = proc
        self._drains[proc] = asyncio.ensure_future(self._drain_stderr(proc))
        try:
            assert proc.stdout is not None
            hello = await asyncio.wait_for(proc.stdout.readline(), STARTUP_TIMEOUT_S)
            if not hello or not json.loads(hello).get("ready"):
                raise EOFError
        except (asyncio.TimeoutError, EOFError, ValueError):
            if proc.returncode is None:
                proc.kill()
            await self._reap(proc)
            self._proc = None
            tail = self._stderr_text().strip().splitlines()
            detail = f": {tail[-1]}" if tail else ""
            raise WorkerFailure(f"could not start the analysis worker{detail}") from None
        return proc

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """Keeps the stderr pipe from filling up; remembers only the recent tail."""
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(8192):
            if proc is not self._proc:
                continue
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL_BYTES]

    def _stderr_text(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    async def _dump_and_kill(self, proc: asyncio.subprocess.Process, path: str) -> int | None:
        if hasattr(signal, "SIGUSR1") and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(_DUMP_GRACE_S)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await self._reap(proc)
        return _crash_line(self._stderr_text(), path)

    async def _died(self, proc: asyncio.subprocess.Process, path: str) -> WorkerFailure:
        try:
            returncode: int | None = await asyncio.wait_for(proc.wait(), 5.0)
        except asyncio.TimeoutError:
            proc.kill()
            returncode = None
        await self._reap(proc)
        stderr = self._stderr_text()
        return WorkerFailure(_describe_exit(returncode, stderr), _crash_line(stderr, path))

    async def _reap(self, proc: asyncio.subprocess.Process) -> None:
        """Waits for a dead or dying child and its stderr, so no pipe or zombie is left."""
        await proc.wait()
        drain = self._drains.pop(proc, None)
        if drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(drain, 1.0)
        if proc.stdin is not None:
            proc.stdin.close()

    def _kill_now(self) -> None:
        """Cancellation path: must not await, so the child is killed and reaped in the background."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        self.restarts += 1
        _background.add(task := asyncio.ensure_future(self._reap(proc)))
        task.add_done_callback(_background.discard)


_background: set[asyncio.Future[None]] = set()


if __name__ == "__main__":
    sys.exit(child_main())
