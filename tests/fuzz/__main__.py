"""`python -m tests.fuzz --programs N [--seed S] [--gpu]`: differential testing from the command line.

Program `i` of a run is `generate(S + i)`, so a failure's seed alone reproduces it
(`--seed <that seed> --programs 1`). Prints how many programs were generated, compiled,
refused and compared; every failure with its seed and a shrunk reproducer. Exits 1 on any
disagreement or internal error, else 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.generate import generate
from tests.fuzz.harness import FAILURES, check, quiet_environment
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--programs", type=int, default=200, help="how many programs to generate")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--gpu", action="store_true", help="also run each program on the GPU, where one is present")
    parser.add_argument("--no-shrink", action="store_true", help="print failing programs as generated")
    args = parser.parse_args(argv)

    quiet_environment()
    gpu = False
    if args.gpu:
        from dsl.runtime import driver

        gpu = driver.available()
        if not gpu:
            print("--gpu: no GPU here (dsl.runtime.driver.available() is False); the GPU way is skipped")

    counts: Counter[str] = Counter()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kdsl-fuzz-") as tmp:
        directory = Path(tmp)
        for i in range(args.programs):
            program = generate(args.seed + i)
            verdict = check(program, directory, gpu)
            counts[verdict.status] += 1
            if verdict.failed:
                report_failure(program, verdict.status, verdict.detail, directory, gpu, not args.no_shrink)
    elapsed = time.perf_counter() - started

    refused = counts["refused"] + counts["unexpected-refusal"]
    compiled = counts["compared"] + counts["mismatch"] + counts["missed-refusal"]
    disagreements = counts["mismatch"] + counts["unexpected-refusal"] + counts["missed-refusal"]
    ways = "reference, interpreter and GPU" if gpu else "reference and interpreter"
    print(f"generated {args.programs}, compiled {compiled}, refused {refused} "
          f"({counts['refused']} as the rules require), compared {counts['compared']} ({ways}), "
          f"skipped {counts['skipped']} (not modelled); "
          f"disagreements {disagreements}, internal errors {counts['internal']}; "
          f"{elapsed:.1f} s, {args.programs / elapsed:.1f} programs/s")
    return 1 if any(counts[f] for f in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
