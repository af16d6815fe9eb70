"""`--target` (and `target` in [tool.kdsl]) reaches every check: the static tier too, which
used to check for sm_90's limits whatever the target (fixture: target_limits.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_helpers import copy_data, lint

FOR_SM_86 = [
    "target_limits.py:13:56: DSL201 minnctapersm must be from 1 to 16 on sm_86, got 20",
    "target_limits.py:20:31: DSL203 block [2048, 1, 1] (2048 threads) exceeds sm_86 limits: at most 1024 threads "
    "and [1024, 1024, 64] per dimension",
    "Found 2 diagnostics (2 errors) in 1 file.",
]
FOR_SM_90 = [
    "target_limits.py:20:31: DSL203 block [2048, 1, 1] (2048 threads) exceeds sm_90 limits: at most 1024 threads "
    "and [1024, 1024, 64] per dimension",
    "Found 1 diagnostic (1 error) in 1 file.",
]


@pytest.mark.parametrize("execute", [[], ["--no-exec"]], ids=["with execution", "static tier only"])
def test_every_tier_checks_for_the_target(project: Path, execute: list[str]) -> None:
    copy_data(project, "target_limits.py")
    assert lint(project, *execute, "--target", "sm_86", ".").stdout.splitlines() == FOR_SM_86
    assert lint(project, *execute, ".").stdout.splitlines() == FOR_SM_90


def test_the_target_from_pyproject(project: Path) -> None:
    copy_data(project, "target_limits.py")
    (project / "pyproject.toml").write_text('[tool.kdsl]\ntarget = "sm_86"\n')
    assert lint(project, "--no-exec", ".").stdout.splitlines() == FOR_SM_86


def test_an_unknown_target_is_a_usage_error(project: Path) -> None:
    """Not a DSL002 on every file, as it was: the run stops before checking anything."""
    copy_data(project, "target_limits.py")
    bad = lint(project, "--target", "sm_99", ".")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "`--target` must be one of sm_80" in bad.stderr
    (project / "pyproject.toml").write_text('[tool.kdsl]\ntarget = "sm_99"\n')
    from_file = lint(project, ".")
    assert from_file.returncode == 2 and "`target` must be one of sm_80" in from_file.stderr
