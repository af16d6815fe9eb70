"""The 8-bit forms of dsl.wgmma on the CPU: the m64nNk32 instruction each pair of operand types
becomes (assembled by ptxas for sm_90a where it is installed), with the immediates each form
takes, and the refusals (DSL301 at the call) of what the 8-bit forms do not have."""

from __future__ import annotations

import collections

import pytest

from dsl.compiler.toolchain import ptxas_path
from dsl.diagnostics import SourceRange

KERNEL = """
import dsl
from dsl import Tensor, f32, i32

@dsl.kernel(target="sm_90a")
def k(c: Tensor[f32, 2], ci: Tensor[i32, 2]):
    smem = dsl.SharedAllocator(dynamic=True)
    e4 = smem.array(dsl.f8e4m3, (64, 128), swizzle=128)
    e5 = smem.array(dsl.f8e5m2, (64, 128), swizzle=128)
    s8 = smem.array(dsl.i8, (64, 128), swizzle=128)
    u8 = smem.array(dsl.u8, (64, 128), swizzle=128)
    bf = smem.array(dsl.bf16, (64, 64), swizzle=128)
    nb = smem.array(dsl.f8e4m3, (1, 128, 128), swizzle=128)
    t = dsl.thread_idx.x
    {body}

@dsl.jit
def run(c: Tensor[f32, 2], ci: Tensor[i32, 2]):
    k(c, ci).launch(grid=1, block=128)
"""

EVERY_FORM = """acc = dsl.wgmma(dsl.zeros(f32, 32), e4, (0,), e4, (0,))
    acc = dsl.wgmma(acc, e4, (0,), e5, (0,))
    acc = dsl.wgmma(acc, dsl.zeros(dsl.f8e5m2, 64), None, e4, (0,))
    iacc = dsl.wgmma(dsl.zeros(i32, 32), s8, (0,), s8, (0,))
    iacc = dsl.wgmma(iacc, u8, (0,), s8, (0,))
    iacc = dsl.wgmma(iacc, dsl.zeros(dsl.u8, 64), None, u8, (0,))
    acc, iacc = dsl.wgmma_wait((acc, iacc))
    for e in dsl.static_range(32):
        c[t, e] = acc[e]
        ci[t, e] = iacc[e]"""


def at(a, needle):
    line = a.line_of(needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def test_each_8_bit_pair_becomes_its_k32_wgmma_with_the_immediates_of_its_form(analyse):
    a = analyse(KERNEL.format(body=EVERY_FORM))
    assert [d.code for d in a.diagnostics if d.severity.name == "ERROR"] == []
    ptx = a.stage("run", "ptx")
    lines = [line.strip() for line in ptx.splitlines() if "wgmma.mma_async" in line]
    assert collections.Counter(line.split()[0] for line in lines) == {
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3": 4,  # K = 128: four steps of k32
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3": 4,  # A in registers
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e5m2": 4,
        "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8": 4,
        "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.s8": 4,
        "wgmma.mma_async.sync.aligned.m64n64k32.s32.u8.u8": 4,
    }
    # fp8 keeps scale-d, imm-scale-a and imm-scale-b; the integer forms take scale-d alone
    assert all(line.endswith(", p, 1, 1;") for line in lines if ".f32." in line)
    assert all(line.endswith(", p;") for line in lines if ".s32." in line)
    registers_a = [line for line in lines if ".e5m2.e4m3" in line and "}, {" in line]  # A as 4 .b32 words
    assert len(registers_a) == 4
    if ptxas_path() is not None:  # ptxas took the PTX: the SASS has the 8-bit warpgroup MMAs
        sass = a.stage("run", "sass")
        assert "QGMMA.64x64x32.F32.E4M3.E5M2" in sass and "IGMMA.64x64x32" in sass


@pytest.mark.parametrize("call, message", [
    ("dsl.wgmma(dsl.zeros(f32, 32), e4, (0,), s8, (0,))",
     "dsl.wgmma multiplies tiles of one type (f16 or bf16), two fp8 types or two 8-bit integer types; got shared "
     "f8e4m3[64, 128] (swizzle=128) and shared i8[64, 128] (swizzle=128)"),
    ("dsl.wgmma(dsl.zeros(i32, 32), u8, (0,), bf, (0,))",
     "dsl.wgmma multiplies tiles of one type (f16 or bf16), two fp8 types or two 8-bit integer types; got shared "
     "u8[64, 128] (swizzle=128) and shared bf16[64, 64] (swizzle=128)"),
    ("dsl.wgmma(dsl.zeros(f32, 32), e4, (0,), nb, (), b_major=\"n\")",
     "dsl.wgmma (B): 8-bit wgmma reads K-major tiles only (no transpose for f8e4m3); store B as N x K "
     "(K contiguous) and pass b_major='k'"),
    ("dsl.wgmma(dsl.zeros(dsl.f16, 64), e4, (0,), e5, (0,))",
     "dsl.wgmma accumulates into an f32 vector (vector<N/2xf32>; i32 for 8-bit integer tiles), not vector<64xf16>"),
    ("dsl.wgmma(dsl.zeros(f32, 32), s8, (0,), s8, (0,))",
     "dsl.wgmma on 8-bit integer tiles accumulates into an i32 vector (vector<N/2xi32>), not vector<...xf32>"),
    ("dsl.wgmma(dsl.zeros(i32, 32), e4, (0,), e5, (0,))",
     "dsl.wgmma on fp8 tiles accumulates into an f32 vector (vector<N/2xf32>), not vector<...xi32>"),
    ("dsl.wgmma(dsl.zeros(f32, 32), dsl.zeros(dsl.f8e4m3, 32), None, e4, (0,))",
     "dsl.wgmma: the B tile has K=128, so A in registers is vector<64xf8e4m3>, not vector<32xf8e4m3>"),
])
def test_what_the_8_bit_forms_do_not_have_is_dsl301_at_the_call(analyse, call, message):
    a = analyse(KERNEL.format(body=f"acc = {call}"))
    diags = [d for d in a.diagnostics if d.code == "DSL301"]
    assert [d.message for d in diags] == [message]
    assert diags[0].range == at(a, call)
