"""Fixtures for `kdsl export` tests: example jit functions, jit functions written by a test."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))  # examples import their shared helpers (reductions.py) by name


def example_jit_functions() -> list[tuple[str, str]]:
    """(example file, jit function name) for every @dsl.jit function in examples/."""
    import ast

    from dsl.frontend.static_checks import decorator_kind

    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(decorator_kind(d) == "jit" for d in node.decorator_list):
                out.append((path.name, node.name))
    return out


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KDSL_CACHE_DIR", str(tmp_path / "kdsl-cache"))


@pytest.fixture
def jit_module(tmp_path):
    """Writes a source as a module in tmp_path, runs it and returns its namespace."""
    from dsl.module_analysis import run_module

    def load(source: str, name: str = "kern") -> dict:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source).lstrip("\n"))
        namespace, diagnostics = run_module(path.read_text(), str(path))
        assert not [d for d in diagnostics if d.is_error], [d.format() for d in diagnostics]
        return namespace

    return load


def example_namespace(file: str) -> dict:
    from dsl.module_analysis import read_program, run_module

    path = str(EXAMPLES / file)
    namespace, diagnostics = run_module(read_program(path, "test"), path)
    assert not [d for d in diagnostics if d.is_error], [d.format() for d in diagnostics]
    return namespace


def have_gcc() -> bool:
    return any(os.access(os.path.join(p, "gcc"), os.X_OK) for p in os.environ.get("PATH", "").split(os.pathsep))
