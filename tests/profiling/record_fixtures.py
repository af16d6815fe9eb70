"""Re-records the profiler's fixtures on a GPU machine, and checks that its ncu has every metric kdsl asks for.

    python tests/profiling/record_fixtures.py [--out DIR] [--check-only]

1. `ncu --query-metrics` on the attached GPU: each roofline metric kdsl asks for
   (`dsl.profiling.flops.OPTIONAL_METRICS`) by its base counter name, listed or missing (the
   summary's metrics are printed too, for information: `launch__*` and some ratios are not
   counters and are not listed). A missing roofline counter is not fatal to a profile (ncu runs
   again without them) but leaves its kernels without a roofline.
2. Unless `--check-only`: profiles each jit function of tests/profiling/planted.py under ncu and
   writes what `nsight.read_report` read (`{"device", "actions"}`, file paths shortened to
   `planted.py`) to DIR/<function>.raw.json (default: tests/profiling/data, the fixtures the
   CPU-only tests read), checks that every roofline metric came back in the report, and prints
   each launch's summary and roofline as analysed from it.

Exit code: 0 when every roofline metric is listed and came back and every function was recorded,
else 1; 2 without ncu.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dsl.profiling.analysis import ALL_KERNEL_METRICS, kernel_profile  # noqa: E402
from dsl.profiling.flops import OPTIONAL_METRICS  # noqa: E402
from dsl.profiling.nsight import ProfilerUnavailable, require_ncu  # noqa: E402
from dsl.profiling.roofline import roofline_note  # noqa: E402
from dsl.profiling.run import raw_profile  # noqa: E402
from dsl.profiling.table import summary  # noqa: E402

PLANTED = Path(__file__).resolve().parent / "planted.py"
FUNCTIONS = ("run_strided", "run_bank_conflict", "run_fma_chain")


def base_name(metric: str) -> str:
    """`dram__bytes.sum.peak_sustained` -> `dram__bytes`: the counter `--query-metrics` lists."""
    return metric.split(".", 1)[0]


def check_metrics(ncu: str) -> bool:
    done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=300)
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip() and "__" in line.split()[0]}
    if done.returncode != 0 or not listed:
        print(f"ncu --query-metrics failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return False
    ok = True
    for group, names in (("summary", ALL_KERNEL_METRICS), ("roofline", OPTIONAL_METRICS)):
        for name in names:
            found = base_name(name) in listed
            ok &= found or group == "summary"
            print(f"  {'listed ' if found else 'MISSING'}  {group:8}  {name}")
    return ok


def record(function: str, out: Path) -> bool:
    try:
        device, actions = raw_profile(str(PLANTED), function)
    except Exception as err:  # a failed profile is reported, and the others still recorded
        print(f"{function}: {type(err).__name__}: {err}")
        return False
    for action in actions:
        for pc in action.get("pcs", []):
            if pc.get("file"):
                pc["file"] = os.path.basename(pc["file"])
    (out / f"{function}.raw.json").write_text(json.dumps({"device": device, "actions": actions}, indent=1) + "\n")
    lines = PLANTED.read_text().splitlines()
    ok = True
    for launch, action in enumerate(actions):
        missing = [name for name in OPTIONAL_METRICS if not isinstance(action["metrics"].get(name), int | float)]
        if missing:
            print(f"{function}: the report lacks the roofline metrics {', '.join(missing)}")
            ok = False
        kernel = kernel_profile(action, launch, {"planted.py": lines}, device)
        print(f"{function}: {kernel.name} on {device}: {kernel.limiter}\n  {summary(kernel)}\n  {roofline_note(kernel)}"
              f"\n  flops by kind: {kernel.flops_by_kind}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "data")
    parser.add_argument("--check-only", action="store_true")
    args = parser.parse_args(argv)
    try:
        ncu = require_ncu()
    except ProfilerUnavailable as err:
        print(err)
        return 2
    print(f"metrics of {ncu}:")
    ok = check_metrics(ncu)
    if not args.check_only:
        args.out.mkdir(parents=True, exist_ok=True)
        for function in FUNCTIONS:
            ok &= record(function, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
