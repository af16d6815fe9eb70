"""`@kernel(maxnreg=..., minnctapersm=...)`: PTX launch bounds ptxas honours, and DSL201
at the decorator argument for a value that cannot be one (in both the instant and the
compiler tier, identically)."""

from __future__ import annotations

import pytest

import dsl
from dsl.diagnostics import SourceRange

# A kernel that takes more than 24 registers unless capped (a 16-step unrolled inner product).
KERNEL = """
import dsl
from dsl import Tensor, f32

@dsl.kernel({hints})
def dot16(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    smem = dsl.SharedAllocator()
    ta = smem.array(f32, (16, 16))
    tb = smem.array(f32, (16, 16))
    tx = dsl.thread_idx.x
    ty = dsl.thread_idx.y
    row = dsl.block_idx.y * 16 + ty
    col = dsl.block_idx.x * 16 + tx
    acc = f32(0.0)
    for t in range(0, a.shape[1], 16):
        ta[ty, tx] = a[row, t + tx]
        tb[ty, tx] = b[t + ty, col]
        dsl.barrier()
        for kk in dsl.static_range(16):
            acc = ta[ty, kk] * tb[kk, tx] + acc
        dsl.barrier()
    c[row, col] = acc

@dsl.jit
def run(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    dot16(a, b, c).launch(grid=(b.shape[1] // 16, a.shape[0] // 16), block={block})
"""


def directives(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines() if line.strip().startswith((".maxn", ".minn", ".reqn"))]


def registers(a) -> int:
    fn = a.report.function("run")
    return fn.compiled.kernels[0].resources.registers


def test_maxnreg_and_minnctapersm_reach_ptx_and_ptxas(analyse):
    free = analyse(KERNEL.format(hints="", block="(16, 16, 1)"), name="free.py")
    capped = analyse(KERNEL.format(hints="maxnreg=24, minnctapersm=4", block="(16, 16, 1)"), name="capped.py")
    assert directives(free.stage("run", "ptx")) == [".maxntid 16, 16, 1"]
    assert directives(capped.stage("run", "ptx")) == [".maxntid 16, 16, 1", ".minnctapersm 4", ".maxnreg 24"]
    assert "nvvm.maxnreg = 24 : i32" in capped.stage("run", "lowered")
    assert "nvvm.minctasm = 4 : i32" in capped.stage("run", "lowered")
    assert registers(free) > 24 >= registers(capped)
    assert capped.diagnostics == []


def _decorator_arg(a, keyword: str, value: str) -> SourceRange:
    """The range of `value` in the decorator's `keyword=value`."""
    line = a.line_of("@dsl.kernel(")
    col = a.source.splitlines()[line - 1].index(f"{keyword}={value}") + len(keyword) + 1
    return SourceRange(a.path, line, col, line, col + len(value))


@pytest.mark.parametrize(("hints", "value", "message"), [
    ("maxnreg=300", "300", "maxnreg must be from 24 to 255 on sm_90, got 300"),
    ("maxnreg=16", "16", "maxnreg must be from 24 to 255 on sm_90, got 16"),
    ("maxnreg='many'", "'many'", "maxnreg must be an int from 24 to 255, got str"),
    ("minnctapersm=0", "0", "minnctapersm must be from 1 to 32 on sm_90, got 0"),
    ("minnctapersm=2.5", "2.5", "minnctapersm must be an int from 1 to 32, got float"),
    ("fastmath=1", "1", "fastmath must be True or False, got int (1)"),
    ("contract=None", "None", "contract must be True or False, got NoneType (None)"),
])
def test_bad_hint_is_dsl201_at_the_decorator_argument(analyse, hints, value, message):
    a = analyse(KERNEL.format(hints=f"known_block_size=[16, 16, 1], {hints}", block="(16, 16, 1)"))
    found = [d for d in a.diagnostics if d.code == "DSL201"]
    assert [(d.message, d.range) for d in found] == [(message, _decorator_arg(a, hints.split("=")[0], value))]
    assert [d for d in dsl.static_checks(a.source, a.path) if d.code == "DSL201"] == found
    assert a.report.function("run").compiled is None  # the launch of a kernel that cannot compile fails


def test_two_bad_hints_are_two_diagnostics(analyse):
    a = analyse(KERNEL.format(hints="maxnreg=8, fastmath='yes'", block="(16, 16, 1)"))
    assert sorted(d.message for d in a.diagnostics if d.code == "DSL201") == [
        "fastmath must be True or False, got str ('yes')", "maxnreg must be from 24 to 255 on sm_90, got 8"]


def test_hints_checked_against_the_compile_target(analyse):
    a = analyse(KERNEL.format(hints="minnctapersm=20", block="(16, 16, 1)"), target="sm_86")
    d = next(d for d in a.diagnostics if d.code == "DSL201")
    assert d.message == "minnctapersm must be from 1 to 16 on sm_86, got 20"
    assert d.range == _decorator_arg(a, "minnctapersm", "20")


def test_minnctapersm_needs_a_block_size(analyse):
    """PTX ignores .minnctapersm without .maxntid: a run-time block cannot have it."""
    a = analyse(KERNEL.format(hints="minnctapersm=2", block="(a.shape[1] // 16, 16, 1)"))
    found = [d for d in a.diagnostics if d.code == "DSL201"]
    assert [(d.message, d.range) for d in found] == [(
        "minnctapersm needs the block size (PTX ignores .minnctapersm without .maxntid): declare "
        "known_block_size=[x, y, z] or launch with a compile-time block", _decorator_arg(a, "minnctapersm", "2"))]


def test_a_hint_named_in_a_variable_is_checked_by_the_compiler_only(analyse):
    source = KERNEL.format(hints="maxnreg=REGS", block="(16, 16, 1)").replace(
        "from dsl import Tensor, f32\n", "from dsl import Tensor, f32\n\nREGS = 512\n")
    a = analyse(source)
    assert [d for d in dsl.static_checks(a.source, a.path) if d.code == "DSL201"] == []
    d = next(d for d in a.diagnostics if d.code == "DSL201")
    assert d.message == "maxnreg must be from 24 to 255 on sm_90, got 512"
    assert d.range == _decorator_arg(a, "maxnreg", "REGS")
