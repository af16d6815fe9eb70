"""A throwaway code-server for one walk: its own user-data and extensions folders, the packaged
.vsix installed, user settings written, listening on 127.0.0.1 only with no authentication.

The settings are those a new user would have after pointing `kdsl.interpreterPath` at the
Python that has kdsl (the one running these tests), plus what keeps a fresh profile quiet
offline (no welcome page, no update or telemetry calls). Workspace trust is off so that the
server runs the compiler tier, as it does in a folder the user trusts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 60


def user_settings(python: str) -> dict[str, object]:
    return {
        "kdsl.interpreterPath": python,
        "kdsl.inlayHints.lineCost": True,
        "security.workspace.trust.enabled": False,
        "workbench.startupEditor": "none",
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False,
        "update.mode": "none",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class CodeServer:
    """A running code-server; `url` opens `workspace` in it."""

    process: subprocess.Popen[bytes]
    port: int
    workspace: Path
    user_data: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?folder={self.workspace}"

    def output_channel_log(self, name: str) -> str:
        """What the output channel `name` holds: VS Code mirrors each channel to a log file."""
        files = sorted(self.user_data.glob(f"logs/*/exthost*/output_logging_*/*-{name}.log"))
        return "\n".join(f.read_text(errors="replace") for f in files)

    def stop(self) -> None:
        """Ends code-server with everything it started (its extension host, the kdsl server)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _code_server_args(binary: Path, root: Path) -> list[str]:
    return [str(binary), "--user-data-dir", str(root / "user-data"), "--extensions-dir", str(root / "extensions"),
            "--config", str(root / "config.yaml")]


def start_code_server(binary: Path, vsix: Path, workspace: Path, root: Path) -> CodeServer:
    """Installs `vsix` into a new profile under `root` and starts code-server on `workspace`."""
    user_data = root / "user-data"
    (user_data / "User").mkdir(parents=True)
    (user_data / "User" / "settings.json").write_text(json.dumps(user_settings(sys.executable), indent=2))
    (root / "config.yaml").write_text("")
    subprocess.run([*_code_server_args(binary, root), "--install-extension", str(vsix)],
                   check=True, capture_output=True, timeout=120)
    port = _free_port()
    log = root / "code-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*_code_server_args(binary, root), "--bind-addr", f"127.0.0.1:{port}", "--auth", "none",
             "--disable-telemetry", "--disable-update-check", "--ignore-last-opened", str(workspace)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = CodeServer(process, port, workspace, user_data, log)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never goes through a proxy
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"code-server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with direct.open(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return server
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"code-server did not answer within {START_TIMEOUT_S} s:\n{log.read_text()}")
