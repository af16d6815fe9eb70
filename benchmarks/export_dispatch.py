"""Host time per launch through a `kdsl export` entry point, against a bare `cuLaunchKernel` of
the same cubin, both called from C. Goal: <= 1.1x.

    python benchmarks/export_dispatch.py [RESULTS_DIR] [--target sm_XX] [--spin N]

Exports `examples/saxpy.py::run_saxpy` and this file's `spin_wait` (one thread looping N
times: it keeps the GPU busy) for the attached GPU into RESULTS_DIR/export_dispatch (a
temporary folder without RESULTS_DIR), builds `benchmarks/export_dispatch.c` against the
export with gcc and runs it. Method, as `host_us_per_launch` in gpu_suite.py: a spin kernel
is queued, then 100 launches are timed while the GPU is still busy with it, so the clock
reads only the host's cost of issuing them; the median over 200 such batches, exported and
bare alternating. The 1024-element saxpy's entry point checks two tensors, computes its grid
and packs six parameters; the bare launch has its parameters prebuilt. The driver exits
with 3 when the spin kernel did not outlast a batch (then raise --spin).

Needs an NVIDIA GPU with its driver, gcc, and the MLIR bindings to export (not torch).
Writes RESULTS_DIR/export_dispatch.json when RESULTS_DIR is given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import dsl
from dsl import Int32, Tensor, f32

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dsl.kernel
def spin(x: Tensor[f32], n: Int32):
    v = x[0]
    i = 0
    while i < n:
        v = v * 0.999999 + 0.000001
        i = i + 1
    x[0] = v


@dsl.jit
def spin_wait(x: Tensor[f32], n: Int32):
    spin(x, n).launch(grid=1, block=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", help="folder for the export, the build and export_dispatch.json")
    parser.add_argument("--target", help="the GPU's architecture (default: the attached GPU's)")
    parser.add_argument("--spin", type=int, default=2_000_000, help="iterations of the spin kernel")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    from dsl.cli_export import main as export
    from dsl.runtime.driver import current_arch

    target = args.target or current_arch()
    if target is None:
        print("no NVIDIA GPU found (pass --target to only build)", file=sys.stderr)
        return 1
    folder = os.path.join(args.results, "export_dispatch") if args.results else tempfile.mkdtemp(prefix="kdsl-")
    saxpy = os.path.join(ROOT, "examples", "saxpy.py") + "::run_saxpy"
    code = export([saxpy, os.path.abspath(__file__) + "::spin_wait", "--prefix", "bench", "--target", target, "-o",
                   folder])
    if code:
        return code
    driver = os.path.join(folder, "export_dispatch")
    subprocess.run(["gcc", "-std=c11", "-O2", f"-I{folder}", os.path.join(ROOT, "benchmarks", "export_dispatch.c"),
                    "-o", driver, "-ldl", "-lpthread", "-lm"], check=True)
    done = subprocess.run([driver, str(args.spin)], capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    print("\n".join(lines[:-1]), done.stderr, sep="\n" if done.stderr else "")
    if done.returncode not in (0, 3) or not lines:
        return done.returncode or 1
    result = {**json.loads(lines[-1]), "target": target}
    if done.returncode == 3:
        print("the spin kernel ended before a batch did: the figures include the GPU's own time; raise --spin")
    if args.results:
        with open(os.path.join(args.results, "export_dispatch.json"), "w") as f:
            json.dump(result, f, indent=2)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
