"""`examples/gemm_fp8.py` through the real compiler on the CPU: both kernels lower to fp8 wgmma
(m64nNk32 with the operand types of the call, e4m3 and e5m2 mixed either way), TMA loads and
mbarriers, and ptxas (the pip package's, a dependency) assembles them for sm_90a without spills
into the SASS's fp8 warpgroup MMAs (QGMMA). Also the language's compile-time tensor-map facts the
example is written with: `tmap.dtype` and `tmap.box` in a kernel, anything else DSL301 there."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

import dsl
from dsl import TensorSpec, bf16, f8e4m3, f8e5m2, f32, i32
from dsl.diagnostics import SourceRange

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
E4, E5 = TensorSpec(f8e4m3, rank=2), TensorSpec(f8e5m2, rank=2)
S1 = TensorSpec(f32, rank=1)


@pytest.fixture(scope="module")
def g8():
    sys.path.insert(0, str(EXAMPLES))
    import gemm_fp8

    yield gemm_fp8
    sys.path.remove(str(EXAMPLES))
    for stem in ("gemm_fp8", "gemm_hopper", "gemm_int8_hopper", "gemm_small_m"):
        sys.modules.pop(stem, None)


def wgmma_forms(ptx: str) -> dict[str, int]:
    """Each wgmma form the PTX holds, with its count in K tiles (four k32 steps per 128-byte tile; LLVM
    may peel the first iteration of a K loop, which copies the tile's four)."""
    counts = collections.Counter(line.split()[0] for line in (s.strip() for s in ptx.splitlines())
                                 if line.startswith("wgmma.mma_async"))
    assert all(n % 4 == 0 for n in counts.values()), counts
    return {form: n // 4 for form, n in counts.items()}


def assembled_without_spills(compiled) -> None:
    assert compiled.cubin, "ptxas produced no cubin"
    for kernel in compiled.kernels:
        assert kernel.resources.spill_stores == 0 and kernel.resources.spill_loads == 0
    assert "QGMMA" in compiled.sass


@pytest.mark.parametrize(("b", "d", "kw", "form"), [
    (E4, TensorSpec(bf16, rank=2), {}, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"),
    (E5, TensorSpec(f32, rank=2), {"ROWWISE": True}, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e5m2"),
    (E5, TensorSpec(bf16, rank=2), {"BN": 128}, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2"),
])
def test_the_persistent_kernel_is_fp8_wgmma_behind_tma(g8, b, d, kw, form):
    compiled = dsl.compile(g8.gemm_fp8, E4, b, S1, S1, d, target="sm_90a", **kw)
    ptx = compiled.ptx
    assert ".target sm_90a" in ptx
    assert set(wgmma_forms(ptx)) == {form}
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232" in ptx and "setmaxnreg.dec.sync.aligned.u32 40" in ptx
    assembled_without_spills(compiled)


def test_the_swapped_kernel_takes_b_t_as_wgmma_a(g8):
    compiled = dsl.compile(g8.gemm_fp8_small_m, E4, E5, S1, S1, TensorSpec(bf16, rank=2), S1,
                           TensorSpec(i32, rank=1), i32, target="sm_90a", MP=32)
    assert set(wgmma_forms(compiled.ptx)) == {"wgmma.mma_async.sync.aligned.m64n32k32.f32.e5m2.e4m3"}
    assert "atom.acq_rel.gpu.global.add.u32" in compiled.ptx  # the split-K ticket
    assembled_without_spills(compiled)


TENSOR_MAP_FACTS = """
import dsl
from dsl import Tensor, i32

@dsl.kernel(target="sm_90a")
def k(ta: dsl.TensorMap, out: Tensor[i32, 1]):
    smem = dsl.SharedAllocator(dynamic=True)
    tile = smem.array(ta.dtype, ta.box, swizzle=128)
    out[0] = ta.box[0] * 1000 + ta.box[1] + (7000000 if ta.dtype == dsl.bf16 else 0)
    out[1] = dsl.cast(tile[0, 0], i32)
    {extra}

@dsl.jit
def run(x: Tensor[dsl.bf16, 2], out: Tensor[i32, 1]):
    k(dsl.tensor_map(x, box=(16, 64), swizzle=128), out).launch(grid=1, block=32)
"""


def test_a_kernel_reads_its_tensor_maps_dtype_and_box_at_compile_time(analyse):
    a = analyse(TENSOR_MAP_FACTS.format(extra="pass"))
    assert [d.format() for d in a.diagnostics] == []
    ptx = a.stage("run", "ptx")
    assert "7016064;" in ptx  # folded while tracing: box (16, 64) of bf16
    assert "ld.shared.u16" in ptx or "ld.shared.b16" in ptx  # the tile is bf16, as the map's tensor


def test_any_other_attribute_of_a_tensor_map_is_dsl301_at_the_attribute(analyse):
    a = analyse(TENSOR_MAP_FACTS.format(extra="out[1] = ta.shape[0]"))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [
        "tensor map 'ta' has attributes dtype and box (known at compile time), not 'shape'"]
    line = a.line_of("ta.shape")
    col = a.source.splitlines()[line - 1].index("ta.shape")
    assert diags[0].range == SourceRange(a.path, line, col, line, col + len("ta.shape"))
