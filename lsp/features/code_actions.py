"""Code actions: the compiler's quick fixes, and source actions that compile or run a function.

A quick fix is whatever `Diagnostic.fixes` carries (the compiler attaches them for DSL202 in
both directions, DSL201, DSL101/102 and DSL103); the server matches the requested range
against the diagnostics it published for the document rather than trusting the client to
echo them back. The source actions name the kernel or jit function around the cursor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from dsl.diagnostics import Diagnostic
from lsp.convert import ranges_overlap, to_command_action, to_lsp_range, to_quick_fixes
from lsp.features import tuning
from lsp.features.code_lens import COMPILE, RUN
from lsp.features.diagnostics import diagnostics_of
from lsp.features.symbols import DslFunction
from lsp.session import DocumentState

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer


def _wanted(kinds: list[str] | None, kind: str) -> bool:
    """LSP `only` filters are hierarchical: asking for "source" includes "source.x"."""
    return not kinds or any(kind == k or kind.startswith(f"{k}.") for k in kinds)


def code_actions(
    state: DocumentState,
    diagnostics: list[Diagnostic],
    rng: types.Range,
    only: list[str] | None,
    trusted: bool,
    functions: list[DslFunction] | None = None,
) -> list[types.CodeAction]:
    lines = state.lines
    actions: list[types.CodeAction] = []
    if _wanted(only, types.CodeActionKind.QuickFix):
        for diag in diagnostics:
            if diag.fixes and ranges_overlap(to_lsp_range(diag.range, lines), rng):
                actions.extend(to_quick_fixes(diag, lines, state.uri, state.path))
    if trusted and _wanted(only, types.CodeActionKind.Source):
        line = rng.start.line + 1
        if functions is None:
            functions = state.index.functions(state.buffer, state.version, state.path)
        for fn in functions:
            if fn.range.contains_line(line):
                actions.append(to_command_action(f"Compile {fn.name}", COMPILE, [state.uri, fn.name]))
                actions.append(to_command_action(f"Run {fn.name} on GPU", RUN, [state.uri, fn.name]))
        actions.extend(tuning.code_actions(state.uri, state.path, lines, rng, functions))  # a tuned winner
    return actions


def register(server: KdslLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source]
        ),
    )
    async def code_action(ls: KdslLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        state = ls.documents.get(params.text_document.uri)
        if state is None:
            return []
        only = [str(k) for k in params.context.only] if params.context.only else None
        functions = await state.index.functions_async(state.buffer, state.version, state.path)
        if ls.documents.get(params.text_document.uri) is not state:
            return []
        return code_actions(
            state, diagnostics_of(state, current_only=True), params.range, only, ls.settings.trusted, functions
        )
