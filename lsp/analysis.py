"""Pure helpers the language server and `kdsl lint` share: read, check, merge, filter.

Both front ends produce diagnostics in two tiers: static checks that only parse the file
(safe for untrusted code, instant) and the compiler's report from the analysis worker. The
rules for combining them live here once, so the editor and CI never disagree about what a
file's diagnostics are. Nothing here imports pygls or starts a process.
"""

from __future__ import annotations

import dataclasses
import io
import os
import stat
import tokenize
from collections.abc import Iterable, Sequence

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import CATALOGUE, Diagnostic, Related, Severity, SourceRange
from dsl.frontend.source import source_lines

SELECT_ALL = "ALL"
MAX_SOURCE_BYTES = 8 * 1024 * 1024  # larger "source files" are skipped, not read
_FILE_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def line_range(path: str, source: str | None, line: int = 1) -> SourceRange:
    """The whole of 1-based `line` of `source` (an empty range when the file has no such line)."""
    lines = source_lines(source or "")
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


def _not_regular(mode: int) -> str | None:
    return None if stat.S_ISREG(mode) else _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_regular(path: str, limit: int) -> bytes | str:
    """The bytes of a regular file of at most `limit` bytes, or why it was not read.

    Looks before it opens (opening a FIFO blocks, opening a device can have effects), opens
    without blocking and checks again what it opened (the path may have been swapped), and
    never reads more than `limit` + 1 bytes (a file may grow, `/proc` files claim size 0).
    """
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind is None:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
            try:
                info = os.fstat(fd)
                kind = _not_regular(info.st_mode)
                if kind is None and info.st_size <= limit:
                    with os.fdopen(fd, "rb", closefd=False) as handle:
                        data = handle.read(limit + 1)
                    if len(data) <= limit:
                        return data
            finally:
                os.close(fd)
    except OSError as exc:
        return f"Cannot read this file: {exc.strerror or exc}."
    if kind is not None:
        return f"Skipped: this is {kind}, not a regular file."
    return f"Skipped: larger than {limit // (1024 * 1024)} MiB, too large for a source file."


def read_source(path: str, limit: int = MAX_SOURCE_BYTES) -> tuple[str | None, list[Diagnostic]]:
    """Reads a Python file the way the interpreter does (PEP 263 coding cookie, BOM).

    Only regular files of at most `limit` bytes are read. Returns the text, or None and a
    diagnostic saying why it was not read (DSL002: unreadable, not a regular file, too
    large) or cannot be decoded (DSL003, which is what Python itself reports).
    """
    data = read_regular(path, limit)
    if isinstance(data, str):
        return None, [failure_diagnostic("DSL002", path, None, data)]
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        return None, [failure_diagnostic("DSL003", path, None, f"Cannot decode this file: {exc}.")]
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, []


def _confine(diagnostic: Diagnostic, path: str, source: str | None) -> Diagnostic:
    fixes = tuple(f for f in diagnostic.fixes if all(e.range.file == path for e in f.edits))
    if diagnostic.range.file == path:
        return diagnostic if fixes == diagnostic.fixes else dataclasses.replace(diagnostic, fixes=fixes)
    elsewhere = Related(diagnostic.range, "reported here")
    return dataclasses.replace(
        diagnostic,
        range=line_range(path, source, 1),
        message=f"{diagnostic.message} (in {diagnostic.range.file}, line {diagnostic.range.line})",
        related=(elsewhere, *diagnostic.related),
        fixes=(),
    )


def confine_report(report: ModuleReport, path: str, source: str | None = None) -> ModuleReport:
    """`report` speaking only about `path`: what it says of other files moves to line 1.

    A report comes from a process that ran the module's own code, which may have written
    it; so a module can claim things about itself, but its report can neither place a
    diagnostic in another file nor carry a fix that edits one.
    """
    report.path = path
    report.diagnostics = [_confine(d, path, source) for d in report.diagnostics]
    for function in report.functions:
        function.diagnostics = [_confine(d, path, source) for d in function.diagnostics]
    return report


def static_diagnostics(source: str, path: str, target: str | None = None) -> list[Diagnostic]:
    """The AST-only tier for `target`'s limits: never runs user code, so it is safe in
    untrusted workspaces."""
    import dsl  # deferred: importing the compiler is the slow part of starting a front end

    try:
        return list(dsl.static_checks(source, path, target))
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
