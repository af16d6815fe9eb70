"""libdevice functions called from many sites are called, not inlined at each (issue 28, item 7).

A GEMM epilogue that applies the exact GELU to each of a consumer thread's 128 accumulator
elements inlined 128 bodies of `__nv_erff` (217 KiB of PTX against the plain GEMM's 41), and
LLVM, ptxas and nvdisasm took that much longer. Past `INLINE_CALL_SITES` call sites the calls
stay calls to one body; an elementwise kernel's few sites are still inlined. The fixture is
`benchmarks/kernels/gemm_hopper_gelu.py`; `benchmarks/compile_gemm_epilogue.py` times it.

Functions of one or two instructions (`ALWAYS_INLINED`: `__nv_exp2f` is one `ex2.approx`) are
inlined however often they are called: 134 calls of `__nv_exp2f` in attention's softmax made
the attention forward run at 35% of SDPA.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import dsl
from dsl.compiler.pipeline import INLINE_CALL_SITES

ROOT = Path(__file__).resolve().parents[2]

MANY_ERFS = """
import dsl
from dsl import Tensor, f32

@dsl.kernel
def k(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x * {n}
    for j in dsl.static_range({n}):
        y[i + j] = dsl.erf(x[i + j])
"""


MANY_EXP2S = MANY_ERFS.replace("dsl.erf", "dsl.exp2")


def erf_calls(ptx: str) -> tuple[int, int]:
    """(bodies of __nv_erff, call sites of it) in a module's PTX (a body is a `.func` with `{`;
    its declaration before the kernel ends in `;`)."""
    bodies = re.findall(r"\.func\s+\(\.param \.b32 func_retval0\) __nv_erff\(\s*\.param \.b32 \w+\s*\)\s*\{", ptx)
    return len(bodies), len(re.findall(r"call\.uni .*__nv_erff", ptx))


def test_more_call_sites_than_the_limit_call_one_body(analyse):
    a = analyse(MANY_ERFS.format(n=INLINE_CALL_SITES + 1))
    assert erf_calls(a.stage("k", "ptx")) == (1, INLINE_CALL_SITES + 1)


def test_up_to_the_limit_libdevice_is_inlined(analyse):
    a = analyse(MANY_ERFS.format(n=INLINE_CALL_SITES))
    assert erf_calls(a.stage("k", "ptx")) == (0, 0)


def test_the_fused_gemm_epilogue_calls_one_erf_body(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    path = ROOT / "benchmarks/kernels/gemm_hopper_gelu.py"
    report = dsl.analyze_source(path.read_text(), str(path))
    sys.modules.pop("gemm_hopper", None)
    assert [d.format() for d in report.all_diagnostics()] == []
    (fn,) = [f for f in report.functions if f.name == "gemm_hopper_gelu"]
    assert erf_calls(fn.compiled.ptx) == (1, 128)  # BN=256: 128 accumulator elements per consumer thread
    (kernel,) = fn.compiled.kernels
    assert kernel.resources.spill_stores == 0 and kernel.resources.tensor_cores.get("HGMMA", 0) > 0


def test_a_one_instruction_function_is_inlined_however_often_it_is_called(analyse):
    n = 4 * INLINE_CALL_SITES
    ptx = analyse(MANY_EXP2S.format(n=n)).stage("k", "ptx")
    assert "__nv_exp2f" not in ptx
    assert len(re.findall(r"ex2\.approx(\.ftz)?\.f32", ptx)) == n


def test_the_attention_softmax_calls_no_libdevice_function(monkeypatch):
    """The examples whose loops apply `dsl.exp2` to every score: forward, decode and backward."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    for name in ("attention_hopper", "attention_decode", "attention_backward_hopper"):
        path = ROOT / "examples" / f"{name}.py"
        report = dsl.analyze_source(path.read_text(), str(path), until="ptx")  # what ptxas is given
        compiled = [f.compiled for f in report.functions if f.compiled is not None]
        assert compiled, name
        for fn in compiled:
            assert not re.search(r"call\.uni[^;]*__nv_", fn.ptx), f"{name}: a libdevice call in the PTX"
        assert any("ex2.approx" in fn.ptx for fn in compiled), name
