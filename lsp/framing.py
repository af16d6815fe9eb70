"""Base-protocol framing: bytes from the client -> JSON bodies, whatever the client sends.

A message is `Content-Length: N` (other headers ignored), a blank line, then N bytes of
body. Clients get this wrong in every way a fuzzer can think of, and a server that trusts
the header either allocates what it is told (`Content-Length: 10**15`) or waits forever
for bytes that never come. `FrameReader` is a pure state machine over a byte buffer:

- header lines may end in CRLF or a bare LF, and header names are case-insensitive;
- a length that is missing, not a decimal number, or above `MAX_CONTENT_LENGTH` is refused
  before anything is allocated for it; the reader then resynchronizes on the next
  `Content-Length` header, even one that starts in the middle of a line;
- a length longer than the message is noticed when the next header shows up inside the
  pending body and the bytes before it are complete JSON;
- a length shorter than the message leaves a broken body (the caller answers -32700) and
  the rest of that message is skipped as junk up to the next header.

Each problem is reported once per resynchronization as a `FramingError`, never raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_CONTENT_LENGTH = 64 * 1024 * 1024  # bigger than any sane document, small enough to buffer
MAX_HEADER_LINE = 8 * 1024  # a header line longer than this is junk

_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_HEADER = re.compile(rb"[A-Za-z0-9!#$%&'*+.^_`|~-]+[ \t]*:")
_KEYWORD = b"Content-Length"


@dataclass(frozen=True)
class FramingError:
    message: str


Frame = bytes | FramingError


class FrameReader:
    """Feed it bytes as they arrive; it returns complete bodies and framing errors, in order."""

    def __init__(self, max_length: int = MAX_CONTENT_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_length
        self._length: int | None = None  # from this header block's Content-Length
        self._in_header = False  # a header line of the current block was seen
        self._in_body = False
        self._scan_from = 0  # where to look next for a header inside a pending body
        self._junk = False  # already reported junk since the last good frame

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out: list[Frame] = []
        while self._step_body(out) if self._in_body else self._step_header(out):
            pass
        return out

    # -- headers ----------------------------------------------------------------------------

    def _step_header(self, out: list[Frame]) -> bool:
        buf = self._buf
        newline = buf.find(b"\n", 0, MAX_HEADER_LINE + 1)
        if newline < 0:
            if len(buf) > MAX_HEADER_LINE:
                self._skip_long_line(out)
                return True
            return False
        line = bytes(buf[: newline + 1])
        del buf[: newline + 1]
        if not line.strip():  # the blank line that ends a header block
            if self._length is not None:
                self._in_body, self._scan_from = True, 0
            elif self._in_header:
                self._report(out, "a message without a valid Content-Length header was skipped")
            self._in_header = False
            return True
        match = _LENGTH.search(line)
        if match is None:
            if _HEADER.match(line):
                self._in_header = True  # Content-Type or an unknown header: ignored
            else:
                self._report(out, f"skipped {len(line)} bytes that are not a message header")
            return True
        if line[: match.start()].strip():
            self._report(out, f"skipped {match.start()} bytes before a Content-Length header")
        self._in_header = True
        value = match.group(1).strip()
        self._length = None
        if value.isdigit() and len(value) <= 12 and int(value) <= self._max:
            self._length = int(value)
        else:
            shown = value[:40].decode("ascii", "replace")
            self._junk = False  # a new problem: say so even in the middle of a resync
            self._report(out, f"refused Content-Length {shown!r} (a decimal number up to {self._max} bytes)")
        return True

    def _skip_long_line(self, out: list[Frame]) -> None:
        """No newline in a whole header's worth of bytes: drop them, keeping a possible header start."""
        buf = self._buf
        at = buf.find(_KEYWORD, 1)
        keep = at if at > 0 else len(buf) - len(_KEYWORD)
        self._report(out, f"skipped {keep} bytes that are not a message header")
        del buf[:keep]
        self._length, self._in_header = None, False

    # -- body -------------------------------------------------------------------------------

    def _step_body(self, out: list[Frame]) -> bool:
        buf, length = self._buf, self._length or 0
        if len(buf) >= length:
            body = bytes(buf[:length])
            if buf.find(_KEYWORD, 1, length) < 0 or _is_json(body) or not self._resync_in_body(out, length):
                out.append(body)
                del buf[:length]
                self._end_frame()
            return True
        # The body is incomplete. If the next message's header is already here and what
        # precedes it is a whole JSON value, the declared length was too long.
        if self._resync_in_body(out, length):
            return True
        self._scan_from = max(len(buf) - len(_KEYWORD), 0)
        return False

    def _resync_in_body(self, out: list[Frame], length: int) -> bool:
        buf = self._buf
        at = buf.find(_KEYWORD, max(self._scan_from, 1), length)
        while at > 0:
            candidate = bytes(buf[:at])
            if _is_json(candidate):
                self._junk = False
                self._report(out, f"Content-Length {length} is longer than the {at}-byte message; resynchronized")
                out.append(candidate)
                del buf[:at]
                self._end_frame()
                return True
            at = buf.find(_KEYWORD, at + 1, length)
        return False

    def _end_frame(self) -> None:
        self._length, self._in_header, self._in_body, self._junk = None, False, False, False

    def _report(self, out: list[Frame], message: str) -> None:
        if not self._junk:
            out.append(FramingError(message))
            self._junk = True


def _is_json(data: bytes) -> bool:
    stripped = data.rstrip()
    if not stripped.endswith((b"}", b"]")):
        return False
    try:
        json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    return True
