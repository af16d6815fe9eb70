"""`kdsl profile FILE::JIT`: the GPU's counters for one call of a jit function, per Python line.

    kdsl profile examples/softmax.py::softmax [--example N] [--device N] [--lines N]
                 [--json] [-o PROFILE.json] [--compare BASELINE.json --fail-above PCT]

Runs the file's jit function once under Nsight Compute (see `dsl.profiling`) on its
`--example`-th `examples=` entry, else on the inputs *Run on GPU* makes, and prints each
kernel launch's summary and its hottest lines; `--json` prints the report as JSON (schema in
`dsl.profiling.records`), `-o` also writes it to a file. `--compare` checks each kernel's
duration against a profile written before.

Exit code: 0 when profiled (and within `--fail-above` of the baseline), 1 when the program
failed or a kernel got slower than allowed, 2 for usage errors, no GPU or no Nsight Compute.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kdsl profile", description="Profile a jit function's kernels on the "
                                     "GPU with Nsight Compute, per Python line.")
    parser.add_argument("target", help="FILE::JIT_FUNCTION")
    parser.add_argument("--example", type=int, default=None, help="which examples= entry to run (default: the "
                        "first, else the inputs Run on GPU makes)")
    parser.add_argument("--device", type=int, default=0, help="the GPU ordinal (default 0)")
    parser.add_argument("--lines", type=int, default=12, help="hottest lines shown per kernel (default 12)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("-o", "--output", help="also write the JSON report to this file")
    parser.add_argument("--compare", metavar="BASELINE", help="a profile written before (--json / -o)")
    parser.add_argument("--fail-above", type=float, metavar="PCT", default=None,
                        help="with --compare: exit 1 when a kernel is slower than the baseline by more than PCT%%")
    args = parser.parse_args(argv)
    path, sep, function = args.target.partition("::")
    if not sep or not function:
        parser.error("name the function: FILE::JIT_FUNCTION")
    if not os.path.isfile(path):
        print(f"kdsl profile: no such file: {path}", file=sys.stderr)
        return 2
    if args.fail_above is not None and not args.compare:
        parser.error("--fail-above needs --compare BASELINE.json")
    baseline = None
    if args.compare:
        try:
            from dsl.profiling.records import ProfileReport

            baseline = ProfileReport.from_json(json.loads(Path(args.compare).read_text()))
        except (OSError, ValueError) as err:
            print(f"kdsl profile: cannot read the baseline {args.compare}: {err}", file=sys.stderr)
            return 2
    from dsl.profiling.compare import compare
    from dsl.profiling.nsight import ProfilerUnavailable
    from dsl.profiling.run import ProfileFailed, profile_function
    from dsl.profiling.table import format_report

    try:
        report = profile_function(path, function, example=args.example, device=args.device)
    except ProfilerUnavailable as err:
        print(f"kdsl profile: {err}", file=sys.stderr)
        return 2
    except ProfileFailed as err:
        print(f"kdsl profile: {err}", file=sys.stderr)
        return 1
    text = report.dumps()
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text if args.json else format_report(report, args.lines))
    if baseline is not None:
        result = compare(report, baseline, args.fail_above if args.fail_above is not None else 0.0)
        print(result.text, file=sys.stderr if args.json else sys.stdout)
        if args.fail_above is not None and not result.ok:
            return 1
    return 0
