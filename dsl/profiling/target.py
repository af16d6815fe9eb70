"""The process Nsight Compute profiles for `kdsl profile FILE::JIT`: one call, nothing else.

    python -m dsl.profiling.target REQUEST.json

The request names the file (and may carry its text: the editor's buffer), the jit function,
the `examples=` entry (or none: the inputs *Run on GPU* makes) and the GPU; the answer
(`{ok, message}`) goes to the request's `result` path. The call runs once to compile and
load, then once more between `cuProfilerStart` and `cuProfilerStop`, which is all ncu
measures.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def profiled_call(fn: Any, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> None:
    """`fn(*args)` once to warm up, then once inside the profiling range."""
    from dsl.runtime.driver import check, driver

    drv = driver()
    fn(*args, **(kwargs or {}))
    check(drv.cuCtxSynchronize(), "running the warm-up call")
    check(drv.cuProfilerStart(), "cuProfilerStart")
    try:
        fn(*args, **(kwargs or {}))
        check(drv.cuCtxSynchronize(), "running the profiled call")
    finally:
        check(drv.cuProfilerStop(), "cuProfilerStop")


def run_request(request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    from dsl.runtime.driver import on_context, primary_context
    from dsl.runtime.run import _synthesize, jit_function_of

    path = str(request["path"])
    sys.path.insert(0, os.path.dirname(path))
    source = request.get("source")  # the editor's buffer, which may be ahead of the file
    fn, problem = jit_function_of(source if isinstance(source, str) else Path(path).read_text(), path,
                                  str(request["function"]))
    if fn is None:
        return {"ok": False, "message": problem}
    with on_context(primary_context(int(request.get("device", 0)))):
        args, _, _ = _synthesize(fn, np.random.default_rng(0), int(request.get("example") or 0))
        profiled_call(fn, args)
    return {"ok": True, "message": ""}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    try:
        answer = run_request(request)
    except Exception as exc:  # the user's module or call failed: said in the answer, not lost
        traceback.print_exc()
        answer = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
    Path(request["result"]).write_text(json.dumps(answer))
    return 0 if answer["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
