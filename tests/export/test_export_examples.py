"""Every jit function in examples/ exports to C that gcc (C11, -Wall -Wextra -Werror) and g++
(C++17, -Wall -Werror) compile and link into a shared library exporting exactly the entry
point, the error string and the launch-configuration table; the headers say what they must.

Each example is exported once, by `kdsl export` itself, into a folder of this module's."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess

import pytest

from tests.export.conftest import EXAMPLES, example_jit_functions, have_gcc

pytestmark = pytest.mark.skipif(not have_gcc(), reason="needs gcc")
EXAMPLES_JIT = example_jit_functions()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """jit function name -> the folder its `kdsl export` wrote (its `main`, in this process: one
    import of kdsl for all of them)."""
    from dsl.cli_export import main

    root = tmp_path_factory.mktemp("exports")
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KDSL_CACHE_DIR", str(root / "cache"))
        patch.syspath_prepend(str(EXAMPLES))  # `from reductions import ...`, as the CLI's run finds it
        for file, name in EXAMPLES_JIT:
            folder = root / name
            errors = io.StringIO()
            with contextlib.redirect_stderr(errors):
                code = main([f"{EXAMPLES / file}::{name}", "-o", str(folder)])
            assert code == 0, errors.getvalue()
            out[name] = folder
    return out


def test_every_example_with_a_jit_function_is_exported():
    assert len(EXAMPLES_JIT) >= 14
    assert ("saxpy.py", "run_saxpy") in EXAMPLES_JIT and ("gemm_hopper.py", "gemm_hopper") in EXAMPLES_JIT


@pytest.mark.parametrize("name", [n for _, n in EXAMPLES_JIT])
def test_the_export_compiles_as_strict_c11_and_cxx17_and_links(exported, name, tmp_path):
    folder = exported[name]
    source = folder / f"{name}.c"
    library = tmp_path / f"lib{name}.so"
    for command in (["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-shared", "-fPIC", "-o", str(library),
                     str(source), "-ldl", "-lpthread", "-lm"],  # strict C11, linked as a library
                    # as C++ (what it accepts; the optimizer's warnings are the -O2 C build's)
                    ["g++", "-std=c++17", "-Wall", "-Werror", "-c", "-o", str(tmp_path / "x.o"), str(source)],
                    ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DKDSL_EXPORT_DEBUG", "-DKDSL_EXPORT_NVTX",
                     "-c", "-o", str(tmp_path / "x.o"), str(source)]):
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                             check=True).stdout
    defined = sorted(line.split()[-1] for line in symbols.splitlines() if line.strip())
    assert defined == sorted([name, f"{name}_error_string", f"{name}_kernel_configs", f"{name}_kernel_config_count"])
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True,
                               check=True).stdout
    assert "cu" not in {s[:2] for s in undefined.split()}  # the driver is looked up at run time, not linked


def test_the_saxpy_header_declares_the_entry_point_by_its_signature(exported):
    header = (exported["run_saxpy"] / "run_saxpy.h").read_text()
    assert "CUresult run_saxpy(CUstream stream, const kdsl_tensor *x, const kdsl_tensor *y, float a);" in header
    assert "const char *run_saxpy_error_string(void);" in header
    assert "[0] x: Tensor[f32, 1], y: Tensor[f32, 1], a: f32, BLOCK=256 (sm_90)" in header
    assert "#include <cuda.h>" not in header and "typedef struct kdsl_tensor {" in header


def test_the_launch_config_header_lists_each_launch(exported):
    text = (exported["run_fp8_quantize"] / "run_fp8_quantize_launch_config.h").read_text()
    rows = [line for line in text.splitlines() if line.startswith("/* run_fp8_quantize [")]
    assert [re.sub(r", \d+ registers", ", N registers", row) for row in rows] == [
        "/* run_fp8_quantize [x: Tensor[bf16, 1], q: Tensor[f8e4m3, 1], amax: Tensor[f32, 1], scale_inv: "
        "Tensor[f32, 1], BLOCK=256] sm_90 launch 1: abs_max, block (256, 1, 1), dynamic smem 0, static smem "
        f"{_static(exported, 'run_fp8_quantize', 'abs_max')}, N registers */",
        "/* run_fp8_quantize [x: Tensor[bf16, 1], q: Tensor[f8e4m3, 1], amax: Tensor[f32, 1], scale_inv: "
        "Tensor[f32, 1], BLOCK=256] sm_90 launch 2: quantize, block (256, 1, 1), dynamic smem 0, static smem "
        f"{_static(exported, 'run_fp8_quantize', 'quantize')}, N registers */"]
    assert "#define RUN_FP8_QUANTIZE_KERNEL_CONFIG_COUNT 2" in text
    assert "extern const kdsl_kernel_config run_fp8_quantize_kernel_configs[];" in text


def _static(exported, name: str, symbol: str) -> int:
    """The kernel's static shared memory, as the table in the source holds it."""
    source = (exported[name] / f"{name}.c").read_text()
    return int(re.search(rf'\{{\d+, "{symbol}", (\d+)\}}', source).group(1))


def test_the_config_table_holds_registers_and_shared_memory_of_the_hopper_gemm(exported):
    source = (exported["gemm_hopper"] / "gemm_hopper.c").read_text()
    row = re.search(r'\{"gemm_hopper", "[^"]*", "sm_90a", "gemm_kernel", 1, \{384, 1, 1\}, 213048, (\d+), (\d+), '
                    r'0, 0\}', source)
    assert row is not None and int(row.group(2)) > 0  # registers from ptxas
    manifest = json.loads((exported["gemm_hopper"] / "gemm_hopper.export.json").read_text())
    assert manifest["functions"][0]["params"] == [
        {"name": n, "kind": "tensor", "ctype": "const kdsl_tensor *", "dtype": None, "default": None}
        for n in ("a", "b_t", "c")]


def test_every_cubin_is_embedded(exported):
    source = (exported["run_saxpy"] / "run_saxpy.c").read_text()
    assert "KDSL_ALIGNAS(64) static const unsigned char kdsl_cubin_0[] = {\n    0x7f, 0x45, 0x4c, 0x46" in source
