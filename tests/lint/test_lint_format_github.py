"""`--format github`: workflow commands that GitHub Actions shows as annotations."""

from __future__ import annotations

from pathlib import Path

from lint_helpers import copy_data, lint

from dsl.diagnostics import Diagnostic, SourceRange
from lsp.lint.formats import escape_github_data, escape_github_property, render_github
from lsp.lint.runner import FileResult


def test_levels_and_properties(tmp_path: Path) -> None:
    path = tmp_path / "k.py"

    def at(line: int, col: int, end_line: int, end_col: int) -> SourceRange:
        return SourceRange(str(path), line, col, end_line, end_col)

    results = [
        FileResult(
            str(path),
            "",
            [
                Diagnostic.make("DSL202", "block (64, 1, 1) differs", at(3, 4, 3, 10)),
                Diagnostic.make("DSL501", "spills", at(5, 0, 6, 2)),
                Diagnostic.make("DSL502", "occupancy 25%\nraise the block", at(7, 0, 7, 1)),
            ],
        )
    ]
    assert render_github(results, tmp_path) == (
        "::error file=k.py,line=3,col=5,endLine=3,endColumn=11,title=DSL202::block (64, 1, 1) differs\n"
        "::warning file=k.py,line=5,col=1,endLine=6,endColumn=3,title=DSL501::spills\n"
        "::notice file=k.py,line=7,col=1,endLine=7,endColumn=2,title=DSL502::"
        "occupancy 25%25%0Araise the block\n"
    )


def test_escaping() -> None:
    assert escape_github_data("50%\r\n: a, b") == "50%25%0D%0A: a, b"
    assert escape_github_property("dir:a,b%.py") == "dir%3Aa%2Cb%25.py"


def test_end_to_end(project: Path) -> None:
    copy_data(project, "bad_block.py")
    run = lint(project, "--no-exec", "--format", "github", ".")
    assert run.returncode == 1
    assert run.stdout.startswith("::error file=bad_block.py,line=6,")
    assert ",title=DSL201::" in run.stdout
