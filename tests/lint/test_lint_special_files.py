"""Lint reads only regular files up to a size limit; anything else is a DSL002, never a hang."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lint_helpers import copy_data, run_lint

from lsp.analysis import MAX_SOURCE_BYTES


@pytest.mark.parametrize("mode", [["--no-exec"], []], ids=["no-exec", "exec"])
def test_fifo_device_and_huge_files_are_skipped_with_a_diagnostic(project: Path, mode: list[str]) -> None:
    copy_data(project, "b_bad.py")
    os.mkfifo(project / "fifo.py")
    (project / "zero.py").symlink_to("/dev/zero")
    with open(project / "huge.py", "wb") as handle:
        handle.truncate(MAX_SOURCE_BYTES + 1)  # sparse: no disk space used
    run = run_lint(project, *mode, "--format", "json", ".", timeout=60)
    found = {d["path"]: (d["code"], d["line"], d["message"]) for d in run.json()}
    assert found.keys() == {"b_bad.py", "fifo.py", "huge.py", "zero.py"} - ({"b_bad.py"} if mode else set())
    assert found["fifo.py"][:2] == ("DSL002", 1) and "named pipe" in found["fifo.py"][2]
    assert found["zero.py"][:2] == ("DSL002", 1) and "character device" in found["zero.py"][2]
    assert found["huge.py"][:2] == ("DSL002", 1) and "too large" in found["huge.py"][2]
    assert run.returncode == 1


def test_fifo_named_on_the_command_line(project: Path) -> None:
    project.mkdir()
    os.mkfifo(project / "fifo.py")
    (item,) = run_lint(project, "--no-exec", "--format", "json", "fifo.py", timeout=60).json()
    assert (item["code"], item["line"]) == ("DSL002", 1)


def test_a_workspace_dsl_package_is_not_imported_by_lint(project: Path) -> None:
    copy_data(project, "b_bad.py")
    (project / "dsl").mkdir()
    (project / "dsl" / "__init__.py").write_text(
        "from pathlib import Path\nPath(__file__).parent.with_name('imported.marker').write_text('x')\n"
    )
    run = run_lint(project, "--no-exec", "--exclude", "dsl", "--format", "json", ".")
    assert run.returncode == 0, run.stderr
    assert not (project / "imported.marker").exists()
