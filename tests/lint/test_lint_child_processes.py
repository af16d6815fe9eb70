"""Processes a checked module starts cost nothing beyond its time limit and never outlive lint."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from lint_helpers import copy_data, run_lint

from lsp.sandbox import is_alive

TIMEOUT_S = 2


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if is_alive(p)]


def _kill(pids: list[int]) -> None:
    for pid in _alive(pids):
        os.kill(pid, signal.SIGKILL)


def test_a_hang_with_a_child_costs_only_the_time_limit(project: Path) -> None:
    copy_data(project, "spawns_and_hangs.py", "b_bad.py")
    try:
        started = time.monotonic()
        run = run_lint(project, "--timeout", str(TIMEOUT_S), "--format", "json", ".")
        elapsed = time.monotonic() - started
        found = [(d["path"], d["code"]) for d in run.json()]
        assert found == [("b_bad.py", "DSL001"), ("spawns_and_hangs.py", "DSL002")]
        assert f"timed out after {TIMEOUT_S} s" in run.json()[1]["message"]
        assert elapsed < TIMEOUT_S + 8, elapsed  # start-up and warm-up included; the child was not waited for
        assert _alive(_pids(project / "spawned.pids")) == []
    finally:
        _kill(_pids(project / "spawned.pids"))


def test_children_and_daemons_do_not_outlive_lint(project: Path) -> None:
    copy_data(project, "spawns_many.py")
    try:
        run = run_lint(project, "--format", "json", ".")
        assert (run.returncode, run.json()) == (0, []), run.stderr
        pids = _pids(project / "many.pids")
        assert len(pids) == 52
        assert _alive(pids) == []
    finally:
        _kill(_pids(project / "many.pids"))
