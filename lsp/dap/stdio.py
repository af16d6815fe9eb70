"""The protocol's channel apart from the program's output.

The adapter speaks DAP on its stdin and stdout, and the program it debugs runs in the same
process: a `print` in the program (or a kernel's `printf`, or a C library writing to fd 1)
would otherwise land in the middle of the protocol's frames. `take_stdio` moves the protocol
to duplicates of fds 0 and 1, then points fd 0 at /dev/null and fds 1 and 2 at pipes whose
contents are sent to the client as `output` events (stdout and stderr).
"""

from __future__ import annotations

import fcntl
import os
import sys
import termios
import threading
import time
from collections.abc import Callable


class Channel:
    """The protocol's own input and output (file descriptors), with a lock for writers."""

    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd, self.write_fd = read_fd, write_fd
        self._lock = threading.Lock()
        self.pumps: list[_Pump] = []

    def drain(self, timeout: float = 2.0) -> None:
        """Waits until what the program wrote to fds 1 and 2 so far has been forwarded."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout
        for pump in self.pumps:
            pump.wait_empty(deadline)

    def read(self, size: int = 65536) -> bytes:
        return os.read(self.read_fd, size)

    def write(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                written = os.write(self.write_fd, view)
                view = view[written:]


def take_stdio(forward: Callable[[str, str], None]) -> Channel:
    """The protocol's channel; from now on fds 1 and 2 go to `forward(category, text)`."""
    channel = Channel(os.dup(0), os.dup(1))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, category in ((1, "stdout"), (2, "stderr")):
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        pump = _Pump(read_end, category, forward)
        channel.pumps.append(pump)
        threading.Thread(target=pump.run, daemon=True, name=f"kdsl-dap-{category}").start()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
        except (AttributeError, ValueError):
            pass
    return channel


class _Pump:
    """Forwards one pipe's bytes as they come."""

    def __init__(self, fd: int, category: str, forward: Callable[[str, str], None]):
        self.fd, self.category, self.forward = fd, category, forward
        self.busy = False

    def run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.busy = True
            try:
                self.forward(self.category, data.decode("utf-8", errors="replace"))
            finally:
                self.busy = False

    def wait_empty(self, deadline: float) -> None:
        quiet = 0  # twice empty and idle in a row: a read that just returned has had time to mark busy
        while time.monotonic() < deadline and quiet < 2:
            pending = bytearray(4)
            fcntl.ioctl(self.fd, termios.FIONREAD, pending)
            quiet = quiet + 1 if int.from_bytes(pending, sys.byteorder) == 0 and not self.busy else 0
            time.sleep(0.002)
