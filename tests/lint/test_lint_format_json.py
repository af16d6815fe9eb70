"""`--format json`: a list of flat objects with 1-based lines and columns and the rule's URL."""

from __future__ import annotations

import json
from pathlib import Path

from lint_helpers import copy_data, lint

from dsl.diagnostics import CATALOGUE, Diagnostic, SourceRange
from lsp.lint.formats import render_json
from lsp.lint.runner import FileResult


def test_fields_of_one_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    diag = Diagnostic.make("DSL203", "block too big", SourceRange(str(path), 4, 8, 4, 20))
    assert json.loads(render_json([FileResult(str(path), "", [diag])], tmp_path)) == [
        {
            "path": "k.py",
            "line": 4,
            "column": 9,
            "end_line": 4,
            "end_column": 21,
            "code": "DSL203",
            "severity": "error",
            "message": "block too big",
            "url": CATALOGUE["DSL203"].url,
            "related": [],
        }
    ]


def test_end_to_end_parses_and_is_sorted(project: Path) -> None:
    copy_data(project, "bad_block.py", "bad_annotation.py", "syntax_error.py.in", "clean.py")
    run = lint(project, "--no-exec", "--format", "json", ".")
    assert run.returncode == 1
    items = run.json()
    assert [(d["path"], d["code"], d["severity"]) for d in items] == [
        ("bad_annotation.py", "DSL102", "warning"),
        ("bad_block.py", "DSL201", "error"),
        ("syntax_error.py", "DSL003", "error"),
    ]
    for item in items:
        assert item["line"] >= 1 and item["column"] >= 1
        assert item["url"] == CATALOGUE[item["code"]].url


def test_clean_run_is_an_empty_list(project: Path) -> None:
    copy_data(project, "clean.py")
    run = lint(project, "--no-exec", "--format", "json", ".")
    assert (run.returncode, run.json()) == (0, [])
