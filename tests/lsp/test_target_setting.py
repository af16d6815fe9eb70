"""The `target` setting reaches every check the server makes: the instant (static) tier, the
compiler tier and hover. The static tier used to check for sm_90's limits whatever the
target, and its wording won over the compiler's (fixture: data/target_limits.py, whose
`minnctapersm=20` is too many for sm_86 and whose `block=2048` is too big anywhere).
"""

from __future__ import annotations

from lsprotocol import types

from tests.lsp.conftest import diagnostics_for, initialize, open_file, pos, tdi, wait_until

SM_86 = [
    ("DSL201", (12, 55, 12, 57), "minnctapersm must be from 1 to 16 on sm_86, got 20"),
    ("DSL203", (19, 30, 19, 34), "block [2048, 1, 1] (2048 threads) exceeds sm_86 limits: at most 1024 threads "
     "and [1024, 1024, 64] per dimension"),
]
SM_90 = [
    ("DSL203", (19, 30, 19, 34), "block [2048, 1, 1] (2048 threads) exceeds sm_90 limits: at most 1024 threads "
     "and [1024, 1024, 64] per dimension"),
]


def found(diagnostics: list[types.Diagnostic]) -> list[tuple[str, tuple[int, int, int, int], str]]:
    return sorted(
        (str(d.code), (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character),
         d.message)
        for d in diagnostics
    )


def publications(client, uri: str, version: int) -> list[types.PublishDiagnosticsParams]:
    return [p for p in client.published if p.uri == uri and p.version == version]


async def test_both_tiers_and_hover_use_the_target(client):
    await initialize(client, target="sm_86")
    uri = open_file(client, "target_limits.py")
    instant = await diagnostics_for(client, uri, 1)  # the first publication: the static tier alone
    assert found(instant) == SM_86
    hover = await client.text_document_hover_async(types.HoverParams(text_document=tdi(uri), position=pos(13, 4)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("**@kernel `k`**")  # it failed to compile: its errors
    assert "on sm_86" in hover.contents.value
    compiled = await wait_until(lambda: publications(client, uri, 1)[1:], what="the compiler tier's publication")
    assert found(list(compiled[-1].diagnostics)) == SM_86


async def test_the_static_tier_alone_uses_the_target(client):
    """An untrusted workspace gets only the static tier; it checks for the configured target."""
    await initialize(client, target="sm_86", trusted=False)
    uri = open_file(client, "target_limits.py")
    assert found(await diagnostics_for(client, uri, 1)) == SM_86


async def test_changing_the_target_checks_again(client):
    await initialize(client, target="sm_86", trusted=False)
    uri = open_file(client, "target_limits.py")
    assert found(await diagnostics_for(client, uri, 1)) == SM_86
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"kdsl": {"target": ""}}))
    await wait_until(lambda: len(publications(client, uri, 1)) >= 2, what="a new publication")
    assert found(list(publications(client, uri, 1)[-1].diagnostics)) == SM_90
