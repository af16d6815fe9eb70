"""Each file is analysed in its own process: what one file does cannot change another's result."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import copy_data, run_lint


def test_a_file_that_patches_the_compiler_does_not_hide_the_next_files_errors(project: Path) -> None:
    copy_data(project, "a_poison.py", "b_bad.py")
    alone = run_lint(project, "--format", "json", "b_bad.py")
    both = run_lint(project, "--jobs", "1", "--format", "json", "a_poison.py", "b_bad.py")
    assert alone.returncode == both.returncode == 1, both.stdout + both.stderr
    assert [(d["path"], d["code"], d["line"]) for d in both.json()] == [("b_bad.py", "DSL001", 4)]
