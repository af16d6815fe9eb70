"""Document symbols for kernels and jit functions, found from the AST alone.

Symbols must work before anything compiles (and in untrusted workspaces), so they come
from parsing the buffer, not from the compiler report: a function decorated with
`dsl.kernel` / `kernel` / `dsl.jit` / `jit`, with or without call parentheses, at any
nesting. `dsl_functions` is also what hover and code actions use to find the function
around the cursor.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from dsl.diagnostics import SourceRange
from dsl.frontend.source import char_column
from dsl.frontend.static_checks import decorator_kind
from lsp.convert import source_lines, to_lsp_range

if TYPE_CHECKING:
    from lsp.server import KdslLanguageServer

@dataclass(frozen=True)
class DslFunction:
    name: str
    kind: str  # "kernel" | "jit"
    node: ast.FunctionDef | ast.AsyncFunctionDef
    decorator: ast.expr
    name_range: SourceRange  # the name in the `def` line
    range: SourceRange  # decorators through the end of the body


def _name_range(node: ast.FunctionDef | ast.AsyncFunctionDef, path: str, lines: list[str]) -> SourceRange:
    line = lines[node.lineno - 1] if node.lineno - 1 < len(lines) else ""
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    start = line.find(node.name, line.find(keyword) + len(keyword))
    start = max(start, 0)
    return SourceRange(path, node.lineno, start, node.lineno, start + len(node.name))


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    return char_column(lines[line - 1] if 0 < line <= len(lines) else "", byte_col)


def node_range(node: ast.AST, path: str, lines: list[str]) -> SourceRange:
    end_line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    end_col = getattr(node, "end_col_offset", None) or 0
    return SourceRange(
        path,
        node.lineno,  # type: ignore[attr-defined]
        _char_col(lines, node.lineno, node.col_offset),  # type: ignore[attr-defined]
        end_line,
        _char_col(lines, end_line, end_col),
    )


def parse(text: str) -> ast.Module | None:
    """The module's AST, or None when it does not parse (or nests too deeply to parse)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def dsl_functions(text: str, path: str, tree: ast.Module | None = None) -> list[DslFunction]:
    """Every kernel and jit function in `text`, in source order; empty if it does not parse."""
    tree = tree or parse(text)
    if tree is None:
        return []
    lines = list(source_lines(text))
    found: list[DslFunction] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            kind = decorator_kind(decorator)
            if kind is None:
                continue
            whole = node_range(node, path, lines)
            first = min(node.decorator_list, key=lambda d: (d.lineno, d.col_offset))
            at = max(_char_col(lines, first.lineno, first.col_offset) - 1, 0)  # the "@"
            found.append(
                DslFunction(
                    node.name,
                    kind,
                    node,
                    decorator,
                    _name_range(node, path, lines),
                    SourceRange(path, first.lineno, at, whole.end_line, whole.end_column),
                )
            )
            break
    return sorted(found, key=lambda f: (f.range.line, f.range.column))


def document_symbols(
    text: str | Sequence[str], path: str, functions: list[DslFunction] | None = None
) -> list[types.DocumentSymbol]:
    """Symbols for `functions` (default: those of `text`, which must then be a string)."""
    lines = source_lines(text)
    return [
        types.DocumentSymbol(
            name=fn.name,
            detail=f"@{fn.kind}",
            kind=types.SymbolKind.Function,
            range=to_lsp_range(fn.range, lines),
            selection_range=to_lsp_range(fn.name_range, lines),
        )
        for fn in (dsl_functions(str(text), path) if functions is None else functions)
    ]


def register(server: KdslLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def document_symbol(
        ls: KdslLanguageServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol]:
        state = ls.documents.get(params.text_document.uri)
        if state is None:
            return []
        functions = await state.index.functions_async(state.buffer, state.version, state.path)
        return document_symbols(state.lines, state.path, functions)
