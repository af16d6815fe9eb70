"""On the GPU: a `KDSL_DEBUG=1` build under cuda-gdb stops at a kernel's Python line, switches
to a thread, prints a variable by its Python name, steps, and the program's result is
unchanged (skipped without a GPU, torch or cuda-gdb)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from dsl.runtime import driver

DATA = os.path.join(os.path.dirname(__file__), "data")

COMMANDS = """set pagination off
set breakpoint pending on
break kernels.py:18
run
info line
cuda block 1,0,0 thread 5,0,0
info locals
print i
print i * 2
next
info line
next
info line
delete
continue
"""


@pytest.mark.gpu
@pytest.mark.skipif(not driver.available(), reason="needs an NVIDIA GPU")
@pytest.mark.skipif(shutil.which("cuda-gdb") is None, reason="needs cuda-gdb (the CUDA toolkit)")
def test_cuda_gdb_stops_at_a_kernels_python_line_and_steps(tmp_path):
    pytest.importorskip("torch")
    commands = tmp_path / "commands.gdb"
    commands.write_text(COMMANDS)
    env = {**os.environ, "KDSL_DEBUG": "1", "KDSL_CACHE_DIR": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run(["cuda-gdb", "-q", "-batch", "-x", str(commands), "--args", sys.executable,
                          "gpu_script.py"], cwd=DATA, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert "hit Breakpoint 1, steps<<<(4,1,1),(64,1,1)>>> () at " in out and "kernels.py:18" in out, out[-4000:]
    assert "block (1,0,0), thread (5,0,0)" in out, out[-4000:]
    assert "$1 = 69" in out and "$2 = 138" in out, out[-4000:]  # i = block_idx.x * 64 + thread_idx.x, by name
    stepped = [line for line in out.splitlines() if line.startswith("Line ") and "kernels.py" in line]
    assert len(stepped) >= 3 and any(not s.startswith("Line 18 ") for s in stepped[1:]), stepped
    assert "steps: [4, 13, 22]" in out  # the debug build computes what the optimised one does
