"""Document symbols come from the AST, so they are there before anything compiles.

Fixture: data/symbols.py (`@kernel`, `@kernel(...)`, `@dsl.jit()`, a kernel inside a class,
and an undecorated helper that must not appear).
"""

from __future__ import annotations

from lsprotocol import types

from tests.lsp.conftest import initialize, open_file, pos, tdi


def rng(a: int, b: int, c: int, d: int) -> types.Range:
    return types.Range(start=pos(a, b), end=pos(c, d))


async def test_symbols_for_every_decorator_form(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "symbols.py")
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=tdi(uri))
    )
    assert [(s.name, s.detail, s.kind, s.range, s.selection_range) for s in symbols] == [
        ("plain", "@kernel", types.SymbolKind.Function, rng(4, 0, 6, 8), rng(5, 4, 5, 9)),
        ("called", "@kernel", types.SymbolKind.Function, rng(9, 0, 11, 8), rng(10, 4, 10, 10)),
        ("host", "@jit", types.SymbolKind.Function, rng(14, 0, 16, 38), rng(15, 4, 15, 8)),
        ("method_kernel", "@kernel", types.SymbolKind.Function, rng(24, 4, 26, 12), rng(25, 8, 25, 21)),
    ]
