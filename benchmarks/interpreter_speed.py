"""How fast the interpreter runs kernels on the CPU: the first call (compiling to PTX with the
real compiler, building the interpreter's program) and a warm call (the same specialization
again), for the examples the interpreter's targets name.

Targets (issue #18): a 2**16-element vector add and a 256 x 256 softmax each under 5 s. The
tensor-core examples are measured too (no target: they are for debugging a kernel's logic on
small shapes).

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


def measure(name: str, jit_fn: object, make: Callable[[], tuple], check: Callable[[tuple], None],
            **kwargs: object) -> None:
    firsts = []
    for _ in range(3):
        _forget(jit_fn)
        args = make()
        start = time.perf_counter()
        dsl.interpret(jit_fn, *args, **kwargs)
        firsts.append(time.perf_counter() - start)
        check(args)
    warms = []
    for _ in range(5):
        args = make()
        start = time.perf_counter()
        dsl.interpret(jit_fn, *args, **kwargs)
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

    tensor_cores(rng)


def _bf16(values: np.ndarray) -> np.ndarray:
    """bf16 bits of float32 values (truncated: any bf16 values will do as inputs)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _float(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def tensor_cores(rng: np.random.Generator) -> None:
    """The tensor-core examples (warp MMA; TMA + mbarriers + wgmma with warp specialization)."""
    import attention_hopper
    import gemm_hopper
    import matmul_mma

    from dsl.interpreter import bits

    def product_check(a: np.ndarray, b_t: np.ndarray) -> Callable[[tuple], None]:
        expected = _float(a) @ _float(b_t).T
        return lambda args: np.testing.assert_allclose(_float(args[2].array), expected, rtol=1e-2, atol=1e-2)

    a, b_t = _bf16(rng.standard_normal((128, 128))), _bf16(rng.standard_normal((128, 128)))
    measure("matmul_mma 128^3", matmul_mma.matmul_mma,
            lambda: (bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(np.zeros((128, 128), np.uint16), dsl.bf16)),
            product_check(a, b_t))
    a, b_t = _bf16(rng.standard_normal((256, 256))), _bf16(rng.standard_normal((256, 256)))
    measure("gemm_hopper 256^3", gemm_hopper.gemm_hopper,
            lambda: (bits(a, dsl.bf16), bits(b_t, dsl.bf16), bits(np.zeros((256, 256), np.uint16), dsl.bf16)),
            product_check(a, b_t))

    q, k, v = (_bf16(rng.standard_normal((1, 512, 64))) for _ in range(3))
    s = _float(q) @ _float(k).transpose(0, 2, 1) / 8.0
    e = np.exp(s - s.max(-1, keepdims=True))
    expected = (e / e.sum(-1, keepdims=True)) @ _float(v)

    measure("attention_hopper S=512 D=64", attention_hopper.attention_hopper,
            lambda: tuple(bits(x, dsl.bf16) for x in (q, k, v, np.zeros((1, 512, 64), np.uint16))),
            lambda args: np.testing.assert_allclose(_float(args[3].array), expected, rtol=0, atol=2e-2), D=64)


if __name__ == "__main__":
    main()
