"""Math intrinsics added for exact GELU and the usual torch ops: IR, PTX and diagnostics."""

from __future__ import annotations

import re

from dsl.diagnostics import SourceRange

HEADER = """
import dsl
from dsl import Float32, Int32, Tensor, boolean, f16, f32, f8e4m3, i32
"""


def rng(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def only(a, code):
    found = [d for d in a.diagnostics if d.code == code]
    assert len(found) == 1, [d.format() for d in a.diagnostics]
    return found[0]


def test_libdevice_functions_are_called_and_linked(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    i = dsl.thread_idx.x
    v = x[i]
    x[i] = dsl.erf(v) + dsl.erfc(v) + dsl.exp2(v) + dsl.log2(v) + dsl.log1p(v) + dsl.expm1(v)
    x[i + 1] = dsl.pow(v, 2.5) + dsl.atan2(v, 1.0)
""")
    traced = a.stage("k", "traced")
    for op in ("math.erf", "math.erfc", "math.exp2", "math.log2", "math.log1p", "math.expm1", "math.powf",
               "math.atan2"):
        assert re.search(rf"= {op} %\w+(, %\w+)? : f32", traced), op
    lowered = a.stage("k", "lowered")
    called = sorted(set(re.findall(r"llvm.call @(__nv_\w+)", lowered)))
    assert called == ["__nv_atan2f", "__nv_erfcf", "__nv_erff", "__nv_exp2f", "__nv_expm1f", "__nv_log1pf",
                      "__nv_log2f", "__nv_powf"]
    ptx = a.stage("k", "ptx")
    assert "__nv_" not in ptx and "call" not in ptx  # linked from libdevice and inlined
    assert a.diagnostics == []


def test_round_is_ties_to_even_and_trunc_rounds_toward_zero(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    i = dsl.thread_idx.x
    x[i] = dsl.round(x[i]) + dsl.trunc(x[i + 1])
""")
    traced = a.stage("k", "traced")
    assert "math.roundeven" in traced and "math.trunc" in traced and "math.round " not in traced
    ptx = a.stage("k", "ptx")
    assert "cvt.rni.f32.f32" in ptx and "cvt.rzi.f32.f32" in ptx


def test_isnan_and_isinf_give_bools(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], b: Tensor[boolean]):
    i = dsl.thread_idx.x
    b[i] = dsl.isnan(x[i])
    b[i + 1] = dsl.isinf(x[i])
""")
    traced = a.stage("k", "traced")
    assert re.search(r"arith.cmpf uno, (%\w+), \1 : f32", traced)
    assert re.search(r"(%\w+) = math.absf %\w+ : f32\n\s+%\w+ = arith.cmpf oeq, \1, %cst : f32", traced)
    assert "%cst = arith.constant 0x7F800000 : f32" in traced  # +inf
    ptx = a.stage("k", "ptx")
    # the compared abs clears the sign bit as an integer (ptxas folds comparisons of abs.f32 past NaNs)
    assert "setp.nan.f32" in ptx and "and.b32" in ptx and "2147483647" in ptx and "setp.eq.f32" in ptx


def test_vectors_call_libdevice_per_lane_and_halves_compute_in_f32(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], h: Tensor[f16]):
    x.vstore(0, dsl.erf(x.vload(0, 4)))
    h[0] = dsl.erf(h[1])
""")
    lowered = a.stage("k", "lowered")
    assert lowered.count("llvm.call @__nv_erff") == 5  # four lanes and the f16 value
    ptx = a.stage("k", "ptx")
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx


def test_math_on_an_integer_is_dsl301_at_the_call(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = dsl.erf(n)
""")
    d = only(a, "DSL301")
    assert d.range == rng(a, "dsl.erf(n)")
    assert d.message == "dsl.erf needs a float value, got i32; cast it first"


def test_two_argument_math_checks_arity_and_types(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = dsl.atan2(x[1])
    x[1] = dsl.pow(x[2], n)
""")
    arity, mixed = sorted(a.diagnostics, key=lambda d: d.range.line)
    assert (arity.code, arity.range, arity.message) == ("DSL301", rng(a, "dsl.atan2(x[1])"),
                                                        "dsl.atan2 takes two arguments")
    assert (mixed.code, mixed.range, mixed.message) == (
        "DSL301", rng(a, "dsl.pow(x[2], n)"),
        "mixed types f32 and i32 in 'pow'; cast one explicitly, e.g. dsl.cast(x, dsl.f32)")


def test_math_on_fp8_asks_for_a_conversion(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(q: Tensor[f8e4m3], b: Tensor[boolean]):
    b[0] = dsl.isnan(q[0])
""")
    d = only(a, "DSL301")
    assert d.range == rng(a, "dsl.isnan(q[0])")
    assert d.message == ("dsl.isnan on f8e4m3; fp8 is a storage type: convert to f16, bf16 or f32 first, "
                         "e.g. dsl.cast(x, dsl.f32)")


def test_mixed_float_and_int_division_suggests_the_float_cast(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = x[1] / n
    x[2] = n / x[3]
""")
    first, second = sorted(a.diagnostics, key=lambda d: d.range.line)
    assert (first.code, first.range, first.message) == (
        "DSL301", rng(a, "x[1] / n"),
        "mixed types f32 and i32 in '/'; cast one explicitly, e.g. dsl.cast(x, dsl.f32)")
    assert (second.code, second.range, second.message) == (
        "DSL301", rng(a, "n / x[3]"),
        "mixed types i32 and f32 in '/'; cast one explicitly, e.g. dsl.cast(x, dsl.f32)")
