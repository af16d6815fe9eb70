"""What a kernel launch computed and moved: its floating-point operations per kind, and its DRAM bytes.

CUDA-core work comes from Nsight Compute's thread-level instruction counters, the ones its own
SpeedOfLight roofline sections read: `smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on`
for FP32 (and the `d*` FP64, `h*` FP16 ones), an FMA counting 2. They count threads whose
predicate was on, so divergence and masked-off lanes are not counted.

Tensor-core work has no counter every ncu names the same way on Hopper, so it is read from the
SASS the report already holds per instruction: each MMA's shape is in its opcode
(`HGMMA.64x256x16.F32.BF16`, `HMMA.16816.F32.BF16`, `QGMMA.64x128x32.F32.E4M3.E4M3`,
`DMMA.884`), and its warp-level `inst_executed` says how often it ran. An `HMMA`/`DMMA` is one
warp's m x n x k MMA (2mnk FLOPs); a `*GMMA` (wgmma) is one warpgroup's, issued by each of its
4 warps, so each warp-level execution carries a quarter of 2mnk. Integer MMAs (`IMMA`, `IGMMA`)
are not floating-point work and are left out.

Every metric named here is optional (`OPTIONAL_METRICS`): a report without them (an older
profile, or an ncu that lacks one) has no FLOP count, and the roofline says it needs a profile
again.
"""

from __future__ import annotations

import re
from typing import Any

from dsl.profiling.peaks import (
    BF16_TENSOR,
    FP8_TENSOR,
    FP16,
    FP32,
    FP64,
    FP64_TENSOR,
    PEAK_METRICS,
    TF32_TENSOR,
)

_THREAD_INST = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
# counter -> (kind of work, FLOPs per thread instruction)
FLOP_COUNTERS: dict[str, tuple[str, int]] = {
    _THREAD_INST.format(op): (kind, 2 if op.endswith("fma") else 1)
    for prefix, kind in (("f", FP32), ("d", FP64), ("h", FP16))
    for op in (prefix + "add", prefix + "mul", prefix + "fma")
}
DRAM_BYTES = "dram__bytes.sum"
OPTIONAL_METRICS = (*FLOP_COUNTERS, DRAM_BYTES, *PEAK_METRICS)

WARPS_PER_WARPGROUP = 4
_GMMA = re.compile(r"([HQDB])GMMA\.(\d+)x(\d+)x(\d+)((?:\.\w+)*)")
_MMA = re.compile(r"([HD])MMA\.(\d+)((?:\.\w+)*)")


def _opcode(sass: str) -> str:
    text = sass.strip()
    if text.startswith("@"):  # a predicate guard: `@P0 HGMMA...`
        text = text.split(None, 1)[1] if " " in text else ""
    return text.split(None, 1)[0] if text else ""


def _tensor_kind(unit: str, types: str) -> str | None:
    if unit == "D" or "F64" in types:
        return FP64_TENSOR
    if "TF32" in types:
        return TF32_TENSOR
    if "E4M3" in types or "E5M2" in types:
        return FP8_TENSOR
    if "BF16" in types or "F16" in types:
        return BF16_TENSOR
    return None


def _mma_shape(digits: str) -> tuple[int, int, int] | None:
    """`16816` -> (16, 8, 16), `1688` -> (16, 8, 8), `884` -> (8, 8, 4): m, then n (one digit), then k."""
    m = 16 if digits.startswith("16") else 8 if digits.startswith("8") else 0
    rest = digits[len(str(m)):] if m else ""
    if len(rest) < 2:
        return None
    return m, int(rest[0]), int(rest[1:])


def mma_flops(sass: str) -> tuple[str, float] | None:
    """(kind, FLOPs per warp-level execution) of a floating-point MMA instruction, else None."""
    opcode = _opcode(sass)
    if m := _GMMA.fullmatch(opcode):
        kind = _tensor_kind(m.group(1), m.group(5))
        shape = int(m.group(2)) * int(m.group(3)) * int(m.group(4))
        return (kind, 2.0 * shape / WARPS_PER_WARPGROUP) if kind else None
    if m := _MMA.fullmatch(opcode):
        kind, shape = _tensor_kind(m.group(1), m.group(3)), _mma_shape(m.group(2))
        if kind is None or shape is None:
            return None
        return kind, 2.0 * shape[0] * shape[1] * shape[2]
    return None


def tensor_flops(pcs: list[dict[str, Any]]) -> dict[str, float]:
    """Tensor-core FLOPs per kind: each MMA instruction's FLOPs times its warp-level executions."""
    out: dict[str, float] = {}
    for pc in pcs:
        executed = pc.get("metrics", {}).get("inst_executed")
        found = mma_flops(str(pc.get("sass") or "")) if isinstance(executed, int | float) and executed else None
        if found:
            kind, per = found
            out[kind] = out.get(kind, 0.0) + per * executed
    return out


def flops_by_kind(raw: dict[str, Any]) -> dict[str, float] | None:
    """The launch's FLOPs per kind (kinds with none left out), or None when the report has no
    CUDA-core counters (so the count would be a guess)."""
    metrics = raw.get("metrics", {})
    counted = {name: metrics[name] for name in FLOP_COUNTERS if isinstance(metrics.get(name), int | float)}
    if not counted:
        return None
    out: dict[str, float] = {}
    for name, value in counted.items():
        kind, per = FLOP_COUNTERS[name]
        if value:
            out[kind] = out.get(kind, 0.0) + float(value) * per
    for kind, value in tensor_flops(raw.get("pcs", [])).items():
        out[kind] = out.get(kind, 0.0) + value
    return out


def dram_bytes(metrics: dict[str, Any], duration_ns: float | None, bytes_per_s: float | None) -> float | None:
    """DRAM bytes read and written: the counter, else its rate over the duration."""
    value = metrics.get(DRAM_BYTES)
    if isinstance(value, int | float):
        return float(value)
    if duration_ns is not None and bytes_per_s is not None:
        return bytes_per_s * duration_ns * 1e-9
    return None
