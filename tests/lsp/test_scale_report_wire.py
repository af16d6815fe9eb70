"""A report crosses from the run process to the parent as a delta: the function reports the
parent already holds travel as a reference to their digest (`lsp.report_wire`).

Reports come from analysing a file of kernels in this process (`kernels(n)` of
test_scale_analysis.py); the last test runs the real worker, whose warm run process sends
only the edited kernel's report after an edit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dsl
from lsp.report_wire import ReportEncoder, decode
from lsp.worker import AnalysisWorker
from tests.lsp.test_scale_analysis import kernels


def entries(line: bytes) -> list[dict]:
    return json.loads(line)["functions"]


def test_only_what_the_parent_lacks_travels(tmp_path: Path) -> None:
    path = str(tmp_path / "ten.py")
    first = dsl.analyze_source(kernels(10), path)
    encoder = ReportEncoder()
    full = encoder.encode(first, imported=["/a.py"])
    assert all("report" in e for e in entries(full))
    held = decode(full, {})
    assert held.report.to_dict() == first.to_dict() and held.imported == ["/a.py"]

    edited = dsl.analyze_source(kernels(10, edited=4), path)
    delta = encoder.encode(edited, held.by_digest.keys(), imported=[])
    assert [("report" in e) for e in entries(delta)] == [i == 4 for i in range(10)]
    assert len(delta) * 5 < len(full)
    now = decode(delta, held.by_digest)
    assert now.report.to_dict() == edited.to_dict()
    assert all(now.report.functions[i] is held.report.functions[i] for i in range(10) if i != 4)
    assert now.report.functions[4] is not held.report.functions[4]


def test_functions_moved_by_an_edit_above_them_travel_as_a_move(tmp_path: Path) -> None:
    path = str(tmp_path / "ten.py")
    encoder = ReportEncoder()
    held = decode(encoder.encode(dsl.analyze_source(kernels(10), path)), {})
    lines_of_k0 = []
    for comments in (1, 3, 2):  # lines typed above every kernel, two more, then one taken away
        moved = dsl.analyze_source("# moved\n" * comments + kernels(10), path)
        delta = encoder.encode(moved, held.by_digest.keys())
        assert all("moved" in e for e in entries(delta)), entries(delta)
        held = decode(delta, held.by_digest)
        assert held.report.to_dict() == moved.to_dict()  # the parent shifted exactly what compiling gives
        lines_of_k0.append(held.report.functions[0].range.line)
    assert lines_of_k0[1] - lines_of_k0[0] == 2 and lines_of_k0[2] - lines_of_k0[1] == -1
    # a fresh run process, which knows of no move, sends the same reports in full
    again = decode(ReportEncoder().encode(dsl.analyze_source("# moved\n" * 2 + kernels(10), path)), {})
    assert again.report.to_dict() == held.report.to_dict()


def test_a_move_of_a_report_not_offered_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "two.py")
    encoder = ReportEncoder()
    held = decode(encoder.encode(dsl.analyze_source(kernels(2), path)), {})
    delta = encoder.encode(dsl.analyze_source("\n" + kernels(2), path), held.by_digest.keys())
    assert all("moved" in e for e in entries(delta))
    with pytest.raises(ValueError, match="not offered"):
        decode(delta, {})


def test_digests_agree_between_processes(tmp_path: Path) -> None:
    """A fresh run process (a new encoder) names the same reports by the same digests."""
    path = str(tmp_path / "three.py")
    report = dsl.analyze_source(kernels(3), path)
    held = decode(ReportEncoder().encode(report), {})
    again = ReportEncoder().encode(report, held.by_digest.keys())
    assert all("same" in e for e in entries(again))


def test_a_reference_to_a_report_not_offered_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "two.py")
    report = dsl.analyze_source(kernels(2), path)
    held = decode(ReportEncoder().encode(report), {})
    delta = ReportEncoder().encode(report, held.by_digest.keys())
    with pytest.raises(ValueError, match="not offered"):
        decode(delta, {})
    with pytest.raises(ValueError):
        decode(b'{"path": "x", "functions": 3}', {})


async def test_the_warm_worker_sends_only_the_edited_kernel(tmp_path: Path) -> None:
    path = str(tmp_path / "twenty.py")
    worker = AnalysisWorker(parallel=1, keep_warm=1, timeout=60)
    try:
        first = await worker.analyze(kernels(20), path)
        second = await worker.analyze(kernels(20, edited=11), path)
    finally:
        await worker.close()
    assert not first.all_diagnostics() and not second.all_diagnostics()
    assert [f.name for f in second.functions] == [f"k{i}" for i in range(20)]
    assert second.to_dict() == dsl.analyze_source(kernels(20, edited=11), path, cubins_on_request=True).to_dict()
    reused = [f.name for f, g in zip(first.functions, second.functions) if f is g]
    assert reused == [f"k{i}" for i in range(20) if i != 11]
