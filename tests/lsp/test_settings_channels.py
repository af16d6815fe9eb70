"""Settings reach the server by each of the three messages the VS Code extension sends them
in, in the shape it sends them: `initialize` (initializationOptions), its answer to the
server's `workspace/configuration` pull, and `workspace/didChangeConfiguration`.

What the extension sends is vscode-extension/src/test/data/server-settings.json (its
settings.test.ts checks that); these tests send that object, with `inlayHints.lineCost` on,
and look for what the setting does: line-cost inlay hints (`SASS` in their label), which need
nvdisasm. Fixture: data/typed_values.py (see test_inlay_hints.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from lsprotocol import types
from pygls import uris

from dsl.compiler import toolchain
from tests.lsp.conftest import ROOT, open_file, pos, tdi, wait_until

pytestmark = pytest.mark.skipif(toolchain.nvdisasm_path() is None, reason="nvdisasm is not installed")

SENT = json.loads((ROOT / "vscode-extension" / "src" / "test" / "data" / "server-settings.json").read_text())
WHOLE = types.Range(start=pos(0, 0), end=pos(40, 0))


def extension_section(*, line_cost: bool) -> dict[str, Any]:
    """The `kdsl` section the extension sends with every setting at its default but line cost."""
    section = copy.deepcopy(SENT["defaults"]["sent"])
    section["inlayHints"]["lineCost"] = line_cost
    return section


async def start(client, options: dict[str, Any], **workspace: Any) -> None:
    capabilities = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
        inlay_hint=types.InlayHintWorkspaceClientCapabilities(refresh_support=True), **workspace))
    await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=uris.from_fs_path(str(ROOT)), initialization_options=options))


async def line_costs(client, uri: str) -> list[str]:
    found = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=tdi(uri), range=WHOLE))
    return [str(h.label) for h in found or [] if "SASS" in str(h.label)]


async def test_at_start_up(client):
    await start(client, extension_section(line_cost=True))
    assert await line_costs(client, open_file(client, "typed_values.py"))


async def test_in_the_workspace_configuration_answer(client):
    """The extension's answer to the pull is VS Code's section (with the settings only the
    extension reads) with its own values over it. The server waits for the pulled settings
    before it compiles, and the hints wait for the first report."""
    client.set_configuration({**extension_section(line_cost=True), "interpreterPath": "", "trace": {"server": "off"}},
                             section="kdsl")
    await start(client, extension_section(line_cost=False), configuration=True)
    assert await line_costs(client, open_file(client, "typed_values.py"))


async def test_in_did_change_configuration(client):
    refreshes: list[None] = []
    client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)(lambda ls, params: refreshes.append(params))
    await start(client, extension_section(line_cost=False))
    uri = open_file(client, "typed_values.py")
    assert await line_costs(client, uri) == []
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"kdsl": extension_section(line_cost=True)}))
    await wait_until(lambda: refreshes, what="workspace/inlayHint/refresh")  # no edit would ask again
    assert await line_costs(client, uri)
