"""Specialising a kernel on a tensor's shape (issue 28, item 6): a run-time shape passed to a
Constexpr parameter is refused with the way to do it, and that way (a Constexpr of the jit
function, passed by the caller and checked by an assert the launcher runs) works."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl import Constexpr, Tensor, f32
from dsl.diagnostics import ArgumentError, SourceRange

HEADER = """
import dsl
from dsl import Constexpr, Tensor, f32
"""


def test_a_shape_for_a_constexpr_says_how_to_specialise(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32, 2], N: Constexpr[int]):
    x[0, 0] = 1.0

@dsl.jit
def run(x: Tensor[f32, 2]):
    k(x, x.shape[1]).launch(grid=1, block=1)
""")
    (d,) = list(a.diagnostics)
    line = a.line_of("k(x, x.shape[1])")
    col = a.source.splitlines()[line - 1].index("x.shape[1]")
    assert d.code == "DSL301" and d.range == SourceRange(a.path, line, col, line, col + len("x.shape[1]"))
    assert d.message == (
        "'N' is Constexpr, and x.shape[1] is a run-time i32 (read at each call). To specialise on it, give run a "
        "parameter `N: Constexpr[int]`, pass it from Python (`run(..., N=x.shape[1])`), check it with "
        "`assert x.shape[1] == N` (the launcher checks before launching) and pass N here")


@dsl.kernel
def double_columns(x: Tensor[f32, 2], y: Tensor[f32, 2], N: Constexpr[int]):
    row = dsl.block_idx.x
    for c in dsl.static_range(0, N, 4):  # unrolled: N is known while tracing
        y.vstore((row, c), x.vload((row, c), 4) * 2.0)


@dsl.jit
def run_double_columns(x: Tensor[f32, 2], y: Tensor[f32, 2], N: Constexpr[int] = 64):
    assert x.shape[1] == N, f"x has {x.shape[1]} columns; this specialization is for N={N}"
    double_columns(x, y, N).launch(grid=x.shape[0], block=1)


def test_the_documented_pattern_specialises_and_checks_at_launch():
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    y = np.zeros_like(x)
    dsl.interpret(run_double_columns, x, y, N=x.shape[1])
    np.testing.assert_array_equal(y, 2 * x)
    with pytest.raises(ArgumentError, match="x has 16 columns; this specialization is for N=64"):
        dsl.interpret(run_double_columns, x, y)  # the default N does not match
    ptx = dsl.compile(run_double_columns, dsl.TensorSpec(f32, rank=2), dsl.TensorSpec(f32, rank=2), 32).ptx
    assert ptx.count("ld.global.v4") == 8  # 32 columns: eight unrolled 128-bit loads
