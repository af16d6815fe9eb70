"""What `kdsl.run` tells the user about a run of a `@dsl.jit` function on the GPU.

The run itself is an operation of the analysis worker (`AnalysisWorker.run_on_gpu`): like
an analysis it runs the user's module, so it happens in a contained process forked for it
alone, under the worker's time limit, killed with everything it started when it ends, times
out or is cancelled. This module only turns its answer into the one line a user reads.
"""

from __future__ import annotations

from typing import Any

NO_GPU = "no NVIDIA GPU/driver found"


def describe(function: str, result: dict[str, Any]) -> str:
    """The one line a user reads after `kdsl.run`."""
    if result.get("error") == "no_gpu":
        detail = str(result.get("message", "")).removeprefix(NO_GPU).lstrip(": ")
        return f"{function}: {NO_GPU}: {detail}" if detail else f"{function}: {NO_GPU}"
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
