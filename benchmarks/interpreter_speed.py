"""How fast the interpreter runs kernels on the CPU: the first call (compiling to PTX with the
real compiler, building the interpreter's program) and a warm call (the same specialization
again), for the examples the interpreter's targets name.

Targets (issue #18): a 2**16-element vector add and a 256 x 256 softmax each under 5 s.

    python benchmarks/interpreter_speed.py

Each figure is the best of three runs in a fresh specialization cache for "first", and the
median of five for "warm"; every result is checked against NumPy before it is printed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))

import dsl  # noqa: E402

TARGET_S = 5.0


def _forget(jit_fn: object) -> None:
    """Drops the interpreted specializations and the compiler's in-memory results."""
    from dsl.compiler import cache
    from dsl.interpreter import jit

    vars(jit_fn).pop("_kdsl_interpreted", None)
    cache.MEMORY.clear()
    jit._modules.clear()


def measure(name: str, jit_fn: object, make: Callable[[], tuple], check: Callable[[tuple], None]) -> None:
    firsts = []
    for _ in range(3):
        _forget(jit_fn)
        args = make()
        start = time.perf_counter()
        dsl.interpret(jit_fn, *args)
        firsts.append(time.perf_counter() - start)
        check(args)
    warms = []
    for _ in range(5):
        args = make()
        start = time.perf_counter()
        dsl.interpret(jit_fn, *args)
        warms.append(time.perf_counter() - start)
        check(args)
    first, warm = min(firsts), statistics.median(warms)
    verdict = "ok" if first < TARGET_S else f"OVER the {TARGET_S:.0f} s target"
    print(f"{name:<28} first call {first * 1e3:8.1f} ms   warm call {warm * 1e3:8.1f} ms   {verdict}")


def main() -> None:
    import matmul_tiled
    import softmax
    import transpose
    import vector_add

    rng = np.random.default_rng(0)
    n = 1 << 16
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    measure("vector add 2^16", vector_add.add, lambda: (a, b, np.zeros(n, dtype=np.float32)),
            lambda args: np.testing.assert_array_equal(args[2], a + b))

    x = rng.standard_normal((256, 256), dtype=np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    reference = e / e.sum(axis=1, keepdims=True)
    measure("softmax 256 x 256", softmax.run_softmax, lambda: (x, np.zeros_like(x)),
            lambda args: np.testing.assert_allclose(args[1], reference, rtol=2e-6, atol=1e-9))

    t = rng.standard_normal((512, 384), dtype=np.float32)
    measure("transpose 512 x 384", transpose.run_transpose, lambda: (t, np.zeros((384, 512), dtype=np.float32)),
            lambda args: np.testing.assert_array_equal(args[1], t.T))

    p, q = rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 128), dtype=np.float32)
    measure("matmul_tiled 128^3", matmul_tiled.run_matmul_tiled, lambda: (p, q, np.zeros((128, 128), np.float32)),
            lambda args: np.testing.assert_allclose(args[2], p.astype(np.float64) @ q, rtol=0, atol=1e-3))


if __name__ == "__main__":
    main()
