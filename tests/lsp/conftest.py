"""A real server over stdio per test, and a client that records every publication.

pytest-lsp's default client keeps only the latest diagnostics per URI; these tests need the
version each publication carried (stale results must never win), so publications are
recorded in order in `client.published`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types
from pygls import uris
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]

# Short debounce so tests are quick; the default (300 ms) is for typing humans.
TEST_OPTIONS: dict[str, Any] = {"debounceMs": 50, "timeoutSeconds": 20}


def _record_publication(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)  # type: ignore[attr-defined]


def _code_lens_refresh(client: LanguageClient, params: None) -> None:
    client.code_lens_refreshes = getattr(client, "code_lens_refreshes", 0) + 1  # type: ignore[attr-defined]


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record_publication
    features[types.WORKSPACE_CODE_LENS_REFRESH] = _code_lens_refresh
    register_lsp_features(client, features)
    client.raw_results = []  # type: ignore[attr-defined]
    structure = client.protocol.structure_message

    def record_raw(data: dict[str, Any]) -> Any:
        # lsprotocol's client reads any code action that has a `command` as a bare Command;
        # tests that care about the exact wire form read the raw results kept here.
        if "result" in data and "method" not in data:
            client.raw_results.append(data["result"])  # type: ignore[attr-defined]
        return structure(data)

    client.protocol.structure_message = record_raw  # type: ignore[method-assign]
    return client


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client)
)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


CAPABILITIES = types.ClientCapabilities(
    window=types.WindowClientCapabilities(work_done_progress=True),
    workspace=types.WorkspaceClientCapabilities(
        code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)
    ),
)


async def initialize(client: LanguageClient, **options: Any) -> None:
    await client.initialize_session(
        types.InitializeParams(
            capabilities=CAPABILITIES,
            root_uri=uris.from_fs_path(str(ROOT)),
            initialization_options={**TEST_OPTIONS, **options},
        )
    )


def uri_of(name: str) -> str:
    return uris.from_fs_path(str(DATA / name))  # type: ignore[return-value]


def open_file(client: LanguageClient, name: str, text: str | None = None, version: int = 1) -> str:
    """Opens data file `name` (or `text` under its name); returns its URI."""
    uri = uri_of(name)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text if text is not None else read(name)
            )
        )
    )
    return uri


def read(name: str) -> str:
    return (DATA / name).read_text()


async def wait_until(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


def summarize(diagnostics: Any) -> list[tuple[str, int, int, int, int]]:
    """(code, start line, start char, end line, end char) per diagnostic, sorted: easy to compare whole."""
    return sorted(
        (str(d.code), d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
        for d in diagnostics
    )


async def diagnostics_for(
    client: LanguageClient,
    uri: str,
    version: int,
    condition: Callable[[list[types.Diagnostic]], bool] = lambda _: True,
    timeout: float = 30.0,
) -> list[types.Diagnostic]:
    """The first publication for `uri` at `version` whose diagnostics satisfy `condition`."""

    def find() -> tuple[list[types.Diagnostic]] | None:
        for params in client.published:  # type: ignore[attr-defined]
            if params.uri == uri and params.version == version and condition(list(params.diagnostics)):
                return (list(params.diagnostics),)  # a tuple, so that "no diagnostics" counts as found
        return None

    (found,) = await wait_until(find, timeout, f"diagnostics of {uri} v{version}")
    return found


def has_code(code: str) -> Callable[[list[types.Diagnostic]], bool]:
    return lambda diags: any(d.code == code for d in diags)


def report_of(name: str):
    """The compiler's own report for a fixture (run here: the fixtures are ours and harmless)."""
    import dsl

    return dsl.analyze_source(read(name), str(DATA / name))


def tdi(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)
