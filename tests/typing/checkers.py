"""Runs pyright and mypy the way a kernel author does, and returns what they report.

pyright gets a configuration in a temporary folder with the repository on its path, so it
resolves `dsl` the same with any install; mypy runs from the repository root, so it reads
the project's own `[tool.mypy]` settings (the `dsl.mypy_plugin` line among them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Report:
    """One checker's diagnostics: (line, text) pairs, 1-based lines, for a check of one file;
    `by_file` has the file name too, for a check of a folder. `revealed` maps lines to types."""

    errors: list[tuple[int, str]]
    revealed: dict[int, str]
    by_file: list[tuple[str, int, str]]


def _pyright_command() -> list[str]:
    exe = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which("pyright")
    if exe is None:
        pytest.skip("pyright is not installed (pip install -e '.[test]')")
    return [exe]


def run_pyright(path: Path, mode: str, workdir: Path) -> Report:
    """pyright in `mode` ("basic" or "standard") on `path`, a file or a folder."""
    config = workdir / "pyrightconfig.json"
    config.write_text(json.dumps({"typeCheckingMode": mode, "extraPaths": [str(ROOT), str(path.parent)]}))
    out = subprocess.run([*_pyright_command(), "--outputjson", "-p", str(config), str(path)],
                         capture_output=True, text=True, timeout=300)
    data = json.loads(out.stdout)
    errors, revealed, by_file = [], {}, []
    for d in data["generalDiagnostics"]:
        line = d["range"]["start"]["line"] + 1
        if d["severity"] == "error":
            errors.append((line, d["message"].splitlines()[0]))
            by_file.append((Path(d["file"]).name, line, d["message"].splitlines()[0]))
        elif (m := re.match(r'Type of ".*" is "(.*)"$', d["message"])):
            revealed[line] = m.group(1)
    return Report(sorted(errors), revealed, sorted(by_file))


def run_mypy(*paths: Path) -> Report:
    """mypy on `paths` (or on what `[tool.mypy]` names), with the project's settings."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--show-error-codes",
                          *map(str, paths)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors, revealed, by_file = [], {}, []
    for raw in out.stdout.splitlines():
        m = re.match(r"(.+?):(\d+): (error|note): (.*)$", raw)
        if not m:
            continue
        line, kind, text = int(m.group(2)), m.group(3), m.group(4)
        if kind == "error":
            errors.append((line, text))
            by_file.append((Path(m.group(1)).name, line, text))
        elif (r := re.match(r'Revealed type is "(.*)"$', text)):
            revealed[line] = r.group(1)
    return Report(sorted(errors), revealed, sorted(by_file))


def line_of(path: Path, marker: str) -> int:
    """The 1-based line of `path` that holds `marker` (a `# <name>` comment)."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.rstrip().endswith(marker):
            return number
    raise AssertionError(f"{marker!r} not in {path}")
