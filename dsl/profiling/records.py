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
                  "sass": [{"offset", "samples", "top_stall"}]}]}

Shares are fractions of 1 (`stall_share` of all the kernel's warp samples; a stall's share
of its line's samples); percentages end in `_pct`. A figure the counters did not give is
null. `lines` is sorted hottest first; `sass` lists the sampled instructions by offset (the
samples as sampled, where the warps waited). New fields may be added; none is renamed or removed
without a new schema number.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
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
                lines = [LineProfile(**{**line, "top_stalls": [(str(r), float(s)) for r, s in line["top_stalls"]]})
                         for line in k.get("lines", [])]
                sass = [InstructionSamples(**i) for i in k.get("sass", [])]
                kernels.append(KernelProfile(**{**k, "lines": lines, "sass": sass}))
            return cls(str(data["function"]), str(data["file"]), str(data["device"]), kernels)
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a kdsl profile: {err}") from err
