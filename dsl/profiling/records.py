"""What a profile says, as plain records with a stable JSON form (`SCHEMA_VERSION`).

`kdsl profile --json` writes `ProfileReport.to_json()`:

    {"schema": 1, "device": "NVIDIA H200", "function": "run_saxpy", "file": "/path/k.py",
     "kernels": [{"name", "launch", "grid", "block", "duration_us", "dram_tbs",
                  "dram_pct_of_peak", "sm_throughput_pct", "tensor_pipe_pct",
                  "achieved_occupancy_pct", "theoretical_occupancy_pct", "registers",
                  "shared_memory_bytes", "l1_hit_pct", "l2_hit_pct", "limiter",
                  "lines": [{"file", "line", "stall_share", "top_stalls": [[reason, share], ...],
                             "samples", "instructions", "sectors_per_request",
                             "ideal_sectors_per_request", "bank_conflicts", "source"}],
                  "sass": [{"offset", "samples", "top_stall"}],
                  "dram_bytes", "flops", "flops_by_kind": {kind: flops},
                  "arithmetic_intensity",
                  "roofline": {"peaks", "dram_tbs", "roofs": {kind: tflops}, "kind",
                               "peak_tflops", "ridge", "achieved_tflops", "bound", "pct_of_roof"}}]}

Shares are fractions of 1 (`stall_share` of all the kernel's warp samples; a stall's share
of its line's samples); percentages end in `_pct`. A figure the counters did not give is
null. `lines` is sorted hottest first; `sass` lists the sampled instructions by offset (the
samples as sampled, where the warps waited). New fields may be added; none is renamed or removed
without a new schema number, and a reader ignores fields it does not know.

The roofline fields came later in schema 1 (`dsl.profiling.flops` counts the work,
`dsl.profiling.roofline` places it): a profile written before them has none of them, and one
whose ncu gave no FLOP counters has `flops` null. `flops_by_kind` splits the FLOPs by the roof
they run under (`fp32`, `fp64`, `fp16` on the CUDA cores; `tf32 tensor`, `bf16/fp16 tensor`,
`fp8 tensor`, `fp64 tensor`); `arithmetic_intensity` is FLOPs per DRAM byte. `roofline` is null
where a roof is unknown: `roofs` are the compute roofs in TFLOP/s, `kind` the work that bounds
the kernel and `peak_tflops` the roof for its mix of work, `ridge` the intensity (FLOP/byte)
where that roof meets the DRAM roof `dram_tbs`, `bound` "memory" or "compute" (the side of the
ridge the kernel is on) and `pct_of_roof` its FLOP rate over what the roofs allow at its intensity.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 1


@dataclass
class LineProfile:
    """One Python line of a kernel (or of a helper it inlined), as the GPU ran it."""

    file: str
    line: int
    stall_share: float  # this line's share of all warp samples of the kernel
    top_stalls: list[tuple[str, float]]  # (reason, share of this line's samples), largest first
    samples: int  # warp samples at this line's instructions
    instructions: int  # warp-level instructions executed
    sectors_per_request: float | None = None  # global memory: 32-byte sectors per request
    ideal_sectors_per_request: float | None = None  # what a coalesced access of that width needs
    bank_conflicts: int | None = None  # shared memory: wavefronts beyond the ideal
    source: str = ""  # the line's text

    @property
    def uncoalesced(self) -> bool:
        """More sectors per request than the access needs (by a quarter or more)."""
        return (self.sectors_per_request is not None and self.ideal_sectors_per_request is not None
                and self.sectors_per_request > 1.25 * self.ideal_sectors_per_request)


@dataclass
class InstructionSamples:
    """One SASS instruction's warp samples: `offset` from the kernel's first instruction (the
    `/*0080*/` of the SASS view), its samples and its top stall reason."""

    offset: int
    samples: int
    top_stall: str


@dataclass
class Roofline:
    """Where a kernel launch sits under its GPU's roofs (see the module docstring)."""

    peaks: str  # where the roofs come from: a datasheet, or what ncu measured
    dram_tbs: float  # the memory roof
    roofs: dict[str, float]  # kind of work -> its compute roof, TFLOP/s
    kind: str  # the kind of work that takes the most of the kernel's time at peak
    peak_tflops: float  # the compute roof for the kernel's mix of work
    ridge: float  # FLOP/byte where that roof meets the memory roof
    achieved_tflops: float
    bound: str  # "memory" (left of the ridge) or "compute"
    pct_of_roof: float  # the FLOP rate over what the roofs allow at the kernel's intensity, 0-100


@dataclass
class KernelProfile:
    """One kernel launch of the profiled call."""

    name: str
    launch: int  # its place among the call's launches, from 0
    grid: int | None
    block: int | None
    duration_us: float | None
    dram_tbs: float | None
    dram_pct_of_peak: float | None
    sm_throughput_pct: float | None
    tensor_pipe_pct: float | None
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    registers: int | None
    shared_memory_bytes: int | None
    l1_hit_pct: float | None
    l2_hit_pct: float | None
    limiter: str
    lines: list[LineProfile] = field(default_factory=list)
    sass: list[InstructionSamples] = field(default_factory=list)  # per instruction, for the SASS view
    dram_bytes: float | None = None  # DRAM bytes read and written
    flops: float | None = None  # floating-point operations executed; None: not counted
    flops_by_kind: dict[str, float] = field(default_factory=dict)
    arithmetic_intensity: float | None = None  # FLOPs per DRAM byte
    roofline: Roofline | None = None


@dataclass
class ProfileReport:
    """Every kernel launch of one profiled call of a jit function."""

    function: str
    file: str
    device: str
    kernels: list[KernelProfile]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": SCHEMA_VERSION, **data}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProfileReport:
        """Reads what `to_json` wrote; raises `ValueError` for another schema or a malformed one."""
        if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
            raise ValueError(f"not a kdsl profile of schema {SCHEMA_VERSION} (got schema {data.get('schema')!r})"
                             if isinstance(data, dict) else "not a kdsl profile: a JSON object was expected")
        try:
            kernels = []
            for k in data["kernels"]:
                lines = [LineProfile(**{**_known(LineProfile, line),
                                        "top_stalls": [(str(r), float(s)) for r, s in line["top_stalls"]]})
                         for line in k.get("lines", [])]
                sass = [InstructionSamples(**_known(InstructionSamples, i)) for i in k.get("sass", [])]
                roofline = _work_figures(k)
                kernels.append(KernelProfile(**{**_known(KernelProfile, k), "lines": lines, "sass": sass, **roofline}))
            return cls(str(data["function"]), str(data["file"]), str(data["device"]), kernels)
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not a kdsl profile: {err}") from err


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """`data`'s fields that `cls` has: a later writer's new fields are left out, not an error."""
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in data.items() if key in names}


def _figure(value: Any) -> float | None:
    """A finite number as a float, else None (a bool is not a figure)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


_ROOFLINE_FIGURES = ("dram_tbs", "peak_tflops", "ridge", "achieved_tflops", "pct_of_roof")


def _roofline(data: Any) -> Roofline | None:
    """A roofline's JSON form, or None where any of its figures is not a number >= 0."""
    if not isinstance(data, dict) or not isinstance(data.get("roofs"), dict) or data.get("bound") not in (
            "memory", "compute"):
        return None
    figures = {name: _figure(data.get(name)) for name in _ROOFLINE_FIGURES}
    roofs = {str(kind): _figure(value) for kind, value in data["roofs"].items()}
    checked = {**figures, **{f"roof {kind}": value for kind, value in roofs.items()}}
    if any(value is None or value < 0 for value in checked.values()):
        return None
    number = {name: float(value or 0.0) for name, value in figures.items()}
    return Roofline(peaks=str(data.get("peaks", "")), dram_tbs=number["dram_tbs"],
                    roofs={kind: float(value or 0.0) for kind, value in roofs.items()}, kind=str(data.get("kind", "")),
                    peak_tflops=number["peak_tflops"], ridge=number["ridge"],
                    achieved_tflops=number["achieved_tflops"], bound=str(data["bound"]),
                    pct_of_roof=number["pct_of_roof"])


def _work_figures(k: dict[str, Any]) -> dict[str, Any]:
    """The roofline fields of a kernel's JSON form, checked (the JSON came from the user's own
    process): a figure that is not a finite number is none, a malformed roofline is none."""
    by_kind = k.get("flops_by_kind")
    return {
        "dram_bytes": _figure(k.get("dram_bytes")), "flops": _figure(k.get("flops")),
        "arithmetic_intensity": _figure(k.get("arithmetic_intensity")),
        "flops_by_kind": ({str(kind): float(v) for kind, v in by_kind.items() if _figure(v) is not None}
                          if isinstance(by_kind, dict) else {}),
        "roofline": _roofline(k.get("roofline")),
    }
