"""Random kernel bodies with `return`, `break` and `continue` under run-time `if`s inside run-time
and unrolled loops (nested too), and a per-thread list changed in place and rebound along the
way, compute what Python computes for the same body.

The body is run three times: as plain Python (the oracle: Python's own semantics, one call
per thread), as the compiled kernel, JIT-compiled for the CPU from its traced MLIR through
upstream MLIR's lowering (`cpu_kernel.py`), and by kdsl's interpreter (`dsl.interpret`, all
threads of the block in lockstep). `test_gpu_control_flow.py` runs the same bodies on the GPU.
"""

from __future__ import annotations

import itertools
import types
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsl
from tests.compiler.cpu_kernel import CpuKernel, tensor_args

THREADS, COLS, SLOTS = 4, 6, 8
HEADER = ("import dsl\nfrom dsl import Int32, Tensor, i32\n\n\n@dsl.kernel\n"
          "def k(x: Tensor[i32, 2], out: Tensor[i32, 2], n: Int32):\n"
          "    t = dsl.thread_idx.x\n    acc = 0\n    arr = [0, 0, 0]\n    w = 0\n")
FOOTER = "    out[t, 6] = arr[0] + arr[1] * 3 + arr[2] * 7\n    out[t, 7] = acc\n"


@st.composite
def block(draw: st.DrawFn, depth: int, loop_vars: tuple[str, ...], in_loop: bool,
          counter: itertools.count) -> list[str]:
    """A list of statement lines (indented relative to the block) valid in Python and the DSL."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        lines += draw(statement(depth, loop_vars, in_loop, counter))
    return lines


def _index(draw: st.DrawFn, loop_vars: tuple[str, ...]) -> str:
    return draw(st.sampled_from([*loop_vars, *map(str, range(3))])) if loop_vars else str(draw(st.integers(0, 2)))


@st.composite
def statement(draw: st.DrawFn, depth: int, loop_vars: tuple[str, ...], in_loop: bool,
              counter: itertools.count) -> list[str]:
    kinds = ["assign", "assign", "store"]
    if depth < 3:
        kinds += ["if", "if", "for", "static_for", "while"]
    if in_loop:
        kinds += ["break", "continue"]
    kinds += ["return"]
    kind = draw(st.sampled_from(kinds))
    j = _index(draw, loop_vars)
    if kind == "assign":
        k = draw(st.integers(0, 2))
        return [draw(st.sampled_from([f"acc = acc + x[t, {j}]", f"acc = acc ^ {j}", "acc = acc - w",
                                      "acc = acc + 1", "w = w + 1", f"arr[{k}] = arr[{k}] + x[t, {j}]",
                                      f"arr[{k}] += acc", "arr = [arr[2], arr[0], arr[1] + 1]"]))]
    if kind == "store":
        return [draw(st.sampled_from([f"out[t, {draw(st.integers(0, 5))}] = acc + {j}",
                                      f"out[t, {draw(st.integers(0, 5))}] = arr[{draw(st.integers(0, 2))}]"]))]
    if kind in ("break", "continue", "return"):
        # a bare exit ends its block in Python; put it under a run-time condition most of the time
        if draw(st.booleans()):
            return [kind]
        cond = draw(condition(loop_vars))
        return [f"if {cond}:", f"    {kind}"]
    inner = depth + 1
    if kind == "if":
        cond = draw(condition(loop_vars))
        lines = [f"if {cond}:"] + ["    " + s for s in draw(block(inner, loop_vars, in_loop, counter))]
        if draw(st.booleans()):
            lines += ["else:"] + ["    " + s for s in draw(block(inner, loop_vars, in_loop, counter))]
        return lines
    var = f"j{next(counter)}"
    if kind == "for":
        bound = draw(st.sampled_from(["n", "3", "x[t, 5]"]))
        header = f"for {var} in range({bound}):"
    elif kind == "static_for":
        header = f"for {var} in dsl.static_range({draw(st.integers(1, 3))}):"
    else:
        limit = draw(st.integers(1, 6))
        return ([f"while w < {limit}:", "    w = w + 1"]
                + ["    " + s for s in draw(block(inner, loop_vars, True, counter))])
    return [header] + ["    " + s for s in draw(block(inner, (*loop_vars, var), True, counter))]


@st.composite
def condition(draw: st.DrawFn, loop_vars: tuple[str, ...]) -> str:
    j = _index(draw, loop_vars)
    return draw(st.sampled_from([f"x[t, {j}] > {draw(st.integers(0, 9))}", f"acc > {draw(st.integers(-3, 30))}",
                                 f"(acc & 3) == {draw(st.integers(0, 3))}", f"w >= {draw(st.integers(0, 4))}",
                                 f"x[t, {j}] == acc"]))


def kernel_source(lines: list[str]) -> str:
    return HEADER + "".join(f"    {line}\n" for line in lines) + FOOTER


def python_oracle(source: str, x: np.ndarray, n: int) -> np.ndarray:
    """Runs the kernel's body as plain Python, one call per thread, on Python ints."""
    fake_dsl = types.SimpleNamespace(static_range=range, kernel=lambda f: f, thread_idx=None)
    body = source.split("    w = 0\n", 1)[1]
    text = "def k(x, out, n, t):\n    acc = 0\n    arr = [0, 0, 0]\n    w = 0\n" + body
    scope: dict = {"dsl": fake_dsl}
    exec(compile(text, "<oracle>", "exec"), scope)
    xs = x.astype(object)
    out = np.zeros((THREADS, SLOTS), dtype=object)
    for t in range(THREADS):
        scope["k"](xs, out, n, t)
    return out.astype(np.int32)


def make_inputs(seed: int) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(THREADS, COLS), dtype=np.int32)
    x[:, 5] = rng.integers(0, 4, size=THREADS)  # a small run-time trip count
    return x, int(rng.integers(0, 5))


def compiled_cpu(source: str, path: str, x: np.ndarray, n: int) -> np.ndarray:
    report = dsl.analyze_source(source, path, until="traced")
    problems = [d.format() for d in report.all_diagnostics()]
    assert not problems, (problems, source)
    (fn,) = report.functions
    out = np.zeros((THREADS, SLOTS), dtype=np.int32)
    CpuKernel(fn.compiled.traced).run((1, 1, 1), (THREADS, 1, 1), *tensor_args(x), *tensor_args(out), n)
    return out


def interpreted(source: str, path: str, x: np.ndarray, n: int) -> np.ndarray:
    """The same kernel run by kdsl's interpreter (`dsl.interpret`), launched by a jit function
    added to the file."""
    import importlib.util

    launcher = ("\n\n@dsl.jit\ndef run(x: Tensor[i32, 2], out: Tensor[i32, 2], n: Int32):\n"
                f"    k(x, out, n).launch(grid=1, block={THREADS})\n")
    Path(path).write_text(source + launcher)
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = np.zeros((THREADS, SLOTS), dtype=np.int32)
    dsl.interpret(module.run, x, out, n)
    return out


counter = itertools.count()


# 80 random nests here; the generated-program tests (tests/fuzz, 2,000 programs in CI) nest exits too
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(block(0, (), False, itertools.count()), st.integers(0, 2**16))
def test_random_exits_match_python(tmp_path, lines, seed):
    source = kernel_source(lines)
    x, n = make_inputs(seed)
    expected = python_oracle(source, x, n)
    number = next(counter)
    got = compiled_cpu(source, str(tmp_path / f"exits_{number}.py"), x, n)
    assert (got == expected).all(), (source, x, n, expected, got)
    by_interpreter = interpreted(source, str(tmp_path / f"exits_run_{number}.py"), x, n)
    assert (by_interpreter == expected).all(), (source, x, n, expected, by_interpreter)


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIRST_ABOVE = (EXAMPLES / "linear_search.py").read_text()  # the reported kernel, as an example


def test_return_inside_a_run_time_loop_leaves_the_kernel(tmp_path):
    """The reported miscompile: `return` in a loop acted as `continue`, every row got -1."""
    path = str(tmp_path / "first_above.py")
    report = dsl.analyze_source(FIRST_ABOVE, path, until="traced")
    assert not list(report.all_diagnostics())
    fn = report.function("first_above")
    x = np.array([[0, 5, 1], [0, 0, 0], [3, 0, 0], [0, 0, 1]], dtype=np.float32)
    out = np.full(5, 99, dtype=np.int32)
    CpuKernel(fn.compiled.traced).run((1, 1, 1), (5, 1, 1), *tensor_args(x), *tensor_args(out), 0.5, 4)
    assert out.tolist() == [1, -1, 0, 2, 99]


NESTED_RETURN = """import dsl
from dsl import Int32, Tensor, i32


@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    t = dsl.thread_idx.x
    if x[t] > 0:
        if x[t] > 5:
            return
        out[t] = 1
    out[t] = out[t] + 10
"""


def test_return_under_nested_run_time_ifs_skips_the_rest(tmp_path):
    """A `return` two `if`s deep skips the statements after both (folding alone missed it)."""
    path = str(tmp_path / "nested.py")
    (fn,) = dsl.analyze_source(NESTED_RETURN, path, until="traced").functions
    x = np.array([0, 3, 9], dtype=np.int32)
    out = np.zeros(3, dtype=np.int32)
    CpuKernel(fn.compiled.traced).run((1, 1, 1), (3, 1, 1), *tensor_args(x), *tensor_args(out))
    assert out.tolist() == [10, 11, 0]
