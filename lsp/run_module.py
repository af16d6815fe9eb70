"""Inside a run process: contain it, run the module, answer on the report pipe.

This is the only code that runs next to user code, in a process forked from the zygote for
one module path. It owns three descriptors: requests in (for later versions of the same
path, when the zygote keeps it warm), reports out, and stderr (fds 1 and 2 point there, so
`print` and C-level writes cannot reach the reports).

Two operations: `analyze` runs and compiles the module (`dsl.analyze_source`) and answers
a `ModuleReport` (sending in full only the function reports the parent does not already
hold: `lsp.report_wire`); `run` launches one `@dsl.jit` function of it on the request's GPU
(`dsl.run_function(..., device=N)`: synthesized inputs, median time, bandwidth, the reference check) and
answers that dict, or, with `"task": "tune"`, tunes one `@dsl.autotune` function
(`dsl.runtime.tune`) and answers its tables, or, with `"task": "interpret"`, runs the
function in the interpreter on the CPU (`dsl.interpreter.run.run_function`). A `run` process is always a fresh fork that
serves one request, since a CUDA context cannot be handed on; the zygote never initialises
CUDA itself, so the fork can.

What the report can be trusted for: user code runs in this process, so it can make this
module's own report say anything (write to the report pipe, patch the compiler here). It
cannot reach another module's report, the zygote or the parent; the parent also keeps only
diagnostics located in this module (`lsp.analysis.confine_report`).

`state_fingerprint` is the check behind reusing a warm run process: before the first run
it records the identity of every function, class and submodule bound in the compiler's
modules (and the members of their classes), in `builtins`, and `sys.path`, the environment
and the working directory; a run that changes any of them, or leaves a thread behind,
retires the process after its report. It is a check, not a proof: a run that mutates a
compiler's data in place, or patches code objects, is not caught, and can affect later
versions of the same file (never another file).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from typing import Any, NoReturn

from lsp import sandbox
from lsp.report_wire import ReportEncoder

_OUT_OF_MEMORY = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")
_WATCHED_PREFIXES = ("dsl", "lsp")


def describe_exit(returncode: int | None, stderr: str) -> tuple[str, str]:
    """(kind, message completing "Running this module for analysis ...") for a run that died."""
    if any(marker in stderr for marker in _OUT_OF_MEMORY):
        return "memory", "ran out of memory"
    if returncode is None:
        return "crash", "stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return "crash", f"was killed by signal {name}"
    return "exit", f"exited with code {returncode}"


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


TRACED_REPORT_FROM = 4  # functions still to lower and assemble for the traced report to be sent


def serve(request: dict[str, Any], on_progress: Any = None, on_traced: Any = None) -> dict[str, Any]:
    """Runs and compiles one module; every failure of user code becomes an `error` answer.
    `on_progress` is called after each step (`dsl.analyze_source`); `on_traced` with the
    report's JSON as tracing left it, when at least `TRACED_REPORT_FROM` functions are still
    to be lowered and assembled (opening a file of many kernels: the editor shows what the
    tracer found while ptxas runs; an edit of one kernel sends no such report)."""
    import dsl
    from dsl.compiler.artifacts import ModuleReport
    from dsl.module_analysis import ModuleRun

    def traced(report: ModuleReport, waiting: int) -> None:
        if on_traced is not None and waiting >= TRACED_REPORT_FROM:
            on_traced(json.dumps(report.to_dict()).encode())

    path = str(request.get("path"))
    known = request.get("known")
    known = {str(d) for d in known} if isinstance(known, list) else set()
    try:
        record = ModuleRun()
        with _module_dir_on_path(path):
            # lint assembles many files' PTX at once; the editor's kernels get their figures from
            # ptxas runs over many modules, their cubins when a view asks for one, and a file of
            # many kernels is lowered on two cores (lint runs files in parallel instead)
            until = "ptx" if request.get("assemble") is False else "cubin"
            views = request.get("views") is not False
            report = dsl.analyze_source(str(request.get("source", "")), path, target=request.get("target"),
                                        until=until, views=views, cubins_on_request=True,
                                        helpers=1 if views and (os.cpu_count() or 1) > 1 else 0, record=record,
                                        on_progress=on_progress, on_traced=traced)
        imported = None if record.import_failed else record.imported
        return {"report": _ENCODER.encode(report, known, imported)}
    except MemoryError as exc:
        kind, message, tb = "memory", "ran out of memory", exc.__traceback__
    except SystemExit as exc:
        kind, message, tb = "exit", f"called sys.exit({exc.code!r})", exc.__traceback__
    except BaseException as exc:
        kind, tb = "internal", exc.__traceback__
        message = f"failed inside the analyzer: {type(exc).__name__}: {exc}"
        traceback.print_exc()
    return {"error": {"kind": kind, "message": message, "line": _user_line(tb, path)}}


_ENCODER = ReportEncoder()  # this process's memory of the compiled functions it encoded


def run_on_gpu(request: dict[str, Any], work: Any = None) -> dict[str, Any]:
    """`dsl.run_function` (or `work`, called the same way) on the module, on the request's
    `device` (a GPU ordinal, default 0); every failure becomes `{ok: False, error, message}`.

    `error` is "no_gpu" when there is no GPU or driver, "error" for anything else that
    stops the run before `run_function` answers (its own answer reports compile, argument
    and launch failures, with DSL601 diagnostics at the launch)."""
    import dsl
    from dsl.runtime.driver import NoGPUError

    path = str(request.get("path"))
    with contextlib.suppress(Exception):  # before the module's folder is on sys.path, so a
        import cuda.bindings.driver  # noqa: F401  workspace's own `cuda/` is never what loads
    try:
        with _module_dir_on_path(path):
            source, function = str(request.get("source", "")), str(request.get("function"))
            device = request.get("device", 0)
            if work is not None:
                return dict(work(source, path, function, target=request.get("target")))
            return dict(dsl.run_function(source, path, function, target=request.get("target"), device=device))
    except NoGPUError as exc:
        return {"ok": False, "error": "no_gpu", "message": str(exc)}
    except MemoryError:
        return {"ok": False, "error": "memory", "message": "ran out of memory"}
    except SystemExit as exc:
        message, tb = f"called sys.exit({exc.code!r})", exc.__traceback__
    except BaseException as exc:
        message, tb = f"{type(exc).__name__}: {exc}", exc.__traceback__
        traceback.print_exc()
    line = _user_line(tb, path)
    return {"ok": False, "error": "error", "message": message + (f" (at line {line})" if line else "")}


def tune_on_gpu(request: dict[str, Any]) -> dict[str, Any]:
    """The editor's "Autotune on GPU": every config of one `@dsl.autotune` function measured
    again (`dsl.runtime.tune`), answered as `run_on_gpu` answers."""

    def tune(source: str, path: str, function: str, target: str | None = None) -> dict[str, Any]:
        from dsl.runtime.tune import tune_functions

        return tune_functions(source, path, [function], force=True)[0]

    return run_on_gpu(request, tune)


def profile_on_gpu(request: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The editor's "Profile on GPU": one call under Nsight Compute (`dsl.profiling`), answered
    as `run_on_gpu` answers, with the report as `profile` (its JSON form). ncu takes seconds:
    `progress()` is called every couple of seconds meanwhile, so the time limit counts from
    the latest sign of life."""
    stop = threading.Event()

    def alive() -> None:
        while not stop.wait(2.0):
            progress()

    pinger = threading.Thread(target=alive, daemon=True)
    pinger.start()
    try:
        from dsl.profiling.nsight import ProfilerUnavailable
        from dsl.profiling.run import ProfileFailed, profile_function
        from dsl.profiling.table import summary

        path = str(request.get("path"))
        with _module_dir_on_path(path):
            report = profile_function(path, str(request.get("function")), device=int(request.get("device") or 0),
                                      source=str(request.get("source", "")))
        kernels = "; ".join(f"{k.name}: {k.duration_us} us, {k.limiter}" for k in report.kernels)
        return {"ok": True, "message": f"on {report.device}: {kernels}", "profile": report.to_json(),
                "summaries": [summary(k) for k in report.kernels]}
    except ProfilerUnavailable as exc:
        return {"ok": False, "error": "no_profiler", "message": str(exc)}
    except ProfileFailed as exc:
        return {"ok": False, "error": "error", "message": str(exc)}
    except Exception as exc:
        traceback.print_exc()
        return {"ok": False, "error": "error", "message": f"{type(exc).__name__}: {exc}"}
    finally:
        stop.set()
        pinger.join()


def interpret_on_cpu(request: dict[str, Any]) -> dict[str, Any]:
    """The editor's "Run on CPU (interpreter)": one call in the interpreter on small synthesized
    inputs, checked against the reference, answered as `run_on_gpu` answers."""

    def interpret(source: str, path: str, function: str, target: str | None = None) -> dict[str, Any]:
        from dsl.interpreter.run import run_function

        return run_function(source, path, function, target=target)

    return run_on_gpu(request, interpret)


def state_fingerprint() -> dict[Any, Any]:
    """What a run must leave as it found it for the process to serve the next version."""
    marks: dict[Any, Any] = {
        "path": tuple(sys.path),
        "env": tuple(sorted(os.environ.items())),
        "cwd": os.getcwd(),
    }
    modules = {n: m for n, m in list(sys.modules.items()) if n.split(".")[0] in _WATCHED_PREFIXES}
    modules["builtins"] = sys.modules["builtins"]
    for name, module in modules.items():
        for attr, value in list(vars(module).items()):
            if not callable(value) and not isinstance(value, types.ModuleType):
                continue  # plain data (caches, counters) legitimately changes between runs
            marks[(name, attr)] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for member, inner in list(vars(value).items()):
                    marks[(name, attr, member)] = id(inner)
    return marks


def _unchanged(before: dict[Any, Any]) -> bool:
    """True when every mark recorded in `before` still holds (new modules and names are fine)."""
    if threading.active_count() > 1:
        return False
    with contextlib.suppress(OSError):
        if not _native_threads_gone():
            return False
    now = state_fingerprint()
    return all(now.get(key, _GONE) == value for key, value in before.items())


_GONE = object()
_THREAD_EXIT_S = 0.2  # how long a native thread that is ending gets to be gone


def _native_threads_gone() -> bool:
    """Whether this process is down to one thread, allowing a thread that is ending (a
    library's worker that has finished but not yet left the kernel's task list) a moment."""
    deadline = time.monotonic() + _THREAD_EXIT_S
    while len(os.listdir("/proc/self/task")) > 1:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _read_line(fd: int) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b""
        data += chunk
    return bytes(data)


def run_process(
    request: dict[str, Any], req_fd: int, rep_fd: int, err_fd: int, policy: sandbox.Containment, *, keep: bool
) -> NoReturn:
    """The body of a forked run process; never returns."""
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(err_fd, 1)
    os.dup2(err_fd, 2)
    os.close(err_fd)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    import faulthandler

    faulthandler.enable(file=sys.stderr)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)

    def answer(message: dict[str, Any], payload: bytes | None = None) -> None:
        data = json.dumps(message, default=str).encode() + b"\n"
        if payload is not None:  # already one line of JSON (`lsp.report_wire`)
            data += payload + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(rep_fd, view) :]

    try:
        sandbox.contain(policy)
    except (sandbox.SandboxError, OSError) as exc:
        answer({"seq": request["seq"], "error": {"kind": "sandbox", "message": f"could not be sandboxed: {exc}"}})
        os._exit(0)
    if request.get("op") == "run":  # a GPU run, a tuning ("tune") or an interpreter run, in a fresh process
        task = request.get("task")
        progress = functools.partial(answer, {"seq": request["seq"], "progress": True})
        result = (tune_on_gpu(request) if task == "tune" else interpret_on_cpu(request) if task == "interpret"
                  else profile_on_gpu(request, progress) if task == "profile" else run_on_gpu(request))
        try:
            answer({"seq": request["seq"], "retire": True, "result": result})
        except Exception as exc:  # a value of the result JSON cannot carry
            failed = {"ok": False, "error": "error", "message": f"sent a result that is not JSON ({exc})"}
            answer({"seq": request["seq"], "retire": True, "result": failed})
        os._exit(0)
    before = state_fingerprint() if keep else {}
    while True:
        response = serve(request, functools.partial(answer, {"seq": request["seq"], "progress": True}),
                         functools.partial(answer, {"seq": request["seq"], "traced_follows": True}))
        retire = not keep or "error" in response or not _unchanged(before)
        try:
            if "report" in response:  # a small header line, then the report as one line
                payload = response.pop("report")
                answer({"seq": request["seq"], "retire": retire, "report_follows": True}, payload)
            else:
                answer({"seq": request["seq"], "retire": retire, **response})
        except MemoryError:
            answer({"seq": request["seq"], "retire": True, "error": {"kind": "memory", "line": None}})
            os._exit(0)
        if retire:
            os._exit(0)
        sandbox.sweep()  # what this version started ends with its report
        line = _read_line(req_fd)
        if not line:
            os._exit(0)
        request = json.loads(line)
