"""Helpers for `kdsl lint` tests: copy files from `data/`, and run lint as a user does."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class LintRun:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def copy_data(folder: Path, *names: str) -> Path:
    """Copies data files into `folder`; `x.py.in` becomes `x.py`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(DATA / name, folder / name.removesuffix(".in"))
    return folder


def run_lint(cwd: Path, *args: str, timeout: float = 120) -> LintRun:
    """`python -m lsp.cli lint ARGS` in `cwd`, the way CI or pre-commit runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "lsp.cli", "lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return LintRun(proc.returncode, proc.stdout, proc.stderr)


def lint(cwd: Path, *args: str) -> LintRun:
    """`kdsl lint ARGS` in this process (same code path as `run_lint`, without starting Python)."""
    from lsp.lint.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(previous)
    return LintRun(code, out.getvalue(), err.getvalue())
