"""Diagnostics end to end: both tiers, the catalogue link, and user code that misbehaves.

Fixtures: data/saxpy.py (clean), data/crash.py (raises at top level, and a malformed
`known_block_size`), data/hang.py (never returns), data/exits.py (`os._exit(3)`).
"""

from __future__ import annotations

import asyncio

from lsprotocol import types

from dsl.diagnostics import CATALOGUE
from tests.lsp.conftest import (
    diagnostics_for,
    has_code,
    initialize,
    open_file,
    read,
    summarize,
)


def change(client, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def test_clean_file_has_no_diagnostics(client):
    await initialize(client)
    uri = open_file(client, "saxpy.py")
    # Wait for the compiler tier (lenses appear once it reported), then check the publication.
    await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri))
    )
    assert await diagnostics_for(client, uri, 1) == []
    assert list(client.diagnostics[uri]) == []


async def test_crash_at_top_level_keeps_other_diagnostics(client):
    """crash.py: DSL001 on the `raise` statement (compiler tier), DSL201 on `[128, 1]` (both tiers)."""
    await initialize(client)
    uri = open_file(client, "crash.py")
    static = await diagnostics_for(client, uri, 1)
    assert summarize(static) == [("DSL201", 4, 29, 4, 37)]
    diags = await diagnostics_for(client, uri, 1, has_code("DSL001"))
    assert sorted(summarize(diags)) == sorted([("DSL201", 4, 29, 4, 37), ("DSL001", 10, 0, 10, 41)])
    crash = next(d for d in diags if d.code == "DSL001")
    assert crash.severity == types.DiagnosticSeverity.Error
    assert crash.source == "kdsl"
    assert crash.code_description == types.CodeDescription(href=CATALOGUE["DSL001"].url)
    assert "config file missing" in crash.message
    contract = next(d for d in diags if d.code == "DSL201")
    assert contract.code_description == types.CodeDescription(href=CATALOGUE["DSL201"].url)
    assert contract.severity == types.DiagnosticSeverity.Error


async def test_hang_times_out_and_the_next_edit_works(client):
    """hang.py loops forever at line 10: DSL002 after the 2 s limit; fixing the loop clears it."""
    await initialize(client, timeoutSeconds=2)
    uri = open_file(client, "hang.py")
    diags = await diagnostics_for(client, uri, 1, has_code("DSL002"), timeout=20)
    assert summarize(diags) == [("DSL002", 0, 0, 0, 10)]
    (hang,) = diags
    assert hang.message == "Running this module for analysis timed out after 2 s (at line 10)."
    assert list(hang.related_information or ()) == [
        types.DiagnosticRelatedInformation(
            location=types.Location(uri=uri, range=types.Range(types.Position(9, 0), types.Position(9, 84))),
            message="this line was running",
        )
    ]
    fixed = read("hang.py").split("while True")[0] + "LIMIT = 1\n"
    change(client, uri, 2, fixed)
    assert await diagnostics_for(client, uri, 2, lambda d: not has_code("DSL002")(d), timeout=20) == []


async def test_os_exit_becomes_a_diagnostic(client):
    await initialize(client)
    uri = open_file(client, "exits.py")
    diags = await diagnostics_for(client, uri, 1, has_code("DSL002"), timeout=20)
    assert summarize(diags) == [("DSL002", 0, 0, 0, 9)]
    assert diags[0].message == "Running this module for analysis exited with code 3."
    # The server is alive and the worker restarts for the next version.
    change(client, uri, 2, read("exits.py").replace("os._exit(3)\n", "os.getpid()\n"))
    assert await diagnostics_for(client, uri, 2, lambda d: not d, timeout=20) == []


async def test_storm_of_edits_publishes_the_last_version(client):
    """200 edits in a row: the final version's compiler diagnostics arrive, nothing stale after."""
    await initialize(client)
    base = read("saxpy.py")
    uri = open_file(client, "saxpy.py", base + 'raise RuntimeError("edit 0")\n')
    last = 201
    for version in range(2, last + 1):
        change(client, uri, version, base + f'raise RuntimeError("edit {version - 1}")\n')
    diags = await diagnostics_for(client, uri, last, has_code("DSL001"), timeout=30)
    assert summarize(diags) == [("DSL001", 15, 0, 15, 30)]
    assert "edit 200" in diags[0].message
    await asyncio.sleep(0.5)  # anything still in flight would have been published by now
    versions = [p.version for p in client.published if p.uri == uri]
    assert versions == sorted(versions)
    assert client.published[-1].version == last
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri), position=types.Position(5, 5))
    )
    assert hover is not None


async def test_untrusted_gets_static_checks_only_until_trusted(client):
    await initialize(client, trusted=False)
    uri = open_file(client, "crash.py")
    assert summarize(await diagnostics_for(client, uri, 1)) == [("DSL201", 4, 29, 4, 37)]
    await asyncio.sleep(1.0)
    assert [p.version for p in client.published if p.uri == uri] == [1]  # no compiler tier
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kdsl": {"trusted": True}})
    )
    diags = await diagnostics_for(client, uri, 1, has_code("DSL001"))
    assert sorted(summarize(diags)) == sorted([("DSL201", 4, 29, 4, 37), ("DSL001", 10, 0, 10, 41)])


async def test_close_clears_diagnostics(client):
    await initialize(client)
    uri = open_file(client, "crash.py")
    await diagnostics_for(client, uri, 1)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri))
    )
    await diagnostics_for(client, uri, None)  # type: ignore[arg-type]
    assert list(client.diagnostics[uri]) == []
