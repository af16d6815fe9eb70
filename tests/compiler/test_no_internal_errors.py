"""Misuse of DSL values is the user's mistake, never an internal error (issue 28, item 3).

Python's own TypeError / ValueError / IndexError / KeyError on a DSL value inside the tracer
used to end as DSL402 "internal error while tracing this statement" (`dsl.max(*v)`,
`dsl.cdiv(n)`, `x.vload()`, `s @ s`, `k(...).launch(bogus=1)`): each is now DSL301 or DSL302
at the expression, in the user's types, with what to write instead where there is one.
"""

from __future__ import annotations

import pytest

from dsl.diagnostics import SourceRange

KERNEL = """
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel(target="sm_90a")
def k(x: Tensor[f32], n: Int32):
    s = x[0]
    v = x.vload(0, 4)
    smem = dsl.SharedAllocator()
    lst = [s, s]
    {stmt}
"""

HOST = """
import dsl
from dsl import Constexpr, Int32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    x[0] = 1.0

@dsl.jit
def run(x: Tensor[f32], B: Constexpr[int] = 4):
    n = x.shape[0]
    {stmt}
"""


def at(a, needle, line_needle):
    """The range of `needle` on the line holding `line_needle`; `max(*|s|)` is the range of
    `s` where `max(*s)` is."""
    context, _, rest = needle.partition("|")
    inner = rest.partition("|")[0]
    line = a.line_of(line_needle)
    col = a.source.splitlines()[line - 1].index(needle.replace("|", "")) + (len(context) if rest else 0)
    return SourceRange(a.path, line, col, line, col + (len(inner) if rest else len(needle)))


@pytest.mark.parametrize(("stmt", "needle", "message"), [
    ("x[0] = dsl.max(*s)", "max(*|s|)", "cannot unpack f32 with '*' (a run-time scalar is one value)"),
    ("x[0] = dsl.max(**s)", "max(**|s|)", "'**' needs a dict with str keys, not f32"),
    ("x[0] = s(1)", "s(1)", "f32 is not callable"),
    ("x[0] = s @ s", "s @ s", "'@' is not defined for DSL values; tensor-core products are dsl.mma_sync and "
     "dsl.wgmma, and a dot product of two vectors is (a * b).sum()"),
    ("x[0] = dsl.cdiv(s)", "dsl.cdiv(s)", "dsl.cdiv(a, b): missing a required argument: 'b'"),
    ("x[0] = dsl.abs(s, s)", "dsl.abs(s, s)", "dsl.abs takes one argument"),
    ("q = dsl.SharedAllocator(True, 1)", "dsl.SharedAllocator(True, 1)",
     "dsl.SharedAllocator(dynamic=False): too many positional arguments"),
    ("q = x.vload()", "x.vload()", ".vload(): missing a required argument: 'index'"),
    ("x.vstore(0)", "x.vstore(0)", ".vstore(): missing a required argument: 'value'"),
    ("q = smem.array(f32, 4, bogus=1)", "smem.array(f32, 4, bogus=1)",
     ".array(): got an unexpected keyword argument 'bogus'"),
    ("q = s.to()", "s.to()", "f32.to(dtype) takes one DSL scalar type, e.g. x.to(dsl.f32)"),
    ("q = s.to(1)", "s.to(1)", "f32.to(dtype) takes one DSL scalar type, e.g. x.to(dsl.f32)"),
    ("q = -x", "-x", "unary '-' is not defined for Tensor[f32, 1]"),
    ("q = x.shape + 1", "x.shape + 1", "'+' is not defined for x.shape and Python int"),
    ("q = sorted(lst)", "sorted(lst)", "sorted(...) cannot run on the run-time values inside its arguments: Python "
     "functions run while tracing, where those values are not known"),
])
def test_kernel_misuse_is_a_user_diagnostic_at_the_expression(analyse, stmt, needle, message):
    a = analyse(KERNEL.format(stmt=stmt))
    (d,) = list(a.diagnostics)
    assert d.code in ("DSL301", "DSL302"), d.format()
    assert (d.message, d.range) == (message, at(a, needle, stmt))


@pytest.mark.parametrize(("stmt", "needle", "message"), [
    ("k(x, n).launch(grid=1, block=1, bogus=1)", "k(x, n).launch(grid=1, block=1, bogus=1)",
     ".launch(grid, block, smem=None, stream=None, cluster=None): got an unexpected keyword argument 'bogus'"),
    ("q = dsl.cdiv(n)", "dsl.cdiv(n)", "dsl.cdiv(a, b) takes two values"),
    ("q = dsl.zeros(f32, 4)", "dsl.zeros(f32, 4)",
     "dsl.zeros is device code: call it in a @dsl.kernel (or a helper a kernel calls), not in a @jit function"),
    ("q = x(1)", "x(1)", "Tensor[f32, 1] is not callable"),
    ("q = x[0]", "x[0]", "Tensor[f32, 1] cannot be indexed here"),
])
def test_host_misuse_is_a_user_diagnostic_at_the_expression(analyse, stmt, needle, message):
    a = analyse(HOST.format(stmt=stmt))
    (d,) = list(a.diagnostics)
    assert (d.code, d.message, d.range) == ("DSL301", message, at(a, needle, stmt)), d.format()


def test_a_shape_unpacks_and_has_a_length(analyse):
    a = analyse(HOST.format(stmt="(m,) = x.shape\n    k(x, m + len(x.shape)).launch(grid=1, block=1)"))
    assert list(a.diagnostics) == []


# Each of these ended as DSL402 before; a few of every kind, kernel side (`dsl.max(*v)`, which
# did too, now compiles: `test_vector_lanes.py`).
FORMER_INTERNAL_ERRORS = [
    "q = dsl.max(*s)", "q = dsl.exp(*s)", "q = dsl.barrier(**s)", "q = dsl.cdiv()", "q = dsl.cdiv(s, s, s)",
    "q = dsl.abs()", "q = dsl.SharedAllocator(s, s)", "q = dsl.SharedAllocator(bogus=1)", "q = s.to()",
    "q = v.to()", "q = x.vload()", "q = x.vload(0, 4, 5)", "x.vstore()", "q = smem.array()",
    "q = smem.array(f32, (4,), bogus=1)", "q = v @ v", "q = max(**s)", "q = dsl.mbarrier_wait(*s)",
    "q = dsl.tma_store_wait(**s)",
]


@pytest.mark.parametrize("stmt", FORMER_INTERNAL_ERRORS)
def test_no_misuse_is_an_internal_error(analyse, stmt):
    """Each is refused (a diagnostic), and none of them is DSL402."""
    a = analyse(KERNEL.format(stmt=stmt))
    assert "DSL402" not in a.codes() and a.codes(), [d.format() for d in a.diagnostics]
