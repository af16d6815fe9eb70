"""The reference's own rules, on values whose answers are known without it: IEEE rounding,
float corners and conversions (`scalars.py`, `floats.py`), and threads that meet
(`lockstep.py`): shared memory across a barrier, warp operations across a warp, a race and a
divergent barrier caught. The lockstep kernels run through the interpreter too, which must
agree (or fault where the reference says the GPU would).
"""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsl
from dsl.runtime.driver import LaunchError
from tests.fuzz import floats as F
from tests.fuzz import reference
from tests.fuzz.harness import quiet_environment
from tests.fuzz.scalars import T, Val, cast, intrinsic, min_max


def test_floats_round_to_nearest_even_in_their_own_type() -> None:
    assert (Val(T.f16, 2048.0) + 1).v == 2048.0 and (Val(T.f16, 2048.0) + 3).v == 2052.0  # ties to even
    assert (Val(T.bf16, 1.0) + 2.0**-8).v == 1.0 and (Val(T.bf16, 1.0) + 3 * 2.0**-9).v == 1.0 + 2.0**-7
    assert (Val(T.f16, 65504.0) + 15).v == 65504.0 and (Val(T.f16, 65504.0) + 16).v == math.inf  # 65520 ties up
    assert (Val(T.f32, 1.0) / 3).v == float(np.float32(1 / 3))
    assert (Val(T.f32, 1.0) / 0).v == math.inf and (Val(T.f32, -1.0) / 0).v == -math.inf
    assert math.isnan((Val(T.f64, 0.0) / 0).v)
    assert (Val(T.f32, 2.0**-149) * 0.5).v == 0.0  # below the smallest subnormal, ties to even: 0
    assert (Val(T.f16, 1.0) + Val(T.bf16, 1.0)).dtype == T.f32  # f16 with bf16 is f32
    exact = 2**62 + 2**38 + 1  # through f64 it would round twice, to 2**62
    assert Val(T.i64, exact).to(T.f32).v == 2.0**62 + 2.0**39
    eps = 2.0**-12
    assert intrinsic("fma")(Val(T.f32, 1 + eps), Val(T.f32, 1 + eps), -(1 + 2 * eps)).v == 2.0**-24


def test_the_f32_shortcut_rounds_as_the_exact_rounding_does() -> None:
    rng = random.Random(5)
    fmt = F.FORMATS["f32"]
    for _ in range(3000):
        x = rng.uniform(-4, 4) * 2.0 ** rng.randint(-160, 130)
        num, den = x.as_integer_ratio()
        assert F.round_float(fmt, x) == F.round_exact(fmt, num < 0, abs(num), den), x


def test_min_max_nan_and_signed_zeros() -> None:
    nan, f32 = math.nan, T.f32
    assert math.isnan(min_max("min", Val(f32, nan), 1.0).v) and math.isnan(min_max("max", Val(f32, 1.0), nan).v)
    assert math.copysign(1.0, min_max("min", Val(f32, 0.0), Val(f32, -0.0)).v) == -1.0
    assert math.copysign(1.0, min_max("max", Val(f32, -0.0), Val(f32, 0.0)).v) == 1.0
    assert (Val(f32, nan) != Val(f32, nan)).v == 1 and (Val(f32, nan) < 1.0).v == 0


def test_float_to_int_truncates_saturates_and_nan_is_zero() -> None:
    f32 = T.f32
    assert Val(f32, 3.0e9).to(T.i32).v == 2**31 - 1 and Val(f32, -3.0e9).to(T.i32).v == -(2**31)
    assert Val(f32, -1.7).to(T.i8).v == -1 and Val(f32, 300.0).to(T.i8).v == 127
    assert Val(f32, math.nan).to(T.u8).v == 0 and Val(f32, -1.5).to(T.u32).v == 0
    assert Val(f32, math.inf).to(T.u64).v == 2**64 - 1
    assert cast(-1.5, T.u32).v == 0 and cast(1e20, T.i16).v == 2**15 - 1  # literals too
    assert Val(f32, math.nan).to(T.boolean).v == 1  # NaN != 0


def _module(tmp_path: Path, name: str, source: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOCKSTEP = """import dsl
from dsl import Tensor, i32


@dsl.kernel
def k(x: Tensor[i32], out: Tensor[i32, 2]):
    t = dsl.thread_idx.x
    sh = dsl.SharedAllocator().array(dsl.i32, (64,))
    sh[t] = x[t] * 2
    dsl.barrier()
    v = sh[(t + 1) & 63]
    s = dsl.warp_reduce(v, "sum")
    y = dsl.shfl_down(v, 3, 8)
    b = dsl.ballot(v > 0)
    out[0, t] = v
    out[1, t] = s
    out[2, t] = y
    out[3, t] = dsl.cast(b, i32)


@dsl.jit
def run(x: Tensor[i32], out: Tensor[i32, 2]):
    k(x, out).launch(grid=1, block=64)
"""


def test_threads_meet_at_barriers_and_warps_meet_at_warp_operations(tmp_path: Path) -> None:
    """v is the next thread's value, written before the barrier; the warp's sum, a shuffle down
    by 3 in segments of 8 (lanes past a segment's end keep their own), the warp's ballot."""
    quiet_environment()
    x = [((k * 37) % 11) - 5 for k in range(64)]
    v = [2 * x[(t + 1) % 64] for t in range(64)]
    warp = [v[32 * (t // 32):32 * (t // 32) + 32] for t in range(64)]
    ballot = [sum(1 << k for k, w in enumerate(warp[t]) if w > 0) for t in range(64)]
    expected = [v, [sum(warp[t]) for t in range(64)],
                [v[t + 3] if t % 8 + 3 < 8 else v[t] for t in range(64)],
                [b - 2**32 if b >= 2**31 else b for b in ballot]]
    out = reference.Tensor("out", T.i32, [0] * 256, (4, 64))
    outcome = reference.run(LOCKSTEP, "run", [reference.Tensor("x", T.i32, list(x)), out], [])
    assert outcome.tensors is not None and outcome.tensors["out"] == [e for row in expected for e in row]
    got = np.zeros((4, 64), dtype=np.int32)
    dsl.interpret(_module(tmp_path, "lockstep", LOCKSTEP).run, np.array(x, dtype=np.int32), got)
    assert got.tolist() == expected


RACY = """import dsl
from dsl import Tensor, i32


@dsl.kernel
def k(x: Tensor[i32]):
    t = dsl.thread_idx.x
    sh = dsl.SharedAllocator().array(dsl.i32, (64,))
    sh[t] = x[t]
    dsl.barrier()
    v = sh[(t + 1) & 63]
    sh[t] = v
    x[t] = v


@dsl.jit
def run(x: Tensor[i32]):
    k(x).launch(grid=1, block=64)
"""


def test_a_race_on_shared_memory_is_a_fault() -> None:
    """Thread 1 writes the element thread 0 read since the barrier: the order decides what
    thread 0 saw, so a generated program must never do it."""
    outcome = reference.run(RACY, "run", [reference.Tensor("x", T.i32, list(range(64)))], [])
    assert outcome.fault is not None and "race: thread 1 writes element 1" in outcome.fault, outcome
    fine = RACY.replace("    sh[t] = v\n", "    dsl.barrier()\n    sh[t] = v\n")
    outcome = reference.run(fine, "run", [reference.Tensor("x", T.i32, list(range(64)))], [])
    assert outcome.tensors is not None and outcome.tensors["x"] == [(t + 1) % 64 for t in range(64)]


DIVERGENT = """import dsl
from dsl import Tensor, i32


@dsl.kernel
def k(x: Tensor[i32]):
    t = dsl.thread_idx.x
    if x[t] > 0:
        dsl.barrier()
    dsl.barrier()
    x[t] = t


@dsl.jit
def run(x: Tensor[i32]):
    k(x).launch(grid=1, block=32)
"""


@pytest.mark.parametrize("values, faults", [([1] * 32, False), ([0] * 32, False), ([1] * 16 + [0] * 16, True)])
def test_a_barrier_some_threads_skip_faults_where_they_reach_another(tmp_path: Path, values: list[int],
                                                                      faults: bool) -> None:
    quiet_environment()
    outcome = reference.run(DIVERGENT, "run", [reference.Tensor("x", T.i32, list(values))], [])
    assert (outcome.fault is not None) == faults, outcome
    run = _module(tmp_path, f"divergent_{faults}_{values[0]}", DIVERGENT).run
    if faults:
        with pytest.raises(LaunchError) as caught:
            dsl.interpret(run, np.array(values, dtype=np.int32))
        assert caught.value.diagnostic is not None and caught.value.diagnostic.code == "DSL601"
    else:
        dsl.interpret(run, np.array(values, dtype=np.int32))
