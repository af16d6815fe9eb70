"""The editor's analysis (`cubins_on_request=True`): every kernel gets the figures and the
diagnostics of its own ptxas run, from ptxas runs over many modules, and its cubin, made when
a view asks for it, is the one compiling it alone makes; a tensor-core kernel is assembled
alone at once (its SASS gives the mix hover shows); a module ptxas refuses gets its own
error."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from dsl.compiler import cache, toolchain
from dsl.compiler.batch_assembly import Batches
from dsl.compiler.toolchain import ToolError
from dsl.module_analysis import analyze_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# libdevice math and warp shuffles, a jit that launches its kernel, shared memory, tensor cores
NAMES = ("softmax", "saxpy", "transpose", "matmul_mma")

pytestmark = pytest.mark.skipif(toolchain.ptxas_path() is None, reason="ptxas is not installed")


def _figures(compiled) -> dict:
    return {k.symbol: (k.resources.registers, k.resources.spill_stores, k.resources.spill_loads,
                       k.resources.stack_bytes, k.resources.static_smem, k.resources.tensor_cores)
            for k in compiled.kernels}


@pytest.mark.parametrize("name", NAMES)
def test_each_kernel_gets_its_own_figures_and_its_cubin_on_request(name, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))  # `from reductions import ...`
    path = EXAMPLES / f"{name}.py"
    cache.MEMORY.clear()
    eager = analyze_source(path.read_text(), str(path))
    on_request = analyze_source(path.read_text(), str(path), cubins_on_request=True)
    assert [f.name for f in on_request.functions] == [f.name for f in eager.functions]
    compiled_kernels = 0
    for mine, theirs in zip(on_request.functions, eager.functions):
        assert mine.diagnostics == theirs.diagnostics, mine.name
        if theirs.compiled is None:
            assert mine.compiled is None
            continue
        a, b = mine.compiled, theirs.compiled
        assert b.cubin is not None and _figures(a) == _figures(b), mine.name
        assert a.stages.keys() == b.stages.keys() and a.stages["ptx"] == b.stages["ptx"]
        tensor_cores = any(k.resources.tensor_cores for k in b.kernels)
        assert (a.cubin is not None) == tensor_cores  # made at once only where hover needs the SASS
        if toolchain.nvdisasm_path() is not None:
            assert "sass" in a.available_stages
        assert a.assembled_cubin() == b.cubin
        if toolchain.nvdisasm_path() is not None:
            assert a.sass == b.sass and a.source_maps["sass"] == b.source_maps["sass"]
        compiled_kernels += len(a.kernels)
    assert compiled_kernels


PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry {name}(.param .u64 {name}_param_0)
{{
    .reg .b64 %rd<3>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [{name}_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 7;
    {store} [%rd2], %r1;
    ret;
}}
"""


def test_a_module_ptxas_refuses_gets_its_error_and_the_others_their_figures():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        batches = Batches(pool, 2)
        good = batches.start(PTX.format(name="good", store="st.global.u32"), "sm_90")
        bad = batches.start(PTX.format(name="bad", store="st.global.not_a_type"), "sm_90")
        again = batches.start(PTX.format(name="good", store="st.global.u32"), "sm_90")  # assembled once
        with pytest.raises(ToolError, match="not_a_type"):
            bad()
        figures = good()
        assert set(figures) == {"good"} and figures["good"].registers > 0
        assert again() == figures and again()["good"] is not figures["good"]  # copies: callers fill them in
