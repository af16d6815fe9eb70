"""`lsp.analysis`: merging the two tiers, severity thresholds, reading files like Python does."""

from __future__ import annotations

from pathlib import Path

from dsl.compiler.artifacts import FunctionReport, ModuleReport
from dsl.diagnostics import Diagnostic, Severity, SourceRange
from lsp.analysis import at_least, merge, parse_severity, read_source, static_diagnostics


def _diag(code: str, line: int, message: str = "m") -> Diagnostic:
    return Diagnostic.make(code, message, SourceRange("k.py", line, 0, line, 4))


def test_merge_dedupes_by_code_and_range_and_sorts_by_position() -> None:
    static = [_diag("DSL201", 5, "static wording"), _diag("DSL102", 2)]
    report = ModuleReport(
        "k.py",
        functions=[
            FunctionReport("k", "kernel", _diag("DSL201", 5).range, None, [_diag("DSL201", 5, "compiler")])
        ],
        diagnostics=[_diag("DSL001", 9)],
    )
    merged = merge(static, report)
    assert [(d.code, d.range.line, d.message) for d in merged] == [
        ("DSL102", 2, "m"),
        ("DSL201", 5, "static wording"),
        ("DSL001", 9, "m"),
    ]


def test_severity_threshold() -> None:
    diags = [_diag("DSL103", 1), _diag("DSL102", 2), _diag("DSL201", 3)]
    assert [d.code for d in at_least(diags, "warning")] == ["DSL102", "DSL201"]
    assert [d.code for d in at_least(diags, Severity.INFO)] == ["DSL103", "DSL102", "DSL201"]
    assert parse_severity("WARN") is Severity.WARNING


def test_read_source_honours_coding_cookie_and_bom(tmp_path: Path) -> None:
    cookie, bom = tmp_path / "cookie.py", tmp_path / "bom.py"
    cookie.write_bytes(b"# coding: latin-1\nname = '\xe9'\n")
    bom.write_bytes(b"\xef\xbb\xbfname = 1\n")
    assert read_source(str(cookie)) == ("# coding: latin-1\nname = 'é'\n", [])
    assert read_source(str(bom)) == ("name = 1\n", [])


def test_static_diagnostics_report_syntax_errors_without_running() -> None:
    diagnostics = static_diagnostics("import os\nos._exit(1)\ndef f(:\n", "/project/broken.py")
    assert [(d.code, d.range.line) for d in diagnostics] == [("DSL003", 3)]
