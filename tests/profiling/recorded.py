"""The profiler's fixtures: what `dsl.profiling.nsight.read_report` read from reports of
tests/profiling/planted.py on an H200 (data/run_*.raw.json, recorded by record_fixtures.py, with
the roofline counters), and the same reports as an older kdsl recorded them, before it asked
for the roofline counters (`without_roofline_counters`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsl.profiling.flops import FLOP_COUNTERS

DATA = Path(__file__).parent / "data"
PLANTED = (Path(__file__).parent / "planted.py").read_text().splitlines()


def raw_report(function: str) -> dict[str, Any]:
    """`{"device", "actions"}` as recorded for `function` of planted.py."""
    return json.loads((DATA / f"{function}.raw.json").read_text())


def with_roofline_counters(function: str) -> tuple[str, dict[str, Any]]:
    """(device, the first launch's raw action), as recorded."""
    raw = raw_report(function)
    return raw["device"], raw["actions"][0]


def without_roofline_counters(function: str) -> tuple[str, dict[str, Any]]:
    """(device, the first launch's raw action) without the FLOP and DRAM byte counters: a report
    an older kdsl made."""
    raw = raw_report(function)
    action = raw["actions"][0]
    metrics = {k: v for k, v in action["metrics"].items() if k not in FLOP_COUNTERS and k != "dram__bytes.sum"}
    return raw["device"], {**action, "metrics": metrics}
