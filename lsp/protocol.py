"""The JSON-RPC layer: every request gets an answer, and the lifecycle follows the spec.

pygls reads frames and structures messages in one step, so a body that is not JSON, a
request whose params do not fit its type, or anything after `shutdown` is logged and
dropped, and the client waits forever. Here each body goes through `KdslProtocol.receive`,
which answers what it cannot dispatch with the spec's error code:

    not JSON                               -32700 (id null)
    not a request object, bad id/method    -32600
    params that do not fit the method      -32602
    any request before `initialize`        -32002 (notifications are dropped)
    any request after `shutdown`           -32600 (notifications are dropped)

`exit` ends the server with 0 after `shutdown` and 1 without, and the server exits (1) when
the `processId` of `initialize` dies. `serve` runs the loop over a queue of byte chunks, fed
from stdin by a thread (`serve_stdio`) or from a socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from cattrs.errors import ClassValidationError
from lsprotocol import types
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import JsonRPCResponseMessage

from lsp.framing import FrameReader, FramingError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

PARENT_POLL_S = 1.0  # how often the parent named by `processId` is checked
_EOF = b""


class KdslProtocol(LanguageServerProtocol):
    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialize_seen = False
        self.shutdown_seen = False
        self.exit_code: int | None = None
        self._inbox: asyncio.Queue[bytes] | None = None
        self._watch: asyncio.Task[None] | None = None

    # -- one body from the client -------------------------------------------------------------

    def receive(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            log.error("a message is not JSON (%s); answered -32700", _short(exc))
            self._error(None, types.ErrorCodes.ParseError, f"Parse error: {_short(exc)}")
            return
        if not isinstance(data, dict):
            what = "batch requests are not supported" if isinstance(data, list) else "not a JSON-RPC object"
            self._error(None, types.ErrorCodes.InvalidRequest, f"Invalid request: {what}")
            return
        method, has_id, msg_id = data.get("method"), "id" in data, data.get("id")
        id_ok = isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)
        if method is None and has_id and ("result" in data or "error" in data):
            self._receive_response(data)
            return
        if not isinstance(method, str) or (has_id and not id_ok) or data.get("jsonrpc") != "2.0":
            reply_to = msg_id if id_ok else None
            if has_id or method is None:
                self._error(reply_to, types.ErrorCodes.InvalidRequest,
                            "Invalid request: needs jsonrpc '2.0', a string method and an integer or string id")
            else:
                log.error("dropped a malformed notification %r", method)
            return
        self._dispatch(data, method, msg_id if has_id else None, has_id)

    def _dispatch(self, data: dict[str, Any], method: str, msg_id: Any, is_request: bool) -> None:
        if method == types.EXIT:
            self.request_exit(0 if self.shutdown_seen else 1)
            return
        if self.shutdown_seen:
            if is_request:
                self._error(msg_id, types.ErrorCodes.InvalidRequest, f"the server is shut down; {method} refused")
            return
        if not self.initialize_seen and method != types.INITIALIZE:
            if is_request:
                self._error(msg_id, types.ErrorCodes.ServerNotInitialized,
                            f"the server is not initialized; {method} refused")
            return
        if method == types.INITIALIZE and self.initialize_seen:
            self._error(msg_id, types.ErrorCodes.InvalidRequest, "initialize may be sent only once")
            return
        try:
            message = self._structure(data, method, is_request)
        except Exception as exc:
            reason = _validation_reason(exc)
            if is_request:
                self._error(msg_id, types.ErrorCodes.InvalidParams, f"Invalid params for {method}: {reason}")
            else:
                log.error("dropped %s with invalid params: %s", method, reason)
            return
        if method == types.INITIALIZE:
            self.initialize_seen = True
            self._watch_parent(getattr(message.params, "process_id", None))
        elif method == types.SHUTDOWN:
            self.shutdown_seen = True
        self.handle_message(message)

    def _structure(self, data: dict[str, Any], method: str, is_request: bool) -> Any:
        known = self.get_message_type(method)
        if known is not None:
            return self._converter.structure(data, known)
        # JSON-RPC lets a request or notification leave `params` out; pygls's generic message
        # types (what custom methods such as `kdsl/capabilities` structure into) require the
        # member on every pygls 2.x, so an absent one is the same as `params: null` here.
        data = {**data, "params": data.get("params")}
        return self._converter.structure(data, JsonRPCRequestMessage if is_request else JsonRPCNotification)

    def _receive_response(self, data: dict[str, Any]) -> None:
        """A client's answer to one of our requests (`workDoneProgress/create`, a refresh)."""
        try:
            if "error" in data:
                message: Any = self._converter.structure(data, types.ResponseErrorMessage)
            else:
                result_type = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                message = self._converter.structure(data, result_type)
        except Exception as exc:
            log.error("dropped a response that does not fit its request: %s", _validation_reason(exc))
            self._request_futures.pop(data.get("id"), None)
            return
        self.handle_message(message)

    def _error(self, msg_id: Any, code: int, message: str) -> None:
        if msg_id is None:  # JSON-RPC wants `"id": null`, which lsprotocol's types leave out
            self._send_data({"jsonrpc": "2.0", "id": None, "error": {"code": int(code), "message": message}})
            return
        self._send_response(msg_id, error=types.ResponseError(code=code, message=message))

    # -- pygls's own document sync is replaced by `lsp.session` (see `lsp.text_model`) ---------

    def _user(self, method: str, params: Any):
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._user(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._user(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._user(types.TEXT_DOCUMENT_DID_CLOSE, params)

    # -- the end ------------------------------------------------------------------------------

    def request_exit(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code
        if self._inbox is not None:
            self._inbox.put_nowait(_EOF)

    def _watch_parent(self, pid: int | None) -> None:
        if not pid or os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
            return
        self._watch = asyncio.ensure_future(self._poll_parent(pid))

    async def _poll_parent(self, pid: int) -> None:
        while self.exit_code is None:
            await asyncio.sleep(PARENT_POLL_S)
            if not process_alive(pid):
                log.warning("the client process %d is gone; exiting", pid)
                self.request_exit(1)
                return

    async def serve(self, inbox: asyncio.Queue[bytes]) -> int:
        """Reads chunks until EOF or `exit`; returns the process's exit code."""
        self._inbox = inbox
        reader = FrameReader()
        while self.exit_code is None:
            chunk = await inbox.get()
            if not chunk:
                break
            for frame in reader.feed(chunk):
                if isinstance(frame, FramingError):
                    log.error("framing: %s", frame.message)
                else:
                    self.receive(frame)
                if self.exit_code is not None:
                    break
        if self._watch is not None:
            self._watch.cancel()
        if self.exit_code is None:  # the client closed the stream without `exit`
            self.exit_code = 0 if self.shutdown_seen else 1
        return self.exit_code


class SafeWriter:
    """stdout for the protocol; a client that went away ends the server instead of raising."""

    def __init__(self, stream: Any, on_lost: Callable[[], None]) -> None:
        self._stream = stream
        self._on_lost = on_lost
        self._lost = False

    def write(self, data: bytes) -> None:
        if self._lost:
            return
        try:
            self._stream.write(data)
            flush = getattr(self._stream, "flush", None)  # an asyncio StreamWriter has none
            if flush is not None:
                flush()
        except (BrokenPipeError, ConnectionError, ValueError, OSError):
            self._lost = True
            log.warning("the client closed the connection")
            self._on_lost()

    def close(self) -> None:
        pass


def serve_stdio(protocol: KdslProtocol, main: Callable[[Awaitable[int]], Awaitable[int]]) -> int:
    """Runs `protocol` over stdin/stdout; `main` wraps the serve coroutine (startup, cleanup)."""
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must not corrupt the protocol stream

    async def run() -> int:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[bytes] = asyncio.Queue()
        protocol.set_writer(SafeWriter(stdout, lambda: protocol.request_exit(1)))
        threading.Thread(target=_read_stdin, args=(loop, inbox), name="kdsl-stdin", daemon=True).start()
        return await main(protocol.serve(inbox))

    return asyncio.run(run())


def _read_stdin(loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[bytes]) -> None:
    # os.read, not sys.stdin.buffer: a daemon thread blocked in a buffered reader's lock
    # aborts the interpreter at exit.
    fd = sys.stdin.fileno()
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = _EOF
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, chunk)
        except RuntimeError:  # the loop is closed: the server is exiting
            return
        if not chunk:
            return


async def pump_stream(reader: asyncio.StreamReader, inbox: asyncio.Queue[bytes]) -> None:
    """Feeds a socket's bytes to `serve` (the TCP transport)."""
    while True:
        chunk = await reader.read(1 << 16)
        inbox.put_nowait(chunk)
        if not chunk:
            return


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, owned by someone else
        return True
    try:  # a zombie is dead, only not yet reaped by its own parent
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _validation_reason(exc: BaseException) -> str:
    if isinstance(exc, ClassValidationError):
        from cattrs import transform_error

        try:
            return _short("; ".join(transform_error(exc)))
        except Exception:
            pass
    cause = exc.__cause__ or exc
    return _short(f"{type(cause).__name__}: {cause}")
