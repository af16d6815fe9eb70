"""The `kdsl` command dispatches to its subcommands and reports misuse with exit code 2."""

from __future__ import annotations

import subprocess
import sys

from lsp.cli import main


def _kdsl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_the_commands(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n  {name} " in out for name in ("lint", "lsp", "ir"))


def test_no_command_and_unknown_command_exit_2() -> None:
    assert _kdsl().returncode == 2
    unknown = _kdsl("frobnicate")
    assert unknown.returncode == 2
    assert "unknown command 'frobnicate'" in unknown.stderr


def test_lint_help_names_every_option() -> None:
    run = _kdsl("lint", "--help")
    assert run.returncode == 0
    for option in ("--select", "--ignore", "--exclude", "--target", "--no-exec", "--fail-on", "--format",
                   "--output", "--jobs", "--timeout"):  # fmt: skip
        assert option in run.stdout
