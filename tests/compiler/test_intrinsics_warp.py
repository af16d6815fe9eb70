"""Warp intrinsics: shuffles of any type, votes, match_any, warp_reduce, bitcast."""

from __future__ import annotations

import re

import pytest

from dsl.diagnostics import SourceRange

HEADER = """
import dsl
from dsl import Float32, Int32, Tensor, bf16, boolean, f16, f32, f64, f8e4m3, i32, i64, u32
"""


def rng(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def only(a, code):
    found = [d for d in a.diagnostics if d.code == code]
    assert len(found) == 1, [d.format() for d in a.diagnostics]
    return found[0]


def ptx_ops(ptx, prefix):
    return re.findall(rf"^\s+({prefix}[\w.]*)", ptx, re.M)


@pytest.mark.parametrize("dtype, load, words", [
    ("f16", "t[i]", 1), ("bf16", "t[i]", 1), ("f8e4m3", "t[i]", 1), ("boolean", "t[i]", 1), ("f64", "t[i]", 2),
    ("i64", "t[i]", 2), ("f32", "t.vload(i * 4, 4)", 4), ("bf16", "t.vload(i * 8, 8)", 4),
    ("f16", "t.vload(i * 2, 2)", 1), ("f8e4m3", "t.vload(i * 2, 2)", 1),
])
def test_shuffles_move_any_value_in_32_bit_words(analyse, dtype, load, words):
    store = f"t.vstore(i * {load.split(', ')[1][:-1]}, v)" if "vload" in load else "t[i] = v"
    a = analyse(HEADER + f"""
@dsl.kernel
def k(t: Tensor[{dtype}]):
    i = dsl.thread_idx.x
    v = dsl.shfl_xor({load}, 1)
    {store}
""")
    assert a.stage("k", "traced").count("gpu.shuffle  xor") == words
    assert ptx_ops(a.stage("k", "ptx"), "shfl.sync") == ["shfl.sync.bfly.b32"] * words


def test_sixty_four_bit_shuffle_splits_and_joins(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(t: Tensor[f64]):
    t[0] = dsl.shfl_idx(t[dsl.thread_idx.x], 3)
""")
    traced = a.stage("k", "traced")
    for op in (r"arith.bitcast %\w+ : f64 to i64", "arith.trunci", "arith.shrui", "arith.extui", "arith.shli",
               "arith.ori", r"arith.bitcast %\w+ : i64 to f64"):
        assert re.search(op, traced), op
    assert ptx_ops(a.stage("k", "ptx"), "shfl.sync") == ["shfl.sync.idx.b32"] * 2


def test_votes_and_match_any(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], l: Tensor[i64], out: Tensor[u32], flags: Tensor[boolean]):
    i = dsl.thread_idx.x
    out[i] = dsl.ballot(x[i] > 0.0) + dsl.ballot(i < 16, mask=0xFFFF)
    out[i + 32] = dsl.match_any(l[i]) + dsl.match_any(x[i]) + dsl.match_any(i)
    flags[i] = dsl.any(x[i] > 1.0)
    flags[i + 32] = dsl.all(x[i] < 5.0)
""")
    traced = a.stage("k", "traced")
    assert traced.count("nvvm.vote.sync  ballot") == 2
    assert "nvvm.vote.sync  any" in traced and "nvvm.vote.sync  all" in traced
    assert re.findall(r"nvvm.match.sync  any %[\w-]+, %\w+ : (i\d+) -> i32", traced) == ["i64", "i32", "i32"]
    ptx = a.stage("k", "ptx")
    assert sorted(set(ptx_ops(ptx, "vote") + ptx_ops(ptx, "match"))) == [
        "match.any.sync.b32", "match.any.sync.b64", "vote.sync.all.pred", "vote.sync.any.pred",
        "vote.sync.ballot.b32"]
    assert a.diagnostics == []


def test_warp_reduce_uses_redux_for_32_bit_ints_and_butterflies_otherwise(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def ints(x: Tensor[i32], u: Tensor[u32]):
    i = dsl.thread_idx.x
    x[i] = dsl.warp_reduce(x[i], "sum") + dsl.warp_reduce(x[i], "min")
    u[i] = dsl.warp_reduce(u[i], "max") ^ dsl.warp_reduce(u[i], "xor")

@dsl.kernel
def floats(x: Tensor[f32]):
    i = dsl.thread_idx.x
    x[i] = dsl.warp_reduce(x[i], "sum")

@dsl.kernel
def groups(x: Tensor[f32]):
    i = dsl.thread_idx.x
    x[i] = dsl.warp_reduce(x[i], "max", width=8)

@dsl.kernel
def votes(b: Tensor[boolean]):
    i = dsl.thread_idx.x
    b[i] = dsl.warp_reduce(b[i], "and")
""")
    assert sorted(ptx_ops(a.stage("ints", "ptx"), "redux")) == [
        "redux.sync.add.s32", "redux.sync.max.u32", "redux.sync.min.s32", "redux.sync.xor.b32"]
    ptx = a.stage("floats", "ptx")
    offsets = re.findall(r"shfl.sync.bfly.b32\s+%r\d+, %r\d+, (\d+), 31, -1;", ptx)
    assert offsets == ["16", "8", "4", "2", "1"] and len(ptx_ops(ptx, "add.f32")) == 5
    groups = re.findall(r"shfl.sync.bfly.b32\s+%r\d+, %r\d+, (\d+), (\d+), (-?\d+);", a.stage("groups", "ptx"))
    assert groups == [("4", "6175", "-1"), ("2", "6175", "-1"), ("1", "6175", "-1")]  # segments of 8: 24 << 8 | 31
    assert ptx_ops(a.stage("votes", "ptx"), "vote") == ["vote.sync.all.pred"]


def test_bitcast_between_scalars_and_vectors(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], h: Tensor[f16], d: Tensor[f64], u: Tensor[u32]):
    u[0] = dsl.bitcast(x[0], u32)
    u[1] = dsl.bitcast(h.vload(0, 2), u32)
    h.vstore(8, dsl.bitcast(d[0], f16))
    x[1] = dsl.bitcast(u[2], f32)
""")
    traced = a.stage("k", "traced")
    assert re.search(r"arith.bitcast %\w+ : f32 to i32", traced)
    assert re.search(r"vector.bitcast %\w+ : vector<2xf16> to vector<1xi32>", traced)
    assert re.search(r"vector.bitcast %\w+ : vector<1xf64> to vector<4xf16>", traced)
    assert re.search(r"arith.bitcast %\w+ : i32 to f32", traced)
    assert a.diagnostics == []


@pytest.mark.parametrize("call, message", [
    ("dsl.warp_reduce(x[0], 'mean')",
     "dsl.warp_reduce op must be one of 'sum', 'max', 'min', 'and', 'or', 'xor', not 'mean'"),
    ("dsl.warp_reduce(x[0], 'xor')", "dsl.warp_reduce 'xor' needs integer or bool values, got f32"),
    ("dsl.warp_reduce(x[0], 'sum', width=12)", "shuffle width must be a power of two from 1 to 32, not 12"),
    ("dsl.bitcast(x[0], dsl.f64)",
     "dsl.bitcast of 32 bits (f32) to f64 leaves 0.5 lanes; it needs 1, 2, 4, 8 or 16"),
    ("dsl.bitcast(x[0], dsl.boolean)", "dsl.bitcast does not take bool (its width is not its storage)"),
    ("dsl.ballot(x.vload(0, 4))", "dsl.ballot needs a scalar predicate, got vector<4xf32>"),
    ("dsl.ballot(x[0] > 0.0, mask=0)", "dsl.ballot mask 0x0 is not a non-empty 32-bit lane mask"),
    ("dsl.match_any(x.vload(0, 4))", "dsl.match_any needs a scalar, got vector<4xf32>"),
    ("dsl.shfl_xor(dsl.thread_idx.x, 1, 3)", "shuffle width must be a power of two from 1 to 32, not 3"),
])
def test_warp_mistakes_are_dsl301_at_the_call(analyse, call, message):
    a = analyse(HEADER + f"""
@dsl.kernel
def k(x: Tensor[f32]):
    y = {call}
""")
    d = only(a, "DSL301")
    assert (d.range, d.message) == (rng(a, call), message)
