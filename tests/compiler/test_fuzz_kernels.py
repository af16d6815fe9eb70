"""Random kernel bodies never crash the compiler: each compiles, or fails with a user-facing
diagnostic (DSL3xx) at a range inside the kernel — never an internal error (DSL402)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsl

SCALARS = {"a": "f32", "b": "i32", "c": "f16", "d": "u32", "e": "i64", "f": "bf16", "g": "f64", "h": "u8"}
PARAMS = ", ".join(f"{name}: dsl.{t}" for name, t in SCALARS.items())

leaf = st.sampled_from([*SCALARS, "1", "2.5", "0", "True", "x[i]", "i", "n"])
unary = st.sampled_from(["(-{})", "dsl.exp({})", "dsl.sqrt({})", "dsl.abs({})", "dsl.cast({}, dsl.f32)",
                         "dsl.cast({}, dsl.i32)", "dsl.u8({})", "dsl.min({}, 1)", "({}).to(dsl.f64)",
                         "(not {})", "(~{})"])
binary = st.sampled_from(["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^", "<", "==", ">="])
expr = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.tuples(unary, inner).map(lambda t: t[0].format(t[1])),
        st.tuples(inner, binary, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
    ),
    max_leaves=6,
)
statement = st.one_of(
    expr.map(lambda e: f"v = {e}"),
    expr.map(lambda e: f"x[i] = {e}"),
    st.tuples(expr, expr).map(lambda t: f"if {t[0]}:\n        v = {t[1]}\n    else:\n        v = 0.0"),
    st.tuples(expr, expr).map(lambda t: f"for j in range(n):\n        v = v + {t[0]}\n        w = {t[1]}"),
    expr.map(lambda e: f"while v < 10:\n        v = v + {e}"),
)

counter = itertools.count()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(statement, min_size=1, max_size=4))
def test_random_kernels_compile_or_report_user_errors(tmp_path, statements):
    body = "\n    ".join(["i = dsl.thread_idx.x", "v = 0.0", *statements])
    source = (f"import dsl\nfrom dsl import Tensor, f32\n\n@dsl.kernel\n"
              f"def k(x: Tensor[f32], n: dsl.Int32, {PARAMS}):\n    {body}\n")
    path = str(tmp_path / f"fuzz_{next(counter)}.py")
    report = dsl.analyze_source(source, path, until="ptx")
    (fn,) = report.functions
    last_line = source.count("\n")
    for d in report.all_diagnostics():
        assert d.code != "DSL402", (d.format(), source)
        assert d.code.startswith("DSL3"), (d.format(), source)
        assert 5 <= d.range.line <= last_line and d.range.file == path, (d.format(), source)
    if not fn.diagnostics:
        assert fn.compiled is not None and ".entry k" in fn.compiled.ptx


dim = st.one_of(st.integers(-2, 2000), st.sampled_from(["n", "dsl.cdiv(n, 256)", "x.shape[0]", "B", "2.5", "None"]))
dim3 = st.one_of(dim, st.lists(dim, min_size=1, max_size=4).map(lambda d: "(" + ", ".join(map(str, d)) + ",)"))
launch_kwargs = st.fixed_dictionaries(
    {"grid": dim3, "block": dim3},
    optional={"smem": st.one_of(st.integers(-1, 300_000), st.just("n")),
              "cluster": st.sampled_from(["(2, 1, 1)", "(16, 1, 1)", "(1,)", "n"])},
)
known = st.sampled_from(["", "known_block_size=[128, 1, 1]", "known_block_size=[0, 1]", "known_block_size=[256, 2, 1]"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(launch_kwargs, known, st.booleans())
def test_random_launches_report_diagnostics_not_crashes(tmp_path, kwargs, contract, dynamic_smem):
    launch = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    alloc = "smem = dsl.SharedAllocator(dynamic=True)\n    buf = smem.array(f32, 1024)\n    buf[0] = x[0]" \
        if dynamic_smem else "x[0] = 1.0"
    source = (f"import dsl\nfrom dsl import Tensor, Constexpr, f32\n\n@dsl.kernel({contract})\n"
              f"def k(x: Tensor[f32]):\n    {alloc}\n\n"
              f"@dsl.jit\ndef run(x: Tensor[f32], B: Constexpr[int] = 128):\n    n = x.shape[0]\n"
              f"    k(x).launch({launch})\n")
    path = str(tmp_path / f"launch_{next(counter)}.py")
    report = dsl.analyze_source(source, path, until="ptx")
    for d in report.all_diagnostics():
        assert d.code != "DSL402", (d.format(), source)
        assert d.code[:4] in ("DSL2", "DSL3", "DSL5"), (d.format(), source)
        assert d.range.file == path and 1 <= d.range.line <= source.count("\n"), (d.format(), source)
