"""The kdsl language server: creates the server, registers every feature, starts it.

`KdslLanguageServer` owns the three things handlers share: the parsed `Settings`, the
`DocumentStore` of open documents and the analysis worker, the only place user code runs.
Handlers live in `lsp.features`, one module per handler group, each with a
`register(server)` function; they stay thin and call pure helpers.

Every feature handler is registered through `KdslLanguageServer.feature`, which guards it:
an exception in a handler (code nested too deeply for `ast`, a bug) is one logged line and
no result, never a traceback sent to the client. The transport and the JSON-RPC lifecycle
are `lsp.framing` and `lsp.protocol`.

Start it with `python -m lsp`, `kdsl lsp` (stdio, the default) or `--tcp HOST:PORT`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp.protocol import KdslProtocol, SafeWriter, pump_stream, serve_stdio
from lsp.session import DocumentStore
from lsp.settings import ConfigurationPull, Settings, make_worker, parse_settings, worker_options

if TYPE_CHECKING:
    from dsl.compiler.artifacts import ModuleReport
    from lsp.worker import Analysis, AnalysisWorker

__version__ = "0.1.0"
log = logging.getLogger(__name__)
NAMES_WARM_UP_WAIT_S = 10.0  # the longest the completion warm-up waits for the first reports
F = TypeVar("F", bound=Callable[..., Any])
CLOSE_TIMEOUT_S = 5.0


def guarded(method: str, handler: F) -> F:
    """`handler`, answering None (and logging one line) instead of raising."""

    def failed(exc: Exception) -> None:
        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
        log.error("%s failed: %s: %s%s", method, type(exc).__name__, str(exc)[:200], at)

    if asyncio.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await handler(*args, **kwargs)
            except Exception as exc:
                failed(exc)
                return None

        return run_async  # type: ignore[return-value]

    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        except Exception as exc:
            failed(exc)
            return None

    return run  # type: ignore[return-value]


class KdslLanguageServer(LanguageServer):
    protocol: KdslProtocol

    def __init__(self) -> None:
        super().__init__(
            "kdsl",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=KdslProtocol,
        )
        self.settings = Settings()
        self.documents = DocumentStore()
        self._worker: AnalysisWorker | None = None  # one warm child serves every document, in turn
        self._background: set[asyncio.Future[None]] = set()
        self.configuration = ConfigurationPull()  # lsp.settings: the workspace/configuration pull

    def feature(self, feature_name: str, options: Any | None = None) -> Callable[[F], F]:
        register = super().feature(feature_name, options)

        def decorator(handler: F) -> F:
            register(guarded(feature_name, handler))
            return handler

        return decorator

    def report_server_error(self, error: Exception, source: Any) -> None:
        log.error("%s", error)  # already logged where it happened; no pop-up per failure

    # -- transports ---------------------------------------------------------------------------

    def start_io(self, stdin: Any = None, stdout: Any = None) -> int:  # type: ignore[override]
        """Serves stdin/stdout until `exit`, EOF or the client's death; returns the exit code."""
        return serve_stdio(self.protocol, self._serve)

    def start_tcp(self, host: str, port: int) -> int:  # type: ignore[override]
        """Serves the first client that connects, then exits like `start_io`."""

        async def run() -> int:
            connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
            connected = asyncio.get_running_loop().create_future()
            server = await asyncio.start_server(
                lambda r, w: connected.done() or connected.set_result((r, w)), host, port
            )
            reader, writer = await connected
            server.close()
            inbox: asyncio.Queue[bytes] = asyncio.Queue()
            self.protocol.set_writer(SafeWriter(writer, lambda: self.protocol.request_exit(1)))
            pump = asyncio.ensure_future(pump_stream(reader, inbox))
            try:
                return await self._serve(self.protocol.serve(inbox))
            finally:
                pump.cancel()
                writer.close()

        return asyncio.run(run())

    async def _serve(self, serving: Awaitable[int]) -> int:
        try:
            return await serving
        finally:  # `exit` without `shutdown`, EOF or a dead client: still stop the user's code
            for state in self.documents.all():
                self.documents.close(state.uri)
            try:
                await asyncio.wait_for(self.close_worker(), CLOSE_TIMEOUT_S)
            except Exception as exc:
                log.warning("the analysis worker did not close cleanly: %s", exc)

    # -- settings ---------------------------------------------------------------------------

    def apply_settings(self, raw: object) -> bool:
        """Parses `raw` over the current settings; returns whether anything changed."""
        new, problems = parse_settings(raw, self.settings)
        for problem in problems:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=problem))
        changed = new != self.settings
        limits_changed = worker_options(new) != worker_options(self.settings)
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
            self._worker = make_worker(self.settings)
        return self._worker

    async def analyze(self, text: str, path: str, on_traced: Callable[[ModuleReport], None] | None = None
                      ) -> Analysis:
        """Runs the compiler tier on `text` in the worker (its report, and what the run
        imported); cancelling this stops the user code. `on_traced` gets the report as tracing
        left it, if the run sends one (`AnalysisWorker.analysis`)."""
        await self.configuration.ready()  # the pulled settings may withdraw trust: wait for them
        if not self.settings.trusted:
            from dsl.compiler.artifacts import ModuleReport
            from lsp.worker import Analysis

            return Analysis(ModuleReport(path))
        return await self.worker().analysis(text, path, self.settings.target, on_traced)

    async def warm_up(self) -> None:
        """Starts the worker early; a failure here shows up again, as a diagnostic, on first use."""
        try:
            await self.worker().start()
        except Exception as exc:
            log.warning("analysis worker did not start: %s", exc)

    async def warm_up_names(self) -> None:
        """Loads jedi's picture of `dsl` and the API catalogue in a thread (`jedi_use.warm_up`),
        once a document is open and the open documents have their compiler reports, or
        `NAMES_WARM_UP_WAIT_S` after start-up, whichever comes first: its 0.4 s of Python shares
        the interpreter with the event loop, and made publishing a 100-kernel file's first report
        0.3 s later; and before a document is open there is nothing to complete in."""
        from lsp.features import jedi_use

        deadline = asyncio.get_running_loop().time() + NAMES_WARM_UP_WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.25)
            states = list(self.documents.all())
            if states and all(state.analysis is None or state.analysis.done() for state in states):
                break
        def warm_up() -> None:
            try:
                jedi_use.warm_up()
            except Exception as exc:  # the first completion then loads it, and fails the same way, visibly
                log.warning("completion warm-up failed: %s", exc)

        # a daemon thread, not the event loop's executor: the server's exit never waits for it
        threading.Thread(target=warm_up, name="kdsl-names-warm-up", daemon=True).start()

    async def close_worker(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await worker.close()


def make_server() -> KdslLanguageServer:
    from lsp.features import (
        code_actions,
        code_lens,
        commands,
        completion,
        diagnostics,
        hover,
        inlay_hints,
        ir,
        profile,
        semantic_tokens,
        signature_help,
        symbols,
        tuning,
    )

    server = KdslLanguageServer()
    for feature in (diagnostics, hover, ir, code_lens, code_actions, commands, symbols, tuning, profile):
        feature.register(server)
    for feature in (completion, signature_help, inlay_hints, semantic_tokens):  # editor intelligence
        feature.register(server)

    @server.feature(types.INITIALIZE)
    def initialize(ls: KdslLanguageServer, params: types.InitializeParams) -> None:
        ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: KdslLanguageServer, params: types.InitializedParams) -> None:
        ls.configuration.start(ls)
        if ls.settings.trusted:  # import the compiler in the worker while the user reads the file
            ls.spawn(ls.warm_up())
        ls.spawn(ls.warm_up_names())  # and load what the first completion needs, in a thread

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
        return server.start_tcp(host or "127.0.0.1", int(port))
    return server.start_io()
