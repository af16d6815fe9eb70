"""`kdsl export` as a user runs it: the files it writes, its options, its exit codes and
messages; `kdsl ir --stage c`; `dsl.load_export` building and loading the library (without
a GPU it can be loaded, and refuses host arrays before calling the C)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import dsl
from dsl.diagnostics import ArgumentError
from tests.export.conftest import EXAMPLES, have_gcc

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")


def kdsl(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_one_function_for_two_targets(tmp_path):
    out = kdsl("export", f"{EXAMPLES / 'saxpy.py'}::run_saxpy", "--target", "sm_80,sm_90", "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(tmp_path)) == ["run_saxpy.c", "run_saxpy.export.json", "run_saxpy.h",
                                            "run_saxpy_launch_config.h"]
    lines = out.stdout.splitlines()
    assert lines[0].endswith("examples/saxpy.py:14: run_saxpy -> CUresult run_saxpy(CUstream stream, "
                             "const kdsl_tensor *x, const kdsl_tensor *y, float a);")
    assert lines[1] == "  [0] x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32, BLOCK=256"
    assert lines[2].startswith("      sm_80: saxpy ") and lines[3].startswith("      sm_90: saxpy ")
    assert lines[-1].startswith("build: gcc -std=c11 -O2 -shared -fPIC -o ") and lines[-1].endswith(" -lm")
    source = (tmp_path / "run_saxpy.c").read_text()
    assert '{0, 0, 8, 0, 0, "sm_80", kdsl_cubin_0, sizeof kdsl_cubin_0},' in source
    assert '{0, 0, 9, 0, 0, "sm_90", kdsl_cubin_1, sizeof kdsl_cubin_1},' in source
    assert "for sm_80, sm_90: the Python launcher, translated */" in source  # one launcher for both
    manifest = json.loads((tmp_path / "run_saxpy.export.json").read_text())
    assert (manifest["base"], manifest["targets"], manifest["functions"][0]["written"]) == (
        "run_saxpy", ["sm_80", "sm_90"], ["y"])


def test_a_prefixed_library_of_two_functions_built(tmp_path):
    out = kdsl("export", f"{EXAMPLES / 'saxpy.py'}::run_saxpy", f"{EXAMPLES / 'softmax.py'}::run_softmax",
               "--prefix", "kd", "-o", str(tmp_path), "--build")
    assert out.returncode == 0, out.stderr
    header = (tmp_path / "kd.h").read_text()
    assert "CUresult kd_run_saxpy(CUstream stream, const kdsl_tensor *x, const kdsl_tensor *y, float a);" in header
    assert "CUresult kd_run_softmax(CUstream stream, const kdsl_tensor *x, const kdsl_tensor *y);" in header
    assert "const char *kd_error_string(void);" in header
    assert out.stdout.splitlines()[-1] == f"built {tmp_path / 'libkd.so'}"
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(tmp_path / "libkd.so")], capture_output=True,
                             text=True, check=True).stdout
    assert sorted(line.split()[-1] for line in symbols.splitlines()) == [
        "kd_error_string", "kd_kernel_config_count", "kd_kernel_configs", "kd_run_saxpy", "kd_run_softmax"]


def test_examples_on_the_command_line_and_for_one_function(tmp_path):
    source = tmp_path / "copy.py"
    source.write_text(textwrap.dedent("""
        import dsl
        from dsl import Constexpr, Int32, Tensor

        @dsl.kernel
        def copy(x: Tensor, y: Tensor, n: Int32):
            i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
            if i < n:
                y[i] = x[i]

        @dsl.jit
        def run(x: Tensor, y: Tensor, BLOCK: Constexpr[int] = 256):
            copy(x, y, x.shape[0]).launch(grid=dsl.cdiv(x.shape[0], BLOCK), block=BLOCK)
    """))
    out = kdsl("export", f"{source}::run", "-o", str(tmp_path / "out"),
               "--example", "x=Tensor[f16, 1], y=Tensor[f16, 1]", "--example", "run: Tensor[bf16, 1], Tensor[bf16, 1]",
               "--example", "other: Tensor[f32, 1]")
    assert out.returncode == 0, out.stderr
    assert [line for line in out.stdout.splitlines() if line.startswith("  [")] == [
        "  [0] x: Tensor[f16, 1], y: Tensor[f16, 1], BLOCK=256",
        "  [1] x: Tensor[bf16, 1], y: Tensor[bf16, 1], BLOCK=256"]


@pytest.mark.parametrize("args, message", [
    (["--target", "sm_70"], "unknown target 'sm_70'"),
    (["--prefix", "1x"], "--prefix '1x' is not a C identifier"),
])
def test_usage_errors(tmp_path, args, message):
    out = kdsl("export", f"{EXAMPLES / 'saxpy.py'}::run_saxpy", "-o", str(tmp_path), *args)
    assert out.returncode == 2 and message in out.stderr


def test_naming_errors(tmp_path):
    out = kdsl("export", f"{EXAMPLES / 'saxpy.py'}::saxpy", "-o", str(tmp_path))
    assert out.returncode == 2
    assert "no @dsl.jit function named 'saxpy'" in out.stderr and "(found: run_saxpy)" in out.stderr
    out = kdsl("export", str(EXAMPLES / "saxpy.py"), "-o", str(tmp_path))
    assert out.returncode == 2 and "name the function as FILE::JIT_FUNCTION" in out.stderr
    out = kdsl("export", f"{EXAMPLES / 'saxpy.py'}::run_saxpy", f"{EXAMPLES / 'softmax.py'}::run_softmax", "-o",
               str(tmp_path))
    assert out.returncode == 2 and "name it with --prefix" in out.stderr


def test_a_kernel_pinned_to_hopper_does_not_export_for_ampere(tmp_path):
    out = kdsl("export", f"{EXAMPLES / 'gemm_hopper.py'}::gemm_hopper", "--target", "sm_80", "-o", str(tmp_path))
    assert out.returncode == 1
    assert "DSL207 kernel 'gemm_kernel' is written for sm_90a" in out.stderr
    assert "kdsl export: gemm_hopper(a: Tensor[bf16, 2], b_t: Tensor[bf16, 2], c: Tensor[bf16, 2], BN=256, " \
           "CLUSTER=1) did not compile for sm_80" in out.stderr
    assert not os.listdir(tmp_path)


def test_ir_prints_the_c_stage_of_a_jit_function():
    out = kdsl("ir", f"{EXAMPLES / 'saxpy.py'}", "--stage", "c")
    assert out.returncode == 0, out.stderr
    assert "// stage c is not available: this is a kernel (C entry points belong to jit functions)" in out.stdout
    assert "CUresult run_saxpy(CUstream stream, const kdsl_tensor *x, const kdsl_tensor *y, float a);" in out.stdout
    assert "const int64_t grid[3] = {kdsl_ceil_div(ev, A->x->shape[0], 256), 1, 1};" in out.stdout
    assert "0x7f, 0x45" not in out.stdout  # the cubin is left out of the view


def test_load_export_builds_loads_and_reads_arrays_as_the_launcher_does(tmp_path):
    numpy = pytest.importorskip("numpy")
    assert kdsl("export", f"{EXAMPLES / 'saxpy.py'}::run_saxpy", "-o", str(tmp_path)).returncode == 0
    lib = dsl.load_export(tmp_path)
    assert lib.library == tmp_path / "librun_saxpy.so" and lib.library.exists()
    assert repr(lib.run_saxpy) == "<exported run_saxpy(x, y, a)>"
    assert dsl.load_export(tmp_path).library == lib.library  # built once
    with pytest.raises(ArgumentError, match="argument 'x' is a CPU array; kernels need GPU"):
        lib.run_saxpy(numpy.zeros(4, numpy.float32), numpy.zeros(4, numpy.float32), 1.0)
    with pytest.raises(TypeError, match="missing a required argument: 'a'"):
        lib.run_saxpy(1, 2)
    debug = dsl.load_export(tmp_path, debug=True, nvtx=True)
    assert debug.library.name == "librun_saxpy-debug-nvtx.so"
