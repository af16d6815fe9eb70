"""Raw Nsight Compute figures -> `KernelProfile`s: the kernel's summary and its Python lines.

A `RawAction` is what `nsight.read_report` takes out of a report for one kernel launch, as
plain JSON-able data (so a report read on a GPU machine can be analysed anywhere):

    {"name": "saxpy", "metrics": {"gpu__time_duration.sum": 3.1e5, ...},
     "pcs": [{"pc": 0x7f..., "file": "/path/k.py", "line": 9, "metrics": {"inst_executed": 524288, ...}}]}

Per line, instructions are summed over the line's PCs; the stall share is the line's warp
samples (`smsp__pcsamp_sample_count`) over the kernel's; sectors per request is
`memory_l2_theoretical_sectors_global` over the warp-level instructions of the line's global
loads and stores, beside the ideal a coalesced access of the same width needs (`..._ideal`:
4 for a warp of f32); bank conflicts are shared-memory wavefronts beyond the ideal
(`memory_l1_wavefronts_shared - memory_l1_wavefronts_shared_ideal`).

Where a warp waits is not always the line that made it wait: a warp stalls on the long
scoreboard at the first instruction that *uses* a global load's register, often a later
line (`out[i] = a + b` waits for `b = y[j]`). `charge_waits_to_loads` moves those samples to
the load that writes the register the waiting instruction reads (found in the SASS, walking
back from the waiting instruction), so the line of the slow load is the hot one; a wait
whose load is not found stays where it was sampled.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from dsl.profiling.flops import dram_bytes, flops_by_kind
from dsl.profiling.peaks import PEAK_METRICS, peaks_for
from dsl.profiling.records import InstructionSamples, KernelProfile, LineProfile
from dsl.profiling.roofline import make_roofline

RawAction = dict[str, Any]

# kernel-level metrics: field -> the names to try, first found wins
KERNEL_METRICS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("gpu__time_duration.sum",),
    "dram_bytes_per_s": ("dram__bytes.sum.per_second",),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "tensor_pct": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
                   "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers": ("launch__registers_per_thread",),
    "smem_static": ("launch__shared_mem_per_block_static",),
    "smem_dynamic": ("launch__shared_mem_per_block_dynamic",),
    "l1_hit": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit": ("lts__t_sector_hit_rate.pct",),
    "grid": ("launch__grid_size",),
    "block": ("launch__block_size",),
}
ALL_KERNEL_METRICS = tuple(name for names in KERNEL_METRICS.values() for name in names)

SAMPLES = "smsp__pcsamp_sample_count"
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
# stall reason (the metric's suffix) -> what a kernel author reads
STALL_REASONS = {
    "long_scoreboard": "long scoreboard (global/local memory)",
    "short_scoreboard": "short scoreboard (shared memory, MUFU)",
    "barrier": "barrier",
    "membar": "memory barrier",
    "mio_throttle": "MIO throttle",
    "lg_throttle": "LG throttle (global/local queue)",
    "tex_throttle": "TEX throttle",
    "math_pipe_throttle": "math pipe throttle",
    "wait": "fixed-latency wait",
    "not_selected": "not selected",
    "dispatch_stall": "dispatch stall",
    "branch_resolving": "branch resolving",
    "drain": "drain",
    "imc_miss": "constant cache miss",
    "misc": "misc",
    "no_instructions": "no instructions",
    "sleeping": "sleeping",
    "warpgroup_arrive": "warpgroup arrive",
    "gmma": "wgmma",
    "selected": "issued",  # sampled while issuing: not a stall
}
NOT_A_STALL = {"selected"}
PER_PC_METRICS = (
    SAMPLES, "inst_executed",
    "memory_l2_theoretical_sectors_global", "memory_l2_theoretical_sectors_global_ideal",
    "memory_l1_tag_requests_global", "memory_l1_wavefronts_shared", "memory_l1_wavefronts_shared_ideal",
    *(STALL_PREFIX + reason for reason in STALL_REASONS),
)
TOP_STALLS = 3


def _figure(metrics: dict[str, Any], key: str) -> float | None:
    for name in KERNEL_METRICS[key]:
        value = metrics.get(name)
        if isinstance(value, int | float):
            return float(value)
    return None


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def limiter(dram_pct: float | None, memory_pct: float | None, sm_pct: float | None,
            tensor_pct: float | None, top_stall: str | None) -> str:
    """The kernel's bound in words: memory-, compute- or latency-bound, with the figure that says so.

    Nsight Compute's own rule of thumb: a unit at 60% or more of its peak bounds the kernel;
    below that on every unit the kernel waits on latency (and the top stall says on what)."""
    dram, memory, sm = dram_pct or 0.0, memory_pct or 0.0, sm_pct or 0.0
    if max(dram, memory) >= 60 and max(dram, memory) >= sm:
        if dram >= memory - 5:
            return f"memory-bound: {dram:.0f}% of DRAM peak"
        return f"memory-bound: L1/L2 at {memory:.0f}% of peak (DRAM {dram:.0f}%)"
    if sm >= 60:
        tensor = f", tensor pipe {tensor_pct:.0f}%" if tensor_pct is not None and tensor_pct >= 10 else ""
        return f"compute-bound: SM at {sm:.0f}% of peak{tensor}"
    why = f"; warps mostly stall on {top_stall}" if top_stall else ""
    return f"latency-bound: SM {sm:.0f}%, DRAM {dram:.0f}% of peak{why}"


_REGISTER = re.compile(r"\bR(\d+)\b")
_WIDTH = re.compile(r"\.(64|128)\b")
GLOBAL_LOADS = ("LDG", "LD", "LDL", "ATOMG", "ATOM", "RED", "TLD", "TEX")
LOOK_BACK = 96  # instructions searched for the load a waiting instruction needs


def _opcode_and_operands(sass: str) -> tuple[str, list[str]]:
    text = sass.strip().rstrip(";")
    if text.startswith("@"):
        text = text.split(None, 1)[1] if " " in text else ""
    opcode, _, rest = text.partition(" ")
    return opcode, [o.strip() for o in rest.split(",")] if rest.strip() else []


def _written(sass: str) -> set[int]:
    """Registers a load writes: its first operand, widened by `.64` / `.128`."""
    opcode, operands = _opcode_and_operands(sass)
    if not operands or not (m := _REGISTER.fullmatch(operands[0].split(".")[0])):
        return set()
    width = _WIDTH.search(opcode)
    count = {"64": 2, "128": 4}[width.group(1)] if width else 1
    return {int(m.group(1)) + k for k in range(count)}


def _read(sass: str) -> set[int]:
    opcode, operands = _opcode_and_operands(sass)
    stores = opcode.startswith(("ST", "RED", "ATOM"))  # a store's first operand is an address, read too
    sources = operands if stores else operands[1:]
    return {int(r) for operand in sources for r in _REGISTER.findall(operand)}


def charge_waits_to_loads(pcs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The PCs with each long-scoreboard wait moved to the global load that feeds it (see the
    module's docstring); PCs without SASS text are left as they are."""
    ordered = sorted(pcs, key=lambda e: e["pc"])
    out = [{**e, "metrics": dict(e.get("metrics", {}))} for e in ordered]
    reason = STALL_PREFIX + "long_scoreboard"
    for index, entry in enumerate(out):
        waits = entry["metrics"].get(reason, 0.0)
        sass = entry.get("sass")
        if not waits or not sass:
            continue
        needed = _read(sass)
        for back in range(index - 1, max(index - 1 - LOOK_BACK, -1), -1):
            producer = out[back]
            text = producer.get("sass") or ""
            opcode = _opcode_and_operands(text)[0]
            hit = needed & _written(text)
            if hit and opcode.split(".")[0] in GLOBAL_LOADS:
                for name in (reason, SAMPLES):
                    moved = min(waits, entry["metrics"].get(name, 0.0))
                    entry["metrics"][name] = entry["metrics"].get(name, 0.0) - moved
                    producer["metrics"][name] = producer["metrics"].get(name, 0.0) + moved
                break
            needed -= _written(text)  # overwritten later by another instruction: not this load's
            if not needed:
                break
    return out


def line_profiles(raw: RawAction, sources: dict[str, list[str]] | None = None) -> list[LineProfile]:
    """The kernel's Python lines, hottest first (then by file and line)."""
    per_line: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pc in charge_waits_to_loads(raw.get("pcs", [])):
        file, line = pc.get("file"), pc.get("line")
        if not file or not isinstance(line, int) or line <= 0:
            continue
        sums = per_line[(file, line)]
        for name, value in pc.get("metrics", {}).items():
            if isinstance(value, int | float):
                sums[name] += value
        if "memory_l2_theoretical_sectors_global" in pc.get("metrics", {}):  # a global load or store
            sums["memory_instructions"] += pc["metrics"].get("inst_executed", 0.0)
    total = sum(s.get(SAMPLES, 0.0) for s in per_line.values())
    out = []
    for (file, line), sums in per_line.items():
        samples = sums.get(SAMPLES, 0.0)
        stalls = [(STALL_REASONS[reason], sums.get(STALL_PREFIX + reason, 0.0) / samples)
                  for reason in STALL_REASONS if reason not in NOT_A_STALL and samples > 0
                  and sums.get(STALL_PREFIX + reason, 0.0) > 0]
        stalls.sort(key=lambda item: -item[1])
        requests = sums.get("memory_instructions", 0.0)  # warp-level requests
        sectors = sums.get("memory_l2_theoretical_sectors_global")
        ideal = sums.get("memory_l2_theoretical_sectors_global_ideal")
        wavefronts = sums.get("memory_l1_wavefronts_shared")
        ideal_wavefronts = sums.get("memory_l1_wavefronts_shared_ideal")
        text = (sources or {}).get(file, [])
        out.append(LineProfile(
            file=file, line=line,
            stall_share=samples / total if total else 0.0,
            top_stalls=[(reason, round(share, 4)) for reason, share in stalls[:TOP_STALLS]],
            samples=int(samples), instructions=int(sums.get("inst_executed", 0.0)),
            sectors_per_request=round(sectors / requests, 2) if requests and sectors is not None else None,
            ideal_sectors_per_request=round(ideal / requests, 2) if requests and ideal is not None else None,
            bank_conflicts=(int(max(wavefronts - ideal_wavefronts, 0.0))
                            if wavefronts is not None and ideal_wavefronts is not None else None),
            source=text[line - 1].strip() if line <= len(text) else "",
        ))
    out.sort(key=lambda lp: (-lp.samples, lp.file, lp.line))
    return out


def instruction_samples(raw: RawAction) -> list[InstructionSamples]:
    """Each sampled instruction by its offset from the kernel's first (lowest) PC."""
    pcs = raw.get("pcs", [])
    if not pcs:
        return []
    base = min(int(pc["pc"]) for pc in pcs)
    out = []
    for pc in sorted(pcs, key=lambda e: e["pc"]):
        metrics = pc.get("metrics", {})
        samples = int(metrics.get(SAMPLES, 0))
        if not samples:
            continue
        stalls = {reason: metrics.get(STALL_PREFIX + reason, 0) for reason in STALL_REASONS
                  if reason not in NOT_A_STALL}
        top = max(stalls, key=lambda r: stalls[r]) if any(stalls.values()) else "selected"
        out.append(InstructionSamples(int(pc["pc"]) - base, samples, STALL_REASONS[top]))
    return out


def kernel_profile(raw: RawAction, launch: int, sources: dict[str, list[str]] | None = None,
                   device: str = "") -> KernelProfile:
    """One launch's summary, lines and roofline (under `device`'s roofs: `dsl.profiling.peaks`)."""
    metrics = raw.get("metrics", {})
    lines = line_profiles(raw, sources)
    samples: dict[str, float] = defaultdict(float)
    for lp in lines:
        for reason, share in lp.top_stalls:
            samples[reason] += share * lp.samples
    top = max(samples, key=lambda r: samples[r]) if samples else None
    duration = _figure(metrics, "duration_ns")
    bandwidth = _figure(metrics, "dram_bytes_per_s")
    static, dynamic = _figure(metrics, "smem_static"), _figure(metrics, "smem_dynamic")
    dram, memory, sm, tensor = (_figure(metrics, key) for key in ("dram_pct", "memory_pct", "sm_pct", "tensor_pct"))
    work = flops_by_kind(raw)
    moved = dram_bytes(metrics, duration, bandwidth)
    flops = None if work is None else sum(work.values())
    measured = {name: float(metrics[name]) for name in PEAK_METRICS if isinstance(metrics.get(name), int | float)}
    roofline = None if work is None else make_roofline(work, moved, None if duration is None else duration * 1e-9,
                                                       peaks_for(device, measured))
    return KernelProfile(
        name=str(raw.get("name", "?")), launch=launch,
        grid=_int(_figure(metrics, "grid")), block=_int(_figure(metrics, "block")),
        duration_us=None if duration is None else round(duration / 1e3, 3),
        dram_tbs=None if bandwidth is None else round(bandwidth / 1e12, 3),
        dram_pct_of_peak=dram, sm_throughput_pct=sm, tensor_pipe_pct=tensor,
        achieved_occupancy_pct=_figure(metrics, "achieved_occupancy"),
        theoretical_occupancy_pct=_figure(metrics, "theoretical_occupancy"),
        registers=_int(_figure(metrics, "registers")),
        shared_memory_bytes=None if static is None and dynamic is None else int((static or 0) + (dynamic or 0)),
        l1_hit_pct=_figure(metrics, "l1_hit"), l2_hit_pct=_figure(metrics, "l2_hit"),
        limiter=limiter(dram, memory, sm, tensor, top),
        lines=lines,
        sass=instruction_samples(raw),
        dram_bytes=moved, flops=flops, flops_by_kind=work or {},
        arithmetic_intensity=flops / moved if flops is not None and moved else None,
        roofline=roofline,
    )
