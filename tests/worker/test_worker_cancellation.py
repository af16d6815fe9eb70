"""Cancelling an analysis (the document changed) kills the user code; the next one starts fresh."""

from __future__ import annotations

import asyncio

from lsp.worker import AnalysisWorker


async def test_cancel_kills_the_child_and_the_next_request_works(worker: AnalysisWorker) -> None:
    await worker.start()
    busy_pid = worker.pid
    task = asyncio.ensure_future(worker.analyze("while True:\n    pass\n", "/project/hangs.py"))
    await asyncio.sleep(0.5)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the analysis should have been cancelled")
    report = await worker.analyze("x = 1\n", "/project/next.py")
    assert report.all_diagnostics() == []
    assert worker.pid not in (None, busy_pid)


async def test_requests_from_several_tasks_are_served_in_turn(worker: AnalysisWorker) -> None:
    sources = {f"/project/m{i}.py": f"value = {i}\n" for i in range(4)}
    reports = await asyncio.gather(*(worker.analyze(text, path) for path, text in sources.items()))
    assert [r.path for r in reports] == list(sources)
    assert all(r.all_diagnostics() == [] for r in reports)
