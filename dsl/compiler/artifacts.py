"""What compiling produces: stage texts, source maps, resource figures and reports.

These are plain data so they cross process boundaries as JSON (the analysis worker of the
language server and of `kdsl lint` sends a `ModuleReport` back to its parent).
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dsl.diagnostics import Diagnostic, SourceRange
from dsl.frontend.trace_facts import ValueFact
from dsl.records import Record, from_json_fields, to_json_fields

ASSEMBLY_TIMEOUT_S = 60.0  # a cubin made on request (the analysis already assembled this PTX once)


@dataclass
class Resources(Record):
    """Per-kernel figures from `ptxas -v` plus launch-independent limits."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    static_smem: int = 0
    dynamic_smem: int = 0
    max_threads_per_block: int = 1024
    occupancy: float | None = None  # theoretical, for `block_threads`
    block_threads: int | None = None
    tensor_cores: dict[str, int] = field(default_factory=dict)  # SASS tensor-core opcode -> count

    def summary(self) -> str:
        text = f"{self.registers} regs"
        if self.spill_stores or self.spill_loads:
            text += f", spills {self.spill_stores}B st/{self.spill_loads}B ld"
        text += f", smem {self.static_smem + self.dynamic_smem} B"
        if self.stack_bytes:
            text += f", stack {self.stack_bytes} B"
        if self.occupancy is not None:
            text += f", occupancy {self.occupancy:.0%}"
            if self.block_threads:
                text += f" @ {self.block_threads} threads"
        if self.tensor_cores:
            text += ", tensor cores " + " ".join(f"{n} {op}" for op, n in sorted(self.tensor_cores.items()))
        return text



@dataclass
class SourceMap(Record):
    """Maps lines of one stage's text (0-based) to Python ranges, and back."""

    entries: list[tuple[int, SourceRange]] = field(default_factory=list)

    def range_for(self, ir_line: int) -> SourceRange | None:
        """The Python range that produced `ir_line`, or None for lines with no location."""
        lines = [line for line, _ in self.entries]
        i = bisect.bisect_left(lines, ir_line)
        if i < len(lines) and lines[i] == ir_line:
            return self.entries[i][1]
        return None

    def ir_lines_for(self, file: str, line: int) -> list[int]:
        """Stage lines produced by Python `line` of `file`: those whose range starts on it (a
        statement in a loop's body is its own ops, not the loop's branch ops, whose range
        spans the body; the `for` line is the loop's ops), else those of the narrowest ranges
        spanning it (the second line of a long expression; a comment in a body)."""
        covering = [(rng, ir) for ir, rng in self.entries if rng.file == file and rng.contains_line(line)]
        own = [ir for rng, ir in covering if rng.line == line]
        if own:
            return own
        narrowest = min((rng.end_line - rng.line for rng, _ in covering), default=0)
        return [ir for rng, ir in covering if rng.end_line - rng.line == narrowest]



@dataclass(frozen=True)
class TensorAccess(Record):
    """How one kernel touches one tensor parameter (`dsl.compiler.access`), checked against
    each argument before the launch."""

    align: int  # bytes its data pointer and outer strides must be multiples of
    written: bool  # stored to or updated atomically

    def merge(self, other: TensorAccess) -> TensorAccess:
        return TensorAccess(max(self.align, other.align), self.written or other.written)


@dataclass
class KernelInfo(Record):
    """One specialized `gpu.func` inside a compiled function."""

    symbol: str  # unique kernel name in the gpu.module and the cubin
    source_name: str  # the Python function it came from
    block: tuple[int, int, int] | None
    dynamic_smem: int
    resources: Resources | None = None
    access: dict[str, TensorAccess] = field(default_factory=dict)  # tensor parameter -> its accesses
    def_range: SourceRange | None = None  # the kernel's name in its `def` (where DSL501 points)
    blocks_per_sm: int | None = None  # a declared `minnctapersm`: the occupancy is chosen, not reported

@dataclass(frozen=True)
class LaunchFact(Record):
    """What the compiler knows of one `.launch(...)` in a jit function, kept in the report so
    the editor reads it instead of re-deriving it from the source: which specialization runs,
    the launcher's grid / block / smem expressions, the static block and the contract."""

    symbol: str  # the specialized kernel (KernelInfo.symbol)
    source_name: str
    range: SourceRange  # the launch call
    grid: str
    block: str
    smem: str
    block_static: tuple[int, int, int] | None = None
    contract: tuple[int, int, int] | None = None

    @classmethod
    def of(cls, record: Any) -> LaunchFact:
        """From the host tracer's record of a launch (or a fact already)."""
        if isinstance(record, LaunchFact):
            return record
        return cls(record.kernel.symbol, record.kernel.source_name, record.range, record.grid, record.block,
                   record.smem, record.block_static, record.contract)

@dataclass
class CompiledFunction(Record):
    """Every stage of one compiled specialization of a kernel or jit function, as text."""

    name: str
    kind: str  # "kernel" | "jit"
    target: str
    stages: dict[str, str] = field(default_factory=dict)  # traced, lowered, llvm, ptx, sass, launcher
    source_maps: dict[str, SourceMap] = field(default_factory=dict)
    kernels: list[KernelInfo] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # warnings and infos
    cubin: bytes | None = None
    launches: list[Any] = field(default_factory=list)  # jit: each launch's kernel, grid, block and range
    # file -> lines to add to what the cubin's line table says: a result moved by an edit above
    # it keeps its cubin (`dsl.compiler.relocation`)
    cubin_line_shift: dict[str, int] = field(default_factory=dict)

    @property
    def traced(self) -> str:
        return self.stages["traced"]

    @property
    def lowered(self) -> str:
        return self.stages["lowered"]

    @property
    def llvm(self) -> str:
        return self.stages["llvm"]

    @property
    def ptx(self) -> str:
        return self.stages["ptx"]

    def assembled_cubin(self) -> bytes | None:
        """The cubin; made from the PTX on first use when the compile found only the kernels'
        figures (an editor's analysis: `dsl.module_analysis.analysis_options`). Raises the
        `ToolError` of a ptxas that fails or runs past `ASSEMBLY_TIMEOUT_S`."""
        if self.cubin is None and "ptx" in self.stages:
            from dsl.compiler.toolchain import assemble, ptxas_path

            if ptxas_path() is not None:
                self.cubin = assemble(self.stages["ptx"], self.target, timeout=ASSEMBLY_TIMEOUT_S)[0]
        return self.cubin

    @property
    def sass(self) -> str | None:
        """SASS from nvdisasm, computed on first use (the disassembler takes ~1 s to start)."""
        if "sass" not in self.stages and self.assembled_cubin() is not None:
            from dsl.compiler.source_maps import sass_view

            view = sass_view(self.cubin)
            if view is not None and self.cubin_line_shift:
                from dsl.compiler.relocation import shift_sass_view

                view = shift_sass_view(view, self.cubin_line_shift)
            if view is not None:
                self.stages["sass"], self.source_maps["sass"] = view
        return self.stages.get("sass")

    @property
    def launcher(self) -> str | None:
        return self.stages.get("launcher")

    @property
    def resources(self) -> dict[str, Resources]:
        return {k.symbol: k.resources for k in self.kernels if k.resources}

    def to_dict(self) -> dict[str, Any]:
        """In-process, `launches` holds the host tracer's records; what travels is their facts."""
        data = to_json_fields(dataclasses.replace(self, launches=[]))
        data["launches"] = [LaunchFact.of(launch).to_dict() for launch in self.launches]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompiledFunction:
        compiled = from_json_fields(cls, {**data, "launches": []})
        compiled.launches = [LaunchFact.from_dict(d) for d in data.get("launches", [])]
        return compiled

    def launch_at(self, file: str, line: int) -> LaunchFact | None:
        """The launch whose call starts on `line` of `file`."""
        for launch in self.launches:
            fact = LaunchFact.of(launch)
            if fact.range.file == file and fact.range.line == line:
                return fact
        return None

    @property
    def available_stages(self) -> list[str]:
        """The stages that exist or can be made on request (SASS needs the cubin, or the PTX and
        ptxas, and nvdisasm; a jit function's C entry point is translated from its launcher)."""
        from dsl.compiler.stages import ordered
        from dsl.compiler.toolchain import nvdisasm_path, ptxas_path

        names = list(self.stages)
        assemblable = self.cubin is not None or ("ptx" in names and ptxas_path() is not None)
        if "sass" not in names and assemblable and nvdisasm_path() is not None:
            names.append("sass")
        if "c" not in names and "launcher" in self.stages:  # a jit function's C entry point (`kdsl export`)
            names.append("c")
        return ordered(names)


@dataclass
class FunctionReport(Record):
    """The outcome of compiling one `@kernel` or `@jit` function found in a module."""

    name: str
    kind: str  # "kernel" | "jit"
    range: SourceRange  # the function's name in its `def`
    compiled: CompiledFunction | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    values: list[ValueFact] = field(default_factory=list)  # what tracing bound each name to (the editor's hints)

@dataclass
class ModuleReport(Record):
    """Everything known about one analysed Python file."""

    path: str
    functions: list[FunctionReport] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # module level: failed statements

    def all_diagnostics(self) -> list[Diagnostic]:
        out = list(self.diagnostics)
        seen = set(out)
        for fn in self.functions:
            for diag in fn.diagnostics:
                if diag not in seen:
                    seen.add(diag)
                    out.append(diag)
        return out

    def function(self, name: str) -> FunctionReport | None:
        return next((f for f in self.functions if f.name == name), None)
