"""What a program's first call compiles with: no generated dialect modules, no IR views, the
same PTX as the editor's build, the driver bindings loaded while ptxas runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dsl
from dsl.compiler import cache
from dsl.compiler.api import compile_function
from dsl.compiler.build_options import BuildOptions

ROOT = Path(__file__).resolve().parents[2]

NO_DIALECT_MODULES = """
import sys
sys.path.insert(0, "examples")
import mlir.dialects.arith  # a user's own import stays fully usable afterwards
import dsl
from examples.softmax import run_softmax
from dsl.compiler import cache
from dsl.compiler.api import compile_function
compiled, diags = compile_function(run_softmax, (dsl.TensorSpec("f32", (4, 1024)),) * 2, until="ptx")
assert compiled is not None, diags
generated = sorted(m for m in sys.modules if m.startswith("mlir.dialects._") and m.endswith("_ops_gen"))
from mlir import ir
with ir.Context(), ir.Location.unknown():
    op = mlir.dialects.arith.ConstantOp(ir.F32Type.get(), 1.0)
    typed = type(op.operation.opview).__name__
print(generated, typed)
"""


def test_compiling_imports_no_generated_dialect_module():
    """Only the arith module the program imported itself is loaded, and its typed ops work."""
    proc = subprocess.run([sys.executable, "-c", NO_DIALECT_MODULES], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)))
    assert proc.stdout.split() == ["['mlir.dialects._arith_ops_gen']", "ConstantOp"], proc.stderr


def test_build_without_views_gives_the_same_ptx_and_no_ir_texts(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from examples.layernorm import run_layernorm

    specs = (dsl.TensorSpec("f32", (8, 1024)), dsl.TensorSpec("f32", (1024,)), dsl.TensorSpec("f32", (1024,)),
             dsl.TensorSpec("f32", (8, 1024)))
    full, diags = compile_function(run_layernorm, specs, until="ptx")
    lean, lean_diags = compile_function(run_layernorm, specs, until="ptx", options=BuildOptions(views=False))
    assert full is not None and lean is not None, diags + lean_diags
    assert lean.stages["ptx"] == full.stages["ptx"]
    assert {"traced", "lowered", "llvm"} <= set(full.stages) and not {"traced", "lowered", "llvm"} & set(lean.stages)
    assert lean.source_maps == {} and full.source_maps["ptx"]


def test_while_assembling_runs_once_during_the_ptxas_build(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from examples.saxpy import run_saxpy

    cache.MEMORY.clear()  # a result compiled before would skip ptxas, and the hook with it
    calls = []
    options = BuildOptions(views=False, while_assembling=lambda: calls.append("loaded"))
    compiled, diags = compile_function(run_saxpy, until="cubin", options=options)
    assert compiled is not None, diags
    assert calls == ["loaded"]
    assert compiled.cubin[:4] == b"\x7fELF"
