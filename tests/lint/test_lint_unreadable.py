"""Files that cannot be read, decoded or parsed are diagnostics, not crashes (exit 1, not 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lint_helpers import copy_data, lint


def test_syntax_error_is_dsl003(project: Path) -> None:
    copy_data(project, "syntax_error.py.in", "clean.py")
    run = lint(project, "--format", "json", ".")
    assert run.returncode == 1
    (item,) = run.json()
    assert (item["path"], item["code"], item["line"]) == ("syntax_error.py", "DSL003", 3)


def test_bad_encoding_is_dsl003(project: Path) -> None:
    copy_data(project, "bad_encoding.py.in")
    run = lint(project, "--format", "json", ".")
    assert run.returncode == 1
    (item,) = run.json()
    assert (item["path"], item["code"], item["line"]) == ("bad_encoding.py", "DSL003", 1)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_dsl002(project: Path) -> None:
    copy_data(project, "clean.py")
    locked = project / "locked.py"
    locked.write_text("x = 1\n")
    locked.chmod(0)
    try:
        run = lint(project, "--format", "json", ".")
    finally:
        locked.chmod(0o644)
    assert run.returncode == 1
    (item,) = run.json()
    assert (item["path"], item["code"], item["line"]) == ("locked.py", "DSL002", 1)
    assert "Cannot read this file" in item["message"]


def test_unreadable_file_without_permission_checks(tmp_path: Path) -> None:
    """Reading a folder given as a file fails the same way for every user, root included."""
    from lsp.analysis import read_source

    source, problems = read_source(str(tmp_path))
    assert source is None
    assert [(d.code, d.range.line) for d in problems] == [("DSL002", 1)]
