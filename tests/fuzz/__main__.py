"""`python -m tests.fuzz --programs N [--seed S] [--gpu] [--jobs J]`: differential testing from the command line.

Program `i` of a run is `generate(S + i)`, so a failure's seed alone reproduces it
(`--seed <that seed> --programs 1`). Prints how many programs were generated, compiled,
refused and compared; every failure with its seed and a shrunk reproducer. Exits 1 on any
disagreement or internal error, else 0. `--jobs J` splits the seeds into J runs in processes
of their own (a long `--gpu` run on a machine with many cores: each compiles on its own core).
`--seconds T` stops handing out seeds (in blocks of up to 200) after T seconds and reports what was checked, with the
seeds left over (a run that must end inside a time limit, to be continued from there); a block still running then
(a kernel that never finishes) is among them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter

from tests.fuzz.harness import FAILURES, quiet_environment
from tests.fuzz.runs import run_seeds, run_task

BLOCK = 200  # seeds per task: a long run reports as it goes, and its cores stay busy to the end


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--programs", type=int, default=200, help="how many programs to generate")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--gpu", action="store_true", help="also run each program on the GPU, where one is present")
    parser.add_argument("--no-shrink", action="store_true", help="print failing programs as generated")
    parser.add_argument("--jobs", type=int, default=1, help="processes to split the seeds among")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop starting new seeds after this long and report the seeds not checked")
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
    deadline = started + args.seconds if args.seconds is not None else None
    jobs = max(1, min(args.jobs, args.programs))
    size = max(1, min(-(-args.programs // jobs), BLOCK))
    blocks = [(args.seed + k, min(size, args.programs - k), gpu, not args.no_shrink)
              for k in range(0, args.programs, size)]
    checked: list[tuple[int, int]] = []  # (first seed, count) of each finished block
    if jobs == 1:
        for first, count, *_ in blocks:
            if deadline is not None and time.perf_counter() > deadline:
                break
            counts.update(run_seeds(first, count, gpu, not args.no_shrink))
            checked.append((first, count))
    else:  # blocks of contiguous seeds, handed out as workers free up (spawned: the parent may hold a CUDA context)
        done = 0
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.imap_unordered(run_task, blocks)
            while True:
                try:  # with a deadline, a block that never finishes (a kernel that hangs) cannot hold the run
                    wait = None if deadline is None else max(1.0, deadline - time.perf_counter())
                    first, count, found, printed = results.next(wait)
                except StopIteration:
                    break
                except multiprocessing.TimeoutError:
                    pool.terminate()
                    break
                counts.update(found)
                checked.append((first, count))
                done += sum(found.values())
                sys.stdout.write(printed)
                sys.stdout.flush()
                failing = sum(counts[f] for f in FAILURES)
                print(f"  seeds {first}-{first + count - 1} done; {done}/{args.programs} checked, {failing} failing, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
                if deadline is not None and time.perf_counter() > deadline:
                    pool.terminate()  # the blocks under way are dropped: reported as not checked
                    break
    elapsed = time.perf_counter() - started

    refused = counts["refused"] + counts["unexpected-refusal"]
    compiled = counts["compared"] + counts["mismatch"] + counts["missed-refusal"]
    disagreements = counts["mismatch"] + counts["unexpected-refusal"] + counts["missed-refusal"]
    ways = "reference, interpreter and GPU" if gpu else "reference and interpreter"
    generated = sum(count for _, count in checked)
    if generated < args.programs:
        print(f"stopped after {args.seconds:g} s: seeds not checked: {_ranges(args.seed, args.programs, checked)}")
    print(f"generated {generated}, compiled {compiled}, refused {refused} "
          f"({counts['refused']} as the rules require), compared {counts['compared']} ({ways}), "
          f"skipped {counts['skipped']} (not modelled); "
          f"disagreements {disagreements}, internal errors {counts['internal']}; "
          f"{elapsed:.1f} s, {generated / elapsed:.1f} programs/s")
    return 1 if any(counts[f] for f in FAILURES) else 0


def _ranges(seed: int, programs: int, checked: list[tuple[int, int]]) -> str:
    """The seeds of [seed, seed + programs) outside the checked blocks, as `a-b` ranges."""
    left, at = [], seed
    for first, count in sorted(checked) + [(seed + programs, 0)]:
        if first > at:
            left.append(f"{at}-{first - 1}")
        at = max(at, first + count)
    return ", ".join(left)


if __name__ == "__main__":
    sys.exit(main())
