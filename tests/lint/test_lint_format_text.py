"""`--format text`: `path:line:col: CODE message` sorted by path and line, then a summary."""

from __future__ import annotations

import re
from pathlib import Path

from lint_helpers import copy_data, lint

from dsl.diagnostics import Diagnostic, Related, SourceRange
from lsp.lint.formats import render_text, summary
from lsp.lint.runner import FileResult


def _diag(path: Path, code: str, line: int, col: int = 0, related: tuple[Related, ...] = ()) -> Diagnostic:
    return Diagnostic.make(code, f"message {code}", SourceRange(str(path), line, col, line, col + 3), related)


def test_sorted_with_one_based_columns_notes_and_summary(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "sub" / "b.py"
    note = Related(SourceRange(str(a), 2, 4, 2, 8), "declared here")
    results = [
        FileResult(str(b), "", [_diag(b, "DSL501", 1)]),
        FileResult(str(a), "", [_diag(a, "DSL202", 9, 4, (note,)), _diag(a, "DSL001", 3)]),
        FileResult(str(tmp_path / "c.py"), "", []),
    ]
    assert render_text(results, tmp_path) == (
        "a.py:3:1: DSL001 message DSL001\n"
        "a.py:9:5: DSL202 message DSL202\n"
        "  note: a.py:2:5: declared here\n"
        "sub/b.py:1:1: DSL501 message DSL501\n"
        "Found 3 diagnostics (2 errors, 1 warning) in 2 files.\n"
    )


def test_summary_counts_severities_and_files(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    assert summary([FileResult(str(a), "", [])] * 2) == "All checks passed (2 files)."
    one_info = [FileResult(str(a), "", [_diag(a, "DSL103", 1)])]
    assert summary(one_info) == "Found 1 diagnostic (1 info) in 1 file."


def test_end_to_end_output_and_file(project: Path) -> None:
    copy_data(project, "bad_block.py", "bad_annotation.py", "clean.py")
    run = lint(project, "--no-exec", ".")
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"bad_annotation\.py:7:\d+: DSL102 .+", lines[0])
    assert re.fullmatch(r"bad_block\.py:6:\d+: DSL201 .+", lines[1])
    assert lines[-1] == "Found 2 diagnostics (1 error, 1 warning) in 2 files."
    to_file = lint(project, "--no-exec", "--output", "report.txt", ".")
    assert to_file.stdout == ""
    assert (project / "report.txt").read_text() == run.stdout
