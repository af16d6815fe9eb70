"""The stubs and the mypy plugin type-check themselves: pyright (standard mode) and mypy
report nothing on `dsl/language/*.pyi` and `dsl/mypy_plugin.py`. An installed package's
stubs are not reported to its users, so a mistake in one (an overload that can never be
chosen, a method that breaks `float`'s) would otherwise pass unseen."""

from __future__ import annotations

import json
import subprocess

from tests.typing.checkers import ROOT, _pyright_command, run_mypy

CHECKED = sorted((ROOT / "dsl" / "language").glob("*.pyi")) + [ROOT / "dsl" / "mypy_plugin.py"]


def test_pyright_accepts_the_stubs():
    out = subprocess.run([*_pyright_command(), "--outputjson", *map(str, CHECKED)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    diagnostics = json.loads(out.stdout)["generalDiagnostics"]
    assert [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}" for d in diagnostics
            if d["severity"] == "error"] == []


def test_mypy_accepts_the_stubs():
    assert run_mypy(*CHECKED).errors == []
