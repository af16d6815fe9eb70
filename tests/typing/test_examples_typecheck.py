"""pyright (basic and standard modes) and mypy report nothing on `examples/`, with the
project's own settings (`[tool.pyright]`, `tests/typing/pyright-basic.json`, `[tool.mypy]`)
— the commands `scripts/test.sh` runs. pyright's one allowance, a missing import as a
warning, may name only the host libraries the examples check results with (torch)."""

from __future__ import annotations

import json
import re
import subprocess

from tests.typing.checkers import ROOT, _pyright_command, run_mypy

OPTIONAL_HOST_LIBRARIES = {"torch", "cupy", "numpy"}


def _pyright_errors(*args: str) -> list[str]:
    out = subprocess.run([*_pyright_command(), "--outputjson", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    data = json.loads(out.stdout)
    assert data["summary"]["filesAnalyzed"] >= 10
    missing = {m.group(1).split(".")[0] for d in data["generalDiagnostics"]
               if (m := re.match(r'Import "(.+)" could not be resolved', d["message"]))}
    assert missing <= OPTIONAL_HOST_LIBRARIES
    return [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
            for d in data["generalDiagnostics"] if d["severity"] == "error"]


def test_pyright_standard_mode_accepts_the_examples():
    assert _pyright_errors() == []


def test_pyright_basic_mode_accepts_the_examples():
    assert _pyright_errors("-p", "tests/typing/pyright-basic.json") == []


def test_mypy_accepts_the_examples():
    assert run_mypy().errors == []
