"""Differential testing in CI: generated kernels give the reference's outputs, bit for bit.

`PROGRAMS` programs from a fixed seed go through the reference (`reference.py`, the kernel's
source run as Python) and the interpreter; every one must compile and agree, or be refused
where the rules refuse it, with no internal error. The CLI (`python -m tests.fuzz`) runs the
larger budgets. The other tests here pin down that the oracle has teeth and that the
generator is deterministic (the reference's own rules: `test_reference.py`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.fuzz import reference, scalars
from tests.fuzz.generate import ends_tracing, generate, traced_prefix
from tests.fuzz.harness import Verdict, check, quiet_environment
from tests.fuzz.program import Assign, Exit, For, If, Lit, Name, Program
from tests.fuzz.shrink import program_edits, shrink

SEED = 20_240_032
PROGRAMS = 80  # about 5 programs/s on a 2-core CI machine: ~16 s; .ci/run adds 2,000 more (python -m tests.fuzz)


def test_generated_programs_agree_with_the_reference(tmp_path: Path) -> None:
    quiet_environment()
    counts: Counter[str] = Counter()
    failures = []
    for i in range(PROGRAMS):
        program = generate(SEED + i)
        verdict = check(program, tmp_path)
        counts[verdict.status] += 1
        if verdict.failed:
            failures.append(f"seed {program.seed}: {verdict.status}\n{verdict.detail}\n{program.render()}")
    assert not failures, "\n\n".join(failures[:3])
    assert counts["compared"] >= PROGRAMS * 0.9, counts  # the comparisons are the point: most programs compile
    assert counts["refused"] > 0, counts  # and the deliberate ill-typed lines were refused


def test_the_generator_writes_every_construct() -> None:
    """Over the first 300 seeds: floats of each width, `while`, rank-2 tensors, shared memory
    with barriers, each warp operation, atomics, and the divergent barrier that must fault."""
    sources = "\n".join(generate(SEED + i).render() for i in range(300))
    for needle in ("f16", "bf16", "f32", "f64", "dsl.fma(", "while ", ", 2]", "sh[", "dsl.barrier()", "dsl.shfl_xor(",
                   "dsl.shfl_down(", "dsl.shfl_up(", "dsl.shfl_idx(", "dsl.warp_reduce(", "dsl.ballot(",
                   "dsl.match_any(", "dsl.any(", "dsl.all(", "dsl.atomic_add(", "dsl.atomic_max(", "<< 32",
                   ".shape[", "dsl.isnan("):
        assert needle in sources, needle
    assert ":\n        dsl.barrier()" in sources  # `if <divergent>: dsl.barrier()`


def test_the_same_seed_gives_the_same_program_and_data() -> None:
    a, b = generate(7), generate(7)
    assert a.render() == b.render() and a.data_seed == b.data_seed
    assert generate(8).render() != a.render()


def test_a_wrong_reference_is_caught_and_shrunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With floor division in the reference (Python's, not the DSL's), programs that divide
    negative values disagree, and the shrinker keeps the `%` or `//` that shows it."""
    quiet_environment()
    monkeypatch.setattr(scalars, "_truncating_div", lambda a, b: a // b)
    failing: Program | None = None
    for i in range(40):
        program = generate(SEED + i)
        if check(program, tmp_path).status == "mismatch":
            failing = program
            break
    assert failing is not None, "floor division went unnoticed in 40 programs"
    small = shrink(failing, lambda p: check(p, tmp_path).status == "mismatch", budget=200)
    kernel = small.render().split("@dsl.kernel", 1)[1].split("@dsl.jit", 1)[0]
    assert len(kernel) < len(failing.render().split("@dsl.kernel", 1)[1].split("@dsl.jit", 1)[0])
    assert "//" in kernel or "%" in kernel, kernel
    assert check(small, tmp_path).status == "mismatch"


def test_the_reference_wraps_truncates_and_clamps() -> None:
    """The reference's own rules, on values whose answers are known from the README."""
    i8, u32, i32 = reference.T.i8, reference.T.u32, reference.T.i32
    V = reference.Val
    assert (V(i8, 127) + 1).v == -128  # wraps
    assert (V(i32, -7) // 2).v == -3 and (V(i32, -7) % 2).v == -1  # truncates toward zero
    assert (V(u32, 0) - 1).v == 2**32 - 1
    assert (V(i8, -1) & 255).v == -1  # a literal that fits only as bits
    assert (V(i32, -8) >> V(i32, 40)).v == -1 and (V(u32, 8) << V(u32, 32)).v == 0  # PTX's clamped shifts
    assert V(i8, -1).to(u32).v == 2**32 - 1 and V(u32, 2**32 - 1).to(i8).v == -1
    with pytest.raises(reference.Refused):
        V(i32, 1) + V(u32, 1)  # mixed signedness
    with pytest.raises(reference.Refused):
        V(i8, 1) + 256  # does not fit


BOOL_ORDER = """import dsl
from dsl import Tensor, i32


@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32]):
    t = dsl.thread_idx.x
    a = x[t] > 0
    b = x[t] > 5
    out[t] = dsl.cast(a < b, i32)


@dsl.jit
def run(x: Tensor[i32], out: Tensor[i32]):
    k(x, out).launch(grid=1, block=2)
"""


def test_bools_order_as_python_orders_them(tmp_path: Path) -> None:
    import importlib.util

    import dsl

    quiet_environment()
    path = tmp_path / "bool_order.py"
    path.write_text(BOOL_ORDER)
    spec = importlib.util.spec_from_file_location("bool_order", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.array([3, 9], dtype=np.int32)  # thread 0: a=True, b=False; thread 1: both True
    out = np.full(2, 7, dtype=np.int32)
    dsl.interpret(module.run, x, out)
    t = reference.Tensor("x", reference.T.i32, [3, 9])
    o = reference.Tensor("out", reference.T.i32, [7, 7])
    assert reference.run(BOOL_ORDER, "run", [t, o], []).tensors == {"x": [3, 9], "out": [0, 0]}
    assert out.tolist() == [0, 0]  # True < False is False in Python


KNOWN = """import dsl
from dsl import Constexpr, Int32, Tensor, i32, u32


def h(a, b):
    return a * b


@dsl.kernel
def k(x: Tensor[i32], out: Tensor[u32], n: Int32, C: Constexpr[int]):
    t = dsl.thread_idx.x
    acc = [0] * 2
    for j in range(n):
        if j == 2:
            break
        acc[0] += x[t] // (j - 3)
    for s in dsl.static_range(C):
        acc[1] = acc[1] + h(x[t], s)
    if x[t] < 0:
        out[t] = dsl.cast(acc[0] - 6, u32)
        return
    out[t] = dsl.cast(acc[1], u32)


@dsl.jit
def run(x: Tensor[i32], out: Tensor[u32], n: Int32, C: Constexpr[int] = 2):
    k(x, out, n, C).launch(grid=1, block=2)
"""


def test_the_reference_runs_loops_exits_lists_and_helpers_as_python_does() -> None:
    """Thread 0 (x = -7): -7 // -3 + -7 // -2 = 2 + 3, then the loop breaks; 5 - 6 wraps in u32.
    Thread 1 (x = 5): 5 * 0 + 5 * 1 from the helper, unrolled twice."""
    x = reference.Tensor("x", reference.T.i32, [-7, 5])
    out = reference.Tensor("out", reference.T.u32, [0, 0])
    outcome = reference.run(KNOWN, "run", [x, out], [reference.Val(reference.T.i32, 4)], C=2)
    assert outcome.tensors == {"x": [-7, 5], "out": [2**32 - 1, 5]}, outcome


def test_an_ill_typed_line_goes_where_the_tracer_gets_to(tmp_path: Path) -> None:
    """Found in the H200 run (seed 18475): a line after `for j in dsl.static_range(1): return` is
    never traced, as Python never runs it, so the rules could not ask for its refusal."""
    unrolled_return = For("j0", (Lit(1),), (Exit("return"),), static=True)
    guarded_return = If(Name("t", None), (Exit("return"),))
    assignment = Assign("v0", Lit(1))
    assert ends_tracing(unrolled_return) and not ends_tracing(guarded_return)
    assert traced_prefix([assignment, guarded_return, unrolled_return, assignment]) == 2
    program = generate(18475)
    assert program.refusal is not None and program.refusal_stmt is not None
    assert program.body.index(program.refusal_stmt) <= traced_prefix(list(program.body))
    assert check(program, tmp_path).status == "refused"


def test_a_shrinking_step_that_drops_the_ill_typed_line_drops_the_refusal() -> None:
    program = generate(18475)
    edits = list(program_edits(program))
    without = [e for e in edits if program.refusal_stmt not in e.body]
    assert without and all(e.refusal is None for e in without)
    assert all(e.refusal == program.refusal for e in edits if program.refusal_stmt in e.body)


def test_a_run_with_a_time_limit_reports_the_seeds_it_left(capsys: pytest.CaptureFixture[str]) -> None:
    """`--seconds`: what a device call that must end in time prints, to be continued from there."""
    from tests.fuzz.__main__ import _ranges, main

    assert _ranges(100, 1000, [(300, 200), (100, 200), (700, 200)]) == "500-699, 900-1099"
    assert _ranges(0, 400, [(0, 200), (200, 200)]) == ""
    assert main(["--programs", "3", "--seed", "40", "--seconds", "0"]) == 0
    out = capsys.readouterr().out
    assert "seeds not checked: 40-42" in out and out.strip().splitlines()[-1].startswith("generated 0,")


def test_a_gpu_left_running_a_kernel_ends_its_block_and_names_the_seed(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel still running after `HANG_SECONDS` (seen on the H200) is a disagreement printed with
    its program; its process can use the GPU no more, so the seeds after it are reported unchecked.
    The verdict `harness.run_gpu` gives then is made here for one seed (no GPU on this machine)."""
    from tests.fuzz import runs
    from tests.fuzz.__main__ import main

    real = runs.check

    def check_with_a_hang(program: Program, directory: Path, gpu: bool = False) -> Verdict:
        if program.seed == 41:
            return Verdict("mismatch", "on the GPU: the kernel was still running after 60 s", gpu=True, stuck=True)
        return real(program, directory, gpu)

    monkeypatch.setattr(runs, "check", check_with_a_hang)
    assert main(["--programs", "4", "--seed", "40"]) == 1
    out = capsys.readouterr().out
    assert "=== seed 41: mismatch ===" in out and "still running after 60 s" in out and "@dsl.kernel" in out
    assert "a GPU left running a kernel: seeds not checked: 42-43" in out
    assert out.strip().splitlines()[-1].startswith("generated 2,")
