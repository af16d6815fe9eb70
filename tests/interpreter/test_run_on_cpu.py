"""`dsl.interpreter.run.run_function`: what the editor's "Run on CPU (interpreter)" answers.

Fixture: tests/lsp/data/saxpy.py (no reference), and the same module with a right and a wrong
`reference=`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from dsl.interpreter.run import run_function

SAXPY = Path(__file__).resolve().parents[1] / "lsp" / "data" / "saxpy.py"


def with_reference(expression: str) -> str:
    decorator = f"@dsl.jit(reference=lambda x, y, a, BLOCK: {{'y': {expression}}})\n"
    return SAXPY.read_text().replace("@dsl.jit\n", decorator)


def expected_y() -> np.ndarray:
    """What saxpy leaves in y on the inputs Run on CPU makes (seed 0: x, then y; a = 1.5)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096,), dtype=np.float32)
    y = rng.standard_normal((4096,), dtype=np.float32)
    return np.float32(1.5) * x + y


def test_without_a_reference_it_says_what_it_wrote_and_how_long_it_took():
    result = run_function(SAXPY.read_text(), str(SAXPY), "run_saxpy")
    elapsed = result.pop("elapsed_ms")
    assert elapsed > 0
    y = expected_y().astype(np.float64)
    stats = f"y (4096,) float32: min {y.min():.4g}, max {y.max():.4g}, mean {y.mean():.4g}, no NaN or inf"
    assert result == {
        "ok": True, "correct": None, "device": "the CPU (interpreter)", "outputs": [stats],
        "message": f"ran in {elapsed:.0f} ms; {stats}; no reference declared "
                   "(reference= on @dsl.jit compares the outputs); inputs x (4096,)",
    }


def test_nan_and_inf_in_an_output_are_counted():
    source = SAXPY.read_text().replace("y[i] = a * x[i] + y[i]",
                                       "y[i] = (x[i] - x[i]) / 0.0 if i % 2 == 0 else x[i] / 0.0")
    result = run_function(source, str(SAXPY), "run_saxpy")
    assert result["ok"] is True, result["message"]
    assert result["outputs"] == ["y (4096,) float32: no finite value, 2048 NaN, 2048 inf"]


def test_a_reference_is_checked():
    right = run_function(with_reference("a * x + y"), str(SAXPY), "run_saxpy")
    assert right["ok"] is True and right["correct"] is True
    assert right["message"].endswith("; matches the reference (y: relative L2 error 0.00e+00); inputs x (4096,)")
    wrong = run_function(with_reference("a * x - y"), str(SAXPY), "run_saxpy")
    assert wrong["ok"] is False and wrong["correct"] is False
    assert "; DIFFERS from the reference (y: relative L2 error " in wrong["message"]


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


def test_without_numpy_the_interpreter_says_what_to_install():
    """A fresh environment can lack NumPy (it is a dependency, but environments drift)."""
    script = ("import sys; sys.modules['numpy'] = None\n"
              "from dsl.interpreter.run import run_function\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: the kdsl interpreter needs NumPy, which "), last
    assert last.endswith(f"install it with `{sys.executable} -m pip install numpy` "
                         "(or reinstall kdsl, which depends on it)"), last
