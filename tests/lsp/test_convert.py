"""The one conversion layer: UTF-16 columns, diagnostics with their links, fixes and actions."""

from __future__ import annotations

from lsprotocol import types

from dsl.diagnostics import CATALOGUE, Diagnostic, Fix, Related, SourceRange, TextEdit
from lsp.convert import (
    from_lsp_position,
    to_command_action,
    to_lsp_diagnostic,
    to_lsp_range,
    to_quick_fixes,
)

PATH = "/src/k.py"
URI = "file:///src/k.py"
TEXT = 'x = "😀é"; y = 1\nz = 2\n'  # the emoji is two UTF-16 units, é one


def rng(a: int, b: int, c: int, d: int) -> types.Range:
    return types.Range(start=types.Position(a, b), end=types.Position(c, d))


def test_columns_count_utf16_units():
    # `y` is character 11 on line 1; the emoji before it takes two UTF-16 units.
    assert to_lsp_range(SourceRange(PATH, 1, 11, 1, 12), TEXT) == rng(0, 12, 0, 13)
    assert from_lsp_position(types.Position(0, 12), TEXT) == (1, 11)
    assert to_lsp_range(SourceRange(PATH, 2, 0, 2, 5), TEXT) == rng(1, 0, 1, 5)


def test_diagnostic_carries_code_link_and_related():
    diag = Diagnostic.make(
        "DSL202",
        "launch block [128, 1, 1] differs from known_block_size [256, 1, 1]",
        SourceRange(PATH, 2, 4, 2, 5),
        related=[Related(SourceRange(PATH, 1, 11, 1, 12), "known_block_size declared here")],
    )
    assert to_lsp_diagnostic(diag, TEXT, URI, PATH) == types.Diagnostic(
        range=rng(1, 4, 1, 5),
        message="launch block [128, 1, 1] differs from known_block_size [256, 1, 1]",
        severity=types.DiagnosticSeverity.Error,
        code="DSL202",
        code_description=types.CodeDescription(href=CATALOGUE["DSL202"].url),
        source="kdsl",
        related_information=[
            types.DiagnosticRelatedInformation(
                location=types.Location(uri=URI, range=rng(0, 12, 0, 13)),
                message="known_block_size declared here",
            )
        ],
    )


def test_fix_becomes_a_quick_fix_with_a_workspace_edit():
    edit = TextEdit(SourceRange(PATH, 2, 4, 2, 5), "3")
    diag = Diagnostic.make("DSL201", "bad", SourceRange(PATH, 2, 4, 2, 5), fixes=[Fix("Use 3", (edit,))])
    (action,) = to_quick_fixes(diag, TEXT, URI, PATH)
    assert action == types.CodeAction(
        title="Use 3",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[to_lsp_diagnostic(diag, TEXT, URI, PATH)],
        edit=types.WorkspaceEdit(changes={URI: [types.TextEdit(range=rng(1, 4, 1, 5), new_text="3")]}),
        is_preferred=True,
    )


def test_command_action_is_a_source_action():
    assert to_command_action("Compile k", "kdsl.compile", [URI, "k"]) == types.CodeAction(
        title="Compile k",
        kind=types.CodeActionKind.Source,
        command=types.Command(title="Compile k", command="kdsl.compile", arguments=[URI, "k"]),
    )
