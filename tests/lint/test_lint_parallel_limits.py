"""A file that hangs costs only its own time limit; the other files are still reported."""

from __future__ import annotations

import time
from pathlib import Path

from lint_helpers import copy_data, run_lint

TIMEOUT_S = 2


def test_hanging_file_becomes_dsl002_and_others_are_reported(project: Path) -> None:
    copy_data(project, "hangs.py", "raises.py", "clean.py")
    started = time.monotonic()
    run = run_lint(project, "--jobs", "2", "--timeout", str(TIMEOUT_S), "--format", "json", ".")
    elapsed = time.monotonic() - started
    items = run.json()
    assert [(d["path"], d["code"], d["line"]) for d in items] == [
        ("hangs.py", "DSL002", 1),
        ("raises.py", "DSL001", 4),
    ]
    assert f"timed out after {TIMEOUT_S} s" in items[0]["message"]
    assert items[0]["related"][0]["line"] == 3  # the loop that was running
    assert run.returncode == 1
    assert elapsed < TIMEOUT_S * 3 + 30  # bounded: the hang was cut off, not waited out


def test_timeout_from_pyproject(project: Path) -> None:
    copy_data(project, "hangs.py")
    (project / "pyproject.toml").write_text(f"[tool.kdsl]\ntimeout = {TIMEOUT_S}\n")
    (item,) = run_lint(project, "--format", "json", ".").json()
    assert f"timed out after {TIMEOUT_S} s" in item["message"]
