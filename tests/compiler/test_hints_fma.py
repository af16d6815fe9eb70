"""Float contraction and fast-math: `a * b + c` becomes one FMA unless `contract=False`.

Fixture: a 16x16 tiled matmul (shared-memory tiles, a 16-step unrolled inner product per
tile), the kernel whose SASS shows whether the multiply-adds fused.
"""

from __future__ import annotations

import re

import pytest

import dsl
from dsl.compiler import cache, toolchain

MATMUL = """
import dsl
from dsl import Tensor, f32

TILE = 16

@dsl.kernel(known_block_size=[TILE, TILE, 1]{hints})
def matmul(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    smem = dsl.SharedAllocator()
    ta = smem.array(f32, (TILE, TILE))
    tb = smem.array(f32, (TILE, TILE))
    tx = dsl.thread_idx.x
    ty = dsl.thread_idx.y
    row = dsl.block_idx.y * TILE + ty
    col = dsl.block_idx.x * TILE + tx
    acc = f32(0.0)
    for t in range(0, a.shape[1], TILE):
        ta[ty, tx] = a[row, t + tx]
        tb[ty, tx] = b[t + ty, col]
        dsl.barrier()
        for kk in dsl.static_range(TILE):
            acc = ta[ty, kk] * tb[kk, tx] + acc
        dsl.barrier()
    c[row, col] = acc

@dsl.jit
def run(a: Tensor[f32, 2], b: Tensor[f32, 2], c: Tensor[f32, 2]):
    matmul(a, b, c).launch(grid=(b.shape[1] // TILE, a.shape[0] // TILE), block=(TILE, TILE, 1))
"""

DIVIDE = """
import dsl
from dsl import Tensor, f32

@dsl.kernel{hints}
def ratio(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x
    y[i] = x[i] / y[i]

@dsl.jit
def run(x: Tensor[f32], y: Tensor[f32]):
    ratio(x, y).launch(grid=1, block=32)
"""


def float_ops(ptx: str) -> dict[str, int]:
    """How often each f32 multiply / add / fma / div instruction occurs in the PTX."""
    counts: dict[str, int] = {}
    for op in re.findall(r"^\s*((?:mul|add|sub|fma|div)\.[\w.]*f32)\s", ptx, flags=re.M):
        counts[op] = counts.get(op, 0) + 1
    return counts


def sass_float_opcodes(sass: str) -> set[str]:
    return set(re.findall(r"\b(FFMA|FMUL|FADD)\b", sass))


def test_multiply_add_contracts_to_fma_by_default(analyse):
    a = analyse(MATMUL.format(hints=""))
    assert float_ops(a.stage("run", "ptx")) == {"fma.rn.f32": 16}
    if toolchain.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed here")
    assert sass_float_opcodes(a.stage("run", "sass")) == {"FFMA"}


def test_contract_false_keeps_rounded_multiply_and_add(analyse):
    a = analyse(MATMUL.format(hints=", contract=False"))
    assert float_ops(a.stage("run", "ptx")) == {"mul.rn.f32": 16, "add.rn.f32": 16}
    if toolchain.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed here")
    assert sass_float_opcodes(a.stage("run", "sass")) == {"FMUL", "FADD"}


def test_the_flag_is_visible_from_the_lowered_stage_on(analyse):
    a = analyse(MATMUL.format(hints=""))
    traced, lowered, llvm = (a.stage("run", s) for s in ("traced", "lowered", "llvm"))
    assert "fastmath" not in traced  # the traced view is the IR as the tracer built it
    fmuls = [line for line in lowered.splitlines() if "llvm.fmul" in line]
    assert len(fmuls) == 16 and all("{fastmathFlags = #llvm.fastmath<contract>}" in f for f in fmuls)
    assert len(re.findall(r"= fmul contract float", llvm)) == 16


def test_division_is_ieee_unless_fastmath(analyse):
    strict = analyse(DIVIDE.format(hints=""), name="strict.py")
    fast = analyse(DIVIDE.format(hints="(fastmath=True)"), name="fast.py")
    assert float_ops(strict.stage("run", "ptx")) == {"div.rn.f32": 1}
    assert float_ops(fast.stage("run", "ptx")) == {"div.approx.f32": 1}
    assert "#llvm.fastmath<fast>" in fast.stage("run", "lowered")


def test_a_hint_is_part_of_the_cache_key(tmp_path, monkeypatch):
    """Changing `contract` on the kernel recompiles the jit function that launches it."""
    path = tmp_path / "keyed.py"
    path.write_text(MATMUL.format(hints=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    import keyed

    fused = dsl.compile(keyed.run)
    keyed.matmul.hints["contract"] = False
    separate = dsl.compile(keyed.run)
    assert fused is not separate
    assert float_ops(fused.ptx) == {"fma.rn.f32": 16}
    assert float_ops(separate.ptx) == {"mul.rn.f32": 16, "add.rn.f32": 16}
    key = cache.function_key(keyed.matmul, _src(keyed.matmul), [], "sm_90", "cubin")
    keyed.matmul.hints["contract"] = True
    assert cache.function_key(keyed.matmul, _src(keyed.matmul), [], "sm_90", "cubin") != key


def _src(kfn):
    from dsl.frontend.source import function_source

    return function_source(kfn.fn)


def test_sqrt_is_correctly_rounded_unless_fastmath(analyse):
    """`dsl.sqrt` on f32 scalars and vectors is IEEE sqrt.rn by default (libdevice alone gives
    sqrt.approx); `fastmath=True` keeps the approximation."""
    a = analyse("""
import dsl
from dsl import Tensor, f32

@dsl.kernel
def exact(x: Tensor[f32]):
    i = dsl.thread_idx.x * 4
    x.vstore(i, dsl.sqrt(x.vload(i, 4)))
    x[0] = dsl.sqrt(x[1])

@dsl.kernel(fastmath=True)
def fast(x: Tensor[f32]):
    x[0] = dsl.sqrt(x[1])
""")
    exact, fast = a.stage("exact", "ptx"), a.stage("fast", "ptx")
    assert exact.count("sqrt.rn.f32") == 5 and "sqrt.approx" not in exact
    assert fast.count("sqrt.approx.f32") == 1 and "sqrt.rn" not in fast


def test_ftz_flushes_f32_subnormals_in_the_instructions(analyse):
    source = """
import dsl
from dsl import Tensor, f32

@dsl.kernel{hint}
def k(x: Tensor[f32], y: Tensor[f32]):
    i = dsl.thread_idx.x
    y[i] = dsl.exp2(x[i]) * x[i] + 1.0
"""
    flushed = analyse(source.format(hint="(ftz=True)"), name="ftz.py").stage("k", "ptx")
    kept = analyse(source.format(hint=""), name="no_ftz.py").stage("k", "ptx")
    assert "ex2.approx.ftz.f32" in flushed and "fma.rn.ftz.f32" in flushed
    assert "ex2.approx.f32" in kept and "fma.rn.f32" in kept and ".ftz" not in kept
