"""Trace + lower + PTX time per example, in a cold process and warm (DESIGN §8: <= 30 ms warm).

    python benchmarks/compile_time.py [--repeat 10]

Cold: a fresh interpreter imports kdsl and compiles the example once (import included,
and shown separately). Warm: the same process compiles again with the in-memory cache
cleared, so every stage runs; the median of --repeat runs is reported, to PTX and to
cubin (ptxas adds its own process start).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ["saxpy", "vector_add", "row_sum", "softmax", "layernorm", "transpose"]
JITS = {"saxpy": "run_saxpy", "vector_add": "add", "row_sum": "run_row_sum", "softmax": "run_softmax",
        "layernorm": "run_layernorm", "transpose": "run_transpose"}

COLD = """
import sys, time
t0 = time.perf_counter()
import dsl
from dsl.compiler.api import compile_function
t1 = time.perf_counter()
sys.path.insert(0, {examples!r})
mod = __import__({name!r})
t2 = time.perf_counter()
compiled, diags = compile_function(getattr(mod, {jit!r}), until="ptx")
t3 = time.perf_counter()
assert compiled is not None, diags
print(t1 - t0, t3 - t2)
"""


def warm(name: str, repeat: int) -> tuple[float, float]:
    from dsl.compiler import cache
    from dsl.compiler.api import compile_function

    sys.path.insert(0, str(EXAMPLES))
    fn = getattr(__import__(name), JITS[name])
    out = {}
    for until in ("ptx", "cubin"):
        times = []
        for _ in range(repeat + 1):
            cache.MEMORY.clear()
            start = time.perf_counter()
            compiled, diags = compile_function(fn, until=until)
            times.append(time.perf_counter() - start)
            assert compiled is not None, diags
        out[until] = statistics.median(times[1:])
    return out["ptx"], out["cubin"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    print(f"{'example':<12} {'import s':>9} {'cold PTX ms':>12} {'warm PTX ms':>12} {'warm cubin ms':>14}")
    for name in NAMES:
        code = COLD.format(examples=str(EXAMPLES), name=name, jit=JITS[name])
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        imp, cold = map(float, out.split())
        ptx, cubin = warm(name, args.repeat)
        print(f"{name:<12} {imp:>9.2f} {cold * 1e3:>12.1f} {ptx * 1e3:>12.1f} {cubin * 1e3:>14.1f}")


if __name__ == "__main__":
    main()
