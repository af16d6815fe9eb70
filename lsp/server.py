"""The kdsl language server: creates the server, registers every feature, starts it.

`KdslLanguageServer` owns the three things handlers share: the parsed `Settings`, the
`DocumentStore` of open documents and the analysis worker, the only place user code runs.
Handlers live in `lsp.features`, one module per handler group, each with a
`register(server)` function; they stay thin and call pure helpers.

Start it with `python -m lsp`, `kdsl lsp` (stdio, the default) or `--tcp HOST:PORT`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp.session import DocumentStore
from lsp.settings import Settings, parse_settings

if TYPE_CHECKING:
    from dsl.compiler.artifacts import ModuleReport
    from lsp.worker import AnalysisWorker

__version__ = "0.1.0"
log = logging.getLogger(__name__)


class KdslLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kdsl", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.documents = DocumentStore()
        self._worker: AnalysisWorker | None = None  # one warm child serves every document, in turn
        self._background: set[asyncio.Future[None]] = set()

    # -- settings ---------------------------------------------------------------------------

    def apply_settings(self, raw: object) -> bool:
        """Parses `raw` over the current settings; returns whether anything changed."""
        new, problems = parse_settings(raw, self.settings)
        for problem in problems:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=problem))
        changed = new != self.settings
        limits_changed = (new.timeout_seconds, new.memory_limit_mb) != (
            self.settings.timeout_seconds,
            self.settings.memory_limit_mb,
        )
        self.settings = new
        if limits_changed and self._worker is not None:
            old, self._worker = self._worker, None
            self.spawn(old.close())  # the next analysis starts one with the new limits
        return changed

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Runs `work` in the background, holding a reference so it is not collected early."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- the worker -------------------------------------------------------------------------

    def worker(self) -> AnalysisWorker:
        if self._worker is None:
            from lsp.worker import AnalysisWorker

            self._worker = AnalysisWorker(
                timeout=self.settings.timeout_seconds, memory_mb=self.settings.memory_limit_mb
            )
        return self._worker

    async def analyze(self, text: str, path: str) -> ModuleReport:
        """Runs the compiler tier on `text` in the worker; cancelling this kills the user code."""
        return await self.worker().analyze(text, path, self.settings.target)

    async def warm_up(self) -> None:
        """Starts the worker early; a failure here shows up again, as a diagnostic, on first use."""
        try:
            await self.worker().start()
        except Exception as exc:
            log.warning("analysis worker did not start: %s", exc)

    async def close_worker(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await worker.close()


def make_server() -> KdslLanguageServer:
    from lsp.features import code_actions, code_lens, commands, diagnostics, hover, ir, symbols

    server = KdslLanguageServer()
    for feature in (diagnostics, hover, ir, code_lens, code_actions, commands, symbols):
        feature.register(server)

    @server.feature(types.INITIALIZE)
    def initialize(ls: KdslLanguageServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: KdslLanguageServer, params: types.InitializedParams) -> None:
        if ls.settings.trusted:  # import the compiler in the worker while the user reads the file
            ls.spawn(ls.warm_up())

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: KdslLanguageServer, params: None) -> None:
        for state in ls.documents.all():
            ls.documents.close(state.uri)
        await ls.close_worker()

    return server


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kdsl lsp", description="The kdsl language server.")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    parser.add_argument("--log-level", default="WARNING", help="logging level on stderr (default WARNING)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    server = make_server()
    if args.tcp:
        host, sep, port = args.tcp.rpartition(":")
        if not sep or not port.isdigit():
            print(f"kdsl lsp: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
    return 0
