"""Launching a function on the GPU for `kdsl.run`, in a one-shot child process.

Running a kernel runs the user's module, so, like analysis, it never happens in the server.
The analysis worker speaks only `analyze`, so a run gets its own short-lived interpreter
(`python -c`) with the same time limit, killed when the command is cancelled. The memory
limit is `RLIMIT_DATA`, not the worker's `RLIMIT_AS`: the CUDA driver reserves far more
virtual address space than it uses, and an address-space cap makes `cuInit` fail.

The child calls `dsl.run_function(source, path, function, target=...)` and writes its dict
(`ok, message, median_ms, bandwidth_gbs, correct`) as one JSON line on a private copy of
stdout, so whatever the user's code prints cannot corrupt the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

NO_GPU = "no NVIDIA GPU/driver found"

_CHILD = r"""
import json, os, resource, sys
request = json.loads(sys.stdin.readline())
answer = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr
if request["memory_mb"] > 0:
    limit = request["memory_mb"] * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
sys.path.insert(0, os.path.dirname(os.path.abspath(request["path"])))
try:
    import dsl
    result = dict(dsl.run_function(request["source"], request["path"], request["function"],
                                   target=request["target"]))
except BaseException as exc:
    kind = "no_gpu" if type(exc).__name__ == "NoGPUError" else "error"
    result = {"ok": False, "error": kind, "message": f"{type(exc).__name__}: {exc}"}
    if kind == "no_gpu":
        result["message"] = str(exc)
answer.write(json.dumps(result, default=str) + "\n")
answer.flush()
"""


async def run_in_child(
    source: str, path: str, function: str, *, target: str | None, timeout_s: float, memory_mb: int
) -> dict[str, Any]:
    """`dsl.run_function` in a fresh interpreter; never raises for what user code does."""
    request = {"source": source, "path": path, "function": function, "target": target, "memory_mb": memory_mb}
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(request).encode() + b"\n"), timeout_s)
    except asyncio.TimeoutError:
        _kill(proc)
        await proc.wait()
        return {"ok": False, "error": "timeout", "message": f"timed out after {timeout_s:g} s"}
    except asyncio.CancelledError:
        _kill(proc)
        _reaping.add(task := asyncio.ensure_future(proc.wait()))
        task.add_done_callback(_reaping.discard)
        raise
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = err.decode(errors="replace").strip().splitlines()
        detail = f": {tail[-1]}" if tail else ""
        return {
            "ok": False,
            "error": "crash",
            "message": f"the run exited with code {proc.returncode}{detail}",
        }


_reaping: set[asyncio.Future[int]] = set()


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def describe(function: str, result: dict[str, Any]) -> str:
    """The one line a user reads after `kdsl.run`."""
    if result.get("error") == "no_gpu":
        detail = str(result.get("message", "")).removeprefix(NO_GPU).lstrip(": ")
        return f"{function}: {NO_GPU}: {detail}" if detail else f"{function}: {NO_GPU}"
    if not result.get("ok"):
        return f"{function}: run failed: {result.get('message', 'unknown error')}"
    parts = []
    if result.get("median_ms") is not None:
        parts.append(f"median {result['median_ms']:.3f} ms")
    if result.get("bandwidth_gbs") is not None:
        parts.append(f"{result['bandwidth_gbs']:.1f} GB/s")
    correct = result.get("correct")
    parts.append("no reference declared" if correct is None else "correct" if correct else "WRONG result")
    text = f"{function}: " + ", ".join(parts)
    return text + (f" ({result['message']})" if result.get("message") else "")
