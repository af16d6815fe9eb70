"""Profile on GPU: what the GPU's own counters say of a jit function's kernels, per Python line.

A run goes through four rooms, in the order data flows:

- `nsight`: finds Nsight Compute (`ncu`, and its `ncu_report` module in `extras/python`), runs
  a child Python under it with a profiling range around one call, and reads the report into
  plain `RawAction` dicts (a kernel launch's scalar metrics, and per-instruction metrics with
  the Python file and line of each instruction, from the `.loc` line tables the compiler emits);
- `target`: that child: runs the module, makes the inputs as *Run on GPU* does (or takes an
  `examples=` entry), warms up (compiles and loads), then profiles exactly one call;
- `analysis`: raw actions -> `KernelProfile`s: duration, DRAM bandwidth, SM and tensor-pipe
  throughput, occupancy, hit rates, the limiter in words, and per line the share of warp
  stall samples with the top reasons, instructions executed, global sectors per request and
  shared-memory bank conflicts (`records` holds the types and their JSON schema); and the
  roofline: `flops` counts each launch's FLOPs per kind of work and its DRAM bytes, `peaks`
  holds each GPU's roofs, `roofline` places the launch under them (in words, and as an SVG
  picture for the editor's hover);
- `compare` and `table`: the CI gate against a baseline, and the terminal table.

`kdsl profile FILE::JIT` (`dsl.cli_profile`), `dsl.profile(fn, *args)` and the editor's
*Profile on GPU* all end in `ProfileReport`. CUPTI is not used: Nsight Compute's source
counters already sample every warp's stall reason per instruction, and its report maps each
instruction to its Python line.
"""

from __future__ import annotations

from typing import Any

from dsl.profiling.records import KernelProfile, LineProfile, ProfileReport

__all__ = ["KernelProfile", "LineProfile", "ProfileReport", "profile"]


def profile(fn: Any, *args: Any, **kwargs: Any) -> ProfileReport | None:
    """`dsl.profile(fn, *args)`: this call of the jit function `fn` profiled on the GPU.

    Nsight Compute needs to start the process it profiles, so this re-runs the current script
    (same interpreter, arguments and working directory) under `ncu`; in that run, this same
    call profiles itself and the script stops there. Side effects before the call happen twice.
    Returns a `ProfileReport` (None inside the run under ncu, which stops right after the call);
    raises `ProfilerUnavailable` when there is no GPU or no `ncu`."""
    from dsl.profiling.run import profile_call

    return profile_call(fn, args, kwargs)
