"""Where the first call of a kdsl kernel in a cold process spends its time (compiling).

    python benchmarks/first_call_breakdown.py [RESULTS_DIR] [--runs=5]

Runs a child process per measurement (torch imported and CUDA initialised before the clock
starts, as in `gpu_suite.py`) with the disk cache off, and times the first `add(a, b, c)`
with wall-clock wrappers (a profiler would inflate the Python parts): the import of the
MLIR bindings and of the compiler, each pipeline stage, the driver set-up, the module load.
Wrapped steps nest (the compile contains its stages), so the rows do not add up to the total.
`KDSL_ASSEMBLER=driver` in the environment times the driver's PTX compiler instead of ptxas.
"""

import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import importlib.machinery, json, sys, time
import torch
sys.path.insert(0, %(examples)r)
import dsl
from vector_add import add

T = {}

def timed(label, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            T[label] = T.get(label, 0.0) + time.perf_counter() - start
    return wrapper

def stage_times(fn):  # run_pipeline records each stage's time on its Build
    def wrapper(build, *args, **kwargs):
        try:
            return fn(build, *args, **kwargs)
        finally:
            for stage, seconds in build.timings.items():
                T["  stage " + stage] = seconds
    return wrapper

# Modules imported during the call: time their import and wrap functions as they load.
LATE = {
    "mlir.ir": {},
    "dsl.compiler.api": {"compile_function": "compile_function (trace, lower, PTX, cubin)"},
    "dsl.compiler.pipeline": {},
    "dsl.runtime.driver_assembler": {"assemble": "  driver's PTX compiler"},
}

class Hook:
    def find_spec(self, name, path=None, target=None):
        if name not in LATE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            start = time.perf_counter()
            run(module)
            T["import " + name] = time.perf_counter() - start
            for attr, label in LATE[name].items():
                setattr(module, attr, timed(label, getattr(module, attr)))
            if name == "dsl.compiler.api":
                module.run_pipeline = stage_times(module.run_pipeline)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())
import dsl.runtime.driver as D, dsl.runtime.jit_call as J, dsl.runtime.module as M
D.driver = timed("driver(): cuda-bindings import, cuInit", D.driver)
J.compile_entry = timed("compile_entry (key, compile, entry)", J.compile_entry)
M.ModuleImage.function = timed("module load + function lookup", M.ModuleImage.function)
a = torch.randn(1 << 20, device='cuda'); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
start = time.perf_counter()
add(a, b, c)
torch.cuda.synchronize()
T["total"] = time.perf_counter() - start
assert torch.equal(c, a + b)
print(json.dumps(T))
"""


def main():
    runs_wanted = next((int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--runs=")), 5)
    out_dir = next((a for a in sys.argv[1:] if not a.startswith("--")), None)
    env = dict(os.environ, KDSL_NO_DISK_CACHE="1",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    runs = []
    for _ in range(runs_wanted):
        proc = subprocess.run([sys.executable, "-c", CHILD % {"examples": os.path.join(ROOT, "examples")}],
                              env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            sys.exit(1)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    keys = sorted({k for r in runs for k in r}, key=lambda k: (k != "total", -statistics.median(
        r.get(k, 0.0) for r in runs)))
    print(f"first call of add(a, b, c), compiling (assembler: {os.environ.get('KDSL_ASSEMBLER', 'ptxas')}); "
          f"ms, median of {len(runs)} cold processes [min-max]")
    for key in keys:
        values = [r.get(key, 0.0) * 1e3 for r in runs]
        print(f"  {key:46s} {statistics.median(values):7.1f}  [{min(values):.1f}-{max(values):.1f}]")
    if out_dir:
        with open(os.path.join(out_dir, "first_call_breakdown.json"), "w") as f:
            json.dump(runs, f, indent=2)


if __name__ == "__main__":
    main()
