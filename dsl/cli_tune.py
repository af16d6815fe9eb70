"""`kdsl tune FILE[::FUNCTION] [--retune]`: tune autotuned jit functions ahead of time.

Runs the file (the user's own program, run on request), then tunes each `@dsl.autotune`
function (or the one named) on the attached GPU, once per `examples=` entry, on synthesized
arguments (see `dsl.runtime.tune`), and prints a table per tuning. The choices are recorded
where a program's first call looks (the kernel cache: `KDSL_CACHE_DIR`, else the user cache
directory), so that call runs no trial; `kdsl build` then compiles the recorded winners.
Configs already recorded for this GPU are not measured again unless `--retune` is given.

Exit code: 0 when every function was tuned, 1 when one could not be (every config failed,
or its module failed), 2 for usage errors or when there is no GPU.
"""

from __future__ import annotations

import argparse
import os
import sys

from dsl.module_analysis import read_program


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kdsl tune", description="Tune @dsl.autotune functions on this GPU "
                                     "and record their choices.")
    parser.add_argument("file", help="FILE or FILE::FUNCTION")
    parser.add_argument("--retune", action="store_true", help="measure every config again, even recorded ones")
    args = parser.parse_args(argv)
    path, _, only = args.file.partition("::")
    path = os.path.abspath(path)
    source = read_program(path, "kdsl tune")
    if source is None:
        return 2
    from dsl.runtime.driver import NoGPUError
    from dsl.runtime.tune import format_table, tune_functions

    try:
        results = tune_functions(source, path, [only] if only else None, force=args.retune)
    except NoGPUError as err:
        print(f"kdsl tune: {err}", file=sys.stderr)
        return 2
    if not results:
        print(f"kdsl tune: no @dsl.autotune function in {path}", file=sys.stderr)
        return 2
    failed = False
    for result in results:
        print(f"== {result['function']} ==")
        for tuning in result["tunings"]:
            print(format_table(tuning))
        if result["ok"]:
            print(result["message"])
        else:
            print(f"kdsl tune: {result['function']}: {result['message']}", file=sys.stderr)
            failed = True
    from dsl.compiler import disk_cache

    print(f"records: {disk_cache.cache_dir()}")
    return 1 if failed else 0
