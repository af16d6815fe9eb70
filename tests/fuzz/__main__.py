"""`python -m tests.fuzz --programs N [--seed S] [--gpu] [--jobs J]`: differential testing from the command line.

Program `i` of a run is `generate(S + i)`, so a failure's seed alone reproduces it
(`--seed <that seed> --programs 1`). Prints how many programs were generated, compiled,
refused and compared; every failure with its seed and a shrunk reproducer. Exits 1 on any
disagreement or internal error, else 0. `--jobs J` splits the seeds into J runs in processes
of their own (a long `--gpu` run on a machine with many cores: each compiles on its own core).
`--seconds T`: no seed starts after T seconds; the run reports what was checked, with the seeds left over (a run
that must end inside a time limit, to be continued from there). A GPU kernel still running after
`harness.HANG_SECONDS` is a disagreement (its process can use the GPU no more: the rest of its block is left over).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter

from tests.fuzz.harness import FAILURES, HANG_SECONDS, quiet_environment
from tests.fuzz.runs import run_seeds, run_task

BLOCK = 200  # seeds per task: a long run reports as it goes, and its cores stay busy to the end
GPU_BLOCK = 400  # with --gpu each task has a fresh process (see `run_block`): fewer, longer tasks
GRACE = HANG_SECONDS + 30  # past the deadline, how long a worker may take to answer before it is dropped


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
    deadline = time.time() + args.seconds if args.seconds is not None else None  # wall clock: workers read it
    jobs = max(1, min(args.jobs, args.programs))
    size = max(1, min(-(-args.programs // jobs), GPU_BLOCK if gpu else BLOCK))
    blocks = [(args.seed + k, min(size, args.programs - k), gpu, not args.no_shrink, deadline)
              for k in range(0, args.programs, size)]
    checked: list[tuple[int, int]] = []  # (first seed, how many checked) of each block that answered
    if jobs == 1:
        for first, count, *_ in blocks:
            found, ran, stuck = run_seeds(first, count, gpu, not args.no_shrink, deadline)
            counts.update(found)
            checked.append((first, ran))
            if stuck:  # this process's GPU still runs a kernel: the seeds left are reported unchecked
                break
    else:  # blocks of contiguous seeds, handed out as workers free up (spawned: the parent may hold a CUDA context)
        done = 0
        # with the GPU, one block per process: a kernel that never ends dies with its process's context
        with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1 if gpu else None) as pool:
            results = pool.imap_unordered(run_task, blocks)
            while True:
                try:  # past the deadline and its grace, a worker that has not answered (a hung GPU) is dropped
                    wait = None if deadline is None else max(1.0, deadline + GRACE - time.time())
                    first, ran, found, printed = results.next(wait)
                except StopIteration:
                    break
                except multiprocessing.TimeoutError:
                    pool.terminate()
                    break
                counts.update(found)
                checked.append((first, ran))
                done += ran
                sys.stdout.write(printed)
                sys.stdout.flush()
                if ran:
                    failing = sum(counts[f] for f in FAILURES)
                    print(f"  seeds {first}-{first + ran - 1} done; {done}/{args.programs} checked, {failing} failing, "
                          f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - started

    refused = counts["refused"] + counts["unexpected-refusal"]
    compiled = counts["compared"] + counts["mismatch"] + counts["missed-refusal"]
    disagreements = counts["mismatch"] + counts["unexpected-refusal"] + counts["missed-refusal"]
    ways = "reference, interpreter and GPU" if gpu else "reference and interpreter"
    generated = sum(count for _, count in checked)
    if generated < args.programs:
        why = f"stopped after {args.seconds:g} s" if args.seconds is not None else "a GPU left running a kernel"
        print(f"{why}: seeds not checked: {_ranges(args.seed, args.programs, checked)}")
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
