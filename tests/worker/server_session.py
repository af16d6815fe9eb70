"""A real server over stdio in a folder of its own, and a client that records what it is sent
and answers `workspace/configuration` with `Session.pulled` (the `session` fixture)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls import uris
from pygls.lsp.client import LanguageClient

MARKER_MODULE = "from pathlib import Path\nPath(__file__).with_name('executed.marker').write_text('ran')\n"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Session:
    client: LanguageClient
    workspace: Path
    published: list[types.PublishDiagnosticsParams] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    pulls: list[types.ConfigurationParams] = field(default_factory=list)
    pulled: list[Any] = field(default_factory=list)  # what the client answers to a pull

    async def start(self, options: dict[str, Any], *, can_pull: bool = False) -> None:
        await self.client.start_io(sys.executable, "-m", "lsp", cwd=str(self.workspace))
        capabilities = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(configuration=can_pull)
        )
        await self.client.initialize_async(
            types.InitializeParams(capabilities=capabilities, initialization_options=options)
        )
        self.client.initialized(types.InitializedParams())

    def open(self, name: str, text: str) -> str:
        path = self.workspace / name
        path.write_text(text)
        uri = uris.from_fs_path(str(path))
        assert uri is not None
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )
        return uri

    async def publications(self, uri: str, count: int, timeout: float = 60.0) -> None:
        for _ in range(int(timeout / 0.05)):
            if sum(p.uri == uri for p in self.published) >= count:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"fewer than {count} publications for {uri}")


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    client = LanguageClient("trust-test", "1")
    state = Session(client, tmp_path)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(params: types.PublishDiagnosticsParams) -> None:
        state.published.append(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show(params: types.ShowMessageParams) -> None:
        state.messages.append(params.message)

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(params: types.ConfigurationParams) -> list[Any]:
        state.pulls.append(params)
        return state.pulled

    yield state
    try:
        await asyncio.wait_for(client.shutdown_async(None), 20)
        client.exit(None)
    finally:
        await client.stop()
