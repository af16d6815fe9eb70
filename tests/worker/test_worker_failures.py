"""Everything user code can do to the worker process ends as a DSL002, and the worker serves on.

Each case runs a module that misbehaves at import time, then a good module through the
same `AnalysisWorker`, which must answer it normally (the failing run's process is gone).
"""

from __future__ import annotations

import pytest

from dsl.diagnostics import Severity
from lsp.worker import AnalysisWorker

GOOD = "SCALE = 2\n"
MEMORY_MB = 2048  # the `worker` fixture's limit

# source, what the message says, lines the "this line was running" note may point at
# (a loop may be caught at its head or in its body)
CASES = {
    "exit": ("import os\nos._exit(3)\n", "exited with code 3", ()),
    "segfault": ("import ctypes\n\nctypes.string_at(0)\n", "was killed by signal SIGSEGV", (3,)),
    "hang": ("x = 1\nwhile True:\n    x += 1\n", "timed out after 2 s", (2, 3)),
    "huge_allocation": ("buffer = bytearray(64 * 1024**4)\n", "ran out of memory (limit 2048 MB)", (1,)),
}
GROWTH = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024**2))\n"


async def _assert_serves_good_request(worker: AnalysisWorker) -> None:
    report = await worker.analyze(GOOD, "/project/good.py")
    assert report.path == "/project/good.py"
    assert report.all_diagnostics() == []


@pytest.mark.parametrize("case", list(CASES))
async def test_failure_is_dsl002_on_line_1_and_worker_recovers(worker: AnalysisWorker, case: str) -> None:
    source, message, running_lines = CASES[case]
    path = f"/project/{case}.py"
    report = await worker.analyze(source, path)
    (diagnostic,) = report.all_diagnostics()
    assert diagnostic.code == "DSL002"
    assert diagnostic.severity is Severity.ERROR
    assert (diagnostic.range.file, diagnostic.range.line, diagnostic.range.column) == (path, 1, 0)
    assert diagnostic.range.end_column == len(source.splitlines()[0])
    assert message in diagnostic.message
    if running_lines:
        (note,) = diagnostic.related
        assert note.range.line in running_lines
    else:
        assert diagnostic.related == ()
    await _assert_serves_good_request(worker)


async def test_gradual_growth_hits_the_memory_limit() -> None:
    """Filling 2 GB takes a few seconds, so this worker gets a longer time limit."""
    worker = AnalysisWorker(timeout=30.0, memory_mb=MEMORY_MB)
    try:
        report = await worker.analyze(GROWTH, "/project/grows.py")
        (diagnostic,) = report.all_diagnostics()
        assert (diagnostic.code, diagnostic.range.line) == ("DSL002", 1)
        assert "ran out of memory (limit 2048 MB)" in diagnostic.message
        await _assert_serves_good_request(worker)
    finally:
        await worker.close()


async def test_sys_exit_at_top_level(worker: AnalysisWorker) -> None:
    report = await worker.analyze("import sys\nsys.exit(4)\n", "/project/quits.py")
    assert [(d.code, d.range.line) for d in report.all_diagnostics()] == [("DSL002", 1)]
    assert "sys.exit(4)" in report.all_diagnostics()[0].message
    await _assert_serves_good_request(worker)


async def test_user_output_does_not_corrupt_the_protocol(worker: AnalysisWorker) -> None:
    noisy = (
        "import os, sys\n"
        'print(\'{"id": 1, "report": null}\')\n'
        "sys.stdout.write('no newline')\n"
        "sys.__stdout__.write('through the original stream\\n')\n"
        "sys.__stdout__.flush()\n"
        "os.write(1, b'straight to fd 1\\n')\n"
        "value = sys.stdin.read()\n"
        "assert value == '', value\n"
        "print('x' * 200_000)\n"
    )
    report = await worker.analyze(noisy, "/project/noisy.py")
    assert report.all_diagnostics() == []
    await _assert_serves_good_request(worker)


async def test_good_requests_reuse_one_warm_process(worker: AnalysisWorker) -> None:
    await worker.start()
    pid = worker.pid
    for _ in range(3):
        await _assert_serves_good_request(worker)
    assert worker.pid == pid
    assert worker.restarts == 0


async def test_a_failure_costs_only_its_own_run_process(worker: AnalysisWorker) -> None:
    """The worker itself never runs user code, so it outlives every failing module."""
    await _assert_serves_good_request(worker)
    first = worker.pid
    await worker.analyze("import os\nos._exit(1)\n", "/project/exit.py")
    await _assert_serves_good_request(worker)
    assert worker.pid == first
    assert worker.restarts == 0
    assert worker.run_pids["/project/exit.py"] != worker.run_pids["/project/good.py"]
