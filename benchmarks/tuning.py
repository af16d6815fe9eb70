"""What autotuning costs: seconds per config while tuning, and the first call of a tuned function
in a cold process (GPU; not run in CI).

    python benchmarks/tuning.py [--rows=32768] [--cols=4096] [--runs=3]

Each measurement is a child process (torch imported and CUDA initialised before the clock
starts) on one private cache directory, calling `examples/softmax_autotuned.py` (4 configs)
on a ROWS x COLS f32 matrix:

1. cold tuning: empty cache, so every config compiles (MLIR, ptxas) and is timed;
2. tuning with compiled kernels: the records are removed but the compiled configs stay in the
   kernel cache, so this is the timing itself (warm-up, batches of CUDA-event-timed calls);
3. tuned first call in a cold process: the record is there, so no trial runs; the winner's
   kernel loads from the disk cache;
4. for comparison, the first call of the untuned example (`examples/softmax.py`), cache warm.

Prints one line per measurement: the median wall time of the first call (importing kdsl
included), and for the tuning rows that time divided by the configs measured, an upper bound
on the seconds per config.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
import torch
sys.path.insert(0, %(examples)r)
x = torch.randn(%(rows)d, %(cols)d, device="cuda")
y = torch.empty_like(x)
torch.cuda.synchronize()
start = time.perf_counter()
import dsl
if %(tuned)r:
    from softmax_autotuned import run_softmax_autotuned as fn
else:
    from softmax import run_softmax as fn
fn(x, y)
torch.cuda.synchronize()
seconds = time.perf_counter() - start
trials = 0
if %(tuned)r:
    from dsl.runtime.autotune import tuner
    trials = tuner(fn).trials
print(json.dumps({"seconds": seconds, "trials": trials}))
"""


def child(cache: str, rows: int, cols: int, tuned: bool) -> dict:
    code = CHILD % {"examples": os.path.join(ROOT, "examples"), "rows": rows, "cols": cols, "tuned": tuned}
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "KDSL_CACHE_DIR": cache, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def remove_records(cache: str) -> None:
    """Drops the tuning records, keeping the compiled kernels (both live in the kernel cache)."""
    from dsl.runtime.autotune import RECORDS

    shutil.rmtree(os.path.join(cache, RECORDS))


def main() -> None:
    options = dict(arg.lstrip("-").split("=", 1) for arg in sys.argv[1:] if "=" in arg)
    rows, cols, runs = int(options.get("rows", 32768)), int(options.get("cols", 4096)), int(options.get("runs", 3))
    results: dict[str, list[dict]] = {"cold tuning": [], "tuning, kernels cached": [], "tuned first call": [],
                                      "untuned first call (cache warm)": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            results["cold tuning"].append(child(cache, rows, cols, True))
            remove_records(cache)
            results["tuning, kernels cached"].append(child(cache, rows, cols, True))
            results["tuned first call"].append(child(cache, rows, cols, True))
            child(cache, rows, cols, False)  # compiles the untuned example into the cache
            results["untuned first call (cache warm)"].append(child(cache, rows, cols, False))
    print(f"softmax_autotuned, {rows}x{cols} f32, median of {runs} cold processes:")
    for label, found in results.items():
        seconds = statistics.median(r["seconds"] for r in found)
        trials = max(r["trials"] for r in found)
        per = f", {seconds / trials:.3f} s per config ({trials} configs)" if trials else ", no trial"
        print(f"  {label:34s} {seconds:7.3f} s{per if label != 'untuned first call (cache warm)' else ''}")


if __name__ == "__main__":
    main()
