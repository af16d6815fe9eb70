"""`kdsl ir`: prints stages with a resources summary; diagnostics on stderr with exit codes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsl.cli_ir", *args], capture_output=True, text=True, timeout=120)


def test_prints_one_function_stage_and_resources():
    out = run(f"{EXAMPLES / 'saxpy.py'}::saxpy", "--stage", "ptx", "--target", "sm_80")
    assert out.returncode == 0, out.stderr
    assert "// ===== kernel saxpy =====" in out.stdout
    assert "// saxpy: 10 regs" in out.stdout or "// saxpy:" in out.stdout
    assert ".target sm_80" in out.stdout and "run_saxpy" not in out.stdout


def test_launcher_stage_of_every_function():
    out = run(str(EXAMPLES / "saxpy.py"), "--stage", "launcher")
    assert out.returncode == 0
    assert "    def launch(x, y, a, stream=None):" in out.stdout
    assert "// stage launcher is not available" in out.stdout  # the kernel has none


def test_diagnostics_on_stderr_and_nonzero_exit(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        import dsl
        from dsl import Int32, Tensor, f32

        @dsl.kernel
        def k(x: Tensor[f32], n: Int32):
            x[0] = x[1] + n
    """).lstrip())
    out = run(str(bad), "--stage", "traced")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"{bad}:6:12: DSL301 mixed types f32 and i32 in '+'; cast one explicitly, e.g. dsl.cast(x, dsl.f32)"]


def test_unknown_function_is_a_usage_error():
    out = run(f"{EXAMPLES / 'saxpy.py'}::nope")
    assert out.returncode == 2 and "no kernel or jit function named 'nope'" in out.stderr
