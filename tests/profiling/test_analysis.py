"""From Nsight Compute's counters to lines and a limiter (`dsl.profiling.analysis`).

Fixtures: data/run_*.raw.json are what `dsl.profiling.nsight.read_report` read from real
reports of tests/profiling/planted.py on an H200 (`kdsl profile` of each jit function; the
file's path shortened to `planted.py`). Each kernel there has one planted cause.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsl.profiling.analysis import charge_waits_to_loads, kernel_profile, limiter
from dsl.profiling.compare import compare
from dsl.profiling.records import ProfileReport

DATA = Path(__file__).parent / "data"
PLANTED = (Path(__file__).parent / "planted.py").read_text().splitlines()


def line_of(text: str) -> int:
    return next(k + 1 for k, line in enumerate(PLANTED) if text in line)


def profile_of(function: str):
    raw = json.loads((DATA / f"{function}.raw.json").read_text())
    return raw["device"], kernel_profile(raw["actions"][0], 0, {"planted.py": PLANTED})


def test_the_strided_load_is_the_hot_line_with_memory_stalls_and_more_sectors():
    _, kernel = profile_of("run_strided")
    assert kernel.name == "strided" and kernel.limiter.startswith("memory-bound: ")
    strided, coalesced = line_of("return t[(i * 33) % n]"), line_of("a = x[i]  # coalesced")
    hottest = kernel.lines[0]
    assert hottest.line == strided  # in the helper traced inline, where the load is
    assert hottest.top_stalls[0][0].startswith("long scoreboard")
    assert hottest.source == "return t[(i * 33) % n]  # strided: every lane of a warp in another 128-byte segment"
    by_line = {line.line: line for line in kernel.lines}
    assert by_line[strided].sectors_per_request == 32 and by_line[strided].ideal_sectors_per_request == 4
    assert by_line[coalesced].sectors_per_request == 4 and not by_line[coalesced].uncoalesced
    assert by_line[strided].uncoalesced
    assert sum(line.stall_share for line in kernel.lines) == pytest.approx(1.0)


def test_a_planted_bank_conflict_is_reported_on_its_line():
    _, kernel = profile_of("run_bank_conflict")
    by_line = {line.line: line for line in kernel.lines}
    column, row = line_of("acc += tile[t * 32 + k]"), line_of("tile[k * 32 + t] = x[")
    assert by_line[column].bank_conflicts and by_line[column].bank_conflicts > 1_000_000
    assert not by_line[row].bank_conflicts


def test_an_fma_chain_is_compute_bound():
    device, kernel = profile_of("run_fma_chain")
    assert device == "NVIDIA H200"
    assert kernel.limiter.startswith("compute-bound: SM at ")
    assert kernel.sm_throughput_pct is not None and kernel.sm_throughput_pct > 60
    hot = {kernel.lines[0].line, kernel.lines[1].line}
    assert hot == {line_of("v = dsl.fma(v, a, w)"), line_of("w = dsl.fma(w, a, v)")}


def test_a_wait_is_charged_to_the_load_it_waits_for():
    pcs = [
        {"pc": 0, "file": "k.py", "line": 3, "sass": "LDG.E.64 R4, desc[UR4][R2.64] ;", "metrics": {}},
        {"pc": 16, "file": "k.py", "line": 4, "sass": "IMAD R9, R7, R7, RZ ;",
         "metrics": {"smsp__pcsamp_sample_count": 5, "smsp__pcsamp_warps_issue_stalled_long_scoreboard": 0}},
        {"pc": 32, "file": "k.py", "line": 5, "sass": "FADD R6, R5, R9 ;",
         "metrics": {"smsp__pcsamp_sample_count": 10, "smsp__pcsamp_warps_issue_stalled_long_scoreboard": 8}},
    ]
    moved = {e["line"]: e["metrics"] for e in charge_waits_to_loads(pcs)}
    assert moved[3] == {"smsp__pcsamp_warps_issue_stalled_long_scoreboard": 8, "smsp__pcsamp_sample_count": 8}
    assert moved[5] == {"smsp__pcsamp_sample_count": 2, "smsp__pcsamp_warps_issue_stalled_long_scoreboard": 0}
    assert moved[4]["smsp__pcsamp_sample_count"] == 5


@pytest.mark.parametrize(("figures", "expected"), [
    ((81.0, 81.0, 8.0, 0.0, "long scoreboard"), "memory-bound: 81% of DRAM peak"),
    ((50.0, 70.0, 20.0, None, None), "memory-bound: L1/L2 at 70% of peak (DRAM 50%)"),
    ((10.0, 12.0, 95.0, 80.0, None), "compute-bound: SM at 95% of peak, tensor pipe 80%"),
    ((10.0, 12.0, 30.0, None, "barrier"), "latency-bound: SM 30%, DRAM 10% of peak; warps mostly stall on barrier"),
])
def test_the_limiter_in_words(figures, expected):
    assert limiter(*figures) == expected


def test_the_json_form_reads_back_and_a_slowdown_fails_the_gate():
    device, kernel = profile_of("run_strided")
    report = ProfileReport("run_strided", "planted.py", device, [kernel])
    data = json.loads(report.dumps())
    assert data["schema"] == 1 and set(data["kernels"][0]) >= {
        "name", "launch", "duration_us", "dram_tbs", "dram_pct_of_peak", "sm_throughput_pct",
        "achieved_occupancy_pct", "theoretical_occupancy_pct", "limiter", "lines"}
    assert set(data["kernels"][0]["lines"][0]) >= {"file", "line", "stall_share", "top_stalls", "instructions",
                                                   "sectors_per_request"}
    again = ProfileReport.from_json(data)
    assert again == report
    slower = ProfileReport.from_json(json.loads(report.dumps()))
    slower.kernels[0].duration_us = kernel.duration_us * 1.2  # type: ignore[operator]
    failed = compare(slower, report, 10.0)
    assert not failed.ok
    assert "strided (launch 0): " in failed.text and "+20.0%: SLOWER than the limit of +10%" in failed.text
    assert compare(slower, report, 25.0).ok
    with pytest.raises(ValueError, match="schema 1"):
        ProfileReport.from_json({"schema": 99})
