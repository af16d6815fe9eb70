"""Renders lint results for people (text), programs (json), CI annotations (github) and SARIF.

Every renderer reads the same `FileResult`s and turns `Diagnostic`s into its form in one
place. Paths are shown relative to the current directory when they are inside it. Columns
are 1-based in every output (the model is 0-based), as ruff and the GitHub and SARIF
specifications count them; end columns point one past the last character.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from dsl.diagnostics import CATALOGUE, Diagnostic, Severity
from lsp.lint.runner import FileResult


def display_path(path: str, cwd: Path) -> str:
    """`path` relative to `cwd` with forward slashes when inside it, else absolute."""
    absolute = Path(path) if os.path.isabs(path) else cwd / path
    try:
        return absolute.relative_to(cwd).as_posix()
    except ValueError:
        return absolute.as_posix()


def ordered(results: Sequence[FileResult], cwd: Path) -> Iterator[tuple[str, Diagnostic]]:
    """(display path, diagnostic) pairs sorted by path, line, column and code."""
    pairs = [(display_path(d.range.file, cwd), d) for r in results for d in r.diagnostics]
    pairs.sort(key=lambda p: (p[0], p[1].range.line, p[1].range.column, p[1].code))
    return iter(pairs)


def _plural(count: int, word: str) -> str:
    if word == "info":
        return f"{count} info"
    return f"{count} {word}" + ("" if count == 1 else "s")


def summary(results: Sequence[FileResult]) -> str:
    diagnostics = [d for r in results for d in r.diagnostics]
    if not diagnostics:
        return f"All checks passed ({_plural(len(results), 'file')})."
    counts = [
        _plural(n, severity.value)
        for severity in Severity
        if (n := sum(d.severity is severity for d in diagnostics))
    ]
    files = len({d.range.file for d in diagnostics})
    return (
        f"Found {_plural(len(diagnostics), 'diagnostic')} ({', '.join(counts)}) in {_plural(files, 'file')}."
    )


def cache_note(results: Sequence[FileResult]) -> str | None:
    """How many files' results came from the cache (said on stderr, so that the report itself
    is the same whether or not they did); None when none did."""
    cached = sum(r.cached for r in results)
    if not cached:
        return None
    return f"kdsl lint: {cached} of {_plural(len(results), 'file')} unchanged, results from the cache"


def render_text(results: Sequence[FileResult], cwd: Path) -> str:
    lines = []
    for path, d in ordered(results, cwd):
        line, column, _, _ = d.range.one_based
        lines.append(f"{path}:{line}:{column}: {d.code} {d.message}")
        for related in d.related:
            rel_line, rel_column, _, _ = related.range.one_based
            where = f"{display_path(related.range.file, cwd)}:{rel_line}:{rel_column}"
            lines.append(f"  note: {where}: {related.message}")
    lines.append(summary(results))
    return "\n".join(lines) + "\n"


def _url(code: str) -> str | None:
    rule = CATALOGUE.get(code)
    return rule.url if rule else None


def render_json(results: Sequence[FileResult], cwd: Path) -> str:
    items = []
    for path, d in ordered(results, cwd):
        line, column, end_line, end_column = d.range.one_based
        items.append({
            "path": path,
            "line": line,
            "column": column,
            "end_line": end_line,
            "end_column": end_column,
            "code": d.code,
            "severity": d.severity.value,
            "message": d.message,
            "url": _url(d.code),
            "related": [
                {
                    "path": display_path(rel.range.file, cwd),
                    **dict(zip(("line", "column", "end_line", "end_column"), rel.range.one_based)),
                    "message": rel.message,
                }
                for rel in d.related
            ],
        })  # fmt: skip
    return json.dumps(items, indent=2) + "\n"


_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_github_data(text: str) -> str:
    """Escapes a workflow-command message (`%`, CR, LF), as the Actions toolkit does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_github_property(text: str) -> str:
    """Escapes a workflow-command property value: the message escapes plus `:` and `,`."""
    return escape_github_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(results: Sequence[FileResult], cwd: Path) -> str:
    lines = []
    for path, d in ordered(results, cwd):
        line, column, end_line, end_column = d.range.one_based
        props = {"file": path, "line": line, "col": column, "endLine": end_line, "endColumn": end_column,
                 "title": d.code}
        prop_text = ",".join(f"{k}={escape_github_property(str(v))}" for k, v in props.items())
        lines.append(f"::{_GITHUB_LEVEL[d.severity]} {prop_text}::{escape_github_data(d.message)}")
    return "".join(line + "\n" for line in lines)


def render(output_format: str, results: Sequence[FileResult], cwd: Path) -> str:
    if output_format == "sarif":
        from lsp.lint.sarif import render_sarif

        return render_sarif(results, cwd)
    renderers = {"text": render_text, "json": render_json, "github": render_github}
    return renderers[output_format](results, cwd)
