"""Semantic tokens from the compiler's trace: which names hold compile-time values, run-time
values and shared-memory arrays, and which derive from the thread index (where divergence
comes from); and which are the language's intrinsics (`dsl.exp`, `dsl.thread_idx`).

The legend (also in README, "Semantic tokens"): token types `variable`, `parameter` and
`function`; modifiers `declaration` (where the name is bound), `readonly` + `compileTime` (a
value known while tracing: a `Constexpr`, `steps = WIDTH // 32`), `runtime` (a value of the
GPU or of the launcher: an `i32`, a vector, a tensor), `sharedMemory` (an array of a
`SharedAllocator`), `threadDependent` (a run-time value that derives from `dsl.thread_idx` /
`dsl.lane_id()`: it differs between the threads of a warp, so a branch on it diverges) and
`defaultLibrary` + `intrinsic` (a function or value of `dsl` that is code of the language:
`dsl.exp`, `dsl.barrier`, `dsl.thread_idx`, `dsl.warp_size`, through any alias; its types and
classes are left to Python's own colouring). Standard types and modifiers keep every theme
working; the kdsl ones are additions that a theme or `editor.semanticTokenColorCustomizations`
can colour, and that the VS Code extension maps to TextMate scopes (`semanticTokenScopes`),
one per combination in `TOKEN_CLASSES`, so that default themes show them apart.

Each name of a function body is marked by what the tracer bound it to: where it is bound,
by the fact at that place; where it is read, by every fact about that name in the function
(a name that is a run-time value anywhere is one where it is read). The tracer's facts come
with the latest report (`lsp.features.inlay_hints.traced`); a fact whose name no longer
stands at its place is left out. Intrinsics are read from the text alone (the module's
`import dsl` / `from dsl import ...`), in the same traced bodies, unless the function binds
that name itself.
"""

from __future__ import annotations

import ast
import functools
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

TOKEN_TYPES = ["variable", "parameter", "function"]
TOKEN_MODIFIERS = ["declaration", "readonly", "compileTime", "runtime", "sharedMemory", "threadDependent",
                   "defaultLibrary", "intrinsic"]  # new ones go last: a client decodes bits by position
LEGEND = types.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_BIT = {name: 1 << i for i, name in enumerate(TOKEN_MODIFIERS)}

# What a marked name holds, as the modifiers it carries besides `declaration`.
HOLDS_RUNTIME = ("runtime",)
HOLDS_THREAD_DEPENDENT = ("runtime", "threadDependent")
HOLDS_SHARED_MEMORY = ("sharedMemory",)
HOLDS_COMPILE_TIME = ("readonly", "compileTime")
IS_INTRINSIC = ("defaultLibrary", "intrinsic")
# Every (token type, modifiers besides `declaration`) a token can have: the combinations the VS
# Code extension gives a TextMate scope each (tests/lsp/test_semantic_token_scopes.py).
TOKEN_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((kind, holds) for kind in ("variable", "parameter")
      for holds in (HOLDS_RUNTIME, HOLDS_THREAD_DEPENDENT, HOLDS_SHARED_MEMORY, HOLDS_COMPILE_TIME)),
    ("function", IS_INTRINSIC),
    ("variable", IS_INTRINSIC),
)


def _bits(modifiers: Sequence[str]) -> int:
    bits = 0
    for name in modifiers:
        bits |= _BIT[name]
    return bits


def _modifiers(kinds: set[str], thread: bool) -> int:
    """Modifier bits for a name that held values of `kinds`."""
    if kinds & {RUN_TIME, TENSOR}:
        return _bits(HOLDS_THREAD_DEPENDENT if thread else HOLDS_RUNTIME)
    if SHARED in kinds:
        return _bits(HOLDS_SHARED_MEMORY)
    if kinds == {COMPILE_TIME}:
        return _bits(HOLDS_COMPILE_TIME)
    return 0


@functools.cache
def intrinsics() -> dict[str, str]:
    """Each intrinsic's name in `dsl` -> its token type: the functions and values of the
    language's catalogue (`lsp.features.dsl_api`) that are code of either side."""
    from lsp.features.dsl_api import dsl_names

    kinds = {"function": "function", "variable": "variable", "constant": "variable"}
    return {api.name: kinds[api.kind] for api in dsl_names() if api.where is not None and api.kind in kinds}


def _dsl_imports(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The module's names for `dsl` (`import dsl`, `import dsl as d`) and for names imported
    from it (`from dsl import exp as e`: e -> exp)."""
    modules: set[str] = set()
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dsl":
                    modules.add(alias.asname or "dsl")
                elif alias.name.startswith("dsl.") and alias.asname is None:  # `import dsl.language` binds dsl
                    modules.add("dsl")
        elif isinstance(node, ast.ImportFrom) and node.module == "dsl" and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
    return modules, names


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _scopes(statements: list[ast.stmt]
            ) -> dict[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.Name | ast.Attribute]]:
    """Each function among `statements` (nested ones too) with the Name nodes of its own
    body and its attributes of a name (`dsl.exp`), in one walk."""
    out: dict[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.Name | ast.Attribute]] = {}
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
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and fn is not None:
            out[fn].append(node)
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
    dsl_modules, from_dsl = _dsl_imports(tree)
    for fn, nodes in _scopes(traced).items():
        first, last = fn.lineno, fn.end_lineno or fn.lineno
        mine = [f for line in range(first, last + 1) for f in by_line.get(line, ())]
        if not mine:
            continue
        names = [node for node in nodes if isinstance(node, ast.Name)]
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
            out.append(_mark(lines, line, column, name, "parameter" if name in params else "variable", bits))
        # a name the function binds itself (`exp = ...`, a parameter `dsl`) is no intrinsic there
        local = set(kinds) | params | {n.id for n in names if isinstance(n.ctx, ast.Store)}
        for node in nodes:
            found = _intrinsic(node, lines, dsl_modules - local, {k: v for k, v in from_dsl.items() if k not in local})
            if found is not None:
                line, column, written, kind = found
                out.append(_mark(lines, line, column, written, kind, _bits(IS_INTRINSIC)))
    return sorted(set(out))


def _intrinsic(node: ast.Name | ast.Attribute, lines: Sequence[str], dsl_modules: set[str],
               from_dsl: dict[str, str]) -> tuple[int, int, str, str] | None:
    """(1-based line, character column, the name as written, token type) of the intrinsic
    `node` names: the attribute of `dsl.exp` (or `d.exp` after `import dsl as d`), or a name
    imported from `dsl`; None for anything else."""
    if isinstance(node, ast.Attribute):
        if not isinstance(node.value, ast.Name) or node.value.id not in dsl_modules:
            return None
        name, line = node.attr, node.end_lineno or node.lineno
        column = _column(lines, line, node.end_col_offset or 0) - len(name)  # the attribute ends the node
        kind = intrinsics().get(name)
    else:
        name, line, column = node.id, node.lineno, _column(lines, node.lineno, node.col_offset)
        kind = intrinsics().get(from_dsl.get(name, ""))
    return (line, column, name, kind) if kind is not None else None


def _mark(lines: Sequence[str], line: int, column: int, name: str, kind: str, bits: int
          ) -> tuple[int, int, int, int, int]:
    """The token of `name` at 1-based `line`, character `column`, in UTF-16 units."""
    content = line_content(lines[line - 1])
    start = column_to_utf16(content, column)
    length = column_to_utf16(content, column + len(name)) - start
    return (line - 1, start, length, TOKEN_TYPES.index(kind), bits)


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
