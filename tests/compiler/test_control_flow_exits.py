"""`return`, `break` and `continue` in run-time control flow: what is refused, exactly where,
and helpers whose returns sit under run-time conditions (run on the CPU through MLIR's JIT)."""

from __future__ import annotations

import numpy as np

from dsl.diagnostics import SourceRange
from tests.compiler.cpu_kernel import CpuKernel, tensor_args

HEADER = """
import dsl
from dsl import Int32, Tensor, i32
"""


def only(a, code):
    found = [d for d in a.diagnostics if d.code == code]
    assert len(found) == 1 and len(list(a.diagnostics)) == 1, [d.format() for d in a.diagnostics]
    return found[0]


def at(a, needle, line_needle=None):
    line = a.line_of(line_needle or needle)
    col = a.source.splitlines()[line - 1].index(needle)
    return SourceRange(a.path, line, col, line, col + len(needle))


def run_kernel(a, x, threads):
    fn = a.report.function("k")
    assert fn is not None and fn.compiled is not None, [d.format() for d in a.diagnostics]
    out = np.zeros(threads, dtype=np.int32)
    CpuKernel(fn.compiled.traced).run((1, 1, 1), (threads, 1, 1), *tensor_args(x), *tensor_args(out))
    return out.tolist()


def test_the_loop_variable_is_not_defined_after_a_run_time_loop(analyse):
    """Python leaves it at the last value (or unset); a run-time loop has no such value."""
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    j = 5
    for j in range(x[0]):
        out[j] = 1
    out[0] = j
""")
    d = only(a, "DSL303")
    assert d.range == at(a, "j", "out[0] = j")
    assert d.message == ("the loop variable 'j' of a run-time loop is not defined after the loop; "
                         "copy it to another name inside the loop")
    assert d.related[0].range == at(a, "j", "for j in range")


def test_a_value_return_inside_a_run_time_loop_is_refused(analyse):
    a = analyse(HEADER + """
def find(x, n):
    for j in range(n):
        if x[j] > 0:
            return j
    return -1

@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    out[0] = find(x, x.shape[0])
""")
    d = only(a, "DSL302")
    assert d.range == at(a, "return j")
    assert d.message == ("'return' with a value inside a run-time loop is not supported; assign the value "
                         "to a name, 'break', and return it after the loop")


def test_break_outside_a_loop_is_refused(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    if x[0] > 0:
        break
""")
    d = only(a, "DSL003")  # Python itself refuses it; the rest of the file is still analysed
    assert d.range == at(a, "break")
    assert d.message == "syntax error: 'break' outside loop"


def test_a_helper_that_returns_on_some_paths_only_is_refused_at_the_call(analyse):
    a = analyse(HEADER + """
def positive_or_none(v):
    if v > 0:
        return v

@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    out[0] = positive_or_none(x[0])
""")
    d = only(a, "DSL303")
    assert d.range == at(a, "positive_or_none(x[0])")
    assert d.message == ("positive_or_none() returns a value on some run-time paths and falls off its end "
                         "(None) on others; return a value on every path")


def test_helper_returns_under_nested_run_time_ifs(analyse):
    """Each thread gets the value of the `return` Python would take."""
    a = analyse(HEADER + """
def classify(v):
    if v > 0:
        if v > 5:
            return 2
        v = v + 100
    else:
        return 0
    return v

@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    t = dsl.thread_idx.x
    out[t] = classify(x[t])
""")
    x = np.array([-1, 0, 3, 9], dtype=np.int32)
    assert run_kernel(a, x, 4) == [0, 0, 103, 2]


def test_break_out_of_an_unrolled_loop_under_a_run_time_if(analyse):
    """`dsl.static_range` iterations after a run-time `break` are traced under `if not broken`."""
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    t = dsl.thread_idx.x
    total = 0
    for j in dsl.static_range(4):
        if x[t] == j:
            break
        total += 10
    out[t] = total + j
""")
    x = np.array([0, 2, 7], dtype=np.int32)
    assert run_kernel(a, x, 3) == [0, 22, 43]


def test_and_or_short_circuit_around_memory_reads(analyse):
    """`i < n and x[i] > 0` reads `x[i]` only where `i < n`: the load sits in a branch."""
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32], n: Int32):
    i = dsl.thread_idx.x
    if i < n and x[i] > 0:
        out[i] = 1
    if i < n and i > 3 or i == 0:
        out[0] = 2
""")
    traced = a.stage("k", "traced")
    first_if = traced.index("scf.if")
    assert traced.index("llvm.load") > first_if  # the load is inside the branch
    assert "arith.andi" in traced and "arith.ori" in traced  # plain comparisons stay a select-free and/or


def test_per_thread_lists_built_with_append_and_carried_by_a_run_time_loop(analyse):
    """A list built with `append`, changed in place through an alias inside a run-time loop, and
    a tuple rebound each iteration: every name sees what Python would show."""
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    acc = []
    for q in dsl.static_range(3):
        acc.append(q)
    alias = acc
    pair = (0, 1)
    for j in range(x.shape[0]):
        for q in dsl.static_range(3):
            alias[q] += x[j] * (q + 1)
        pair = (pair[1], pair[0] + pair[1])
    for q in dsl.static_range(3):
        out[q] = acc[q]
    out[3] = pair[1]
    out[4] = sum(acc)
""")
    fn = a.report.function("k")
    assert fn is not None and fn.compiled is not None, [d.format() for d in a.diagnostics]
    x = np.array([1, 2, 3, 4], dtype=np.int32)
    out = np.zeros(5, dtype=np.int32)
    CpuKernel(fn.compiled.traced).run((1, 1, 1), (1, 1, 1), *tensor_args(x), *tensor_args(out))
    assert out.tolist() == [10, 21, 32, 5, 63]


def test_a_list_changing_length_in_a_run_time_loop_is_refused(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    acc = [0]
    for j in range(x.shape[0]):
        acc.append(x[j])
    out[0] = acc[0]
""")
    d = only(a, "DSL301")
    assert d.range == SourceRange(a.path, a.line_of("for j in range"), 4, a.line_of("acc.append"), 24)
    assert d.message == ("the length of 'acc' changes inside this run-time loop; a per-thread list keeps its "
                         "length (build it before the loop)")


def test_a_list_indexed_by_a_run_time_value_is_refused(analyse):
    a = analyse(HEADER + """
@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    acc = [1, 2, 3]
    out[0] = acc[x[0]]
""")
    d = only(a, "DSL301")
    assert d.range == at(a, "x[0]", "acc[x[0]]")
    assert d.message == ("a per-thread list is indexed with compile-time ints (loop with dsl.static_range to "
                         "index it from a loop)")
