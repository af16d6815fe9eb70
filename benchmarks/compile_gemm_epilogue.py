"""Cold compile of the Hopper GEMM against the same GEMM with a fused bias + exact-GELU epilogue.

    KDSL_NO_DISK_CACHE=1 python benchmarks/compile_gemm_epilogue.py [--repeat 3] [--first-call]

Each run is a fresh interpreter that imports kdsl, then compiles the jit function to a cubin
with the disk cache off (`KDSL_NO_DISK_CACHE=1`, set for the children whatever the parent
has). The table gives the best wall time of `--repeat` runs (the least disturbed by whatever
else the machine runs, as `timeit` reports), and from one more run under
cProfile (which slows the Python parts) where the time goes: tracing the kernel, the MLIR
lowering passes, PTX (LLVM with libdevice linked, NVPTX code generation), ptxas, and the
SASS disassembly the editor views need for the tensor-core mix. `--first-call` compiles as a
program's first call does (`BuildOptions(views=False)`: no texts, no source maps, no SASS).
The fused kernel is `benchmarks/kernels/gemm_hopper_gelu.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {"gemm_hopper": ("examples", "gemm_hopper"),
           "gemm_hopper_gelu": ("benchmarks/kernels", "gemm_hopper_gelu")}
PARTS = {  # what the table calls a part of the compile: the functions whose cumulative time it is
    "trace": ("kernel_tracer.py", "trace_kernel"),
    "lower": ("pipeline.py", "stage_lowered"),
    "ptx": ("pipeline.py", "stage_ptx"),
    "ptxas": ("toolchain.py", "assemble"),
    "sass": ("pipeline.py", "count_tensor_core_instructions"),
}

CHILD = """
import cProfile, json, pstats, sys, time
sys.path[:0] = [{examples!r}, {folder!r}]
t0 = time.perf_counter()
import dsl
from dsl.compiler.api import compile_function
from dsl.compiler.build_options import BuildOptions
mod = __import__({module!r})
profile = cProfile.Profile()
t1 = time.perf_counter()
if {profiled}:
    profile.enable()
compiled, diags = compile_function(getattr(mod, {function!r}), until="cubin", options=BuildOptions(views={views}))
profile.disable()
t2 = time.perf_counter()
assert compiled is not None, [d.format() for d in diags]
parts = {{}}
if {profiled}:
    stats = pstats.Stats(profile).stats
    parts = {{name: sum(v[3] for k, v in stats.items() if k[0].endswith(file) and k[2] == fn)
             for name, (file, fn) in {parts!r}.items()}}
print(json.dumps({{"import": t1 - t0, "compile": t2 - t1, "ptx_kib": len(compiled.ptx) // 1024, **parts}}))
"""


def cold(name: str, views: bool, profiled: bool = False) -> dict[str, float]:
    folder, function = KERNELS[name]
    code = CHILD.format(examples=str(ROOT / "examples"), folder=str(ROOT / folder), module=name,
                        function=function, views=views, parts=PARTS, profiled=profiled)
    env = {**os.environ, "KDSL_NO_DISK_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--first-call", action="store_true", help="compile without the views, as a first call")
    args = parser.parse_args()
    print(f"{'kernel':<18}{'compile s':>11}{'PTX KiB':>9}   profiled: " + "".join(f"{p + ' s':>9}" for p in PARTS))
    for name in KERNELS:
        runs = [cold(name, views=not args.first_call) for _ in range(args.repeat)]
        parts = cold(name, views=not args.first_call, profiled=True)
        wall = min(r["compile"] for r in runs)
        print(f"{name:<18}{wall:>11.2f}{runs[0]['ptx_kib']:>9}   {'':10}" + "".join(f"{parts[p]:>9.2f}" for p in PARTS))


if __name__ == "__main__":
    main()
