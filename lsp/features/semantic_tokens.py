"""Semantic tokens from the compiler's trace: which names hold compile-time values, run-time
values and shared-memory arrays, and which derive from the thread index (where divergence
comes from).

The legend (also in README, "Semantic tokens"): token types `variable` and `parameter`;
modifiers `declaration` (where the name is bound), `readonly` + `compileTime` (a value
known while tracing: a `Constexpr`, `steps = WIDTH // 32`), `runtime` (a value of the GPU
or of the launcher: an `i32`, a vector, a tensor), `sharedMemory` (an array of a
`SharedAllocator`) and `threadDependent` (a run-time value that derives from
`dsl.thread_idx` / `dsl.lane_id()`: it differs between the threads of a warp, so a branch
on it diverges). Standard types and modifiers keep themes working; the kdsl ones are
additions a theme or `editor.semanticTokenColorCustomizations` can colour.

Each name of a function body is marked by what the tracer bound it to: where it is bound,
by the fact at that place; where it is read, by every fact about that name in the function
(a name that is a run-time value anywhere is one where it is read). The tracer's facts come
with the latest report (`lsp.features.inlay_hints.traced`); a fact whose name no longer
stands at its place is left out.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lsprotocol import types

from dsl.frontend.source import char_column
from dsl.frontend.trace_facts import COMPILE_TIME, RUN_TIME, SHARED, TENSOR, ValueFact
from lsp.features.inlay_hints import stands, traced_for_features
from lsp.features.symbols import parse
from lsp.text_model import column_to_utf16, line_content

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

TOKEN_TYPES = ["variable", "parameter"]
TOKEN_MODIFIERS = ["declaration", "readonly", "compileTime", "runtime", "sharedMemory", "threadDependent"]
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_BIT = {name: 1 << i for i, name in enumerate(TOKEN_MODIFIERS)}


def _modifiers(kinds: set[str], thread: bool) -> int:
    """Modifier bits for a name that held values of `kinds`."""
    if kinds & {RUN_TIME, TENSOR}:
        bits = _BIT["runtime"] | (_BIT["threadDependent"] if thread else 0)
    elif SHARED in kinds:
        bits = _BIT["sharedMemory"]
    elif kinds == {COMPILE_TIME}:
        bits = _BIT["readonly"] | _BIT["compileTime"]
    else:
        bits = 0
    return bits


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _scopes(statements: list[ast.stmt]) -> dict[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.Name]]:
    """Each function among `statements` (nested ones too) with the Name nodes of its own
    body, in one walk."""
    out: dict[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.Name]] = {}
    todo: list[tuple[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None]] = [(s, None) for s in statements]
    while todo:
        node, fn = todo.pop()
        if isinstance(node, _FUNCTIONS):
            out[node] = []
            todo.extend((child, node) for child in node.body)
            continue
        if isinstance(node, ast.Name):
            if fn is not None:
                out[fn].append(node)
            continue
        inner = None if isinstance(node, ast.Lambda | ast.ClassDef) else fn
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return out


def tokens(text: str, lines: Sequence[str], facts: Sequence[ValueFact]) -> list[tuple[int, int, int, int, int]]:
    """(0-based line, UTF-16 start, UTF-16 length, type, modifiers) per marked name, in order."""
    tree = parse(text)
    if tree is None:
        return []
    by_line: dict[int, list[ValueFact]] = {}
    for fact in facts:
        if stands(fact, lines):
            by_line.setdefault(fact.range.line, []).append(fact)
    out: list[tuple[int, int, int, int, int]] = []
    traced = [stmt for stmt in tree.body  # only statements the tracer said something about
              if any(line in by_line for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))]
    for fn, names in _scopes(traced).items():
        first, last = fn.lineno, fn.end_lineno or fn.lineno
        mine = [f for line in range(first, last + 1) for f in by_line.get(line, ())]
        if not mine:
            continue
        at = {(f.range.line, f.range.column): f for f in mine}
        kinds: dict[str, set[str]] = {}
        thread: dict[str, bool] = {}
        for f in mine:
            kinds.setdefault(f.name, set()).add(f.kind)
            thread[f.name] = thread.get(f.name, False) or f.thread
        params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        places: list[tuple[int, int, str, bool]] = []  # (line, char column, name, bound here)
        for arg in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
            places.append((arg.lineno, _column(lines, arg.lineno, arg.col_offset), arg.arg, True))
        for name in names:
            places.append((name.lineno, _column(lines, name.lineno, name.col_offset), name.id,
                           isinstance(name.ctx, ast.Store)))
        for line, column, name, bound in places:
            fact = at.get((line, column)) if bound else None
            if fact is not None:
                bits = _modifiers({fact.kind}, fact.thread) | _BIT["declaration"]
            elif name in kinds:
                bits = _modifiers(kinds[name], thread[name]) | (_BIT["declaration"] if bound else 0)
            else:
                continue
            content = line_content(lines[line - 1])
            start = column_to_utf16(content, column)
            length = column_to_utf16(content, column + len(name)) - start
            out.append((line - 1, start, length, TOKEN_TYPES.index("parameter" if name in params else "variable"),
                        bits))
    return sorted(set(out))


def _column(lines: Sequence[str], line: int, byte_col: int) -> int:
    return char_column(line_content(lines[line - 1]) if 0 < line <= len(lines) else "", byte_col)


def encode(marks: Sequence[tuple[int, int, int, int, int]]) -> list[int]:
    """LSP's relative encoding: (delta line, delta start, length, type, modifiers) per token."""
    data: list[int] = []
    previous_line = previous_start = 0
    for line, start, length, kind, bits in marks:
        delta_start = start - previous_start if line == previous_line else start
        data += [line - previous_line, delta_start, length, kind, bits]
        previous_line, previous_start = line, start
    return data


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
    async def semantic_tokens_full(ls: KdslLanguageServer, params: types.SemanticTokensParams
                                   ) -> types.SemanticTokens | None:
        uri = params.text_document.uri
        state = ls.documents.get(uri)
        if state is None or not ls.settings.trusted:
            return None
        found = await traced_for_features(ls, state, "semantic")
        state = ls.documents.get(uri)
        if found is None or state is None:
            return None
        return types.SemanticTokens(data=encode(tokens(state.text, state.lines, found.facts)))
