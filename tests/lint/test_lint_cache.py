"""The lint cache: a second run reuses the results of unchanged files, and a change in a file's
text, in a module it imports, in the options or in the toolchain checks it again.

Each test has a cache folder of its own (`cache_dir` in conftest.py). Whether a file ran is
read from `counts_runs.py`, which appends a line to `runs.log` each time its top level runs;
what came from the cache is said on stderr.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from lint_helpers import copy_data, lint, run_lint

from dsl.compiler.toolchain import ptxas_path


def runs(project: Path) -> int:
    log = project / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_second_run_reuses_every_result(project: Path) -> None:
    copy_data(project, "counts_runs.py", "bad_block.py", "clean.py")
    first = lint(project, "--jobs", "1", ".")
    second = lint(project, "--jobs", "1", ".")
    assert (first.returncode, second.returncode) == (1, 1)
    assert second.stdout == first.stdout and " DSL201 " in first.stdout
    assert runs(project) == 1  # the second run did not run the module again
    assert "from the cache" not in first.stderr
    assert "kdsl lint: 3 of 3 files unchanged, results from the cache" in second.stderr


def test_a_changed_file_is_checked_again_and_only_it(project: Path) -> None:
    copy_data(project, "counts_runs.py", "bad_block.py")
    lint(project, "--jobs", "1", ".")
    with (project / "counts_runs.py").open("a") as source:
        source.write("# edited\n")
    again = lint(project, "--jobs", "1", ".")
    assert runs(project) == 2
    assert "1 of 2 files unchanged" in again.stderr


def test_a_changed_dependency_is_seen(project: Path) -> None:
    """block_from_helper.py imports block_helper.py: editing only the helper changes the result."""
    copy_data(project, "block_from_helper.py", "block_helper.py")
    clean = lint(project, "--jobs", "1", ".")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    helper = project / "block_helper.py"
    helper.write_text(helper.read_text().replace("BLOCK = 128", "BLOCK = 2048"))
    changed = lint(project, "--jobs", "1", ".")
    assert changed.returncode == 1
    assert "block_from_helper.py:18:31: DSL203 block [2048, 1, 1]" in changed.stdout
    assert "from the cache" not in changed.stderr  # the helper changed, and so did the launcher's dependency


def test_changed_options_check_again(project: Path) -> None:
    copy_data(project, "counts_runs.py", "target_limits.py")
    default = lint(project, "--jobs", "1", ".")
    for_sm_86 = lint(project, "--jobs", "1", "--target", "sm_86", ".")
    assert runs(project) == 2
    assert "exceeds sm_90 limits" in default.stdout
    assert "exceeds sm_86 limits" in for_sm_86.stdout and "from the cache" not in for_sm_86.stderr
    longer = lint(project, "--jobs", "1", "--target", "sm_86", "--timeout", "30", ".")
    assert runs(project) == 3 and "from the cache" not in longer.stderr
    static = lint(project, "--no-exec", ".")
    assert "from the cache" not in static.stderr
    assert runs(project) == 3  # --no-exec never runs it, cached or not
    assert "2 of 2 files unchanged" in lint(project, "--jobs", "1", "--target", "sm_86", ".").stderr


def test_another_toolchain_checks_again(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toolchain id covers ptxas: a different ptxas (here a wrapper of the same one, which
    compiles the same) makes every entry a miss."""
    real = ptxas_path()
    assert real is not None
    copy_data(project, "counts_runs.py", "target_limits.py")
    first = run_lint(project, "--jobs", "1", ".")
    assert "from the cache" not in first.stderr
    assert "2 of 2 files unchanged" in run_lint(project, "--jobs", "1", ".").stderr
    wrapper = tmp_path / "bin" / "ptxas"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("KDSL_PTXAS", str(wrapper))
    other = run_lint(project, "--jobs", "1", ".")  # a process of its own: the toolchain id is read once
    assert "from the cache" not in other.stderr
    assert other.stdout == first.stdout and runs(project) == 2


def test_a_failed_import_is_not_kept(project: Path) -> None:
    """A module that is missing now may appear: such a result is checked again next time."""
    copy_data(project, "imports_later.py")
    missing = lint(project, "--jobs", "1", ".")
    assert "imports_later.py:4:1: DSL001 ModuleNotFoundError" in missing.stdout
    (project / "appears_later.py").write_text('"""Now it exists."""\n')
    found = lint(project, "--jobs", "1", ".")
    assert found.returncode == 0, found.stdout
    assert "from the cache" not in found.stderr


def test_a_worker_failure_is_not_kept(project: Path) -> None:
    """A timeout depends on the machine as much as on the file: DSL002 is never kept."""
    copy_data(project, "hangs.py")
    first = lint(project, "--jobs", "1", "--timeout", "1", ".")
    second = lint(project, "--jobs", "1", "--timeout", "1", ".")
    assert " DSL002 " in first.stdout and " DSL002 " in second.stdout
    assert "from the cache" not in second.stderr


def test_no_cache_and_a_damaged_entry(project: Path, cache_dir: Path) -> None:
    copy_data(project, "counts_runs.py")
    lint(project, "--jobs", "1", ".")
    ignored = lint(project, "--jobs", "1", "--no-cache", ".")
    assert runs(project) == 2 and "from the cache" not in ignored.stderr
    entries = list((cache_dir / "lint").rglob("*.bin"))
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:-1] + b"x")  # no longer matches its digest
    damaged = lint(project, "--jobs", "1", ".")
    assert damaged.returncode == 0 and "from the cache" not in damaged.stderr
    assert runs(project) == 3
