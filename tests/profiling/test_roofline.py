"""The roofline: FLOPs counted per kind of work, the roofs, the kernel's place under them, the
words and the picture (`dsl.profiling.flops`, `peaks`, `roofline`), and the report's JSON with
and without the roofline fields.

Fixtures: the H200 reports of planted.py, recorded with the roofline counters (and without
them, as an older kdsl recorded them: recorded.py); the SASS lines are the forms the compiler emits here
for examples/gemm_hopper.py (`HGMMA.64x256x16.F32.BF16`) and examples/matmul_mma.py
(`HMMA.16816.F32.BF16`).
"""

from __future__ import annotations

import base64
import json
import math
import re

import pytest

from dsl.profiling.analysis import kernel_profile
from dsl.profiling.flops import FLOP_COUNTERS, OPTIONAL_METRICS, flops_by_kind, mma_flops, tensor_flops
from dsl.profiling.nsight import _unknown_metric, command
from dsl.profiling.peaks import BF16_TENSOR, FP8_TENSOR, FP32, H200_SXM, PEAK_METRICS, TF32_TENSOR, peaks_for
from dsl.profiling.records import ProfileReport
from dsl.profiling.roofline import data_uri, figure, make_roofline, roofline_note, roofline_svg
from dsl.profiling.table import format_report
from tests.profiling.recorded import PLANTED, with_roofline_counters, without_roofline_counters


def profiled(function: str):
    device, action = with_roofline_counters(function)
    return device, kernel_profile(action, 0, {"planted.py": PLANTED}, device)


def circle_and_ridge_x(svg: str, ridge_label: str) -> tuple[float, float]:
    """The point's x, and the x where the roof labelled `ridge_label` starts (its ridge)."""
    cx = float(re.search(r'<circle cx="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    lines = svg.split("\n")
    label = next(k for k, line in enumerate(lines) if f">{ridge_label} " in line)
    start = float(re.search(r'<line x1="([\d.]+)"', lines[label - 1]).group(1))  # type: ignore[union-attr]
    return cx, start


def test_a_memory_bound_kernel_sits_left_of_the_ridge_at_its_dram_share_of_the_memory_roof():
    device, kernel = profiled("run_strided")
    assert device == "NVIDIA H200"
    roof = kernel.roofline
    assert roof is not None and roof.bound == "memory" and roof.kind == FP32
    assert roof.ridge == pytest.approx(67.0 / 4.8, rel=1e-5)  # the ridge: peak FLOP/s over peak bytes/s
    assert kernel.arithmetic_intensity == pytest.approx(kernel.flops / kernel.dram_bytes)
    assert kernel.arithmetic_intensity < roof.ridge
    # on the memory side, the share of the roof is the share of DRAM bandwidth (4.8 TB/s here)
    assert roof.pct_of_roof == pytest.approx(kernel.dram_tbs / 4.8 * 100, rel=1e-3)
    cx, ridge_x = circle_and_ridge_x(roofline_svg(roof, kernel.arithmetic_intensity, "strided"), "fp32")
    assert cx < ridge_x
    assert roofline_note(kernel) == (f"AI {figure(kernel.arithmetic_intensity)} FLOP/B · "
                                     f"{figure(roof.achieved_tflops)} TFLOP/s fp32 · 81% of the memory roof · "
                                     "memory-bound (ridge 14.0 FLOP/B)")


def test_an_fma_chain_sits_right_of_the_ridge_near_the_fp32_roof():
    _, kernel = profiled("run_fma_chain")
    roof = kernel.roofline
    assert roof is not None and roof.bound == "compute" and kernel.arithmetic_intensity > roof.ridge
    assert kernel.flops_by_kind[FP32] == kernel.flops  # FMA counts 2: 2 x 2 x 4096 steps per thread, and two more
    assert roof.achieved_tflops == pytest.approx(kernel.flops / (kernel.duration_us * 1e-6) / 1e12, rel=1e-5)
    assert 60 < roof.pct_of_roof <= 100  # SM throughput was 95%
    cx, ridge_x = circle_and_ridge_x(roofline_svg(roof, kernel.arithmetic_intensity, "fma_chain"), "fp32")
    assert cx > ridge_x
    assert "% of the compute roof · compute-bound" in roofline_note(kernel)


def test_the_mix_of_work_has_the_roof_of_its_time_at_each_peak():
    roof = make_roofline({BF16_TENSOR: 989e12, FP32: 67e12}, 1e12, 4.0, H200_SXM)  # 1 s of each at peak
    assert roof is not None
    assert roof.peak_tflops == pytest.approx((989 + 67) / 2, rel=1e-5) and roof.ridge == pytest.approx(
        roof.peak_tflops / 4.8, rel=1e-5)
    assert set(roof.roofs) == {FP32, BF16_TENSOR}
    assert roof.bound == "compute" and roof.pct_of_roof == pytest.approx(1056e12 / 4.0 / 1e12 / 528 * 100, rel=1e-5)
    assert "this kernel's mix 528" in roofline_svg(roof, 1056.0, "mixed")
    assert make_roofline({FP8_TENSOR: 1.0}, 1.0, 1.0, peaks_for("NVIDIA L4", {})) is None  # no roofs known
    assert make_roofline({}, 1.0, 1.0, H200_SXM) is None


def test_an_unknown_gpu_takes_the_roofs_ncu_measured():
    measured = dict(zip(PEAK_METRICS, (16896.0, 1.98e9, 5120.0, 9.375e8), strict=True))
    peaks = peaks_for("NVIDIA Imaginary", measured)
    assert peaks is not None and peaks.tflops == {FP32: pytest.approx(16896 * 2 * 1.98e9 / 1e12)}
    assert peaks.dram_tbs == pytest.approx(4.8)
    assert peaks_for("NVIDIA H200") is H200_SXM and peaks_for("NVIDIA Imaginary") is None


@pytest.mark.parametrize(("sass", "expected"), [
    ("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;", (BF16_TENSOR, 2 * 64 * 256 * 16 / 4)),
    ("@P0 HGMMA.64x64x8.F32.TF32 R24, gdesc[UR4], R24 ;", (TF32_TENSOR, 2 * 64 * 64 * 8 / 4)),
    ("QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24 ;", (FP8_TENSOR, 2 * 64 * 128 * 32 / 4)),
    ("HMMA.16816.F32.BF16 R4, R8, R12, R4 ;", (BF16_TENSOR, 2 * 16 * 8 * 16)),
    ("HMMA.1688.F32.TF32 R4, R8, R12, R4 ;", (TF32_TENSOR, 2 * 16 * 8 * 8)),
    ("IMMA.16832.S8.S8 R4, R8, R12, R4 ;", None),  # integer: not floating-point work
    ("FFMA R4, R8, R12, R4 ;", None),  # CUDA-core work is counted by ncu's thread counters
])
def test_each_mma_carries_its_shapes_flops(sass, expected):
    assert mma_flops(sass) == expected


def test_tensor_work_is_each_mma_times_its_executions_and_needs_the_cuda_core_counters():
    pcs = [{"pc": 0, "sass": "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24 ;", "metrics": {"inst_executed": 1024}},
           {"pc": 16, "sass": "FFMA R4, R8, R12, R4 ;", "metrics": {"inst_executed": 4096}}]
    assert tensor_flops(pcs) == {BF16_TENSOR: 1024 * 2 * 64 * 256 * 16 / 4}
    counters = {name: 0 for name in FLOP_COUNTERS} | {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000}
    assert flops_by_kind({"metrics": counters, "pcs": pcs}) == {FP32: 2000.0, BF16_TENSOR: 1024 * 2 * 64 * 256 * 16 / 4}
    assert flops_by_kind({"metrics": {}, "pcs": pcs}) is None  # a report without the counters: not counted


def test_a_profile_recorded_before_the_counters_says_to_profile_again():
    device, action = without_roofline_counters("run_strided")
    raw = {"device": device}
    kernel = kernel_profile(action, 0, {"planted.py": PLANTED}, device)
    assert kernel.flops is None and kernel.roofline is None and kernel.flops_by_kind == {}
    assert kernel.dram_bytes == pytest.approx(kernel.dram_tbs * 1e12 * kernel.duration_us * 1e-6, rel=1e-3)
    assert roofline_note(kernel).startswith("roofline: this profile has no FLOP counts")
    assert "roofline: this profile has no FLOP counts" in format_report(
        ProfileReport("run_strided", "planted.py", raw["device"], [kernel]))


def test_the_json_reads_back_with_the_roofline_and_without_it():
    device, kernel = profiled("run_strided")
    report = ProfileReport("run_strided", "planted.py", device, [kernel])
    data = json.loads(report.dumps())
    assert data["schema"] == 1
    assert set(data["kernels"][0]["roofline"]) == {"peaks", "dram_tbs", "roofs", "kind", "peak_tflops", "ridge",
                                                   "achieved_tflops", "bound", "pct_of_roof"}
    assert ProfileReport.from_json(data) == report
    older = json.loads(report.dumps())  # as written before the roofline fields
    for name in ("dram_bytes", "flops", "flops_by_kind", "arithmetic_intensity", "roofline"):
        del older["kernels"][0][name]
    read = ProfileReport.from_json(older).kernels[0]
    assert read.flops is None and read.roofline is None and read.lines == kernel.lines
    newer = json.loads(report.dumps())  # a later writer's fields are ignored
    newer["kernels"][0]["l2_roofline"] = {"dram_tbs": 1}
    newer["kernels"][0]["lines"][0]["warp_ids"] = [1, 2]
    assert ProfileReport.from_json(newer) == report
    broken = json.loads(report.dumps())  # the user's process wrote it: a bad roofline is dropped, not drawn
    broken["kernels"][0]["roofline"]["ridge"] = "wide"
    broken["kernels"][0]["flops"] = "many"
    broken["kernels"][0]["dram_bytes"] = math.inf
    read = ProfileReport.from_json(json.loads(json.dumps(broken))).kernels[0]
    assert read.roofline is None and read.flops is None and read.dram_bytes is None


def test_the_picture_is_plain_svg_with_its_labels_in_a_data_uri():
    device, kernel = profiled("run_strided")
    assert kernel.roofline is not None and kernel.arithmetic_intensity is not None
    svg = roofline_svg(kernel.roofline, kernel.arithmetic_intensity, "strided <on> H200 & co")
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" width="440" height="270"')
    assert "strided &lt;on&gt; H200 &amp; co" in svg  # text is escaped
    for label in ("DRAM 4.80 TB/s", "fp32 67.0", "bf16/fp16 tensor 989", "arithmetic intensity (FLOP/byte)",
                  "TFLOP/s", "81% of roof"):
        assert label in svg
    uri = data_uri(svg)
    assert uri.startswith("data:image/svg+xml;base64,") and " " not in uri
    assert base64.b64decode(uri.split(",", 1)[1]).decode() == svg


def test_ncu_is_asked_for_the_counters_and_asked_again_without_them_where_it_lacks_one():
    with_counters = command("ncu", "r", ["python", "k.py"])
    without = command("ncu", "r", ["python", "k.py"], optional=False)
    metrics = with_counters[with_counters.index("--metrics") + 1].split(",")
    assert set(OPTIONAL_METRICS) <= set(metrics)
    assert not set(OPTIONAL_METRICS) & set(without[without.index("--metrics") + 1].split(","))
    assert _unknown_metric("==PROF== Connected\n==ERROR== Failed to find metric smsp__sass_thread_inst_x.sum\n")
    assert not _unknown_metric("==PROF== Disconnected from process 12\n==WARNING== No kernels were profiled.\n")


def test_an_ncu_that_refuses_a_roofline_counter_profiles_again_without_them(tmp_path, monkeypatch):
    """A stand-in ncu that knows none of the roofline counters: the run is made once more without them."""
    from dsl.profiling.nsight import run_under_ncu

    log = tmp_path / "calls.txt"
    fake = tmp_path / "ncu"
    fake.write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$*" in
  *smsp__sass_thread_inst_executed_op_ffma_pred_on.sum*) echo "==ERROR== Failed to find metric x"; exit 1;;
esac
echo "==PROF== Disconnected"
""")
    fake.chmod(0o755)
    monkeypatch.setenv("KDSL_NCU", str(fake))
    done = run_under_ncu(["python", "k.py"], str(tmp_path / "report"))
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "dram__bytes.sum," in calls[0] and "dram__bytes.sum," not in calls[1]
    assert done.returncode == 0
