"""Pure helpers the language server and `kdsl lint` share: read, check, merge, filter.

Both front ends produce diagnostics in two tiers: static checks that only parse the file
(safe for untrusted code, instant) and the compiler's report from the analysis worker. The
rules for combining them live here once, so the editor and CI never disagree about what a
file's diagnostics are. Nothing here imports pygls or starts a process.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterable, Sequence

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import CATALOGUE, Diagnostic, Related, Severity, SourceRange

SELECT_ALL = "ALL"


def line_range(path: str, source: str | None, line: int = 1) -> SourceRange:
    """The whole of 1-based `line` of `source` (an empty range when the file has no such line)."""
    lines = (source or "").splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return SourceRange(path, line, 0, line, len(text))


def failure_diagnostic(
    code: str, path: str, source: str | None, message: str, line: int | None = None
) -> Diagnostic:
    """A module-level diagnostic on line 1; `line`, when known, becomes a related location.

    Module-level failures (the worker died, the file cannot be read) belong to the whole
    file, so they sit on its first line; the line that was running, if we know it, is
    attached so editors and SARIF viewers can jump there.
    """
    related: tuple[Related, ...] = ()
    if line is not None and line >= 1:
        related = (Related(line_range(path, source, line), "this line was running"),)
    return Diagnostic.make(code, message, line_range(path, source, 1), related=related)


def read_source(path: str) -> tuple[str | None, list[Diagnostic]]:
    """Reads a Python file the way the interpreter does (PEP 263 coding cookie, BOM).

    Returns the text, or None and a diagnostic saying why it cannot be read (DSL002) or
    decoded (DSL003, which is what Python itself reports for a bad encoding).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return None, [failure_diagnostic("DSL002", path, None, f"Cannot read this file: {reason}.")]
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        return None, [failure_diagnostic("DSL003", path, None, f"Cannot decode this file: {exc}.")]
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, []


def static_diagnostics(source: str, path: str) -> list[Diagnostic]:
    """The AST-only tier: never runs user code, so it is safe in untrusted workspaces."""
    import dsl  # deferred: importing the compiler is the slow part of starting a front end

    try:
        return list(dsl.static_checks(source, path))
    except Exception as exc:  # a bug in the checks must not take the front end down
        return [failure_diagnostic("DSL002", path, source, f"The static checks failed: {exc!r}.")]


def _sort_key(diagnostic: Diagnostic) -> tuple[str, int, int, int, int, str]:
    r = diagnostic.range
    return (r.file, r.line, r.column, r.end_line, r.end_column, diagnostic.code)


def merge(
    static: Iterable[Diagnostic], report: ModuleReport | Iterable[Diagnostic] | None
) -> list[Diagnostic]:
    """Static and compiler diagnostics as one list, deduplicated by code and range, in source order.

    The compiler repeats some static findings (it sees the same literal blocks); the first
    one seen wins, so the static tier's wording is kept when both report a problem.
    """
    compiled = report.all_diagnostics() if isinstance(report, ModuleReport) else list(report or ())
    seen: set[tuple[str, SourceRange]] = set()
    out: list[Diagnostic] = []
    for diagnostic in [*static, *compiled]:
        key = (diagnostic.code, diagnostic.range)
        if key not in seen:
            seen.add(key)
            out.append(diagnostic)
    return sorted(out, key=_sort_key)


def split_codes(text: str | Sequence[str] | None) -> list[str]:
    """`"DSL2, DSL301"` or `["DSL2", "DSL301"]` -> `["DSL2", "DSL301"]` (upper-cased)."""
    if text is None:
        return []
    parts = text.split(",") if isinstance(text, str) else [p for item in text for p in item.split(",")]
    return [p.strip().upper() for p in parts if p.strip()]


def unknown_selectors(selectors: Iterable[str]) -> list[str]:
    """Selectors that match no catalogue code (typos), so a front end can refuse them."""
    return [s for s in selectors if s != SELECT_ALL and not any(code.startswith(s) for code in CATALOGUE)]


def _longest_match(code: str, selectors: Sequence[str]) -> int:
    """Length of the longest selector that is a prefix of `code`; -1 when none is."""
    best = -1
    for selector in selectors:
        if selector == SELECT_ALL:
            best = max(best, 0)
        elif code.startswith(selector):
            best = max(best, len(selector))
    return best


def is_selected(code: str, select: Sequence[str] = (), ignore: Sequence[str] = ()) -> bool:
    """Prefix matching like ruff: the most specific selector decides, `ignore` wins ties.

    No `select` means everything; `--select DSL2 --ignore DSL202` keeps DSL201 and drops
    DSL202, and `--ignore DSL2 --select DSL205` keeps only DSL205 of the DSL2xx family.
    """
    chosen = _longest_match(code, select) if select else 0
    ignored = _longest_match(code, ignore)
    return chosen >= 0 and chosen > ignored


def filter_codes(
    diagnostics: Iterable[Diagnostic], select: Sequence[str] = (), ignore: Sequence[str] = ()
) -> list[Diagnostic]:
    return [d for d in diagnostics if is_selected(d.code, select, ignore)]


def parse_severity(name: str | Severity) -> Severity:
    """`"error"`, `"warning"` or `"info"` (also `"warn"`, `"note"`) -> `Severity`."""
    if isinstance(name, Severity):
        return name
    aliases = {"warn": "warning", "note": "info", "information": "info"}
    key = name.strip().lower()
    return Severity(aliases.get(key, key))


def at_least(diagnostics: Iterable[Diagnostic], threshold: Severity | str) -> list[Diagnostic]:
    """The diagnostics at or above `threshold` (what `--fail-on` counts)."""
    floor = parse_severity(threshold).rank
    return [d for d in diagnostics if d.severity.rank >= floor]
