"""Every conversion from the DSL's data model to LSP types, in one place.

The compiler speaks in `SourceRange`s: 1-based lines and 0-based columns counted in
characters. LSP positions are 0-based lines and columns counted in UTF-16 code units, so
any line holding characters outside the Basic Multilingual Plane (emoji, some CJK) needs
the document's text to convert. Handlers pass the text (or its lines) they analysed;
nothing else in the server builds LSP ranges, diagnostics or edits by hand.

Lines are LSP's (`lsp.text_model`: they end only at `\n`, `\r\n`, `\r`), given as a
string or as a sequence of lines with or without their endings. Every range built here is
clamped to the document: a diagnostic computed for an older text, or a syntax error at the
end of the file, never points past the last line or past the end of a line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lsprotocol import types
from pygls import uris

from dsl.diagnostics import CATALOGUE, Diagnostic, Fix, Severity, SourceRange
from lsp.text_model import column_to_utf16, line_content, split_lines, utf16_to_column

SOURCE = "kdsl"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFO: types.DiagnosticSeverity.Information,
}

Lines = Sequence[str]


def source_lines(text: str | Lines) -> Lines:
    """The document's LSP lines, as `to_lsp_*` helpers take them."""
    return split_lines(text) if isinstance(text, str) else text


def to_lsp_position(line: int, column: int, text: str | Lines) -> types.Position:
    """1-based `line`, 0-based character `column` -> LSP position (0-based, UTF-16 units),
    clamped to the document (no lines at all means another file we could not read: the
    position passes through)."""
    lines = source_lines(text)
    index = max(line - 1, 0)
    if not lines:
        return types.Position(line=index, character=max(column, 0))
    if index >= len(lines):
        index = len(lines) - 1
        content = line_content(lines[index])
        return types.Position(line=index, character=column_to_utf16(content, len(content)))
    content = line_content(lines[index])
    return types.Position(line=index, character=column_to_utf16(content, min(max(column, 0), len(content))))


def to_lsp_range(rng: SourceRange, text: str | Lines) -> types.Range:
    lines = source_lines(text)
    start = to_lsp_position(rng.line, rng.column, lines)
    end = to_lsp_position(rng.end_line, rng.end_column, lines)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return types.Range(start=start, end=end)


def from_lsp_position(position: types.Position, text: str | Lines) -> tuple[int, int]:
    """LSP position -> (1-based line, 0-based character column), the inverse of `to_lsp_position`;
    a character past the end of its line means the end of the line."""
    lines = source_lines(text)
    content = line_content(lines[position.line]) if 0 <= position.line < len(lines) else ""
    return position.line + 1, utf16_to_column(content, position.character)


def path_to_uri(path: str) -> str:
    return uris.from_fs_path(os.path.abspath(path)) or path


def uri_to_path(uri: str) -> str:
    return uris.to_fs_path(uri) or uri


def _lines_of(rng: SourceRange, path: str, lines: Lines) -> Lines:
    """The lines `rng` is measured against: the document's, or the other file's on disk."""
    if os.path.abspath(rng.file) == os.path.abspath(path):
        return lines
    try:
        with open(rng.file, encoding="utf-8") as f:
            return split_lines(f.read())
    except OSError:
        return ()  # no text: columns pass through unchanged for ASCII-only lines


def _location(rng: SourceRange, uri: str, path: str, lines: Lines) -> types.Location:
    same = os.path.abspath(rng.file) == os.path.abspath(path)
    return types.Location(
        uri=uri if same else path_to_uri(rng.file), range=to_lsp_range(rng, _lines_of(rng, path, lines))
    )


def to_lsp_diagnostic(diag: Diagnostic, text: str | Lines, uri: str, path: str) -> types.Diagnostic:
    """A DSL diagnostic as LSP shows it: code, catalogue link, related locations."""
    lines = source_lines(text)
    rule = CATALOGUE.get(diag.code)
    return types.Diagnostic(
        range=to_lsp_range(diag.range, lines),
        message=diag.message,
        severity=_SEVERITY[diag.severity],
        code=diag.code,
        code_description=types.CodeDescription(href=rule.url) if rule else None,
        source=SOURCE,
        related_information=[
            types.DiagnosticRelatedInformation(
                location=_location(r.range, uri, path, lines), message=r.message
            )
            for r in diag.related
        ]
        or None,
    )


def to_lsp_text_edits(fix: Fix, text: str | Lines) -> list[types.TextEdit]:
    lines = source_lines(text)
    return [types.TextEdit(range=to_lsp_range(e.range, lines), new_text=e.new_text) for e in fix.edits]


def to_quick_fixes(diag: Diagnostic, text: str | Lines, uri: str, path: str) -> list[types.CodeAction]:
    """One `quickfix` code action per `Fix` the compiler attached to `diag`."""
    lines = source_lines(text)
    lsp_diag = to_lsp_diagnostic(diag, lines, uri, path)
    return [
        types.CodeAction(
            title=fix.title,
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[lsp_diag],
            edit=types.WorkspaceEdit(changes={uri: to_lsp_text_edits(fix, lines)}),
            is_preferred=len(diag.fixes) == 1 or None,
        )
        for fix in diag.fixes
    ]


def to_command_action(title: str, command: str, arguments: list[Any]) -> types.CodeAction:
    """A `source` code action that runs one of the server's commands."""
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.Source,
        command=types.Command(title=title, command=command, arguments=arguments),
    )


def to_json(value: Any) -> Any:
    """An lsprotocol object as plain JSON data (camelCase keys), for custom request results."""
    from lsprotocol.converters import get_converter

    return get_converter().unstructure(value)


def ranges_overlap(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
