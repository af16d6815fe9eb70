"""JSON-RPC and the LSP lifecycle: every request is answered, with the spec's error code.

Driven over stdio in raw bytes (`RawServer`), since a typed client refuses to send most of
these messages in the first place.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HOVER = "textDocument/hover"
URI = "file:///nowhere/doc.py"


def _hover(line: int, character: int) -> dict:
    return {"textDocument": {"uri": URI}, "position": {"line": line, "character": character}}


def _error(answer: dict) -> tuple[int, str]:
    return answer["error"]["code"], answer["error"]["message"]


def test_requests_before_initialize_are_refused_and_notifications_dropped(raw_server):
    server = raw_server()
    assert _error(server.request(HOVER, _hover(0, 0))) == (
        -32002, "the server is not initialized; textDocument/hover refused"
    )
    server.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "python", "version": 1,
                                                            "text": "x = 1\n"}})
    server.initialize()
    assert server.request("kdsl/text", {"uri": URI})["result"] is None  # the early didOpen was dropped
    assert _error(server.request("initialize", {"processId": None, "capabilities": {}})) == (
        -32600, "initialize may be sent only once"
    )


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        (_hover(-1, 0), "invalid value @ $.params.position"),
        (_hover(0, 2**31), "invalid value @ $.params.position"),
        (None, "required field missing @ $.params"),
        ("null", "invalid value for type, expected textDocument/hover @ $.params"),
    ],
    ids=["negative line", "character 2**31", "missing params", "null params"],
)
def test_params_that_do_not_fit_get_invalid_params(raw_server, params, reason):
    server = raw_server()
    server.initialize()
    message = server.request_message(HOVER)
    if params == "null":
        message["params"] = None
    elif params is not None:
        message["params"] = params
    server.send(message)
    code, text = _error(server.response(message["id"]))
    assert code == -32602
    assert text.startswith(f"Invalid params for {HOVER}: ")
    assert reason.split(" @ ")[1] in text
    # the largest valid position is fine: no document there, so no hover
    assert server.request(HOVER, _hover(2**31 - 1, 2**31 - 1))["result"] is None


def test_malformed_requests_get_invalid_request(raw_server):
    server = raw_server()
    server.initialize()
    server.send({"jsonrpc": "1.0", "id": 41, "method": HOVER, "params": _hover(0, 0)})
    server.send({"jsonrpc": "2.0", "id": 42})
    server.send({"jsonrpc": "2.0", "id": {"no": 1}, "method": HOVER})
    server.send([{"jsonrpc": "2.0", "id": 43, "method": "shutdown"}])
    assert [_error(server.response(i))[0] for i in (41, 42)] == [-32600, -32600]
    assert _error(server.request("kdsl/noSuchMethod", {}))[0] == -32601  # answered in order: a fence
    nulls = [m for m in server.messages if m.get("id", 0) is None]
    assert [m["error"]["code"] for m in nulls] == [-32600, -32600]


def test_everything_after_shutdown_is_refused_and_exit_is_zero(raw_server):
    server = raw_server()
    server.initialize()
    assert server.request("shutdown")["result"] is None
    for method, params in ((HOVER, _hover(0, 0)), ("shutdown", None), ("kdsl/text", {"uri": URI})):
        assert _error(server.request(method, params)) == (-32600, f"the server is shut down; {method} refused")
    server.notify("exit")
    assert server.wait_exit() == 0


def test_exit_without_shutdown_is_one(raw_server):
    server = raw_server()
    server.initialize()
    server.notify("exit")
    assert server.wait_exit() == 1


def test_end_of_input_without_exit(raw_server):
    server = raw_server()
    server.initialize()
    server.proc.stdin.close()
    assert server.wait_exit() == 1


def test_the_server_exits_when_its_parent_process_dies(raw_server):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        server = raw_server()
        answer = server.request(
            "initialize", {"processId": parent.pid, "capabilities": {}, "initializationOptions": {"trusted": False}}
        )
        assert answer["result"]["serverInfo"]["name"] == "kdsl"
        assert server.request("kdsl/text", {"uri": URI})["result"] is None  # alive while the parent is
        parent.kill()
        parent.wait()
        assert server.wait_exit(timeout=15) == 1
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert f"the client process {parent.pid} is gone; exiting" in server.stderr


CUSTOM_REQUESTS = ["kdsl/capabilities", "kdsl/stages", "kdsl/ir", "kdsl/text"]


@pytest.mark.parametrize("form", ["absent", "null"])
@pytest.mark.parametrize("method", CUSTOM_REQUESTS)
def test_custom_requests_take_params_absent_or_null(raw_server, method, form):
    """JSON-RPC allows both; the VS Code client leaves `params` out of `kdsl/capabilities`."""
    server = raw_server()
    server.initialize()
    message = server.request_message(method)
    assert "params" not in message
    if form == "null":
        message["params"] = None
    server.send(message)
    answer = server.response(message["id"])
    assert "error" not in answer, answer
    if method == "kdsl/capabilities":
        assert answer["result"]["defaultTarget"] == "sm_90"
    server.notify("kdsl/noSuchNotification")  # a notification without params is dropped quietly
    assert "error" not in server.request("kdsl/capabilities")
    assert "invalid params" not in server.stderr.lower()
