"""The roofs of a roofline: each GPU's peak DRAM bandwidth and peak FLOP rate per kind of work.

A kernel's floating-point work is counted per kind (`FLOP_KINDS`): the CUDA cores' FP32, FP64
and FP16, and the tensor cores' TF32, BF16/FP16, FP8 and FP64 paths. Each kind has its own
compute roof; the DRAM roof is shared.

Known GPUs take the dense figures of NVIDIA's datasheets (the sparsity figures are twice these
and no kdsl kernel is sparse). A GPU not in the table takes what Nsight Compute measured for
it at the clocks it ran at (the same expressions as ncu's own SpeedOfLight_RooflineChart
section: peak FFMA per cycle x 2 x SM clock, peak DRAM bytes per cycle x DRAM clock): then
only the FP32 roof is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FP32, FP64, FP16 = "fp32", "fp64", "fp16"
TF32_TENSOR, BF16_TENSOR, FP8_TENSOR, FP64_TENSOR = "tf32 tensor", "bf16/fp16 tensor", "fp8 tensor", "fp64 tensor"
FLOP_KINDS = (FP32, FP64, FP16, TF32_TENSOR, BF16_TENSOR, FP8_TENSOR, FP64_TENSOR)
TENSOR_KINDS = (TF32_TENSOR, BF16_TENSOR, FP8_TENSOR, FP64_TENSOR)


@dataclass(frozen=True)
class DevicePeaks:
    """One GPU's roofs: DRAM in TB/s, compute per kind in TFLOP/s (dense), and where they come from."""

    device: str
    dram_tbs: float
    tflops: dict[str, float] = field(default_factory=dict)
    source: str = ""


# NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column; the TF32/BF16/FP16/FP8 tensor figures
# there are "with sparsity": the dense ones are half): FP64 34 TFLOPS, FP64 Tensor Core 67,
# FP32 67, TF32 Tensor Core 989 (495 dense), BF16/FP16 Tensor Core 1,979 (989 dense), FP8 Tensor
# Core 3,958 (1,979 dense); GPU memory 141 GB HBM3e at 4.8 TB/s. FP16 on the CUDA cores (HFMA2:
# two FMAs per lane per instruction) runs at twice FP32: the NVIDIA H100 Tensor Core GPU
# Architecture whitepaper lists 133.8 TFLOPS "Peak FP16 (non-Tensor)" for the same GH100 at the
# same clocks.
_HOPPER_SXM = {FP32: 67.0, FP64: 34.0, FP16: 133.8, TF32_TENSOR: 495.0, BF16_TENSOR: 989.0, FP8_TENSOR: 1979.0,
               FP64_TENSOR: 67.0}
H200_SXM = DevicePeaks("NVIDIA H200", 4.8, _HOPPER_SXM, "NVIDIA H200 datasheet (SXM, dense)")
# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: the same compute; HBM3 at 3.35 TB/s.
H100_SXM = DevicePeaks("NVIDIA H100 80GB HBM3", 3.35, _HOPPER_SXM, "NVIDIA H100 datasheet (SXM, dense)")

KNOWN: dict[str, DevicePeaks] = {p.device: p for p in (H200_SXM, H100_SXM)}  # by ncu's device name

# What ncu measures of the GPU it profiles (all four are in its own SpeedOfLight_RooflineChart
# section, for every architecture): the roofs of a GPU not in `KNOWN`.
PEAK_FFMA_PER_CYCLE = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
PEAK_DRAM_BYTES_PER_CYCLE = "dram__bytes.sum.peak_sustained"
DRAM_CLOCK = "dram__cycles_elapsed.avg.per_second"
PEAK_METRICS = (PEAK_FFMA_PER_CYCLE, SM_CLOCK, PEAK_DRAM_BYTES_PER_CYCLE, DRAM_CLOCK)


def peaks_for(device: str, measured: dict[str, float] | None = None) -> DevicePeaks | None:
    """The roofs of `device` (ncu's name for it): the datasheet's where known, else what ncu
    measured (`measured` holds `PEAK_METRICS`), else None."""
    if device in KNOWN:
        return KNOWN[device]
    figures = measured or {}
    ffma, sm_clock = figures.get(PEAK_FFMA_PER_CYCLE), figures.get(SM_CLOCK)
    dram, dram_clock = figures.get(PEAK_DRAM_BYTES_PER_CYCLE), figures.get(DRAM_CLOCK)
    if not (dram and dram_clock):
        return None
    tflops = {FP32: ffma * 2 * sm_clock / 1e12} if ffma and sm_clock else {}
    return DevicePeaks(device or "this GPU", dram * dram_clock / 1e12, tflops,
                       "Nsight Compute's peaks for this GPU at the clocks it ran")
