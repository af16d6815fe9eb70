"""A file of many functions is lowered on two cores (`analyze_source(helpers=1)`, the
editor's): the report is exactly the one lowering everything in one process gives, the
helper's results are kept in the cache like the ones made here (with this process's records
of the launches, which the next analysis reads), and a helper that dies costs nothing but
time."""

from __future__ import annotations

import os

import pytest

import dsl
from dsl import module_analysis
from dsl.compiler import cache

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the helper is a fork")

KERNEL = '''
@dsl.kernel
def k{i}(x: Tensor[f32], y: Tensor[f32], n: Int32):
    i = dsl.block_idx.x * dsl.block_dim.x + dsl.thread_idx.x
    if i < n:
        y[i] = x[i] * {scale:.1f} + dsl.exp(y[i])
'''
JIT = '''

@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32], BLOCK: Constexpr[int] = 128):
    n = x.shape[0]
    k{last}(x, y, n).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
'''


def source(kernels: int, scale: float = 2.0) -> str:
    head = "import dsl\nfrom dsl import Constexpr, Int32, Tensor, f32\n"
    body = "".join(KERNEL.format(i=i, scale=scale if i == 1 else 2.0) for i in range(kernels))
    return head + body + JIT.format(last=kernels - 1)


COUNT = 2 * module_analysis.HELPED_FROM


def test_the_helpers_half_is_exactly_what_lowering_it_here_gives(tmp_path):
    path = str(tmp_path / "many.py")
    cache.MEMORY.clear()
    alone = dsl.analyze_source(source(COUNT), path, cubins_on_request=True, helpers=0)
    cache.MEMORY.clear()
    helped = dsl.analyze_source(source(COUNT), path, cubins_on_request=True, helpers=1)
    assert len(helped.functions) == COUNT + 1 and not helped.all_diagnostics()
    assert helped.to_dict() == alone.to_dict()
    # kept in the cache: the next analysis compiles only the edited kernel, and the jit
    # function (in the helper's half) still gives its kernel the specialization it launches
    again = dsl.analyze_source(source(COUNT, scale=3.0), path, cubins_on_request=True, helpers=1)
    reused = [f.name for f, g in zip(helped.functions, again.functions) if f.compiled is g.compiled]
    assert reused == [f.name for f in helped.functions if f.name != "k1"]
    assert again.function("run").compiled.launches[0].kernel.source_name == f"k{COUNT - 1}"


def test_a_helper_that_dies_leaves_its_share_to_be_lowered_here(tmp_path, monkeypatch):
    path = str(tmp_path / "many.py")
    cache.MEMORY.clear()
    alone = dsl.analyze_source(source(COUNT), path, cubins_on_request=True, helpers=0)
    cache.MEMORY.clear()
    monkeypatch.setattr(module_analysis, "_serve_share", lambda share, out: os._exit(3))
    helped = dsl.analyze_source(source(COUNT), path, cubins_on_request=True, helpers=1)
    assert helped.to_dict() == alone.to_dict()


def test_a_few_functions_get_no_helper(tmp_path, monkeypatch):
    def no_fork() -> int:
        raise AssertionError("forked a helper for a few functions")

    monkeypatch.setattr(os, "fork", no_fork)
    report = dsl.analyze_source(source(module_analysis.HELPED_FROM - 2), str(tmp_path / "few.py"), helpers=1)
    assert len(report.functions) == module_analysis.HELPED_FROM - 1 and not report.all_diagnostics()
