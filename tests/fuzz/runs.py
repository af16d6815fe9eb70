"""Checking a block of seeds: what `python -m tests.fuzz` runs, in its own process or in workers."""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections import Counter
from pathlib import Path

from tests.fuzz.generate import generate
from tests.fuzz.harness import check, quiet_environment
from tests.fuzz.program import Program
from tests.fuzz.shrink import shrink


def report_failure(program: Program, status: str, detail: str, directory: Path, gpu: bool, do_shrink: bool) -> None:
    print(f"\n=== seed {program.seed}: {status} ===")
    print(detail.rstrip())
    if do_shrink:
        small = shrink(program, lambda p: check(p, directory, gpu).status == status)
        verdict = check(small, directory, gpu)
        print(f"--- shrunk reproducer (seed {program.seed}, n={small.n}, C={small.const}, "
              f"data seed {small.data_seed}) ---")
        print(small.render().rstrip())
        print(verdict.detail.rstrip())
    else:
        print(program.render().rstrip())
    sys.stdout.flush()


def run_seeds(first: int, count: int, gpu: bool, do_shrink: bool) -> Counter[str]:
    """Checks programs `first` to `first + count - 1`, printing each failure; their statuses."""
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="kdsl-fuzz-") as tmp:
        directory = Path(tmp)
        for i in range(count):
            program = generate(first + i)
            verdict = check(program, directory, gpu)
            counts[verdict.status] += 1
            if verdict.failed:
                report_failure(program, verdict.status, verdict.detail, directory, gpu, do_shrink)
    return counts


def run_block(first: int, count: int, gpu: bool, do_shrink: bool) -> tuple[Counter[str], str]:
    """`run_seeds` in a worker process: its statuses and what it printed."""
    quiet_environment()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        found = run_seeds(first, count, gpu, do_shrink)
    return found, out.getvalue()


def run_task(task: tuple[int, int, bool, bool]) -> tuple[int, int, Counter[str], str]:
    """`run_block` of one (first, count, gpu, shrink) task, for a pool's `imap_unordered`: the
    block's first seed and count with what it found, since blocks finish in any order."""
    found, printed = run_block(*task)
    return task[0], task[1], found, printed
