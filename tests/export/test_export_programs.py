"""The C programs of the GPU test and of the dispatch benchmark build with gcc against real
exports and run their course against the recording driver (`recording.py`): on a GPU
machine only the kernels' work is left to check, which `test_export_gpu.py` and
`benchmarks/export_dispatch.py` do."""

from __future__ import annotations

import glob
import json
import os
import struct
import subprocess
import textwrap

import pytest

from dsl.cli_export import main as export
from tests.export.conftest import EXAMPLES, ROOT, have_gcc
from tests.export.recording import recording_driver
from tests.export.test_export_gpu import COPY, DATA

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")


def run(program: str, *args: str, folder) -> subprocess.CompletedProcess:
    env = {**os.environ, "LD_LIBRARY_PATH": str(recording_driver(folder)), "RECORDING_CUDA_LOG": str(folder / "log")}
    return subprocess.run([program, *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_gpu_test_program(tmp_path):
    (tmp_path / "copy_kernels.py").write_text(COPY)
    assert export([f"{EXAMPLES / 'saxpy.py'}::run_saxpy", f"{EXAMPLES / 'softmax.py'}::run_softmax",
                   f"{tmp_path / 'copy_kernels.py'}::copy", "--prefix", "lib", "-o", str(tmp_path / "lib"),
                   "--example", "copy: x=Tensor[f32, 1], y=Tensor[f32, 1], BLOCK=256",
                   "--example", "copy: x=Tensor[f16, 1], y=Tensor[f16, 1], BLOCK=128"]) == 0
    program = str(tmp_path / "gpu_program")
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path / 'lib'}",
                    str(DATA / "gpu_program.c"), str(tmp_path / "lib" / "lib.c"), "-o", program, "-ldl", "-lpthread",
                    "-lm"], check=True)
    n, rows, cols = 1000, 4, 100
    for name, count in (("x.bin", n), ("y.bin", n), ("rows.bin", rows * cols)):
        (tmp_path / name).write_bytes(struct.pack(f"{count}f", *range(count)))
    done = run(program, str(tmp_path), str(n), str(rows), str(cols), folder=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "refused: lib_copy: no exported specialization takes these arguments:",
        "  [x: Tensor[f32, 1], y: Tensor[f32, 1], BLOCK=256] BLOCK=64, but this specialization has BLOCK=256",
        "  [x: Tensor[f16, 1], y: Tensor[f16, 1], BLOCK=128] BLOCK=64, but this specialization has BLOCK=128", "ok"]
    launched = [line.split()[1:6] for line in (tmp_path / "log").read_text().splitlines()]
    assert launched == [["saxpy", "grid", "4", "1", "1"], ["softmax", "grid", "4", "1", "1"],
                        ["copy_kernel", "grid", "4", "1", "1"], ["copy_kernel", "grid", "8", "1", "1"]]


def test_the_dispatch_benchmark_driver(tmp_path):
    folder = tmp_path / "export_dispatch"
    assert export([f"{EXAMPLES / 'saxpy.py'}::run_saxpy", f"{ROOT / 'benchmarks' / 'export_dispatch.py'}::spin_wait",
                   "--prefix", "bench", "-o", str(folder)]) == 0
    driver = str(tmp_path / "driver")
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{folder}",
                    str(ROOT / "benchmarks" / "export_dispatch.c"), "-o", driver, "-ldl", "-lpthread", "-lm"],
                   check=True)
    done = run(driver, "10", folder=tmp_path)
    assert done.returncode in (0, 3), done.stderr  # 3: the recording driver's spin kernel takes no time
    lines = done.stdout.splitlines()
    assert lines[0].startswith("exported entry point bench_run_saxpy ") and lines[2].startswith("ratio ")
    result = json.loads(lines[-1])
    assert result["batch"] == 100 and result["rounds"] == 200 and result["exported_us"] > 0


CUDA_H = next((p for p in ("/usr/local/cuda/include/cuda.h", *sorted(glob.glob("/usr/local/cuda-*/include/cuda.h")))
               if os.path.exists(p)), None)


@pytest.mark.skipif(CUDA_H is None, reason="no cuda.h here (exports need none; this checks they live with it)")
def test_a_program_including_cuda_h_first_builds_with_the_export_and_is_told_there_is_no_driver(tmp_path):
    assert export([f"{EXAMPLES / 'saxpy.py'}::run_saxpy", "-o", str(tmp_path)]) == 0
    (tmp_path / "user.c").write_text(textwrap.dedent("""
        #include <cuda.h>
        #include "run_saxpy.h"
        #include <stdio.h>
        int main(void)
        {
            kdsl_tensor x = {0, KDSL_F32, 1, 0, 0, {4}, {1}}, y = x;
            CUresult r = run_saxpy(NULL, &x, &y, 1.0f);
            printf("%d %s\\n", (int)r, run_saxpy_error_string());
            return 0;
        }
    """))
    include = f"-I{os.path.dirname(CUDA_H)}"
    for compiler in (["gcc", "-std=c11", "-Wall", "-Wextra"], ["g++", "-std=c++17", "-Wall", "-x", "c++"]):
        subprocess.run([*compiler, "-Werror", include, str(tmp_path / "user.c"), str(tmp_path / "run_saxpy.c"), "-o",
                        str(tmp_path / "user"), "-ldl", "-lpthread", "-lm"], check=True)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    done = subprocess.run([str(tmp_path / "user")], capture_output=True, text=True, env=env)
    if "no NVIDIA GPU driver found" in done.stdout:  # a machine with no driver: the call says so, nothing exits
        assert done.stdout.startswith("3 run_saxpy: no NVIDIA GPU driver found (")
