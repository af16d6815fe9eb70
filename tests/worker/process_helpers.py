"""Helpers for tests of what user code's processes may do: modules that start processes and
write their pids to a file, and waiting for those pids to be gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsp.sandbox import is_alive

SLEEPER = "import time; time.sleep(120)"


def pids_in(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def children_module(pid_file: Path, count: int) -> str:
    """Starts `count` sleeping children and returns; their pids go to `pid_file`."""
    return (
        "import subprocess, sys\n"
        f"kids = [subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]) for _ in range({count})]\n"
        f"open({str(pid_file)!r}, 'w').write(' '.join(str(k.pid) for k in kids))\n"
    )


def daemon_module(pid_file: Path) -> str:
    """A `setsid` daemon (double fork, new session) and a child in a new session, then returns."""
    return (
        "import os, subprocess, sys, time\n"
        f"kid = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], start_new_session=True)\n"
        "read_end, write_end = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.write(write_end, str(os.getpid()).encode())\n"
        "        time.sleep(120)\n"
        "    os._exit(0)\n"
        "os.close(write_end)\n"
        "daemon = os.read(read_end, 100).decode()\n"
        f"open({str(pid_file)!r}, 'w').write(f'{{kid.pid}} {{daemon}}')\n"
    )


def hang_with_child_module(pid_file: Path) -> str:
    """A child that inherits every pipe of the run (stderr included), then a busy loop."""
    return (
        "import subprocess, sys\n"
        f"kid = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], close_fds=False)\n"
        f"open({str(pid_file)!r}, 'w').write(str(kid.pid))\n"
        "while True:\n"
        "    pass\n"
    )


def wait_gone(pids: list[int], within_s: float = 3.0) -> list[int]:
    """The pids still alive after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in pids if is_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


async def await_gone(pids: list[int], within_s: float = 3.0) -> list[int]:
    return await asyncio.to_thread(wait_gone, pids, within_s)


def kill_all(pids: list[int]) -> None:
    """Cleanup for a failing test, so no sleeper outlives it."""
    import os
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
