"""Run on GPU as an operation of the analysis worker: contained like an analysis.

Without a GPU a run must say so, and never run the module. The containment tests need the
module's own code to run inside a GPU run, which `dsl.run_function` only lets happen once it
has found a GPU; on machines without one they run the worker with `fake_driver/` first on
its `PYTHONPATH`, a stand-in for cuda-bindings that reports one device and refuses every
allocation and launch. Everything else (the worker, its processes, `dsl.run_function`) is
the real one.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from process_helpers import (
    await_gone,
    children_module,
    daemon_module,
    hang_with_child_module,
    kill_all,
    pids_in,
)

from dsl.runtime import driver
from lsp.sandbox import is_alive
from lsp.worker import AnalysisWorker

TIMEOUT_S = 2.0
MEMORY_MB = 2048
FAKE_DRIVER = Path(__file__).parent / "fake_driver"
SAXPY = (Path(__file__).parents[1] / "lsp" / "data" / "saxpy.py").read_text()
MARKER = "from pathlib import Path\nPath(__file__).with_name('ran.marker').write_text('ran')\n"


def fake_gpu_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_DRIVER), env.get("PYTHONPATH")) if p)
    return env


@pytest.fixture
async def fake_gpu_worker() -> AsyncIterator[AnalysisWorker]:
    worker = AnalysisWorker(timeout=TIMEOUT_S, memory_mb=MEMORY_MB, env=fake_gpu_env())
    yield worker
    await worker.close()


@pytest.mark.skipif(driver.available(), reason="a GPU is attached: tests/lsp covers a real run")
async def test_without_a_gpu_a_run_says_so_and_runs_nothing(worker: AnalysisWorker, tmp_path: Path) -> None:
    path = str(tmp_path / "marks.py")
    result = await worker.run_on_gpu(MARKER + SAXPY, path, "run_saxpy")
    assert (result["ok"], result["error"]) == (False, "no_gpu")
    assert result["message"].startswith("no NVIDIA GPU driver found (")
    assert not (tmp_path / "ran.marker").exists()
    assert await await_gone([worker.gpu_run_pids[path]]) == []


async def test_a_hang_with_a_child_holding_stderr_costs_only_the_time_limit(
    fake_gpu_worker: AnalysisWorker, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    path = str(tmp_path / "hang.py")
    try:
        await fake_gpu_worker.start()
        started = time.monotonic()
        result = await fake_gpu_worker.run_on_gpu(hang_with_child_module(pid_file), path, "run_it")
        elapsed = time.monotonic() - started
        # stopped inside the busy loop: on `while True:` (line 4) or on its `pass` (line 5)
        assert result in ({"ok": False, "error": "timeout", "message": f"timed out after 2 s (at line {line})"}
                          for line in (4, 5))
        assert elapsed < TIMEOUT_S + 8, elapsed  # the child holding the pipe is not waited for
        assert len(pids_in(pid_file)) == 1
        assert await await_gone([*pids_in(pid_file), fake_gpu_worker.gpu_run_pids[path]]) == []
    finally:
        kill_all(pids_in(pid_file))


async def test_cancelling_a_run_kills_its_process_tree(fake_gpu_worker: AnalysisWorker, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    path = str(tmp_path / "spawns.py")
    source = daemon_module(pid_file) + "while True:\n    pass\n"  # a child in a new session, a setsid daemon
    try:
        await fake_gpu_worker.start()
        zygote = fake_gpu_worker.pid
        run = asyncio.ensure_future(fake_gpu_worker.run_on_gpu(source, path, "run_it"))
        for _ in range(200):
            if len(pids_in(pid_file)) == 2 or run.done():
                break
            await asyncio.sleep(0.02)
        assert len(pids_in(pid_file)) == 2 and not run.done()
        tree = [*pids_in(pid_file), fake_gpu_worker.gpu_run_pids[path]]
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert await await_gone(tree, within_s=2.0) == []
        report = await fake_gpu_worker.analyze("x = 1\n", str(tmp_path / "next.py"))
        assert report.all_diagnostics() == []
        assert (fake_gpu_worker.pid, fake_gpu_worker.restarts) == (zygote, 0)  # a cancel restarts nothing
    finally:
        kill_all(pids_in(pid_file))


async def test_what_a_finished_run_started_dies_with_it(fake_gpu_worker: AnalysisWorker, tmp_path: Path) -> None:
    source = children_module(tmp_path / "many", 20) + daemon_module(tmp_path / "daemon")
    path = str(tmp_path / "leaves.py")
    try:
        result = await fake_gpu_worker.run_on_gpu(source, path, "missing")
        assert result == {
            "ok": False, "message": f"no @dsl.jit function 'missing' in {path}",
            "median_ms": None, "bandwidth_gbs": None, "correct": None,
        }  # fmt: skip
        pids = pids_in(tmp_path / "many") + pids_in(tmp_path / "daemon")
        assert len(pids) == 22
        assert await await_gone([*pids, fake_gpu_worker.gpu_run_pids[path]]) == []
    finally:
        kill_all(pids_in(tmp_path / "many") + pids_in(tmp_path / "daemon"))


async def test_a_gpu_run_caps_its_data_segment_not_its_address_space(
    fake_gpu_worker: AnalysisWorker, tmp_path: Path
) -> None:
    """CUDA reserves far more address space than it uses, so a GPU run gets RLIMIT_DATA instead."""
    limits = tmp_path / "limits"
    source = (
        "import resource\n"
        f"open({str(limits)!r}, 'w').write(repr((resource.getrlimit(resource.RLIMIT_DATA),"
        " resource.getrlimit(resource.RLIMIT_AS))))\n"
    )
    await fake_gpu_worker.run_on_gpu(source, str(tmp_path / "limits.py"), "missing")
    cap = MEMORY_MB * 1024 * 1024
    assert eval(limits.read_text()) == ((cap, cap), resource.getrlimit(resource.RLIMIT_AS))


async def test_a_run_reaches_the_device_and_its_refusal_is_the_answer(
    fake_gpu_worker: AnalysisWorker, tmp_path: Path
) -> None:
    """The stand-in refuses the allocation: the answer is `run_function`'s own, in its shape."""
    result = await fake_gpu_worker.run_on_gpu(SAXPY, str(tmp_path / "saxpy.py"), "run_saxpy")
    assert result == {
        "ok": False, "message": "cuMemAlloc(4194304) failed: CUDA_ERROR_NOT_SUPPORTED (refused by the stand-in driver)",
        "median_ms": None, "bandwidth_gbs": None, "correct": None,
    }  # fmt: skip


async def test_a_run_gets_a_fresh_process_and_leaves_the_warm_analysis_alone(
    fake_gpu_worker: AnalysisWorker, tmp_path: Path
) -> None:
    path = str(tmp_path / "module.py")
    assert (await fake_gpu_worker.analyze("x = 1\n", path)).all_diagnostics() == []
    warm = fake_gpu_worker.run_pids[path]
    runs = []
    for _ in range(2):
        await fake_gpu_worker.run_on_gpu("x = 1\n", path, "missing")
        runs.append(fake_gpu_worker.gpu_run_pids[path])
    assert len({warm, *runs}) == 3
    assert await await_gone(runs) == []
    assert is_alive(warm)  # kept for the document's next version
    assert (await fake_gpu_worker.analyze("x = 2\n", path)).all_diagnostics() == []
    assert fake_gpu_worker.run_pids[path] == warm


def test_a_results_diagnostics_speak_only_about_its_file() -> None:
    """A run's process may write its answer; a DSL601 it places elsewhere moves to line 1."""
    from dsl.diagnostics import Diagnostic, SourceRange
    from lsp.worker import _confined_result

    source = "import dsl\n\nx = 1\n"
    here = Diagnostic.make("DSL601", "launch failed", SourceRange("/w/k.py", 3, 0, 3, 5))
    there = Diagnostic.make("DSL601", "launch failed", SourceRange("/w/other.py", 7, 0, 7, 5))
    answer = {"ok": False, "message": "m", "diagnostics": [here.to_dict(), there.to_dict(), {"code": 1}]}
    result = _confined_result(answer, "/w/k.py", source)
    assert [(d["code"], d["range"]["file"], d["range"]["line"]) for d in result["diagnostics"]] == [
        ("DSL601", "/w/k.py", 3),
        ("DSL601", "/w/k.py", 1),
    ]
    assert result["diagnostics"][1]["message"] == "launch failed (in /w/other.py, line 7)"
