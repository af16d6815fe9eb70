"""Checking a block of seeds: what `python -m tests.fuzz` runs, in its own process or in workers."""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.generate import generate
from tests.fuzz.harness import Verdict, check, quiet_environment
from tests.fuzz.program import Program
from tests.fuzz.shrink import shrink


def report_failure(program: Program, verdict: Verdict, directory: Path, gpu: bool, do_shrink: bool) -> None:
    print(f"\n=== seed {program.seed}: {verdict.status} ===")
    print(verdict.detail.rstrip())
    if do_shrink and not verdict.stuck:  # a hung GPU runs nothing more: the program is printed as generated
        small = shrink(program, lambda p: check(p, directory, gpu).status == verdict.status)
        shrunk = check(small, directory, gpu)
        print(f"--- shrunk reproducer (seed {program.seed}, n={small.n}, C={small.const}, "
              f"data seed {small.data_seed}) ---")
        print(small.render().rstrip())
        print(shrunk.detail.rstrip())
    else:
        print(program.render().rstrip())
    sys.stdout.flush()


def run_seeds(first: int, count: int, gpu: bool, do_shrink: bool,
              deadline: float | None = None) -> tuple[Counter[str], int, bool]:
    """Checks programs `first` to `first + count - 1` (none started after the wall-clock
    `deadline`), printing each failure: their statuses, how many seeds were checked, and whether
    the GPU was left running a kernel that never ends (the seeds after that one are not checked:
    this process can use the GPU no more)."""
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="kdsl-fuzz-") as tmp:
        directory = Path(tmp)
        for i in range(count):
            if deadline is not None and time.time() > deadline:
                return counts, i, False
            program = generate(first + i)
            verdict = check(program, directory, gpu)
            counts[verdict.status] += 1
            if verdict.failed:
                report_failure(program, verdict, directory, gpu, do_shrink)
            if verdict.stuck:
                return counts, i + 1, True
    return counts, count, False


def run_block(first: int, count: int, gpu: bool, do_shrink: bool,
              deadline: float | None = None) -> tuple[Counter[str], int, str]:
    """`run_seeds` in a worker process: its statuses, the seeds checked and what it printed."""
    quiet_environment()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        found, checked, _ = run_seeds(first, count, gpu, do_shrink, deadline)
    return found, checked, out.getvalue()


def run_task(task: tuple[int, int, bool, bool, float | None]) -> tuple[int, int, Counter[str], str]:
    """`run_block` of one (first, count, gpu, shrink, deadline) task, for a pool's
    `imap_unordered`: the block's first seed and how many of its seeds were checked, with what
    it found, since blocks finish in any order."""
    found, checked, printed = run_block(*task)
    return task[0], checked, found, printed
