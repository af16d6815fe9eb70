"""`kdsl build`: the declared specializations land in the disk cache, under the same keys a
program's first call looks up (no GPU: the lookup is the runtime's own `compile_entry`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from dsl.cli_build import main

MODULE = textwrap.dedent("""
    import dsl
    from dsl import Constexpr, Float32, Tensor, f32, i32

    @dsl.kernel
    def scale(x: Tensor[f32], a: Float32):
        i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
        if i < x.shape[0]:
            x[i] = x[i] * a

    @dsl.jit
    def run(x: Tensor[f32], a: Float32, BLOCK: Constexpr[int] = 128):
        scale(x, a).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)

    @dsl.kernel
    def fill(x: Tensor, v: i32):
        x[dsl.thread_idx.x] = v

    @dsl.jit(examples=[(dsl.TensorSpec(i32, (64,)), 7)])
    def run_fill(x: Tensor, v: i32):
        fill(x, v).launch(grid=1, block=64)
""")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOOKUP = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import built_mod
from dsl.runtime.jit_call import compile_entry
x = np.zeros(1000, np.float32)
print(compile_entry(built_mod.run, (x, 2.0), {}, "sm_90")[1],
      compile_entry(built_mod.run_fill, (np.zeros(64, np.int32), 3), {}, "sm_90")[1],
      compile_entry(built_mod.run, (x, 2.0, 256), {}, "sm_90")[1])
"""


def test_built_entries_are_what_a_program_looks_up(tmp_path, capsys):
    (tmp_path / "built_mod.py").write_text(MODULE)
    assert main([str(tmp_path / "built_mod.py")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("run(x: Tensor[f32, 1], a: f32, BLOCK=128) for sm_90: built")
    assert out[1].endswith("run_fill(x: Tensor[i32, 1], v: i32) for sm_90: built")
    assert out[2] == f"cache: {os.environ['KDSL_CACHE_DIR']}"
    assert main([str(tmp_path / "built_mod.py")]) == 0
    assert "for sm_90: already cached" in capsys.readouterr().out
    # A program importing the module the usual way finds both entries; another BLOCK is not built.
    proc = subprocess.run([sys.executable, "-c", LOOKUP, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)))
    assert proc.stdout.split() == ["True", "True", "False"], proc.stderr


def test_a_specialization_that_does_not_compile_fails_the_build(tmp_path, capsys):
    (tmp_path / "broken_mod.py").write_text(MODULE.replace("x[i] = x[i] * a", "x[i] = x[i] * undefined_name"))
    assert main([str(tmp_path / "broken_mod.py")]) == 1
    err = capsys.readouterr().err
    assert "undefined_name" in err and "run(x: Tensor[f32, 1], a: f32, BLOCK=128) for sm_90: did not compile" in err


def test_without_a_disk_cache_there_is_nothing_to_build(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KDSL_NO_DISK_CACHE", "1")
    (tmp_path / "built_mod.py").write_text(MODULE)
    assert main([str(tmp_path / "built_mod.py")]) == 2
    assert "KDSL_NO_DISK_CACHE" in capsys.readouterr().err
