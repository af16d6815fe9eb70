"""The terminal form of a `ProfileReport`: each launch's summary and roofline, then its hottest lines."""

from __future__ import annotations

import os

from dsl.profiling.records import KernelProfile, LineProfile, ProfileReport
from dsl.profiling.roofline import roofline_note


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def summary(kernel: KernelProfile) -> str:
    """`DRAM 3.90 TB/s (81% of peak) · SM 8% · ...`: the speed-of-light line."""
    parts = [f"DRAM {kernel.dram_tbs:.2f} TB/s ({_pct(kernel.dram_pct_of_peak)} of peak)"
             if kernel.dram_tbs is not None else "DRAM -",
             f"SM {_pct(kernel.sm_throughput_pct)}"]
    if kernel.tensor_pipe_pct:
        parts.append(f"tensor pipe {_pct(kernel.tensor_pipe_pct)}")
    parts.append(f"occupancy {_pct(kernel.achieved_occupancy_pct)} of {_pct(kernel.theoretical_occupancy_pct)} "
                 "theoretical")
    if kernel.registers is not None:
        parts.append(f"{kernel.registers} registers")
    if kernel.shared_memory_bytes:
        parts.append(f"smem {kernel.shared_memory_bytes} B")
    parts.append(f"L1 hit {_pct(kernel.l1_hit_pct)} · L2 hit {_pct(kernel.l2_hit_pct)}")
    return " · ".join(parts)


def line_note(line: LineProfile) -> str:
    """`31% stalls · long scoreboard`, and what its memory accesses do."""
    note = f"{line.stall_share * 100:.0f}% stalls"
    if line.top_stalls:
        note += " · " + line.top_stalls[0][0].split(" (")[0]
    if line.uncoalesced:
        note += (f" · uncoalesced ({line.sectors_per_request:g} sectors/request, "
                 f"ideal {line.ideal_sectors_per_request:g})")
    if line.bank_conflicts:
        note += f" · {line.bank_conflicts} bank conflicts"
    return note


def _memory(line: LineProfile) -> str:
    if line.sectors_per_request is None:
        return ""
    text = f"{line.sectors_per_request:g}"
    if line.ideal_sectors_per_request is not None and line.uncoalesced:
        text += f" (ideal {line.ideal_sectors_per_request:g}, uncoalesced)"
    return text


def format_report(report: ProfileReport, max_lines: int = 12) -> str:
    launches = len(report.kernels)
    plural = "es" if launches != 1 else ""
    out = [f"{report.function} on {report.device or 'the GPU'}: {launches} kernel launch{plural}"]
    for k in report.kernels:
        shape = f"grid {k.grid} x block {k.block}" if k.grid is not None else ""
        duration = f"{k.duration_us:.2f} us" if k.duration_us is not None else "-"
        out += ["", f"{k.name} (launch {k.launch}{', ' + shape if shape else ''}): {duration} · {k.limiter}",
                "  " + summary(k), "  " + roofline_note(k)]
        rows = [line for line in k.lines if line.samples or line.instructions][:max_lines]
        if not rows:
            continue
        out.append(f"  {'stalls':>6}  {'line':<22} {'top stalls':<62} {'instr':>10}  {'sectors/req':<26} source")
        for line in rows:
            where = f"{os.path.basename(line.file)}:{line.line}"
            stalls = ", ".join(f"{reason.split(' (')[0]} {share * 100:.0f}%" for reason, share in line.top_stalls)
            conflicts = f" [{line.bank_conflicts} bank conflicts]" if line.bank_conflicts else ""
            out.append(f"  {line.stall_share * 100:>5.1f}%  {where:<22} {stalls:<62} {line.instructions:>10}  "
                       f"{_memory(line):<26} {line.source}{conflicts}")
    return "\n".join(out)
