"""Every public name of a module with a stub is declared in the stub, and every name
`dsl` exports resolves: a name missing from a `.pyi` is an error for pyright and mypy,
and an `Unknown` for Pylance, even though the code runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dsl

LANGUAGE = Path(dsl.__file__).parent / "language"
STUBBED = ["types", "intrinsics", "decorators", "tensor_cores"]


def _top_level_names(path: Path, imports: bool = True) -> set[str]:
    """The names `path` defines at its top level, and those it imports if `imports`."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names.add(name.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and imports:
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.If):  # `if not TYPE_CHECKING:` branches hold run-time-only code
            continue
    return names


@pytest.mark.parametrize("module", STUBBED)
def test_stub_declares_every_public_name(module):
    runtime = {n for n in _top_level_names(LANGUAGE / f"{module}.py", imports=False) if not n.startswith("_")}
    stub = _top_level_names(LANGUAGE / f"{module}.pyi")
    assert runtime - stub == set()


def test_every_export_of_dsl_is_declared():
    stubs = set().union(*(_top_level_names(LANGUAGE / f"{m}.pyi") for m in STUBBED))
    from_stubbed = set()
    for node in ast.parse(Path(dsl.__file__).read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module in {f"dsl.language.{m}" for m in STUBBED}:
            from_stubbed.update(alias.name for alias in node.names)
    assert from_stubbed, "dsl/__init__.py no longer imports from dsl.language"
    assert from_stubbed - stubs == set()
