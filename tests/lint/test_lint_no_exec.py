"""`--no-exec` runs only the static checks: the checked module's code never runs."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import copy_data, lint


def test_no_exec_never_runs_the_module(project: Path) -> None:
    copy_data(project, "writes_marker.py", "bad_block.py")
    run = lint(project, "--no-exec", ".")
    assert not (project / "executed.marker").exists()
    assert " DSL201 " in run.stdout  # the static tier still reports


def test_without_no_exec_the_module_runs_in_a_worker(project: Path) -> None:
    """The control for the test above: the marker does appear when execution is allowed."""
    copy_data(project, "writes_marker.py")
    run = lint(project, "--jobs", "1", ".")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (project / "executed.marker").exists()


def test_runtime_errors_need_execution(project: Path) -> None:
    copy_data(project, "raises.py")
    assert lint(project, "--no-exec", ".").returncode == 0
    assert lint(project, "--jobs", "1", ".").returncode == 1
