"""The analysis worker's process: stays warm, never runs user code, forks a contained run per request.

    parent (server or lint) --JSON lines--> zygote --fork--> run process (one per module path)

The zygote imports and warms up the compiler once, so a forked run starts compiling at once
(a fork costs a few milliseconds, a fresh interpreter half a second). It serves requests
concurrently, at most `--parallel` runs at a time, so a module that hangs holds up only
itself. Each run process is contained (`lsp.sandbox.contain`) before it runs anything and
holds three private pipes (request in, report out, stderr out) and no other descriptor the
zygote uses: user code can reach neither the parent's protocol nor another module's run.

With `--keep-warm N` (the editor) a run process stays alive after its report and serves the
next version of the same path, keeping its in-memory kernel cache (editing one kernel of
ten recompiles one). It is retired, and the next version forks afresh, when the run failed
or left a thread behind, or changed the compiler's modules, `sys.path`, the environment or
the working directory. Processes a kept run started are killed after every report. With
`--keep-warm 0` (lint) every module gets a fresh fork. Cancelling an analysis of a kept run
process (the document changed again) lets it finish while each of its steps takes less than
`SOFT_CANCEL_STEP_S`, its answer dropped: killing it would make the next version compile every
kernel of the file again in a fresh process. Anything else cancelled is killed at once.

A `run` request (the editor's "Run on GPU") always gets a fresh fork that serves it alone
and exits: it creates a CUDA context, which no later request may inherit. It is contained
like an analysis, under the same time limit, except that the memory limit caps its data
segment instead of its address space (see `lsp.sandbox`). The zygote itself never touches
CUDA, so every fork can still initialise it.

Time limits are enforced here, from the fork on. An analysis reports progress after running
the module's top level and after each function it compiles, and each step gets the whole
limit: the limit is for a step that hangs, and a file of a hundred kernels that compiles is
not a hang, however loaded the machine. A run that keeps making progress still ends at
`PROGRESS_CAP` limits. The zygote never waits for end-of-file on a pipe user code may have
handed down: only for the run's report line or its exit (pidfd).

Protocol with the parent, one JSON object per line:

    zygote -> parent  {"ready": true, "pid": 123}                                      once
    parent -> zygote  {"id": 1, "op": "analyze", "source": "...", "path": "...", "target": null,
                       "views": true, "assemble": true, "known": ["<digest>", ...]}  (lsp.report_wire;
                       "assemble": false: compiled to PTX only, lint assembles it)
    parent -> zygote  {"id": 2, "op": "run", "source": "...", "path": "...", "function": "f", "target": null}
    zygote -> parent  {"id": 1, "started": 456}                     when a run process takes it
    zygote -> parent  {"id": 1, "progress": true}         an analysis finished a step (limit restarts)
    zygote -> parent  {"id": 1, "traced_follows": true}, then the report as tracing left it, as one
                   line (`ModuleReport.to_dict()`; sent by an analysis with many functions to compile)
    zygote -> parent  {"id": 1, "report_follows": true}, then the report as one line (lsp.report_wire)
                   or {"id": 2, "result": {"ok": true, "message": "...", "median_ms": 0.1, ...}}
                   or {"id": 1, "error": {"kind": "timeout" | "memory" | "exit" | "crash" |
                                          "internal" | "sandbox", "message": "...", "line": 3}}
    parent -> zygote  {"id": 1, "op": "cancel"}       -> {"id": 1, "cancelled": true}
    parent -> zygote  end of file                     -> every run is killed; the zygote exits
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import selectors
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from lsp import sandbox
from lsp.run_module import describe_exit, run_process

_DUMP_GRACE_S = 0.2  # time faulthandler gets to write the stack of a timed-out run
PROGRESS_CAP = 30  # an analysis that keeps making progress still ends after this many time limits
SOFT_CANCEL_STEP_S = 1.0  # a cancelled analysis finishes only while each step takes less than this
_STDERR_TAIL_BYTES = 64 * 1024
_REPORT_LIMIT = 256 * 1024 * 1024
_POLL_S = 0.05  # without pidfds, how often exits are looked for
_WARM_UP = """\
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def warm(x: Tensor[f32, 1], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        x[i] = x[i] * 2.0

@dsl.jit
def run_warm(x: Tensor[f32, 1], n: Int32):
    warm(x, n).launch(grid=dsl.cdiv(n, 128), block=128)
"""


@dataclass
class _Run:
    rid: Any
    seq: int
    deadline: float  # the time limit, from the start or from the last progress
    cap: float = float("inf")  # the latest `deadline` any progress can push it to
    kill_at: float | None = None  # set once the stack dump was asked for
    timed_out: bool = False
    cancelled: bool = False
    header: dict[str, Any] | None = None  # set when the report line is next
    traced_next: bool = False  # set when the traced report's line is next


@dataclass
class _Runner:
    pid: int
    path: str
    req_w: int
    rep_r: int
    err_r: int
    pidfd: int | None
    outbox: bytearray = field(default_factory=bytearray)
    inbox: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    op: str = "analyze"  # or "run": one request on the GPU, then retired
    run: _Run | None = None
    retiring: bool = False  # will not take another request
    last_used: float = 0.0

    def fds(self) -> list[int]:
        return [fd for fd in (self.req_w, self.rep_r, self.err_r, self.pidfd) if fd is not None]


def _nonblocking(fd: int) -> int:
    os.set_blocking(fd, False)
    return fd


def _read_available(fd: int, into: bytearray, limit: int) -> bool:
    """Reads what is there now; False on end of file or when `limit` is reached."""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        into += chunk
        if len(into) > limit:
            return False


class Zygote:
    def __init__(self, proto_in: int, proto_out: BinaryIO, args: argparse.Namespace):
        self.proto_in = _nonblocking(proto_in)
        self.proto_out = proto_out
        self.timeout = args.timeout
        self.memory_mb = args.memory_mb
        self.parallel = max(1, args.parallel)
        self.keep_warm = max(0, args.keep_warm)
        self.policy = sandbox.Containment(memory_mb=args.memory_mb, strict=args.sandbox == "strict")
        self.gpu_policy = dataclasses.replace(self.policy, address_space=False)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proto_in, selectors.EVENT_READ, ("proto", None))
        self.inbox = bytearray()
        self.queue: list[dict[str, Any]] = []
        self.runners: dict[int, _Runner] = {}
        self.seq = 0
        self.eof = False
        self.exits: list[tuple[int, int]] = []  # (pid, wait status) reaped, not yet handled

    # -- the loop

    def serve(self) -> None:
        while not self.eof:
            self._start_queued()
            for key, _ in self.sel.select(self._next_timeout()):
                kind, runner = key.data
                if kind == "proto":
                    self._read_proto()
                elif kind == "report":
                    self._read_report(runner)
                elif kind == "stderr":
                    if not _read_available(runner.err_r, runner.stderr, 1 << 20):
                        self._unregister(runner.err_r)
                    del runner.stderr[:-_STDERR_TAIL_BYTES]
                elif kind == "request":
                    self._flush_request(runner)
            self._reap()
            self._check_deadlines()
        self.shutdown()

    def shutdown(self) -> None:
        """Kills every run and everything they started; called on end of file and on SIGTERM."""
        for runner in list(self.runners.values()):
            self._kill(runner)
        for runner in list(self.runners.values()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(runner.pid, 0)
            self._forget(runner)
        sandbox.sweep()

    def _next_timeout(self) -> float | None:
        times = [r.run.kill_at or r.run.deadline for r in self.runners.values() if r.run is not None]
        timeout = max(0.0, min(times) - time.monotonic()) if times else None
        if any(r.pidfd is None for r in self.runners.values()):
            timeout = _POLL_S if timeout is None else min(timeout, _POLL_S)
        return timeout

    def _send(self, message: dict[str, Any]) -> None:
        self.proto_out.write(json.dumps(message).encode() + b"\n")
        self.proto_out.flush()

    # -- requests from the parent

    def _read_proto(self) -> None:
        if not _read_available(self.proto_in, self.inbox, 1 << 31):
            self.eof = True
        while (end := self.inbox.find(b"\n")) >= 0:
            line, self.inbox = bytes(self.inbox[:end]), self.inbox[end + 1 :]
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if isinstance(request, dict):
                self._handle(request)

    def _handle(self, request: dict[str, Any]) -> None:
        rid, op = request.get("id"), request.get("op")
        if op in ("analyze", "run"):
            self.queue.append(request)
        elif op == "cancel":
            self._cancel(rid)
        elif op == "ping":
            self._send({"id": rid, "ok": True})
        else:
            self._send({"id": rid, "error": {"kind": "internal", "message": f"unknown op {op!r}", "line": None}})

    def _cancel(self, rid: Any) -> None:
        for request in self.queue:
            if request.get("id") == rid:
                self.queue.remove(request)
                self._send({"id": rid, "cancelled": True})
                return
        for runner in self.runners.values():
            run = runner.run
            if run is not None and run.rid == rid and not run.cancelled:
                run.cancelled = True
                if runner.op == "analyze" and self.keep_warm > 0 and not runner.retiring:
                    # Finishing costs less than the next version compiling everything in a fresh
                    # process: it goes on while it makes progress, its answer dropped.
                    run.deadline = min(run.deadline, time.monotonic() + SOFT_CANCEL_STEP_S)
                else:
                    self._kill(runner)
                self._send({"id": rid, "cancelled": True})
                return

    def _start_queued(self) -> None:
        busy = {(r.op, r.path) for r in self.runners.values() if r.run is not None}
        for request in list(self.queue):
            if len(busy) >= self.parallel:
                return
            slot = (str(request.get("op")), str(request.get("path")))
            if slot in busy:
                continue  # one analysis (and one GPU run) per path at a time; later ones wait
            self.queue.remove(request)
            busy.add(slot)
            self._start(request, slot[1])

    def _start(self, request: dict[str, Any], path: str) -> None:
        self.seq += 1
        request = {**request, "seq": self.seq}
        warm = None
        if request.get("op") == "analyze":
            warm = next(
                (r for r in self.runners.values()
                 if r.op == "analyze" and r.path == path and r.run is None and not r.retiring),
                None,
            )  # fmt: skip
        if warm is not None:
            runner = warm
            runner.outbox += json.dumps(request).encode() + b"\n"
            runner.stderr.clear()
            self._flush_request(runner)
        elif request.get("op") == "run":  # a fresh process, retired after its one answer
            self._evict_idle(keep=self.keep_warm)
            runner = self._fork(request, path, self.gpu_policy, keep=False)
            runner.op, runner.retiring = "run", True
        else:
            self._evict_idle(keep=self.keep_warm - 1)
            runner = self._fork(request, path, self.policy, keep=self.keep_warm > 0)
        now = time.monotonic()
        runner.run = _Run(request.get("id"), self.seq, now + self.timeout, now + self.timeout * PROGRESS_CAP)
        self._send({"id": request.get("id"), "started": runner.pid})

    def _evict_idle(self, keep: int) -> None:
        idle = sorted((r for r in self.runners.values() if r.run is None), key=lambda r: r.last_used)
        for runner in idle[: max(0, len(idle) - max(0, keep))]:
            runner.retiring = True
            self._kill(runner)

    # -- run processes

    def _fork(self, request: dict[str, Any], path: str, policy: sandbox.Containment, *, keep: bool) -> _Runner:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        err_r, err_w = os.pipe()
        private = {self.proto_in, self.proto_out.fileno(), self.sel.fileno(), req_w, rep_r, err_r}
        for other in self.runners.values():
            private.update(other.fds())
        pid = os.fork()
        if pid == 0:  # the run process: nothing of the zygote's may stay reachable
            try:
                for fd in private:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                run_process(request, req_r, rep_w, err_w, policy, keep=keep)
            finally:
                os._exit(70)
        for fd in (req_r, rep_w, err_w):
            os.close(fd)
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(pid)
        runner = _Runner(pid, path, _nonblocking(req_w), _nonblocking(rep_r), _nonblocking(err_r), pidfd)
        self.sel.register(runner.rep_r, selectors.EVENT_READ, ("report", runner))
        self.sel.register(runner.err_r, selectors.EVENT_READ, ("stderr", runner))
        if pidfd is not None:
            self.sel.register(pidfd, selectors.EVENT_READ, ("exit", runner))
        self.runners[pid] = runner
        return runner

    def _flush_request(self, runner: _Runner) -> None:
        try:
            while runner.outbox:
                written = os.write(runner.req_w, runner.outbox)
                del runner.outbox[:written]
        except BlockingIOError:
            pass
        except OSError:
            runner.outbox.clear()
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(runner.req_w)
        if runner.outbox:
            self.sel.register(runner.req_w, selectors.EVENT_WRITE, ("request", runner))

    def _read_report(self, runner: _Runner) -> None:
        if not _read_available(runner.rep_r, runner.inbox, _REPORT_LIMIT):
            self._unregister(runner.rep_r)
            if len(runner.inbox) > _REPORT_LIMIT and runner.run is not None:
                self._fail(runner, "internal", "sent a report larger than 256 MiB")
                return
        while (end := runner.inbox.find(b"\n")) >= 0:
            line, runner.inbox = bytes(runner.inbox[:end]), runner.inbox[end + 1 :]
            run = runner.run
            if run is not None and run.header is not None:
                self._answer(runner, run, run.header, line)
                return
            if run is not None and run.traced_next:
                run.traced_next = False
                if not run.cancelled:  # forwarded as it is, after a header line of ours
                    self.proto_out.write(json.dumps({"id": run.rid, "traced_follows": True}).encode() + b"\n")
                    self.proto_out.write(line + b"\n")
                    self.proto_out.flush()
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if run is None or not isinstance(message, dict) or message.get("seq") != run.seq:
                continue  # not an answer to the request in flight: dropped
            if message.get("report_follows"):
                run.header = message  # the next line is the report, forwarded as it is
                continue
            if message.get("traced_follows"):
                run.traced_next = True
                continue
            if "progress" in message:
                self._progress(run)
                continue
            self._answer(runner, run, message, None)
            return

    def _progress(self, run: _Run) -> None:
        """An analysis finished a step (the module's top level, or a function): its time limit
        counts again from now, up to its cap, and the parent's backstop is told so."""
        if run.cancelled:
            run.deadline = min(time.monotonic() + SOFT_CANCEL_STEP_S, run.cap)
        elif run.kill_at is None:
            run.deadline = min(time.monotonic() + self.timeout, run.cap)
            self._send({"id": run.rid, "progress": True})

    def _answer(self, runner: _Runner, run: _Run, header: dict[str, Any], payload: bytes | None) -> None:
        """Forwards a run's answer. A report goes on as one opaque line after a header line of
        ours: it was split at a newline, so it cannot carry a line of its own into the protocol."""
        runner.run = None
        runner.last_used = time.monotonic()
        runner.inbox.clear()  # anything after the answer is not trusted for the next request
        if not run.cancelled:
            if payload is not None:
                self.proto_out.write(json.dumps({"id": run.rid, "report_follows": True}).encode() + b"\n")
                self.proto_out.write(payload + b"\n")
                self.proto_out.flush()
            elif isinstance(header.get("result"), dict):  # a GPU run's answer: parsed, so one line
                self._send({"id": run.rid, "result": header["result"]})
            else:
                error = header.get("error") if isinstance(header.get("error"), dict) else {}
                self._send({"id": run.rid, "error": self._error(error)})
        if header.get("retire") or self.keep_warm == 0:
            runner.retiring = True
            self._kill(runner)

    def _error(self, error: dict[str, Any]) -> dict[str, Any]:
        kind = str(error.get("kind", "internal"))
        message = str(error.get("message", "failed"))
        if kind == "memory":
            message = f"ran out of memory (limit {self.memory_mb} MB)" if self.memory_mb > 0 else "ran out of memory"
        line = error.get("line")
        return {"kind": kind, "message": message, "line": line if isinstance(line, int) else None}

    def _fail(self, runner: _Runner, kind: str, message: str) -> None:
        run, runner.run = runner.run, None
        runner.retiring = True
        self._kill(runner)
        if run is not None and not run.cancelled:
            self._send({"id": run.rid, "error": {"kind": kind, "message": message, "line": None}})

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for runner in list(self.runners.values()):
            run = runner.run
            if run is None or run.timed_out:
                continue
            if run.cancelled:  # nobody waits for its answer: no stack to dump, no error to send
                if now >= run.deadline:
                    run.timed_out = runner.retiring = True
                    self._kill(runner)
                continue
            if run.kill_at is None and now >= run.deadline:
                run.kill_at = now + _DUMP_GRACE_S
                with contextlib.suppress(ProcessLookupError):
                    os.kill(runner.pid, signal.SIGUSR1)  # faulthandler: where it was running
            elif run.kill_at is not None and now >= run.kill_at:
                run.timed_out = True
                runner.retiring = True
                self._kill(runner)

    def _kill(self, runner: _Runner) -> None:
        sandbox.kill_group(runner.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner.pid, signal.SIGKILL)

    def _reap(self) -> None:
        collected, self.exits = [*self.exits, *sandbox.reap_any()], []
        exited = [(pid, status) for pid, status in collected if pid in self.runners]
        for pid, status in exited:
            runner = self.runners[pid]
            self._kill(runner)  # its process group, at once
            if runner.run is not None:
                self._read_report(runner)  # a report written just before exiting still counts
            _read_available(runner.err_r, runner.stderr, 1 << 20)
            run = runner.run
            if run is not None and not run.cancelled:
                self._send({"id": run.rid, "error": self._exit_error(run, status, runner.stderr, runner.path)})
            self._forget(runner)
        if exited:
            # What escaped the groups re-parented here. The sweep reaps as it goes; a run that
            # exits meanwhile is kept for the next round (lost, its exit would never be seen,
            # and its pidfd, readable for good, would keep the loop from ever sleeping).
            sandbox.sweep(protect=set(self.runners), reap=lambda: self.exits.extend(sandbox.reap_any()))

    def _exit_error(self, run: _Run, status: int, stderr: bytearray, path: str) -> dict[str, Any]:
        text = stderr.decode("utf-8", "replace")
        line = _crash_line(text, path)
        if run.timed_out:
            return {"kind": "timeout", "message": f"timed out after {self.timeout:g} s", "line": line}
        kind, message = describe_exit(os.waitstatus_to_exitcode(status), text)
        if kind == "memory":
            return self._error({"kind": "memory", "line": line})
        return {"kind": kind, "message": message, "line": line}

    def _unregister(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(fd)

    def _forget(self, runner: _Runner) -> None:
        self.runners.pop(runner.pid, None)
        for fd in runner.fds():
            self._unregister(fd)
            with contextlib.suppress(OSError):
                os.close(fd)


def _crash_line(stderr: str, path: str) -> int | None:
    """The innermost frame of `path` in a faulthandler dump (it lists the newest call first)."""
    import re

    for match in re.finditer(r'File "(?P<file>.*)", line (?P<line>\d+)', stderr):
        if match["file"] == path:
            return int(match["line"])
    return None


def _warm_up() -> None:
    """Loads MLIR and the passes once, so every fork starts warm; runs only kdsl's own code."""
    import dsl

    with contextlib.suppress(Exception):
        from dsl.compiler import api

        # Forked runs have no thread pool: the context must not expect one.
        api.shared_context().enable_multithreading(False)
    with contextlib.suppress(Exception):
        # To PTX: ptxas is a process of its own, of which nothing stays warm for a fork; finding
        # it (its release, from `ptxas --version`) and nvdisasm is done here, once for every fork.
        dsl.analyze_source(_WARM_UP, "<kdsl warm-up>", until="ptx")
        from dsl.compiler import toolchain

        toolchain.usable_ptxas()
        toolchain.nvdisasm_path()
    # The warm heap is shared with every fork: left to the collector, a run's first full
    # collection would write to every object's header and copy all those pages.
    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kdsl analysis worker")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--keep-warm", type=int, default=0)
    parser.add_argument("--sandbox", choices=sandbox.SANDBOXES, default=sandbox.SANDBOXES[0])
    args = parser.parse_args(argv)

    # Take the protocol off fds 0/1; the zygote's own output goes to stderr.
    proto_in = os.dup(0)
    proto_out = os.fdopen(os.dup(1), "wb")
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr

    import faulthandler

    faulthandler.enable()
    parent = os.getppid()
    sandbox.set_death_signal(signal.SIGTERM)  # the parent died: clean up, then exit
    if os.getppid() != parent:
        return 0
    sandbox.become_subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which stops us
    zygote = Zygote(proto_in, proto_out, args)

    def stop(signum: int, frame: object) -> None:
        zygote.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    _warm_up()
    zygote._send({"ready": True, "pid": os.getpid()})
    zygote.serve()
    return 0
