"""`a if cond else b` in kernels: a select for plain arithmetic, a branch (only the side taken
runs) when a side reads memory, checked against Python on the CPU oracle."""

from __future__ import annotations

import numpy as np

import dsl
from tests.compiler.cpu_kernel import CpuKernel, tensor_args

SOURCE = """import dsl
from dsl import Int32, Tensor, f32, i32

MODE = 1

@dsl.kernel
def k(x: Tensor[f32], out: Tensor[f32], n: Int32):
    t = dsl.thread_idx.x
    v = x[t]
    out[t] = v * 2.0 if v > 0.0 else -1            # both sides arithmetic: one select
    out[t + 8] = x[t + 4] if t + 4 < n else 0.5     # the load runs only when it is in bounds
    out[t + 16] = 3.0 if MODE == 0 else dsl.cast(t if t % 2 == 0 else 7, dsl.f32)  # compile-time: one side
"""


def test_conditional_expressions_agree_with_python(tmp_path):
    path = tmp_path / "ifexp.py"
    path.write_text(SOURCE)
    report = dsl.analyze_source(SOURCE, str(path), until="traced")
    assert not list(report.all_diagnostics())
    traced = report.function("k").compiled.traced
    assert traced.count("arith.select") == 2 and traced.count("scf.if") == 1
    x = np.array([1.5, -2.0, 0.0, 4.0, 5.0, 6.0, 7.0, 8.0], dtype=np.float32)
    n = 6
    out = np.full(24, 99.0, dtype=np.float32)
    CpuKernel(traced).run((1, 1, 1), (4, 1, 1), *tensor_args(x), *tensor_args(out), n)
    for t in range(4):
        v = float(x[t])
        assert out[t] == (v * 2.0 if v > 0.0 else -1)
        assert out[t + 8] == (x[t + 4] if t + 4 < n else 0.5)
        assert out[t + 16] == (t if t % 2 == 0 else 7)


def test_sides_of_types_that_do_not_promote_are_refused(tmp_path):
    source = SOURCE.replace("-1            # both", "dsl.cast(v, dsl.i32)  # both")
    path = tmp_path / "bad.py"
    path.write_text(source)
    diags = list(dsl.analyze_source(source, str(path), until="traced").all_diagnostics())
    assert [(d.code, d.range.line) for d in diags] == [("DSL301", 10)]
    assert "f32" in diags[0].message and "i32" in diags[0].message
