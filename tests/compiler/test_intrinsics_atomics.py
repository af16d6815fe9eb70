"""Atomics: f32/f64 max and min, f16/bf16 adds (packed pairs too), 64-bit CAS, order and scope."""

from __future__ import annotations

import re

import pytest

from dsl.diagnostics import SourceRange

HEADER = """
import dsl
from dsl import Float32, Int32, Tensor, bf16, f16, f32, f64, i32, i64, u32, u64
"""


def rng(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def atoms(ptx):
    return re.findall(r"^\s+(atom[\w.]*)", ptx, re.M)


def test_float_max_and_min_are_one_integer_atomic_chosen_by_sign(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], d: Tensor[f64]):
    v = x[dsl.thread_idx.x]
    old = dsl.atomic_max(x, 0, v)
    dsl.atomic_min(x, 1, old)
    dsl.atomic_max(d, 0, d[1])
""")
    traced = a.stage("k", "traced")
    assert re.search(r"arith.select %\w+, %c2147483647_i32, %\w+ : i32", traced)  # NaN -> the largest NaN
    assert re.search(r"arith.select %\w+, %c-1_i32, %\w+ : i32", traced)  # min: NaN -> 0xFFFFFFFF
    assert traced.count("scf.if") == 3
    ptx = a.stage("k", "ptx")
    assert atoms(ptx) == ["atom.global.max.s32", "atom.global.min.u32", "atom.global.min.s32",
                          "atom.global.max.u32", "atom.global.max.s64", "atom.global.min.u64"]
    assert "cas" not in ptx  # no compare-and-swap loop


def test_order_and_scope_reach_the_ptx(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(c: Tensor[u32], x: Tensor[f32], l: Tensor[i64]):
    smem = dsl.SharedAllocator()
    s = smem.array(i32, 32)
    dsl.atomic_add(c, 0, 1, order="acq_rel", scope="block")
    dsl.atomic_add(s, 1, 1, "release", "device")
    dsl.atomic_max(c, 2, 5, order="acquire", scope="system")
    dsl.atomic_add(x, 0, 1.0, scope="cluster")
    dsl.atomic_max(x, 1, x[3], order="acq_rel")  # a run-time sign: both branches
    dsl.atomic_cas(l, 0, 0, 7, order="acquire", scope="system")
    dsl.atomic_cas(l, 1, 0, 7)
    dsl.atomic_cas(x, 2, 0.0, 1.5, order="release", scope="block")
    c[3] = dsl.cast(s[1], u32)
""")
    assert atoms(a.stage("k", "ptx")) == [
        "atom.acq_rel.cta.global.add.u32", "atom.release.gpu.shared.add.u32", "atom.acquire.sys.global.max.u32",
        "atom.relaxed.cluster.global.add.f32", "atom.acq_rel.gpu.global.max.s32", "atom.acq_rel.gpu.global.min.u32",
        "atom.acquire.sys.global.cas.b64", "atom.relaxed.gpu.global.cas.b64", "atom.release.cta.global.cas.b32"]


@pytest.mark.parametrize("target, expected", [
    ("sm_90", ["atom.global.add.noftz.f16", "atom.global.add.noftz.bf16", "atom.global.add.noftz.f16x2",
               "atom.global.add.noftz.bf16x2"]),
    ("sm_80", ["atom.global.add.noftz.f16", "atom.relaxed.gpu.global.cas.b32", "atom.global.add.noftz.f16x2",
               "atom.relaxed.gpu.global.cas.b32"]),  # no bf16 atomics before sm_90: a CAS loop
])
def test_half_adds_are_native_and_pairs_pack(analyse, target, expected):
    a = analyse(HEADER + """
@dsl.kernel
def k(h: Tensor[f16], b: Tensor[bf16]):
    i = dsl.thread_idx.x * 2
    dsl.atomic_add(h, 0, h[i])
    dsl.atomic_add(b, 0, b[i])
    dsl.atomic_add(h, i, h.vload(i, 2))
    dsl.atomic_add(b, i, b.vload(i, 2))
""", target=target)
    assert atoms(a.stage("k", "ptx")) == expected
    assert a.diagnostics == []


def test_sixty_four_bit_and_float_cas_return_the_old_value(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(l: Tensor[u64], x: Tensor[f32]):
    old = dsl.atomic_cas(l, 0, l[1], l[2])
    l[3] = old
    x[1] = dsl.atomic_cas(x, 0, 1.0, 2.0)
""")
    traced = a.stage("k", "traced")
    assert re.search(r'llvm.cmpxchg %\w+, %\w+, %\w+ syncscope\("device"\) monotonic monotonic : !llvm.ptr<1>, i64',
                     traced)
    assert re.search(r"arith.bitcast %\w+ : i32 to f32", traced)
    assert atoms(a.stage("k", "ptx")) == ["atom.relaxed.gpu.global.cas.b64", "atom.relaxed.gpu.global.cas.b32"]


@pytest.mark.parametrize("call, message", [
    ("dsl.atomic_add(x, 0, 1.0, order='seq_cst')",
     "dsl.atomic_add order must be one of 'relaxed', 'acquire', 'release', 'acq_rel', not 'seq_cst'"),
    ("dsl.atomic_add(x, 0, 1.0, scope='warp')",
     "dsl.atomic_add scope must be one of 'block', 'cluster', 'device', 'system', not 'warp'"),
    ("dsl.atomic_max(h, 0, h[1])", "dsl.atomic_max on floats needs f32 or f64, not f16"),
    ("dsl.atomic_add(h, 1, h.vload(0, 2))", "dsl.atomic_add of a pair needs an even (4-byte aligned) index, not 1"),
    ("dsl.atomic_max(h, 0, h.vload(0, 2))", "dsl.atomic_max takes a scalar, got vector<2xf16>"),
    ("dsl.atomic_add(x, 0, x.vload(0, 2))",
     "dsl.atomic_add of a vector adds packed pairs: vector<2xf16> or vector<2xbf16> into a tensor of that type, "
     "got vector<2xf32> on Tensor[f32, 1]"),
    ("dsl.atomic_add(x, 0, n)", "dsl.atomic_add of i32 on Tensor[f32, 1]; cast with dsl.cast(value, dsl.f32)"),
    ("dsl.atomic_cas(h, 0, h[1], h[2])", "dsl.atomic_cas needs 32- or 64-bit elements, not f16"),
    ("dsl.atomic_add(x, 0, 1.0, 'relaxed', 'device', 3)",
     "dsl.atomic_add(ref, index, value, order='relaxed', scope='device') takes 3 values"),
])
def test_atomic_mistakes_are_dsl301_at_the_call(analyse, call, message):
    a = analyse(HEADER + f"""
@dsl.kernel
def k(x: Tensor[f32], h: Tensor[f16], n: Int32):
    y = {call}
""")
    (d,) = a.diagnostics
    assert (d.code, d.range, d.message) == ("DSL301", rng(a, call), message)


def test_cluster_scope_needs_sm_90(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32]):
    dsl.atomic_add(x, 0, 1.0, scope="cluster")
""", target="sm_80")
    (d,) = a.diagnostics
    assert (d.code, d.range, d.message) == ("DSL301", rng(a, 'dsl.atomic_add(x, 0, 1.0, scope="cluster")'),
                                            "scope='cluster' needs sm_90 or newer; the target is sm_80")
