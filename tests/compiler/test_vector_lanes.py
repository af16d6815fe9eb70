"""A vector's lanes as a Python sequence, lane reductions, and the mistakes around them (issue 28,
items 1, 3 and 5): what compiles and what each refusal says and where it points. Results are
checked in `tests/interpreter/test_vector_lanes.py`; other misuse of DSL values in
`test_no_internal_errors.py`.
"""

from __future__ import annotations

import pytest

from dsl.diagnostics import SourceRange

HEADER = """
import dsl
from dsl import Int32, Tensor, f16, f32, i32, u64
"""

BODY = HEADER + """
@dsl.kernel(target="sm_90a")
def k(x: Tensor[f32], h: Tensor[f16], y: Tensor[f32, 2], n: Int32):
    s = x[0]
    i = dsl.thread_idx.x
    v = x.vload(0, 4)
    smem = dsl.SharedAllocator()
    a = smem.array(f32, (4, 4))
    lst = [s, s]
    {stmt}
"""


def at(a, needle, line_needle=None):
    """The range of `needle` on the line holding `line_needle`; `max(*|s|)` is the range of
    `s` where `max(*s)` is."""
    context, _, rest = needle.partition("|")
    inner, _, _ = rest.partition("|")
    line = a.line_of(line_needle or needle.replace("|", ""))
    col = a.source.splitlines()[line - 1].index(needle.replace("|", "")) + (len(context) if rest else 0)
    width = len(inner) if rest else len(needle)
    return SourceRange(a.path, line, col, line, col + width)


def only(a, code):
    found = [d for d in a.diagnostics if d.code == code]
    assert len(found) == 1 and len(list(a.diagnostics)) == 1, [d.format() for d in a.diagnostics]
    return found[0]


def test_a_vector_unpacks_like_a_tuple_of_its_lanes(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], y: Tensor[f32]):
    v = x.vload(0, 4)
    p, q, r, t = v
    y[0] = dsl.max(*v)
    y[1] = p + q + r + t
    y[2] = len(v) + 0.0
    for e in v:
        y[3] += e
    w = dsl.vector(*[e * 2.0 for e in v], *list(v))
    y.vstore(8, w[0:4] + w[4:8])
    y[4] = max(v) + min(v) + sum(v) + v.sum() + v.max() + v.min()
""")
    assert list(a.diagnostics) == []
    traced = a.stage("k", "traced")
    assert "vector.reduction" not in traced  # plain arith ops, which the interpreter runs as they are
    assert "arith.maximumf" in traced and "arith.minimumf" in traced


def test_an_f16_sum_adds_packed_halves(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f16], y: Tensor[f16]):
    y[0] = x.vload(0, 8).sum()
""")
    ptx = a.stage("k", "ptx")
    assert ptx.count("add.f16x2") == 3 and ptx.count("add.f16 ") + ptx.count("add.f16\t") == 1


@pytest.mark.parametrize(("stmt", "needle", "message"), [
    ("y[0, 0] = (v > 0.0).sum()", "v > 0.0",
     "comparisons of vectors are not supported; compare elements"),
    ("y[0, 0] = h.vload(0, 8).to(dsl.f8e4m3).sum()", "h.vload(0, 8).to(dsl.f8e4m3).sum()",
     "v.sum() on vector<8xf8e4m3>; fp8 is a storage type: convert to f16, bf16 or f32 first, e.g. v.to(dsl.f32)"),
    ("y[0, 0] = v.sum(1)", "v.sum(1)", "v.sum() takes no arguments"),
    ("y[0, 0] = dsl.min(s)", "dsl.min(s)",
     "dsl.min takes two or more values, or one vector (whose lanes it reduces); got f32"),
    ("p, q = v", "p, q", "cannot unpack vector<4xf32> (4 items) into 2 names"),
    ("y[0, 0] = v[4]", "4", "vector lane 4 out of range 0..3 (vector<4xf32>)"),
    ("y[0, 0] = v[1.0]", "1.0", "a vector lane is an int, not Python float"),
    ("y[0, 0] = v[i + 1]", "i + 1",
     "a vector lane must be a compile-time int (a literal, a Constexpr or a dsl.static_range index); 'i + 1' is "
     "a run-time i32. To pick a lane at run time, select: `lane = v[0]` then `for j in dsl.static_range(1, 4): "
     "lane = v[j] if i + 1 == j else lane`"),
    ("y[0, 0] = v @ v", "v @ v", "'@' is not defined for DSL values; tensor-core products are dsl.mma_sync and "
     "dsl.wgmma, and a dot product of two vectors is (a * b).sum()"),
    ("q = dsl.vector(v, v)", "dsl.vector(v, v)",
     "dsl.vector takes scalars, got vector<4xf32>; to join vectors, unpack their lanes: dsl.vector(*a, *b)"),
])
def test_lane_mistakes_are_dsl301_at_the_expression(analyse, stmt, needle, message):
    a = analyse(BODY.format(stmt=stmt))
    (d,) = list(a.diagnostics)
    assert (d.code, d.message, d.range) == ("DSL301", message, at(a, needle, stmt)), d.format()


def test_a_kernel_returning_a_value_is_refused_at_the_return_and_a_bare_return_is_not(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    if dsl.thread_idx.x >= n:
        return
    v = x.vload(0, 4)
    if v[0] > 0.0:
        return v[1]
    x.vstore(0, v)
""")
    d = only(a, "DSL301")
    assert d.range == at(a, "return v[1]")
    assert d.message == "kernels return nothing; write results into a tensor argument (a bare 'return' may leave early)"
