"""Integer `//`, `%` and `dsl.cdiv` in a jit function mean what they mean in a kernel (truncating,
as the IR's divsi / remsi), in the generated launcher too, where Python's operators floor."""

from __future__ import annotations

import pytest

from dsl.runtime.launch import Runtime

SOURCE = """
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def fill(x: Tensor[f32], v: Int32):
    x[dsl.thread_idx.x] = dsl.cast(v, f32)

@dsl.jit
def run(x: Tensor[f32], k: Int32):
    n = x.shape[0]
    fill(x, k // 4 + k % 3 + dsl.cdiv(k, 8)).launch(grid=dsl.cdiv(n, 128), block=128)
"""


def test_the_launcher_truncates_where_an_operand_may_be_negative(analyse):
    a = analyse(SOURCE)
    launcher = a.stage("run", "launcher")
    assert "rt.trunc_div(k, 4)" in launcher and "rt.trunc_mod(k, 3)" in launcher and "rt.cdiv(k, 8)" in launcher
    assert "(-(-x_shape[0] // 128))" in launcher  # shapes are never negative: Python's // agrees
    traced = a.stage("run", "traced")
    assert "arith.divsi" in traced and "arith.remsi" in traced


@pytest.mark.parametrize(("a", "b", "quotient", "remainder", "ceil"), [
    # ceil: (a + b - 1) truncated by b, as the IR computes dsl.cdiv
    (7, 2, 3, 1, 4), (-7, 2, -3, -1, -3), (7, -2, -3, 1, -2), (-7, -2, 3, -1, 5), (-5, 4, -1, -1, 0), (0, 3, 0, 0, 0),
])
def test_the_launcher_helpers_compute_as_c_does(a, b, quotient, remainder, ceil):
    assert (Runtime.trunc_div(a, b), Runtime.trunc_mod(a, b), Runtime.cdiv(a, b)) == (quotient, remainder, ceil)
