"""`--select` / `--ignore` and their pyproject twins: prefix matching, the most specific wins."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_helpers import copy_data, lint

from dsl.diagnostics import Diagnostic, SourceRange
from lsp.analysis import filter_codes, is_selected, split_codes


@pytest.mark.parametrize(
    ("code", "select", "ignore", "expected"),
    [
        ("DSL201", [], [], True),
        ("DSL201", ["DSL2"], [], True),
        ("DSL101", ["DSL2"], [], False),
        ("DSL202", ["DSL2"], ["DSL202"], False),
        ("DSL201", ["DSL2"], ["DSL202"], True),
        ("DSL205", ["DSL205"], ["DSL2"], True),
        ("DSL201", ["DSL205"], ["DSL2"], False),
        ("DSL201", ["ALL"], ["DSL2"], False),
        ("DSL101", ["ALL"], ["DSL2"], True),
        ("DSL201", ["DSL2"], ["DSL2"], False),
    ],
)
def test_most_specific_selector_decides(
    code: str, select: list[str], ignore: list[str], expected: bool
) -> None:
    assert is_selected(code, select, ignore) is expected


def test_codes_split_on_commas_and_repeats() -> None:
    assert split_codes("dsl2, DSL301,") == ["DSL2", "DSL301"]
    assert split_codes(["DSL1,DSL2", "DSL5"]) == ["DSL1", "DSL2", "DSL5"]


def test_filter_keeps_order() -> None:
    def diag(code: str, line: int) -> Diagnostic:
        return Diagnostic.make(code, "m", SourceRange("f.py", line, 0, line, 1))

    kept = filter_codes([diag("DSL201", 1), diag("DSL102", 2), diag("DSL202", 3)], ["DSL2"])
    assert [d.code for d in kept] == ["DSL201", "DSL202"]


def test_cli_select_and_ignore(project: Path) -> None:
    copy_data(project, "bad_block.py", "bad_annotation.py")
    only_errors = lint(project, "--no-exec", "--format", "json", "--select", "DSL2", ".").json()
    assert {d["code"] for d in only_errors} == {"DSL201"}
    no_warnings = lint(project, "--no-exec", "--format", "json", "--ignore", "DSL1", ".").json()
    assert {d["code"] for d in no_warnings} == {"DSL201"}
    both = lint(project, "--no-exec", "--format", "json", "--select", "DSL1,DSL2", ".").json()
    assert {d["code"] for d in both} == {"DSL102", "DSL201"}


def test_pyproject_select_and_cli_override(project: Path) -> None:
    copy_data(project, "bad_block.py", "bad_annotation.py")
    (project / "pyproject.toml").write_text('[tool.kdsl]\nignore = ["DSL2"]\n')
    from_config = lint(project, "--no-exec", "--format", "json", ".").json()
    assert {d["code"] for d in from_config} == {"DSL102"}
    overridden = lint(project, "--no-exec", "--format", "json", "--ignore", "DSL1", ".").json()
    assert {d["code"] for d in overridden} == {"DSL201"}
