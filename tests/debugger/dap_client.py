"""A Debug Adapter Protocol client for the tests: the adapter as a child process, spoken to
over its stdin and stdout with the protocol's framing and messages (requests, responses,
events), as an editor speaks to it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from typing import Any

from lsp.framing import FrameReader, FramingError

TIMEOUT = 60.0


class DapClient:
    def __init__(self, cwd: str | None = None):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "lsp.dap"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env)
        self._seq = 0
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self._responses: dict[int, dict[str, Any]] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        reader = FrameReader()
        assert self.proc.stdout is not None
        while True:
            data = self.proc.stdout.read1(65536)  # type: ignore[attr-defined]
            if not data:
                self._messages.put({"type": "eof"})
                return
            for frame in reader.feed(data):
                if not isinstance(frame, FramingError):
                    self._messages.put(json.loads(frame))

    def send_raw(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> int:
        self._seq += 1
        message: dict[str, Any] = {"seq": self._seq, "type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        self.send_raw(json.dumps(message).encode())
        return self._seq

    def _next(self, timeout: float) -> dict[str, Any]:
        message = self._messages.get(timeout=timeout)
        if message.get("type") == "eof":
            raise EOFError("the adapter closed its output: " + self.stderr())
        if message.get("type") == "event":
            self.events.append(message)
        elif message.get("type") == "response":
            self._responses[message["request_seq"]] = message
        return message

    def response(self, seq: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        while seq not in self._responses:
            self._next(timeout)
        return self._responses.pop(seq)

    def request(self, command: str, arguments: dict[str, Any] | None = None, ok: bool = True) -> dict[str, Any]:
        response = self.response(self.send(command, arguments))
        if ok:
            assert response["success"], response
        return response

    def event(self, name: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The first `name` event not yet taken (waiting for it)."""
        while True:
            for i, e in enumerate(self.events):
                if e["event"] == name:
                    return self.events.pop(i)
            self._next(timeout)

    def output(self) -> str:
        return "".join(e["body"]["output"] for e in self.events if e["event"] == "output")

    def stderr(self) -> str:
        try:
            self.proc.kill()
            return self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        except Exception:
            return ""

    def start(self, launch: dict[str, Any], breakpoints: dict[str, list[dict[str, Any]]] | None = None,
              filters: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """initialize, launch, breakpoints, configurationDone in the order editors use; the
        breakpoints as the adapter verified them, by path."""
        caps = self.request("initialize", {"adapterID": "kdsl", "linesStartAt1": True, "columnsStartAt1": True})
        assert caps["body"]["supportsConfigurationDoneRequest"]
        launched = self.send("launch", {"type": "kdsl", "request": "launch", **launch})
        self.event("initialized")
        placed = {}
        for path, bps in (breakpoints or {}).items():
            placed[path] = self.request("setBreakpoints", {"source": {"path": path}, "breakpoints": bps}
                                        )["body"]["breakpoints"]
        self.request("setExceptionBreakpoints", {"filters": filters if filters is not None else ["faults"]})
        self.request("configurationDone")
        response = self.response(launched)
        assert response["success"], response
        return placed

    def stopped(self) -> dict[str, Any]:
        return self.event("stopped")["body"]

    def top_frame(self, thread: int | None = None) -> dict[str, Any]:
        tid = thread if thread is not None else self.request("threads")["body"]["threads"][0]["id"]
        return self.request("stackTrace", {"threadId": tid})["body"]["stackFrames"][0]

    def locals(self, frame_id: int) -> dict[str, dict[str, Any]]:
        scopes = self.request("scopes", {"frameId": frame_id})["body"]["scopes"]
        ref = next(s["variablesReference"] for s in scopes if s["name"] in ("Locals", "Launch"))
        return {v["name"]: v for v in self.request("variables", {"variablesReference": ref})["body"]["variables"]}

    def children(self, ref: int) -> dict[str, dict[str, Any]]:
        return {v["name"]: v for v in self.request("variables", {"variablesReference": ref})["body"]["variables"]}

    def evaluate(self, expression: str, frame_id: int | None = None) -> dict[str, Any]:
        args: dict[str, Any] = {"expression": expression, "context": "watch"}
        if frame_id is not None:
            args["frameId"] = frame_id
        return self.request("evaluate", args, ok=False)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.send("disconnect", {"terminateDebuggee": True})
                self.proc.wait(timeout=10)
        except Exception:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
