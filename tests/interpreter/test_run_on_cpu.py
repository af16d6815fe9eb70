"""`dsl.interpreter.run.run_function`: what the editor's "Run on CPU (interpreter)" answers.

Fixture: tests/lsp/data/saxpy.py (no reference), and the same module with a right and a wrong
`reference=`.
"""

from __future__ import annotations

from pathlib import Path

from dsl.interpreter.run import run_function

SAXPY = Path(__file__).resolve().parents[1] / "lsp" / "data" / "saxpy.py"


def with_reference(expression: str) -> str:
    decorator = f"@dsl.jit(reference=lambda x, y, a, BLOCK: {{'y': {expression}}})\n"
    return SAXPY.read_text().replace("@dsl.jit\n", decorator)


def test_without_a_reference_it_runs_on_small_inputs():
    result = run_function(SAXPY.read_text(), str(SAXPY), "run_saxpy")
    assert result.pop("elapsed_ms") > 0
    assert result == {"ok": True, "correct": None, "device": "the CPU (interpreter)",
                      "message": "no reference declared; inputs x (4096,), y (4096,)"}


def test_a_reference_is_checked():
    right = run_function(with_reference("a * x + y"), str(SAXPY), "run_saxpy")
    assert right["ok"] is True and right["correct"] is True
    assert right["message"] == "matches the reference (y: relative L2 error 0.00e+00); inputs x (4096,), y (4096,)"
    wrong = run_function(with_reference("a * x - y"), str(SAXPY), "run_saxpy")
    assert wrong["ok"] is False and wrong["correct"] is False
    assert wrong["message"].startswith("DIFFERS from the reference (y: relative L2 error ")


def test_a_fault_comes_back_with_its_diagnostic():
    source = SAXPY.read_text().replace("a * x[i]", "a * x[i + 1]")
    result = run_function(source, str(SAXPY), "run_saxpy")
    assert result["ok"] is False
    assert "out-of-bounds load of 4 bytes at tensor 'x' at element offset 4096" in result["message"]
    (diagnostic,) = result["diagnostics"]
    assert diagnostic["code"] == "DSL601" and diagnostic["range"]["line"] == 9


def test_a_kernel_is_not_a_jit_function():
    result = run_function(SAXPY.read_text(), str(SAXPY), "saxpy")
    assert result["ok"] is False
    assert result["message"] == "'saxpy' is a @dsl.kernel; run the @dsl.jit function that launches it"
