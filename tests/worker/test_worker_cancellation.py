"""Cancelling an analysis (the document changed) kills that run; the warm worker serves on."""

from __future__ import annotations

import asyncio

from lsp.sandbox import is_alive
from lsp.worker import AnalysisWorker


async def _gone(pid: int, within_s: float = 2.0) -> bool:
    for _ in range(int(within_s / 0.05)):
        if not is_alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_cancel_kills_the_run_and_the_next_request_works(worker: AnalysisWorker) -> None:
    await worker.start()
    zygote = worker.pid
    task = asyncio.ensure_future(worker.analyze("while True:\n    pass\n", "/project/hangs.py"))
    await asyncio.sleep(0.5)
    busy = worker.run_pids["/project/hangs.py"]
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the analysis should have been cancelled")
    assert await _gone(busy)
    report = await worker.analyze("x = 1\n", "/project/next.py")
    assert report.all_diagnostics() == []
    assert (worker.pid, worker.restarts) == (zygote, 0)  # no interpreter restart for a cancel


async def test_requests_from_several_tasks_are_served(worker: AnalysisWorker) -> None:
    sources = {f"/project/m{i}.py": f"value = {i}\n" for i in range(4)}
    reports = await asyncio.gather(*(worker.analyze(text, path) for path, text in sources.items()))
    assert [r.path for r in reports] == list(sources)
    assert all(r.all_diagnostics() == [] for r in reports)
