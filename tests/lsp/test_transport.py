"""Framing: whatever bytes arrive, the server keeps answering.

The server tests speak raw bytes to `python -m lsp` (`RawServer`); each malformed frame is
followed by three good requests and a `shutdown`, which must all be answered. The
`FrameReader` tests feed the pure reader directly, split at every possible place.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp.framing import MAX_CONTENT_LENGTH, FrameReader, FramingError

SYMBOLS = "textDocument/documentSymbol"


def _request(msg_id: int) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": SYMBOLS, "params": {"textDocument": {"uri": "file:///none.py"}}}


def _body(message: dict) -> bytes:
    return json.dumps(message).encode()


def _assert_still_answering(server) -> None:
    """Three later requests are answered (no document open: empty lists), then shutdown and exit 0."""
    for msg_id in (1, 2, 3):
        server.send(_request(msg_id))
    assert [server.response(i)["result"] for i in (1, 2, 3)] == [[], [], []]
    assert server.request("shutdown") == {"jsonrpc": "2.0", "id": server._next_id, "result": None}
    server.notify("exit")
    assert server.wait_exit() == 0


def _framing_errors(server) -> list[str]:
    return [line for line in server.stderr.splitlines() if "framing:" in line]


def test_absurd_content_length_is_refused_without_allocating(raw_server):
    server = raw_server()
    server.initialize()
    server.write(b"Content-Length: 1000000000000000\r\n\r\n" + b"x" * 100)
    _assert_still_answering(server)
    assert _framing_errors(server) == [
        "ERROR:lsp.protocol:framing: refused Content-Length '1000000000000000' "
        f"(a decimal number up to {MAX_CONTENT_LENGTH} bytes)"
    ]


BROKEN_FRAMES = {
    "too short": lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) - 5) + body,
    "too long": lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) + 50) + body,
    "not a number": lambda body: b"Content-Length: abc\r\n\r\n" + body,
    "negative": lambda body: b"Content-Length: -5\r\n\r\n" + body,
    "missing": lambda body: b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body,
    "garbage before": lambda body: b"\x00\xffhello\r\n" + b"Content-Length: %d\r\n\r\n" % len(body) + body,
}


@pytest.mark.parametrize("kind", sorted(BROKEN_FRAMES))
def test_a_malformed_frame_is_skipped_with_one_logged_error(raw_server, kind):
    server = raw_server()
    server.initialize()
    server.write(BROKEN_FRAMES[kind](_body(_request(99))))
    _assert_still_answering(server)
    assert len(_framing_errors(server)) <= 1
    if kind == "too long":  # the message itself was whole: it is answered too
        assert server.response(99)["result"] == []
    if kind == "too short":  # a cut body is not JSON
        assert server.wait_for(lambda m: "error" in m)["error"]["code"] == -32700


def test_lf_only_headers_and_any_header_case_are_accepted(raw_server):
    server = raw_server()
    server.initialize()
    body = _body(_request(7))
    server.write(b"content-length:%d\n\n" % len(body) + body)
    assert server.response(7)["result"] == []
    _assert_still_answering(server)
    assert _framing_errors(server) == []


def test_bad_json_is_answered_with_parse_error(raw_server):
    server = raw_server()
    server.initialize()
    server.send(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    error = server.wait_for(lambda m: "error" in m)
    assert error == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": "Parse error: Expecting value: line 1 column 39 (char 38)",
        },
    }
    _assert_still_answering(server)


# -- the pure reader ------------------------------------------------------------------------------


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(b"Content-Length: %d\r\n\r\n" % len(b) + b for b in bodies)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10),
)
def test_reader_is_independent_of_how_bytes_are_split(bodies, cuts):
    encoded = [json.dumps(b).encode() for b in bodies]
    data = _stream(encoded)
    reader = FrameReader()
    frames = []
    last = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
        frames += reader.feed(data[last:cut])
        last = cut
    assert frames == encoded


def test_reader_refuses_a_length_above_its_limit_and_resynchronizes():
    reader = FrameReader(max_length=10)
    frames = reader.feed(b"Content-Length: 11\r\n\r\n{\"a\": 12345}" + _stream([b"{}"]))
    assert frames == [
        FramingError("refused Content-Length '11' (a decimal number up to 10 bytes)"),
        b"{}",
    ]


def test_reader_skips_a_long_line_without_newline():
    reader = FrameReader()
    frames = reader.feed(b"x" * 20000 + _stream([b"[1]"]))
    assert frames == [FramingError("skipped 20000 bytes that are not a message header"), b"[1]"]
