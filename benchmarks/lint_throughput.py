"""`kdsl lint` throughput with execution, cold and from its cache (not run in CI).

Makes a project of `--copies` folders, each holding a copy of the chosen examples (default:
the ten small ones, 350 files in all; each copy has its own folder so `from reductions
import ...` finds its sibling), then runs `python -m lsp.cli lint` on it as CI would:

- cold: `--no-cache`, for each `--jobs` value, with an empty kernel cache: files/s, and the
  CPU seconds all processes used (lint, the worker and its runs, ptxas);
- warm: one run to fill the cache, then the time of a second run over the unchanged files.

The machine's load average is printed beside each figure: on a shared machine it says how
much of the CPU the run had.

    python benchmarks/lint_throughput.py [--copies 35] [--jobs 1 2] [--examples saxpy ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL_EXAMPLES = ("fp8_quantize", "gelu_bf16", "layernorm", "linear_search", "reductions", "row_sum", "saxpy",
                  "softmax", "transpose", "vector_add")


def make_project(folder: Path, examples: list[str], copies: int) -> int:
    for i in range(copies):
        copy = folder / f"copy{i:03d}"
        copy.mkdir(parents=True)
        for name in examples:
            shutil.copyfile(ROOT / "examples" / f"{name}.py", copy / f"{name}.py")
    return copies * len(examples)


def lint(project: Path, cache: Path, *args: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of every process it started, its last stderr line)."""
    env = dict(os.environ, KDSL_CACHE_DIR=str(cache))
    env.pop("KDSL_NO_DISK_CACHE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "lsp.cli", "lint", *args, "."], cwd=project, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kdsl lint failed ({proc.returncode}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (proc.stderr.strip().splitlines() or [""])[-1]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def main(copies: int, jobs: list[int], examples: list[str]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="kdsl-lint-bench-"))
    try:
        files = make_project(folder / "project", examples, copies)
        print(f"{files} files: {copies} copies of {', '.join(examples)}")
        for count in jobs:
            cache = folder / f"cache-cold-{count}"
            before = load()
            wall, cpu, _ = lint(folder / "project", cache, "--no-cache", "--jobs", str(count))
            print(f"cold, --jobs {count}: {wall:6.2f} s  {files / wall:6.1f} files/s  "
                  f"{cpu:6.1f} CPU s ({1000 * cpu / files:.0f} ms a file)  [{before} -> {load()}]")
        cache = folder / "cache-warm"
        lint(folder / "project", cache, "--jobs", str(max(jobs)))
        before = load()
        wall, _, note = lint(folder / "project", cache, "--jobs", str(max(jobs)))
        print(f"warm, second run:  {wall:6.2f} s  ({note})  [{before}]")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--copies", type=int, default=35, help="folders, each with a copy of the examples")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="--jobs values to time cold")
    parser.add_argument("--examples", nargs="+", default=list(SMALL_EXAMPLES), help="examples/ files, no .py")
    args = parser.parse_args()
    main(args.copies, args.jobs, args.examples)
