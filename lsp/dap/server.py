"""The debug adapter: Debug Adapter Protocol requests in, a `dsl.debugger.DebugSession` driven.

The protocol's order: `initialize` is answered with the capabilities and followed by the
`initialized` event; the client then sets breakpoints and exception filters and sends
`configurationDone`; the program starts once both that and `launch` have arrived. The session
ends with `exited` and `terminated`; `disconnect` ends the adapter.

Every request is answered. One that is malformed (arguments missing or of the wrong type, an
unknown command) gets an error response naming the problem, and the session goes on; a
message that is not JSON, or not a request, is reported as an `output` event.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from lsp.dap.stdio import Channel, take_stdio
from lsp.framing import FrameReader, FramingError

CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsEvaluateForHovers": True,
    "supportsTerminateRequest": True,
    "supportsExceptionInfoRequest": True,
    "supportsSetVariable": False,
    "supportsRestartRequest": False,
    "exceptionBreakpointFilters": [
        {"filter": "faults", "label": "Kernel faults (DSL601)", "default": True,
         "description": "Stop where a kernel faults (out-of-bounds access, divergent barrier), on the faulting "
                        "thread"}],
}

FOCUS_REQUEST = "kdsl/focus"
TERMINATE_GRACE_S = 3.0  # how long `terminate` waits for the program to reach a kernel statement


class RequestError(Exception):
    """An error response's message."""


class DebugAdapter:
    """One adapter: one client, at most one debugged program."""

    def __init__(self, channel: Channel):
        from dsl.debugger.session import DebugSession

        self.channel = channel
        self._seq = 0
        self._seq_lock = threading.Lock()
        self.session = DebugSession(self.event)
        self._launched = False
        self._configured = False
        self._started = False
        self._ended = threading.Event()
        self.done = False

    # ----- sending -------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        with self._seq_lock:
            self._seq += 1
            message["seq"] = self._seq
            body = json.dumps(message).encode("utf-8")
            self.channel.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def event(self, name: str, body: dict[str, Any]) -> None:
        if name in ("stopped", "exited"):
            self.channel.drain()  # the program's output comes before its stop or its end
        if name == "terminated":
            if self._ended.is_set():
                return
            self._ended.set()
        self.send({"type": "event", "event": name, "body": body})

    def output(self, category: str, text: str) -> None:
        self.event("output", {"category": category, "output": text})

    # ----- receiving -----------------------------------------------------------------------------
    def serve(self) -> int:
        reader = FrameReader()
        while not self.done:
            try:
                data = self.channel.read()
            except OSError:
                break
            if not data:
                break
            for frame in reader.feed(data):
                if isinstance(frame, FramingError):
                    self.output("stderr", f"kdsl debug: {frame.message}\n")
                    continue
                self.handle(frame)
                if self.done:
                    break
        self.session.terminate()
        return 0

    def handle(self, frame: bytes) -> None:
        try:
            message = json.loads(frame)
        except (ValueError, UnicodeDecodeError) as err:
            self.output("stderr", f"kdsl debug: a message that is not JSON ({err})\n")
            return
        if not isinstance(message, dict) or message.get("type") != "request":
            self.output("stderr", "kdsl debug: a message that is not a request was ignored\n")
            return
        seq, command = message.get("seq"), message.get("command")
        arguments = message.get("arguments")
        response: dict[str, Any] = {"type": "response", "request_seq": seq if isinstance(seq, int) else 0,
                                    "command": command if isinstance(command, str) else "", "success": True}
        try:
            if not isinstance(command, str):
                raise RequestError("the request has no command")
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise RequestError(f"'{command}': arguments must be an object")
            handler = self._handlers().get(command)
            if handler is None:
                raise RequestError(f"kdsl debug does not support the request '{command}'")
            body, after = handler(arguments)
            if body is not None:
                response["body"] = body
        except RequestError as err:
            self._fail(response, str(err))
            after = None
        except (KeyError, TypeError, ValueError) as err:  # arguments of the wrong shape
            self._fail(response, f"'{command}': {type(err).__name__}: {err}")
            after = None
        self.send(response)
        if after is not None:
            after()

    @staticmethod
    def _fail(response: dict[str, Any], message: str) -> None:
        response["success"] = False
        response["message"] = message
        response["body"] = {"error": {"id": 1, "format": message.replace("{", "{{").replace("}", "}}"),
                                      "showUser": True}}

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], tuple[Any, Callable[[], None] | None]]]:
        return {
            "initialize": self._initialize, "launch": self._launch, "attach": self._attach,
            "setBreakpoints": self._set_breakpoints, "setExceptionBreakpoints": self._set_exception_breakpoints,
            "setFunctionBreakpoints": lambda a: ({"breakpoints": []}, None),
            "configurationDone": self._configuration_done, "threads": self._threads,
            "stackTrace": self._stack_trace, "scopes": self._scopes, "variables": self._variables,
            "evaluate": self._evaluate, "exceptionInfo": self._exception_info,
            "continue": self._resume("continue"), "next": self._resume("next"), "stepIn": self._resume("in"),
            "stepOut": self._resume("out"), "pause": self._pause, "terminate": self._terminate,
            "disconnect": self._disconnect, FOCUS_REQUEST: self._focus,
        }

    # ----- requests --------------------------------------------------------------------------------
    def _initialize(self, args: dict[str, Any]) -> tuple[Any, Any]:
        if args.get("linesStartAt1") is False or args.get("columnsStartAt1") is False:
            raise RequestError("kdsl debug counts lines and columns from 1 (linesStartAt1)")
        return CAPABILITIES, lambda: self.event("initialized", {})

    def _launch(self, args: dict[str, Any]) -> tuple[Any, Any]:
        from dsl.debugger.session import LaunchConfig, LaunchConfigError

        if self._launched:
            raise RequestError("this adapter already launched a program")
        try:
            self.session.configure(LaunchConfig.parse(args))
        except LaunchConfigError as err:
            raise RequestError(str(err)) from None
        except OSError as err:
            raise RequestError(f"cannot read the program: {err}") from None
        self._launched = True
        return None, self._maybe_start

    def _attach(self, args: dict[str, Any]) -> tuple[Any, Any]:
        raise RequestError("kdsl debug launches programs (\"request\": \"launch\"); it does not attach")

    def _configuration_done(self, args: dict[str, Any]) -> tuple[Any, Any]:
        self._configured = True
        return None, self._maybe_start

    def _maybe_start(self) -> None:
        if self._launched and self._configured and not self._started:
            self._started = True
            self.session.start()

    def _set_breakpoints(self, args: dict[str, Any]) -> tuple[Any, Any]:
        source = args.get("source")
        if not isinstance(source, dict) or not isinstance(source.get("path"), str):
            raise RequestError("setBreakpoints needs source.path")
        requested = args.get("breakpoints")
        if requested is None:
            requested = [{"line": line} for line in args.get("lines", [])]
        if not isinstance(requested, list) or not all(
                isinstance(b, dict) and isinstance(b.get("line"), int) for b in requested):
            raise RequestError("setBreakpoints: breakpoints must be a list of {line, condition?, hitCondition?, "
                               "logMessage?}")
        placed = self.session.breakpoints.set(source["path"], requested)
        out = []
        for bp in placed:
            item: dict[str, Any] = {"id": bp.id, "verified": bp.verified, "line": bp.line,
                                    "source": {"path": source["path"]}}
            if bp.message:
                item["message"] = bp.message
            out.append(item)
        return {"breakpoints": out}, None

    def _set_exception_breakpoints(self, args: dict[str, Any]) -> tuple[Any, Any]:
        filters = args.get("filters", [])
        if not isinstance(filters, list):
            raise RequestError("setExceptionBreakpoints: filters must be a list")
        unknown = [f for f in filters if f != "faults"]
        self.session.break_on_faults = "faults" in filters
        return {"breakpoints": [{"verified": f == "faults"} for f in filters]} if unknown else None, None

    def _threads(self, args: dict[str, Any]) -> tuple[Any, Any]:
        return {"threads": self.session.threads()}, None

    def _stack_trace(self, args: dict[str, Any]) -> tuple[Any, Any]:
        thread = args.get("threadId")
        if not isinstance(thread, int):
            raise RequestError("stackTrace needs threadId")
        frames = [{"id": f["id"], "name": f["name"], "line": f["line"], "column": 1,
                   "source": {"name": f["file"].rsplit("/", 1)[-1], "path": f["file"]}}
                  for f in self.session.stack(thread)]
        start, levels = int(args.get("startFrame", 0) or 0), int(args.get("levels", 0) or 0)
        shown = frames[start:start + levels] if levels else frames[start:]
        return {"stackFrames": shown, "totalFrames": len(frames)}, None

    def _scopes(self, args: dict[str, Any]) -> tuple[Any, Any]:
        frame = args.get("frameId")
        if not isinstance(frame, int):
            raise RequestError("scopes needs frameId")
        scopes = [{"name": s.name, "variablesReference": s.reference, "expensive": False}
                  for s in self.session.scopes(frame)]
        return {"scopes": scopes}, None

    def _variables(self, args: dict[str, Any]) -> tuple[Any, Any]:
        ref = args.get("variablesReference")
        if not isinstance(ref, int):
            raise RequestError("variables needs variablesReference")
        found = self.session.variables(ref)
        if found is None:
            raise RequestError(f"no variables with reference {ref} (they last until the program resumes)")
        return {"variables": [_variable(v) for v in found]}, None

    def _evaluate(self, args: dict[str, Any]) -> tuple[Any, Any]:
        from dsl.debugger.session import LaunchConfigError

        expression = args.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            raise RequestError("evaluate needs an expression")
        frame = args.get("frameId")
        try:
            v = self.session.evaluate(expression, frame if isinstance(frame, int) else None)
        except LaunchConfigError as err:
            raise RequestError(str(err)) from None
        except Exception as err:  # the user's expression failed: say how, as a console would
            raise RequestError(f"{type(err).__name__}: {err}") from None
        return {"result": v.value, "type": v.type, "variablesReference": v.reference}, None

    def _exception_info(self, args: dict[str, Any]) -> tuple[Any, Any]:
        stop = self.session.stop
        if stop is None or stop.fault is None:
            raise RequestError("the program is not stopped at a fault")
        return {"exceptionId": "DSL601", "description": stop.fault.message, "breakMode": "always",
                "details": {"message": stop.fault.message, "typeName": "kernel fault"}}, None

    def _resume(self, command: str) -> Callable[[dict[str, Any]], tuple[Any, Any]]:
        def handler(args: dict[str, Any]) -> tuple[Any, Any]:
            if self.session.stop is None:
                raise RequestError("the program is not stopped")
            body = {"allThreadsContinued": True} if command == "continue" else None
            return body, lambda: self.session.resume(command)

        return handler

    def _pause(self, args: dict[str, Any]) -> tuple[Any, Any]:
        self.session.pause()
        return None, None

    def _terminate(self, args: dict[str, Any]) -> tuple[Any, Any]:
        return None, self._end_program

    def _end_program(self) -> None:
        self.session.terminate()
        if not self._started:
            self.event("terminated", {})
            return
        if not self.session.wait(TERMINATE_GRACE_S):  # host code that never reaches a kernel statement
            self.output("stderr", "kdsl debug: the program did not stop; ending the adapter\n")
            self.event("exited", {"exitCode": 1})
            self.event("terminated", {})
            self.done = True

    def _disconnect(self, args: dict[str, Any]) -> tuple[Any, Any]:
        def end() -> None:
            self.session.terminate()
            self.session.wait(TERMINATE_GRACE_S)
            self.done = True

        return None, end

    def _focus(self, args: dict[str, Any]) -> tuple[Any, Any]:
        from dsl.debugger.session import LaunchConfigError, dim3

        try:
            block = dim3(args.get("block", list(self.session.focus_block)), "block")
            thread = dim3(args.get("thread", list(self.session.focus_thread)), "thread")
            description = self.session.set_focus(block, thread)
        except LaunchConfigError as err:
            raise RequestError(str(err)) from None
        after = (lambda: self.event("invalidated", {"areas": ["threads", "stacks", "variables"]})
                 ) if self.session.stop is not None else None
        return {"block": list(block), "thread": list(thread), "description": description}, after


def _variable(v: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": v.name, "value": v.value, "variablesReference": v.reference}
    if v.type:
        out["type"] = v.type
    if v.evaluate_name:
        out["evaluateName"] = v.evaluate_name
    return out


def main(argv: list[str] | None = None) -> int:
    """Serves one debug session on stdin/stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write("usage: kdsl debug\n\nA Debug Adapter Protocol server over stdio: point an editor's "
                         "debugger at it (type \"kdsl\").\n")
        return 0
    if args:
        sys.stderr.write(f"kdsl debug takes no arguments (got {' '.join(args)})\n")
        return 2
    holder: list[DebugAdapter] = []
    pending: list[tuple[str, str]] = []

    def forward(category: str, text: str) -> None:
        if holder:
            holder[0].output(category, text)
        else:
            pending.append((category, text))

    channel = take_stdio(forward)
    adapter = DebugAdapter(channel)
    holder.append(adapter)
    for category, text in pending:
        adapter.output(category, text)
    return adapter.serve()
