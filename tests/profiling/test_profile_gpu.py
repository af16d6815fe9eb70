"""`kdsl profile` and `dsl.profile` on the GPU: the planted causes found where they are.

Needs an NVIDIA GPU and Nsight Compute (`ncu`); skipped where either is missing (the
CPU-only checks are test_analysis.py, on counters recorded from these same kernels).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsl.profiling.nsight import find_ncu
from dsl.runtime import driver

ROOT = Path(__file__).resolve().parents[2]
PLANTED = Path(__file__).parent / "planted.py"
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not driver.available(), reason="no NVIDIA GPU here"),
              pytest.mark.skipif(find_ncu() is None, reason="Nsight Compute (ncu) is not installed")]


def kdsl_profile(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lsp.cli", "profile", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def line_of(text: str) -> int:
    return next(k + 1 for k, line in enumerate(PLANTED.read_text().splitlines()) if text in line)


def profiled(function: str) -> dict:
    done = kdsl_profile(f"{PLANTED}::{function}", "--json")
    assert done.returncode == 0, done.stderr
    (kernel,) = json.loads(done.stdout)["kernels"]
    return kernel


def test_the_strided_line_is_first_with_memory_stalls():
    kernel = profiled("run_strided")
    first = kernel["lines"][0]
    assert (first["file"], first["line"]) == (str(PLANTED), line_of("return t[(i * 33) % n]"))
    assert first["top_stalls"][0][0].startswith("long scoreboard")
    coalesced = next(line for line in kernel["lines"] if line["line"] == line_of("a = x[i]  # coalesced"))
    assert first["sectors_per_request"] > 2 * coalesced["sectors_per_request"]
    assert kernel["limiter"].startswith("memory-bound")


def test_the_bank_conflict_is_on_its_line():
    kernel = profiled("run_bank_conflict")
    column = next(line for line in kernel["lines"] if line["line"] == line_of("acc += tile[t * 32 + k]"))
    assert column["bank_conflicts"] > 0


def test_the_fma_chain_is_compute_bound():
    assert profiled("run_fma_chain")["limiter"].startswith("compute-bound")


def test_the_roofline_counts_the_fma_chains_flops_by_hand_and_puts_it_right_of_the_ridge():
    """2**20 threads, each: 4096 steps of two FMAs (2 FLOPs each), one multiply and one add."""
    kernel = profiled("run_fma_chain")
    assert kernel["flops"] == (1 << 20) * (4096 * 2 * 2 + 2), kernel["flops_by_kind"]
    roofline = kernel["roofline"]
    assert roofline["kind"] == "fp32" and roofline["bound"] == "compute"
    assert roofline["ridge"] == pytest.approx(67.0 / 4.8, rel=1e-4)
    assert kernel["arithmetic_intensity"] > roofline["ridge"]


def test_the_table_names_the_lines_and_a_slower_kernel_fails_the_gate(tmp_path):
    baseline = tmp_path / "baseline.json"
    done = kdsl_profile(f"{PLANTED}::run_strided", "-o", str(baseline))
    assert done.returncode == 0, done.stderr
    assert "return t[(i * 33) % n]" in done.stdout and "memory-bound" in done.stdout
    data = json.loads(baseline.read_text())
    data["kernels"][0]["duration_us"] /= 2  # a baseline twice as fast: this run is 100% slower
    baseline.write_text(json.dumps(data))
    gate = kdsl_profile(f"{PLANTED}::run_strided", "--compare", str(baseline), "--fail-above", "10")
    assert gate.returncode == 1
    assert "SLOWER than the limit of +10%" in gate.stdout


def test_dsl_profile_in_a_script_shows_the_tensor_pipe_of_the_hopper_gemm(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "gemm_script.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "examples")!r})
        import torch
        import dsl
        from gemm_hopper import gemm_hopper

        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        b_t = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
        report = dsl.profile(gemm_hopper, a, b_t, c)
        print("REPORT" + report.dumps().replace(chr(10), " "))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("REPORT"))
    (kernel,) = json.loads(line[len("REPORT"):])["kernels"]
    assert kernel["name"] == "gemm_kernel"
    assert kernel["tensor_pipe_pct"] is not None and kernel["tensor_pipe_pct"] > 20
    assert any(line["file"].endswith("gemm_hopper.py") for line in kernel["lines"])
    # the roofline's tensor work, read from the HGMMAs' shapes and executions: 2 M N K
    tensor = kernel["flops_by_kind"].get("bf16/fp16 tensor")
    assert tensor == pytest.approx(2 * 4096**3, rel=1e-3), (tensor, kernel["flops_by_kind"])
    assert kernel["roofline"]["kind"] == "bf16/fp16 tensor" and kernel["roofline"]["bound"] == "compute"
