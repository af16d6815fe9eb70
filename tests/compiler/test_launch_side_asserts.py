"""`assert` in a `@dsl.jit` function: a `cf.assert` in the IR and a launcher check raising
`ArgumentError` with the user's message before any kernel is launched.

The launcher is run here against a recording stand-in for the runtime (`FakeRuntime`), so
the checks are exercised without a GPU; `tests/runtime/test_gpu_launch_side.py` runs them
for real.
"""

from __future__ import annotations

import pytest

import dsl
from dsl.diagnostics import ArgumentError

SOURCE = """
import dsl
from dsl import Constexpr, Float32, Tensor, f32

@dsl.kernel
def scale(x: Tensor[f32, 2], a: Float32):
    x[dsl.block_idx.x, dsl.thread_idx.x] = x[dsl.block_idx.x, dsl.thread_idx.x] * a

@dsl.jit
def run(x: Tensor[f32, 2], a: Float32, BLOCK: Constexpr[int] = 32):
    scale(x, a).launch(grid=x.shape[0], block=x.shape[1])
    assert x.shape[1] % BLOCK == 0, f"columns ({x.shape[1]}) must be a multiple of {BLOCK}"
    assert a > 0.0 and not x.shape[0] > 4096
    assert BLOCK >= 32, "compile-time: checked while tracing"
"""


class FakeRuntime:
    """What a launcher binds, recording launches instead of making them."""

    argument_error = staticmethod(lambda message: ArgumentError(str(message)))

    def __init__(self):
        self.launches = []

    def arg_reader(self, params):
        def read(*args):
            out = []
            for (_, _, rank), value in zip(params, args):
                out += [0x1000, value, tuple(value[1:])] if rank is not None else [value]  # row-major
            return (*out, 0)

        return read

    def kernel(self, symbol, codes, cluster=None):
        return lambda grid, block, smem, stream, *values: self.launches.append((symbol, grid, block, smem))

    def device_attribute(self, name):
        return {"multiprocessor_count": 132}[name]

    def check_smem(self, symbol, grid, block, smem, required):
        if smem < required:
            raise RuntimeError(f"smem {smem} < {required}")


def bind(launcher: str):
    namespace: dict = {}
    exec(compile(launcher, "<launcher>", "exec"), namespace)
    rt = FakeRuntime()
    return namespace["bind"](rt), rt


def test_run_time_asserts_become_launcher_checks_before_the_launch(analyse):
    a = analyse(SOURCE)
    assert a.diagnostics == []
    lines = a.stage("run", "launcher").splitlines()
    reader = next(i for i, line in enumerate(lines) if "= _read_args(" in line)
    first, second, launch = a.line_of("assert x.shape"), a.line_of("assert a > 0.0"), a.line_of(".launch(")
    assert lines[reader + 1:reader + 6] == [
        f"        if not ((x_shape[1] % 32) == 0):  # assert at kern.py:{first}",
        "            raise rt.argument_error(('columns (' + format((x_shape[1]), '') + ') must be a multiple of '"
        " + '32'))",
        f"        if not ((a > 0.0) and (not (x_shape[0] > 4096))):  # assert at kern.py:{second}",
        "            raise rt.argument_error('assertion failed: a > 0.0 and not x.shape[0] > 4096')",
        f"        # kern.py:{launch}",
    ]


def test_the_ir_shows_each_check_as_cf_assert(analyse):
    a = analyse(SOURCE)
    asserts = [line.strip().split(", ", 1)[1] for line in a.stage("run", "traced").splitlines()
               if line.strip().startswith("cf.assert")]
    assert asserts == ['"f\'columns ({x.shape[1]}) must be a multiple of {BLOCK}\'"',
                       '"assertion failed: a > 0.0 and not x.shape[0] > 4096"']


def test_a_failing_check_raises_argument_error_and_launches_nothing(analyse):
    launch, rt = bind(analyse(SOURCE).stage("run", "launcher"))
    with pytest.raises(ArgumentError) as info:
        launch((64, 48), 2.0)
    assert str(info.value) == "columns (48) must be a multiple of 32"
    with pytest.raises(ArgumentError, match=r"^assertion failed: a > 0.0 and not x.shape\[0\] > 4096$"):
        launch((64, 64), -1.0)
    with pytest.raises(ArgumentError, match=r"^assertion failed: a > 0.0"):
        launch((5000, 64), 1.0)
    assert rt.launches == []
    launch((64, 64), 1.0)
    assert rt.launches == [("scale", (64, 1, 1), (64, 1, 1), 0)]


def test_a_compile_time_assert_is_still_checked_while_tracing(analyse):
    a = analyse(SOURCE.replace("BLOCK: Constexpr[int] = 32", "BLOCK: Constexpr[int] = 16"))
    d = next(d for d in a.diagnostics if d.code == "DSL301")
    line = a.line_of("assert BLOCK >= 32")
    assert d.message == "compile-time: checked while tracing"
    assert (d.range.line, d.range.column, d.range.end_line) == (line, 4, line)


def test_format_specs_and_conversions_in_the_message(analyse):
    a = analyse("""
import dsl
from dsl import Float32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32]):
    pass

@dsl.jit
def run(x: Tensor[f32], eps: Float32):
    assert eps < 0.5, f"eps={eps:.3f} ({eps!r}), n={x.shape[0]:>6}, {'literal'!r}"
    k(x).launch(grid=1, block=32)
""")
    launch, rt = bind(a.stage("run", "launcher"))
    with pytest.raises(ArgumentError) as info:
        launch((10,), 0.75)
    assert str(info.value) == "eps=0.750 (0.75), n=    10, 'literal'"
    assert rt.launches == []


def test_a_run_time_assert_outside_a_jit_function_is_still_refused(analyse):
    a = analyse("""
import dsl
from dsl import Int32, Tensor, f32

@dsl.kernel
def k(x: Tensor[f32], n: Int32):
    assert n > 0
""")
    d = next(d for d in a.diagnostics if d.code == "DSL302")
    assert d.message == "assert on a run-time value is not supported; use dsl.const_expr"
    assert d.range.line == a.line_of("assert n > 0")


def test_dsl_exports_the_device_functions():
    assert dsl.sm_count.__module__ == dsl.device_attribute.__module__ == "dsl.language.device"


HELPER_ASSERT = """
import dsl
from dsl import Tensor, f32

def check_rows(x):
    assert x.shape[0] % 8 == 0, "rows must be a multiple of 8"

@dsl.kernel
def bump(x: Tensor[f32]):
    x[dsl.thread_idx.x] = x[dsl.thread_idx.x] + 1.0

@dsl.jit
def run(x: Tensor[f32]):
    check_rows(x)
    bump(x).launch(grid=1, block=x.shape[0])
"""


def test_an_assert_in_a_plain_helper_of_a_jit_function_compiles_and_checks(analyse):
    """Its location is a call site (the helper's line, called from the jit function's): the
    lowering's debug-scope pass crashed the process on it while it saw the host function."""
    a = analyse(HELPER_ASSERT)
    assert not [d for d in a.diagnostics if d.is_error]
    assert ".entry bump" in a.stage("run", "ptx")
    launch, rt = bind(a.stage("run", "launcher"))
    with pytest.raises(ArgumentError, match="rows must be a multiple of 8"):
        launch((12,))
    launch((16,))
    assert rt.launches == [("bump", (1, 1, 1), (16, 1, 1), 0)]
