"""Semantic tokens from the compiler's trace: compile-time values, run-time values, shared
arrays and values derived from the thread index; and the language's intrinsics.

Fixtures: data/typed_values.py (see test_inlay_hints.py). `lane = dsl.thread_idx.x` is
where divergence starts: `j` (a loop from `lane`) and `acc` (loads at `j`) follow it.
data/intrinsics.py: intrinsics through `dsl.`, an alias of the module (`d.log`) and names
imported from it (`exp`, `thread_idx as tid`), a kernel whose parameter `exp` hides the
imported one, a type (`dsl.f32`) that is no intrinsic, and `dsl.cdiv` in a jit body.
"""

from __future__ import annotations

from lsprotocol import types
from pygls import uris

from lsp.features.semantic_tokens import TOKEN_MODIFIERS, TOKEN_TYPES
from tests.lsp.conftest import CAPABILITIES, ROOT, TEST_OPTIONS, initialize, open_file, read, tdi

DECL, RO, CT, RT, SH, TD = "declaration", "readonly", "compileTime", "runtime", "sharedMemory", "threadDependent"
DL, IN = "defaultLibrary", "intrinsic"

# (1-based line, column, text, type, modifiers) for every token of data/typed_values.py
EXPECTED = [
    (8, 12, "x", "parameter", {DECL, RT}),
    (8, 31, "out", "parameter", {DECL, RT}),
    (8, 52, "n", "parameter", {DECL, RT}),
    (8, 62, "WIDTH", "parameter", {DECL, RO, CT}),
    (9, 4, "row", "variable", {DECL, RT}),
    (9, 14, "block_idx", "variable", {DL, IN}),
    (10, 4, "lane", "variable", {DECL, RT, TD}),
    (10, 15, "thread_idx", "variable", {DL, IN}),
    (12, 4, "buf", "variable", {DECL, SH}),
    (13, 4, "steps", "variable", {DECL, RO, CT}),
    (13, 12, "WIDTH", "parameter", {RO, CT}),
    (14, 4, "acc", "variable", {DECL, RO, CT}),  # `acc = 0.0`: a compile-time value here ...
    (15, 8, "j", "variable", {DECL, RT, TD}),
    (15, 19, "lane", "variable", {RT, TD}),
    (15, 25, "n", "parameter", {RT}),
    (16, 8, "acc", "variable", {DECL, RT, TD}),  # ... and a run-time one the loop carries
    (16, 15, "x", "parameter", {RT}),
    (16, 17, "row", "variable", {RT}),
    (16, 22, "j", "variable", {RT, TD}),
    (17, 4, "v", "variable", {DECL, RT}),
    (17, 8, "x", "parameter", {RT}),
    (17, 17, "row", "variable", {RT}),
    (18, 4, "buf", "variable", {SH}),
    (18, 8, "lane", "variable", {RT, TD}),
    (18, 16, "acc", "variable", {RT, TD}),
    (18, 22, "v", "variable", {RT}),
    (19, 8, "barrier", "function", {DL, IN}),
    (20, 7, "lane", "variable", {RT, TD}),
    (21, 8, "total", "variable", {DECL, RT}),
    (21, 16, "buf", "variable", {SH}),
    (21, 25, "steps", "variable", {RO, CT}),
    (22, 8, "out", "parameter", {RT}),
    (22, 12, "row", "variable", {RT}),
    (22, 19, "total", "variable", {RT}),
    (26, 16, "x", "parameter", {DECL, RT}),
    (26, 35, "out", "parameter", {DECL, RT}),
    (26, 56, "BLOCK", "parameter", {DECL, RO, CT}),
    (27, 4, "rows", "variable", {DECL, RT}),
    (27, 11, "x", "parameter", {RT}),
    (28, 12, "x", "parameter", {RT}),
    (28, 15, "out", "parameter", {RT}),
    (28, 20, "x", "parameter", {RT}),
    (28, 49, "rows", "variable", {RT}),
    (28, 61, "BLOCK", "parameter", {RO, CT}),
]


def decode(data: list[int], text: str) -> list[tuple[int, int, str, str, set[str]]]:
    """LSP's relative encoding back to (1-based line, column, text, type, modifiers)."""
    lines = text.split("\n")
    out, line, start = [], 0, 0
    for i in range(0, len(data), 5):
        delta_line, delta_start, length, kind, bits = data[i:i + 5]
        line, start = (line + delta_line, delta_start) if delta_line else (line, start + delta_start)
        modifiers = {name for bit, name in enumerate(TOKEN_MODIFIERS) if bits >> bit & 1}
        out.append((line + 1, start, lines[line][start:start + length], TOKEN_TYPES[kind], modifiers))
    return out


async def test_the_legend_is_announced(client):
    result = await client.initialize_session(types.InitializeParams(
        capabilities=CAPABILITIES, root_uri=uris.from_fs_path(str(ROOT)), initialization_options=TEST_OPTIONS))
    provider = result.capabilities.semantic_tokens_provider
    assert isinstance(provider, types.SemanticTokensOptions)
    assert list(provider.legend.token_types) == ["variable", "parameter", "function"]
    assert list(provider.legend.token_modifiers) == [
        "declaration", "readonly", "compileTime", "runtime", "sharedMemory", "threadDependent",
        "defaultLibrary", "intrinsic"]
    assert provider.full is True


async def test_every_traced_name_is_marked_by_what_it_holds(client):
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    assert result is not None
    assert decode(list(result.data), read("typed_values.py")) == EXPECTED


async def test_a_document_that_does_not_parse_gets_no_tokens(client):
    await initialize(client)
    uri = open_file(client, "typed_values.py", text=read("typed_values.py") + "\ndef broken(:\n")
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    assert result is not None and list(result.data) == []


# (1-based line, column, text, type) of every intrinsic token of data/intrinsics.py
INTRINSICS = [
    (9, 12, "block_idx", "variable"),
    (9, 30, "block_dim", "variable"),
    (9, 44, "tid", "variable"),  # `from dsl import thread_idx as tid`
    (11, 17, "log", "function"),  # `import dsl as d`
    (11, 27, "exp", "function"),  # `from dsl import exp`
    (12, 8, "barrier", "function"),
    (17, 12, "block_idx", "variable"),
    (17, 30, "warp_size", "variable"),
    (17, 42, "tid", "variable"),
    (25, 38, "cdiv", "function"),  # a jit body's intrinsics too
    (26, 37, "cdiv", "function"),
]


async def test_intrinsics_are_marked_through_any_name_of_dsl(client):
    await initialize(client)
    uri = open_file(client, "intrinsics.py")
    result = await client.text_document_semantic_tokens_full_async(types.SemanticTokensParams(text_document=tdi(uri)))
    assert result is not None
    found = decode(list(result.data), read("intrinsics.py"))
    assert [(line, column, text, kind) for line, column, text, kind, modifiers in found
            if IN in modifiers] == INTRINSICS
    assert all(modifiers == {DL, IN} for *_, modifiers in found if IN in modifiers)
    # in `scale`, `exp` is the parameter that hides the imported intrinsic; `dsl.f32` is a type
    assert (19, 30, "exp", "parameter", {RT}) in found
    assert not [t for t in found if t[2] == "f32"]
