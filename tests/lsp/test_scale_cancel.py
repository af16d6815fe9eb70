"""Typing while an analysis runs cancels it; the warm run process finishes it (its answer
dropped) and serves the next version, instead of being killed and leaving the next version
to compile every kernel of the file again in a fresh process.

The version cancelled here has a kernel that sleeps for 0.6 s while it is traced (see
test_scale_time_limit.py), so the cancel arrives while it runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsp.worker import AnalysisWorker
from tests.lsp.test_scale_analysis import kernels

SLEEPER = """

import time


@dsl.kernel
def sleeper(x: Tensor[f32, 1]):
    time.sleep(0.6)
    x[dsl.thread_idx.x] = 1.0
"""


async def test_a_cancelled_analysis_leaves_its_process_warm(tmp_path: Path) -> None:
    path = str(tmp_path / "typing.py")
    worker = AnalysisWorker(parallel=1, keep_warm=1, timeout=20)
    try:
        await worker.analyze(kernels(10), path)
        warm = worker.run_pids[path]
        typing = asyncio.ensure_future(worker.analyze(kernels(10, edited=2) + SLEEPER, path))
        await asyncio.sleep(0.3)
        typing.cancel()
        await asyncio.gather(typing, return_exceptions=True)
        latest = await worker.analyze(kernels(10, edited=4) + SLEEPER, path)
    finally:
        await worker.close()
    assert worker.run_pids[path] == warm  # the same process served all three versions
    assert [f.name for f in latest.functions] == [*(f"k{i}" for i in range(10)), "sleeper"]
    assert latest.all_diagnostics() == []
