"""The package's layers import only downwards: language -> frontend -> compiler -> runtime (each
may use those before it, and the shared modules beside them), never one after it, not even
inside a function. The `dsl` package itself, above them all, plugs the upper layers into the
language's entry points."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DSL = Path(__file__).resolve().parents[2] / "dsl"
LAYERS = ["language", "frontend", "compiler", "runtime", "profiling"]


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_no_layer_imports_a_later_one(layer):
    later = LAYERS[LAYERS.index(layer) + 1:]
    wrong = []
    for path in sorted((DSL / layer).glob("*.py")):
        for line, module in _imports(path):
            parts = module.split(".")
            if parts[0] == "dsl" and len(parts) > 1 and parts[1] in later:
                wrong.append(f"{path.relative_to(DSL.parent)}:{line} imports {module}")
    assert wrong == []


def test_shared_modules_import_no_layer():
    wrong = []
    for name in ("diagnostics.py", "targets.py", "environment.py", "records.py"):
        for line, module in _imports(DSL / name):
            parts = module.split(".")
            if parts[0] == "dsl" and len(parts) > 1 and parts[1] in LAYERS:
                wrong.append(f"dsl/{name}:{line} imports {module}")
    assert wrong == []
