"""What a user reads: messages name DSL types, not the compiler's objects, and one mistake gives
one error (no follow-on errors at the launch, no DSL103 on a kernel a jit launches)."""

from __future__ import annotations

HEADER = """
import dsl
from dsl import Constexpr, Int32, Tensor, f32
"""


def test_run_time_values_in_messages_read_as_dsl_types(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    v = x.vload(0, 4)
    x[0] = v[n]
""")
    (d,) = a.diagnostics
    assert d.code == "DSL301"
    assert d.message == ("a vector lane must be a compile-time int (a literal, a Constexpr or a dsl.static_range "
                         "index); 'n' is a run-time i32. To pick a lane at run time, select: `lane = v[0]` then "
                         "`for j in dsl.static_range(1, 4): lane = v[j] if n == j else lane`")


def test_a_failing_kernel_is_reported_once_not_again_at_its_launch(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def scale(x: Tensor[f32], n: Int32, BLOCK: Constexpr[int]):
    i = dsl.block_idx.x * BLOCK + dsl.thread_idx.x
    vals = [x[i], x[i + 1]]
    if i < n:
        x[i] = vals[2]

@dsl.jit
def run(x: Tensor[f32], BLOCK: Constexpr[int] = 128):
    n = x.shape[0]
    scale(x, n, BLOCK).launch(grid=dsl.cdiv(n, BLOCK), block=BLOCK)
""")
    assert [(d.code, d.message, d.range.line) for d in a.diagnostics] == [
        ("DSL301", "index 2 is out of range for a list of 2", a.line_of("vals[2]"))]


def test_no_dsl103_on_a_kernel_launched_by_a_jit_that_failed(analyse):
    """`BLOCK` has no DSL type, but the jit gives it one; the jit's own mistake is the root."""
    a = analyse(HEADER + """
@dsl.kernel
def fill(x: Tensor[f32], BLOCK: Constexpr[int]):
    x[dsl.thread_idx.x] = 1.0

@dsl.jit
def run(x: Tensor[f32], BLOCK: Constexpr[int] = 128):
    fill(x, BLOCK).launch(grid=undefined_name, block=BLOCK)
""")
    assert [(d.code, d.message) for d in a.diagnostics] == [("DSL301", "name 'undefined_name' is not defined")]
