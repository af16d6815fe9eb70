"""fp8 types: literal encoding, conversions on sm_89+, refusals on older targets, no arithmetic."""

from __future__ import annotations

import math
import re

import pytest

from dsl import TARGETS, f8e4m3, f8e5m2
from dsl.diagnostics import SourceRange
from dsl.frontend import fp8
from dsl.language.types import dtype_from_foreign

HEADER = """
import dsl
from dsl import Int32, Tensor, bf16, f16, f32, f64, f8e4m3, f8e5m2
"""


def rng(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


@pytest.mark.parametrize("dtype, value, bits", [
    (f8e4m3, 1.5, 0x3C), (f8e4m3, -2.0, 0xC0), (f8e4m3, 448.0, 0x7E), (f8e4m3, 464.0, 0x7E),
    (f8e4m3, 1e6, 0x7E), (f8e4m3, -math.inf, 0xFE), (f8e4m3, math.nan, 0x7F), (f8e4m3, 2.0**-9, 0x01),
    (f8e4m3, 2.0**-10, 0x00), (f8e4m3, 3 * 2.0**-10, 0x02), (f8e4m3, -0.0, 0x80), (f8e4m3, 0.3, 0x2A),
    (f8e5m2, 1.0, 0x3C), (f8e5m2, 57344.0, 0x7B), (f8e5m2, math.inf, 0x7B), (f8e5m2, 2.0**-16, 0x01),
    (f8e5m2, 1.125, 0x3C), (f8e5m2, 1.375, 0x3E), (f8e5m2, math.nan, 0x7F),
])
def test_literals_round_to_nearest_even_and_saturate(dtype, value, bits):
    assert fp8.encode(value, dtype) == bits


@pytest.mark.parametrize("dtype", [f8e4m3, f8e5m2])
def test_every_finite_code_round_trips(dtype):
    finite = [c for c in range(256) if math.isfinite(fp8.decode(c, dtype))]
    assert len(finite) == (254 if dtype == f8e4m3 else 248)
    assert [fp8.encode(fp8.decode(c, dtype), dtype) for c in finite] == finite
    assert fp8.decode(0x7E, f8e4m3) == 448.0 and fp8.decode(0x7B, f8e5m2) == 57344.0
    assert fp8.decode(0x7C, f8e5m2) == math.inf and math.isnan(fp8.decode(0xFF, f8e4m3))


def test_torch_dtype_names_map_to_the_fp8_types():
    assert dtype_from_foreign("torch.float8_e4m3fn") is f8e4m3
    assert dtype_from_foreign("torch.float8_e5m2") is f8e5m2


def test_conversions_use_the_pairwise_cvt_instructions(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], h: Tensor[f16], b: Tensor[bf16], q: Tensor[f8e4m3], r: Tensor[f8e5m2]):
    i = dsl.thread_idx.x
    q[i] = dsl.cast(x[i], f8e4m3)
    q.vstore(i * 4 + 64, x.vload(i * 4, 4).to(f8e4m3))
    r[i] = f8e5m2(h[i])
    q[i + 32] = dsl.cast(b[i], f8e4m3)
    x[i] = dsl.cast(q[i + 1], f32)
    b[i] = dsl.cast(r[i + 1], bf16)
    q[0] = 1.5
""")
    traced = a.stage("k", "traced")
    rn_satfinite = "{rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>}"
    assert re.search(rf"nvvm.convert.f32x2.to.f8x2 %\w+, %\w+ {rn_satfinite} : i16\(f8E4M3FN\)", traced)
    # `f8e5m2(h)` and `.to()`: NVVM ops where the tracer knows the target, else the same cvt as inline PTX
    assert re.search(rf"nvvm.convert.f32x2.to.f8x2 %\w+, %\w+ {rn_satfinite} : i16\(f8E5M2\)", traced) or \
        'llvm.inline_asm "cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f"' in traced
    assert re.search(r"nvvm.convert.f8x2.to.f16x2 %\w+ : vector<2xi8>\(f8E4M3FN\) -> vector<2xf16>", traced)
    assert "arith.constant 60 : i8" in traced  # 1.5 encoded while tracing
    ptx = a.stage("k", "ptx")
    cvts = re.findall(r"^\s+(cvt\.rn[\w.]*(?:e4m3|e5m2)[\w.]*)", ptx, re.M)
    assert sorted(cvts) == sorted(["cvt.rn.satfinite.e4m3x2.f32"] * 4 + ["cvt.rn.satfinite.e5m2x2.f32",
                                   "cvt.rn.f16x2.e4m3x2", "cvt.rn.f16x2.e5m2x2"])
    assert re.search(r"shl.b32\s+%r\d+, %r\d+, 16;", ptx)  # bf16 widened as its bits (compiler/exact_lowering.py)
    assert "st.global.b32" in ptx  # 4 fp8 lanes stored as one 32-bit word
    assert a.diagnostics == []


@pytest.mark.parametrize("target", ["sm_80", "sm_86"])
def test_fp8_conversions_are_refused_before_sm_89(analyse, target):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], q: Tensor[f8e4m3]):
    q[0] = dsl.cast(x[0], f8e4m3)
    x[1] = dsl.cast(q[1], f32)
    q[2] = 0.5
""", target=target)
    assert [(d.code, d.range, d.message) for d in a.diagnostics] == [
        ("DSL301", rng(a, "dsl.cast(x[0], f8e4m3)"),
         f"f8e4m3 conversions need sm_89 or newer (the cvt fp8 instructions); the target is {target}"),
        ("DSL301", rng(a, "dsl.cast(q[1], f32)"),
         f"f8e4m3 conversions need sm_89 or newer (the cvt fp8 instructions); the target is {target}"),
    ]  # loads, stores and literals need no conversion instruction


def test_fp8_on_sm_89_needs_ptx_8_1(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], q: Tensor[f8e5m2]):
    q[0] = dsl.cast(x[0], f8e5m2)
""", target="sm_89")
    if getattr(TARGETS["sm_89"], "ptx_version", 80) >= 81:
        assert a.diagnostics == [] and "cvt.rn.satfinite.e5m2x2.f32" in a.stage("k", "ptx")
    else:
        (d,) = a.diagnostics
        assert (d.code, d.range, d.message) == (
            "DSL301", rng(a, "dsl.cast(x[0], f8e5m2)"),
            "f8e5m2 conversions on sm_89 need PTX ISA 8.1, newer than the PTX emitted for this target")


@pytest.mark.parametrize("expr, what", [("q[0] + q[1]", "+"), ("q[0] * 2.0", "*"), ("-q[0]", "-"),
                                        ("q[0] < q[1]", "<"), ("dsl.max(q[0], q[1])", "max"),
                                        ("x[0] + q[0]", "+")])
def test_fp8_takes_no_arithmetic(analyse, expr, what):
    a = analyse(HEADER + f"""
@dsl.kernel
def k(x: Tensor[f32], q: Tensor[f8e4m3]):
    y = {expr}
""")
    (d,) = a.diagnostics
    assert (d.code, d.range, d.message) == (
        "DSL301", rng(a, expr), f"'{what}' on f8e4m3 values; fp8 is a storage type: convert to f16, bf16 or f32 "
        "first, e.g. dsl.cast(x, dsl.f32)")
