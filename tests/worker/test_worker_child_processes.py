"""Processes user code starts die with its run: a hang costs its time limit and nothing more,
nothing outlives the worker, and other modules keep compiling meanwhile."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_helpers import (
    await_gone,
    children_module,
    daemon_module,
    hang_with_child_module,
    kill_all,
    pids_in,
    wait_gone,
)

from lsp.worker import AnalysisWorker

TIMEOUT_S = 2.0


@pytest.mark.parametrize("keep_warm", [4, 0], ids=["editor", "lint"])
async def test_hang_with_a_child_holding_stderr_costs_only_the_time_limit(tmp_path: Path, keep_warm: int) -> None:
    pid_file = tmp_path / "pids"
    worker = AnalysisWorker(timeout=TIMEOUT_S, memory_mb=2048, keep_warm=keep_warm)
    try:
        await worker.start()
        started = time.monotonic()
        report = await worker.analyze(hang_with_child_module(pid_file), str(tmp_path / "hang.py"))
        elapsed = time.monotonic() - started
        (diagnostic,) = report.all_diagnostics()
        assert "timed out after 2 s" in diagnostic.message
        assert elapsed < TIMEOUT_S + 8, elapsed  # the child holding the pipe is not waited for
        assert await await_gone(pids_in(pid_file)) == []
    finally:
        kill_all(pids_in(pid_file))
        await worker.close()


@pytest.mark.parametrize("keep_warm", [4, 0], ids=["editor", "lint"])
async def test_children_and_daemons_die_with_the_run(tmp_path: Path, keep_warm: int) -> None:
    worker = AnalysisWorker(timeout=10.0, memory_mb=2048, keep_warm=keep_warm)
    files = {"many": children_module(tmp_path / "many", 50), "daemon": daemon_module(tmp_path / "daemon")}
    try:
        for name, source in files.items():
            report = await worker.analyze(source, str(tmp_path / f"{name}.py"))
            assert report.all_diagnostics() == []
        pids = pids_in(tmp_path / "many") + pids_in(tmp_path / "daemon")
        assert len(pids) == 52
        assert await await_gone(pids) == []  # after the report, not only after close
    finally:
        await worker.close()
        kill_all(pids_in(tmp_path / "many") + pids_in(tmp_path / "daemon"))


async def test_other_modules_compile_while_one_hangs(tmp_path: Path) -> None:
    worker = AnalysisWorker(timeout=TIMEOUT_S * 3, memory_mb=2048)
    try:
        await worker.start()
        hang = asyncio.ensure_future(worker.analyze("while True:\n    pass\n", str(tmp_path / "hang.py")))
        started = time.monotonic()
        for i in range(3):
            report = await worker.analyze(f"x = {i}\nraise ValueError('{i}')\n", str(tmp_path / f"m{i}.py"))
            assert [d.code for d in report.all_diagnostics()] == ["DSL001"]
        assert time.monotonic() - started < TIMEOUT_S
        assert not hang.done()
        assert "timed out" in (await hang).all_diagnostics()[0].message
    finally:
        await worker.close()


_OWNER = """
import asyncio, sys
from lsp.worker import AnalysisWorker

async def main():
    worker = AnalysisWorker(timeout=30, memory_mb=2048)
    await worker.analyze(sys.stdin.read(), sys.argv[1])
    print("analysed", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def test_nothing_outlives_a_killed_parent(tmp_path: Path) -> None:
    """The server or lint killed with SIGKILL: the worker notices and kills what the module left."""
    pid_file = tmp_path / "daemon"
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_OWNER), str(tmp_path / "daemon.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        assert owner.stdin is not None and owner.stdout is not None
        owner.stdin.write(daemon_module(pid_file) + "import time\ntime.sleep(60)\n")
        owner.stdin.close()
        deadline = time.monotonic() + 60
        while len(pids_in(pid_file)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = pids_in(pid_file)
        assert len(pids) == 2
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        assert wait_gone(pids, within_s=5.0) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
        kill_all(pids_in(pid_file))
