"""A real server over stdio per test, and a client that records every publication.

pytest-lsp's default client keeps only the latest diagnostics per URI; these tests need the
version each publication carried (stale results must never win), so publications are
recorded in order in `client.published`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
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


def make_asking_client(choose: Callable[[types.ShowMessageRequestParams], types.MessageActionItem | None]
                       ) -> LanguageClient:
    """A client that answers `window/showMessageRequest` with `choose(params)` (None: dismissed,
    as VS Code answers a closed question) and keeps each question in `client.asked`."""
    client = make_client()
    client.asked = []  # type: ignore[attr-defined]

    def answer(ls: LanguageClient, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        client.asked.append(params)  # type: ignore[attr-defined]
        return choose(params)

    client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)(answer)
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


# -- a raw client: bytes in, parsed messages out (framing and protocol tests) -------------------


class RawServer:
    """`python -m lsp` over pipes, spoken to in bytes; every message it writes is collected.

    pytest-lsp's client frames its messages correctly and structures every answer, which is
    exactly what the framing and protocol tests must not rely on.
    """

    def __init__(self, *args: str) -> None:
        import subprocess
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lsp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(ROOT),
        )
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=lambda: self._stderr.extend(iter(self.proc.stderr.readline, b"")), daemon=True).start()
        self._next_id = 1000

    def _read_stdout(self) -> None:
        import json

        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None, "the server wrote a message without Content-Length"
            message = json.loads(out.read(length))
            with self._cond:
                self.messages.append(message)
                self._cond.notify_all()

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    @staticmethod
    def frame(message: dict[str, Any] | bytes) -> bytes:
        import json

        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def send(self, message: dict[str, Any] | bytes) -> None:
        self.write(self.frame(message))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request_message(self, method: str, params: Any = None, msg_id: Any = None) -> dict[str, Any]:
        msg_id = self.new_id() if msg_id is None else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        return message

    def request(self, method: str, params: Any = None, timeout: float = 20.0) -> dict[str, Any]:
        message = self.request_message(method, params)
        self.send(message)
        return self.response(message["id"], timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((m for m in self.messages if predicate(m)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching message within {timeout} s; stderr:\n{self.stderr[-3000:]}")
                self._cond.wait(left)

    def response(self, msg_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda m: "method" not in m and m.get("id") == msg_id, timeout)

    def initialize(self, **options: Any) -> dict[str, Any]:
        params = {
            "processId": None,
            "rootUri": uris.from_fs_path(str(ROOT)),
            "capabilities": {},
            "initializationOptions": {**TEST_OPTIONS, "trusted": False, **options},
        }
        answer = self.request("initialize", params)
        self.notify("initialized", {})
        return answer

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(Exception):
                stream.close()


@pytest.fixture
def raw_server():
    """A fresh `RawServer`, killed at the end of the test if it is still running."""
    servers: list[RawServer] = []

    def start(*args: str) -> RawServer:
        server = RawServer(*args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
