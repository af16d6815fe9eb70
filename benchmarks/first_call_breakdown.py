"""Where the first call of a kdsl kernel in a cold process spends its time (compiling).

    python benchmarks/first_call_breakdown.py [RESULTS_DIR]

Runs a child process per measurement (torch imported before the clock starts, as in
`gpu_suite.py`) with the disk cache off, profiles the first `add(a, b, c)` and prints the
cumulative seconds of the compiler's stages, the imports of the MLIR bindings, ptxas and
the module load.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import cProfile, json, pstats, sys, time
import torch
sys.path.insert(0, %(examples)r)
import dsl
from vector_add import add
a = torch.randn(1 << 20, device='cuda'); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
add(a, b, c)
torch.cuda.synchronize()
prof.disable()
total = time.perf_counter() - t
stats = pstats.Stats(prof).stats
wanted = {
    "mlir.ir import": ("mlir/ir.py", "<module>"),
    "mlir dialects: gpu": ("dialects/gpu/__init__.py", "<module>"),
    "mlir dialects: llvm": ("dialects/llvm.py", "<module>"),
    "mlir dialects: nvvm": ("dialects/nvvm.py", "<module>"),
    "dsl.compiler.api import": ("dsl/compiler/api.py", "<module>"),
    "compile_function": ("dsl/compiler/api.py", "compile_function"),
    "run_pipeline": ("dsl/compiler/pipeline.py", "run_pipeline"),
    "stage_lowered": ("dsl/compiler/pipeline.py", "stage_lowered"),
    "stage_ptx": ("dsl/compiler/pipeline.py", "stage_ptx"),
    "stage_cubin (ptxas)": ("dsl/compiler/pipeline.py", "stage_cubin"),
    "disk_cache.store": ("dsl/compiler/disk_cache.py", "store"),
    "driver(): cuda-bindings import, cuInit": ("dsl/runtime/driver.py", "driver"),
    "current_context": ("dsl/runtime/driver.py", "current_context"),
    "module load": ("dsl/runtime/module.py", "function"),
}
out = {"total_s": total}
for label, (path, name) in wanted.items():
    out[label] = sum(v[3] for k, v in stats.items() if k[0].endswith(path) and k[2] == name)
print(json.dumps(out))
"""


def main():
    env = dict(os.environ, KDSL_NO_DISK_CACHE="1",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    runs = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", CHILD % {"examples": os.path.join(ROOT, "examples")}],
                              env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            sys.exit(1)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for key in runs[0]:
        print(f"{key:28s} " + "  ".join(f"{r[key]:6.3f}" for r in runs) + " s")
    if len(sys.argv) > 1:
        with open(os.path.join(sys.argv[1], "first_call_breakdown.json"), "w") as f:
            json.dump(runs, f, indent=2)


if __name__ == "__main__":
    main()
