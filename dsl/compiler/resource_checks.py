"""What ptxas's figures for a kernel call for: DSL501 (spills) and DSL502 (low occupancy).

One place for the rule, used by the compiler after its own ptxas run (`api`) and by
`kdsl lint`, which assembles many modules in one run (`lsp.lint.assembly`).
"""

from __future__ import annotations

from dsl.compiler.artifacts import KernelInfo, Resources
from dsl.diagnostics import Diagnostic, SourceRange
from dsl.targets import Target, theoretical_occupancy


def resource_diagnostics(kernel: KernelInfo, res: Resources, launch_ranges: list[SourceRange],
                         tgt: Target) -> list[Diagnostic]:
    """Gives `kernel` ptxas's figures `res` (with its occupancy) and returns the diagnostics
    they call for: DSL501 at the def for spills, DSL502 at each launch for an occupancy under
    50% that no `minnctapersm` declared. The compiler calls it after ptxas; `kdsl lint`, which
    assembles many modules at once (`batch_assembly`), calls it with what that run found."""
    kernel.resources = res
    res.dynamic_smem = kernel.dynamic_smem
    out = []
    block = kernel.block
    if block is not None:
        threads = block[0] * block[1] * block[2]
        res.block_threads = threads
        res.occupancy = theoretical_occupancy(tgt, threads, res.registers, res.static_smem + kernel.dynamic_smem)
    if (res.spill_stores or res.spill_loads) and kernel.def_range is not None:
        out.append(Diagnostic.make(
            "DSL501", f"kernel '{kernel.symbol}' spills registers: {res.spill_stores} bytes stored, "
            f"{res.spill_loads} bytes loaded ({res.registers} registers)", kernel.def_range))
    if res.occupancy is not None and res.occupancy < 0.5 and kernel.blocks_per_sm is None and block is not None:
        for where in launch_ranges:
            out.append(Diagnostic.make(
                "DSL502", f"theoretical occupancy of '{kernel.symbol}' is {res.occupancy:.0%} with block "
                f"{list(block)} ({res.registers} registers, {res.static_smem + kernel.dynamic_smem} bytes smem)",
                where))
    return out
