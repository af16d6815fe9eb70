"""What `kdsl.run` and `kdsl.runOnCpu` tell the user about a run of a `@dsl.jit` function.

The run itself is an operation of the analysis worker (`AnalysisWorker.run_on_gpu`, and
`interpret_on_cpu` for the interpreter): like an analysis it runs the user's module, so it
happens in a contained process forked for it alone, under the worker's time limit, killed with
everything it started when it ends, times out or is cancelled. This module only turns its
answer into the one line a user reads, and remembers (one server per process, as
`lsp.features.tuning` does) whether a GPU run found no GPU: from then on the lenses offer
"Run on CPU (interpreter)".
"""

from __future__ import annotations

from typing import Any

NO_GPU = "no NVIDIA GPU/driver found"
_DRIVER_SAYS = "no NVIDIA GPU driver found"  # how `dsl.runtime.driver.NoGPUError` begins
RUN_ON_CPU_TITLE = "Run on CPU (interpreter)"
_seen: dict[str, bool] = {"no_gpu": False}  # set on the main loop when a GPU run finds no GPU


def note_no_gpu() -> None:
    _seen["no_gpu"] = True


def no_gpu_seen() -> bool:
    """Whether a GPU run of this server found no GPU (the lenses then offer the interpreter)."""
    return _seen["no_gpu"]


def describe(function: str, result: dict[str, Any]) -> str:
    """The one line a user reads after `kdsl.run`."""
    if result.get("error") == "no_gpu":
        detail = str(result.get("message", "")).removeprefix(NO_GPU).lstrip(": ")
        detail = detail.removeprefix(_DRIVER_SAYS).lstrip()  # the driver's own opening words, not said twice
        if not detail:
            return f"{function}: {NO_GPU}"
        return f"{function}: {NO_GPU}{' ' if detail.startswith('(') else ': '}{detail}"
    if not result.get("ok"):
        return f"{function}: run failed: {result.get('message') or 'unknown error'}"
    parts = []
    if result.get("median_ms") is not None:
        parts.append(f"median {result['median_ms']:.3f} ms")
    if result.get("bandwidth_gbs") is not None:
        parts.append(f"{result['bandwidth_gbs']:.1f} GB/s")
    correct = result.get("correct")
    parts.append("no reference declared" if correct is None else "correct" if correct else "WRONG result")
    text = f"{function}: " + ", ".join(parts)
    return text + (f" ({result['message']})" if result.get("message") else "")


def describe_cpu(function: str, result: dict[str, Any]) -> str:
    """The one line a user reads after `kdsl.runOnCpu` (no timing: the CPU's says nothing)."""
    ran = result.get("ok") or result.get("correct") is False  # a wrong result still ran
    if not ran:
        return f"{function}: interpreter run failed: {result.get('message') or 'unknown error'}"
    return f"{function} on the CPU (interpreter): {result.get('message')}"
