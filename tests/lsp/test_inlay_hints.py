"""Inlay hints from the compiler's trace: DSL types, compile-time values, loop-carried values.

Fixture: data/typed_values.py, a kernel `row_sum` (thread and block indices, a shared array,
a compile-time `steps`, an `acc` a run-time loop carries, a vector load) launched by the
jit function `run_row_sum` with `WIDTH=128`.
"""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls import uris

from tests.lsp.conftest import ROOT, TEST_OPTIONS, initialize, open_file, pos, read, tdi, wait_until

WHOLE = types.Range(start=pos(0, 0), end=pos(40, 0))


async def hints(client, uri: str, rng: types.Range = WHOLE) -> list[types.InlayHint]:
    result = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=rng))
    assert result is not None
    return result


def summary(found: list[types.InlayHint]) -> list[tuple[int, int, str]]:
    """(0-based line, character, label) per hint, in order."""
    return [(h.position.line, h.position.character, h.label) for h in found]  # type: ignore[misc]


# (0-based line, character after the name, label) of every hint in data/typed_values.py
EXPECTED = [
    (7, 83, "= 128"),  # `WIDTH: Constexpr[int] = 128`: no default, the launch gives 128
    (8, 7, ": i32"),  # row = dsl.block_idx.x
    (9, 8, ": i32"),  # lane = dsl.thread_idx.x
    (11, 7, ": shared f32[32]"),  # buf = smem.array(f32, TILE)
    (12, 9, "= 4"),  # steps = WIDTH // TILE
    (14, 9, ": i32"),  # for j in range(lane, n, TILE)
    (15, 11, ": f32, carried by the loop"),  # acc += x[row, j]
    (16, 5, ": vector<4xf32>"),  # v = x.vload((row, 0), 4)
    (20, 13, ": f32"),  # total = buf[0] * steps
    (26, 8, ": i32"),  # rows = x.shape[0] (the jit function)
]


async def test_every_assignment_shows_its_traced_type_or_value(client):
    """`acc = 0.0` and `BLOCK: Constexpr[int] = 32` show nothing: the code already says it."""
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    found = await hints(client, uri)
    assert summary(found) == EXPECTED
    kinds = {(h.position.line, h.label): (h.kind, h.padding_left) for h in found}
    assert kinds[(8, ": i32")] == (types.InlayHintKind.Type, False)
    assert kinds[(12, "= 4")] == (None, True)
    by_line = {h.position.line: h.tooltip for h in found}
    assert by_line[9] == ("`lane`: a run-time value, `i32`; it derives from the thread index, so it differs between "
                          "the threads of a warp.")
    assert by_line[15] == ("`acc`: a run-time value, `f32`; a run-time loop carries it from one iteration to the next; "
                           "it derives from the thread index, so it differs between the threads of a warp.")
    assert by_line[12] == "`steps`: a compile-time value, `int` = `4`."


async def test_only_the_requested_range_is_answered(client):
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    found = await hints(client, uri, types.Range(start=pos(14, 0), end=pos(16, 30)))
    assert summary(found) == [(14, 9, ": i32"), (15, 11, ": f32, carried by the loop"), (16, 5, ": vector<4xf32>")]


async def test_hints_follow_the_text_and_the_next_report(client):
    """Right after an edit that moves every line down, the old report's facts no longer
    stand where their names are: no hint is placed on the wrong name. Once the compiler
    has caught up, every hint is back, one line lower."""
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    assert summary(await hints(client, uri)) == EXPECTED
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="# moved\n" + read("typed_values.py"))],
    ))
    assert summary(await hints(client, uri)) == []
    published = client.published  # type: ignore[attr-defined]
    await wait_until(lambda: len([p for p in published if p.uri == uri and p.version == 2]) >= 2,
                     what="the compiler tier's diagnostics of version 2")
    assert summary(await hints(client, uri)) == [(line + 1, column, label) for line, column, label in EXPECTED]


async def test_untrusted_workspace_gets_no_hints(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "typed_values.py")
    result = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=WHOLE))
    assert result is None


@pytest.mark.parametrize("asked_before", [True, False], ids=["hints shown before", "no hints asked before"])
async def test_a_version_that_does_not_parse_keeps_the_last_traced_facts(client, asked_before):
    """While `dsl.` is being typed the file does not parse, and its report traces nothing;
    the hints stay wherever their names do (`row` still stands on the line being typed),
    whether or not hints were asked for while the report that ran was the latest."""
    await initialize(client)
    uri = open_file(client, "typed_values.py")
    published = client.published  # type: ignore[attr-defined]
    if asked_before:
        assert summary(await hints(client, uri)) == EXPECTED
    else:
        await wait_until(lambda: len([p for p in published if p.uri == uri and p.version == 1]) >= 2,
                         what="the compiler tier's diagnostics of version 1")
    lines = read("typed_values.py").split("\n")
    lines[8] = "    row = dsl."
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="\n".join(lines))],
    ))
    await wait_until(lambda: len([p for p in published if p.uri == uri and p.version == 2]) >= 2,
                     what="the compiler tier's diagnostics of version 2")
    assert summary(await hints(client, uri)) == EXPECTED


async def test_the_client_is_asked_to_refresh_when_the_report_catches_up(client):
    refreshes: list[None] = []
    client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)(lambda ls, params: refreshes.append(params))
    capabilities = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
        inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True)))
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=uris.from_fs_path(str(ROOT)), initialization_options=TEST_OPTIONS))
    uri = open_file(client, "typed_values.py")
    assert summary(await hints(client, uri)) == EXPECTED
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="# moved\n" + read("typed_values.py"))],
    ))
    assert summary(await hints(client, uri)) == []  # the old report's facts: nothing stands
    await wait_until(lambda: refreshes, what="workspace/inlayHint/refresh")
    assert summary(await hints(client, uri)) == [(line + 1, column, label) for line, column, label in EXPECTED]


def test_a_literal_in_another_spelling_shows_nothing_and_a_parameter_reads_as_python():
    """`m = -3e+38` traced as `-3.0e38` repeats nothing; a Constexpr parameter's value goes
    after its annotation, nested brackets and all."""
    from dsl.diagnostics import SourceRange
    from dsl.frontend.trace_facts import COMPILE_TIME, ValueFact
    from lsp.features.inlay_hints import type_hints

    lines = ["    m = -3e+38  # the running max",
             "def k(x, B: Constexpr[dict[str, int]] = None, W: Constexpr[int], n):",
             "    big = 1 << 40"]
    facts = [ValueFact(SourceRange("k.py", 1, 4, 1, 5), "m", "float", COMPILE_TIME, "-3.0e38"),
             ValueFact(SourceRange("k.py", 2, 46, 2, 47), "W", "int", COMPILE_TIME, "128", parameter=True),
             ValueFact(SourceRange("k.py", 3, 4, 3, 7), "big", "int", COMPILE_TIME, "1099511627776")]
    found = [(h.position.line, h.position.character, h.label) for h in type_hints(facts, lines, 1, 3)]
    assert found == [(1, 47 + len(": Constexpr[int]"), "= 128"), (2, 7, "= 1099511627776")]
