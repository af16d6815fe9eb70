"""Lint's ptxas step: every analysed file's PTX, assembled many modules per ptxas run.

Lint's runs compile to PTX only (`AnalysisWorker(assemble=False)`); this finds each kernel's
registers, spills and shared memory with one ptxas run per batch of modules
(`dsl.compiler.batch_assembly`) instead of one per function, which halves what ptxas costs
a lint, and then adds what the figures call for, the same diagnostics the compiler adds
after its own ptxas run (`dsl.compiler.resource_checks`: DSL501 spills, DSL502
occupancy; DSL402 where ptxas refuses a module, DSL002 where it outlasts the analysis time
limit). ptxas runs no user code, so this runs in lint's own process, `jobs` batches at a
time, while the runs of later files go on, each ptxas under the analyses' time and memory
limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from dsl.compiler.artifacts import FunctionReport, ModuleReport, Resources
from dsl.compiler.batch_assembly import BATCH, Timeout, resources_of, split_evenly
from dsl.compiler.resource_checks import resource_diagnostics
from dsl.compiler.toolchain import ToolError
from dsl.diagnostics import Diagnostic
from dsl.targets import get_target


@dataclass
class _Module:
    path: str
    function: FunctionReport
    ptx: str
    arch: str


@dataclass
class Assembler:
    """Collects the modules of finished analyses and assembles them in batches."""

    jobs: int
    on_file_done: Callable[[str], None]
    timeout: float | None = None  # per module, as each file's analysis has (DSL002 past it)
    memory_mb: int = 0
    _waiting: dict[str, list[_Module]] = field(default_factory=dict)  # arch -> modules not yet sent
    _left: dict[str, int] = field(default_factory=dict)  # path -> its modules not yet assembled
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None

    def add(self, path: str, report: ModuleReport) -> None:
        """Takes a finished file's report; the file is done once its modules are assembled."""
        modules = [_Module(path, fn, fn.compiled.stages["ptx"], fn.compiled.target) for fn in report.functions
                   if fn.compiled is not None and "ptx" in fn.compiled.stages and fn.compiled.kernels
                   and all(k.resources is None for k in fn.compiled.kernels)]
        if not modules:
            self.on_file_done(path)
            return
        self._left[path] = len(modules)
        for m in modules:
            waiting = self._waiting.setdefault(m.arch, [])
            waiting.append(m)
            if len(waiting) >= BATCH:
                self._send(m.arch)

    async def finish(self) -> None:
        """Assembles what is left, split `jobs` ways (nothing else is left to run beside it),
        and waits for every batch."""
        for arch in list(self._waiting):
            for part in split_evenly(self._waiting.pop(arch), self.jobs):
                self._waiting[arch] = part
                self._send(arch)
        while self._tasks:
            tasks, self._tasks = self._tasks, []
            await asyncio.gather(*tasks)

    def _send(self, arch: str) -> None:
        batch = self._waiting.pop(arch, [])
        if batch:
            self._tasks.append(asyncio.ensure_future(self._assemble(batch, arch)))

    async def _assemble(self, batch: list[_Module], arch: str) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.jobs))
        async with self._slots:
            found = await asyncio.to_thread(resources_of, [m.ptx for m in batch], arch, timeout=self.timeout,
                                            memory_mb=self.memory_mb)
        for module, result in zip(batch, found):
            _complete(module.function, result)
            module.function.compiled.stages.pop("ptx", None)  # lint shows no stages: do not keep them
            self._left[module.path] -= 1
            if not self._left[module.path]:
                self.on_file_done(module.path)


def _complete(fn: FunctionReport, result: dict[str, Resources] | ToolError) -> None:
    """Gives the function's kernels their figures and adds the diagnostics they call for."""
    compiled = fn.compiled
    assert compiled is not None
    if isinstance(result, Timeout):  # what the analysis would have said, had ptxas run in it
        fn.diagnostics.append(Diagnostic.make("DSL002", f"Assembling '{fn.name}' with ptxas: {result}.", fn.range))
        return
    if isinstance(result, ToolError):
        fn.diagnostics.append(Diagnostic.make("DSL402", f"ptxas failed: {result}", fn.range))
        return
    target = get_target(compiled.target)
    for kernel in compiled.kernels:
        res = result.get(kernel.symbol)
        if res is None:
            continue
        launches = [launch.range for launch in compiled.launches if getattr(launch, "symbol", None) == kernel.symbol]
        found = resource_diagnostics(kernel, res, launches, target)
        fn.diagnostics.extend(found)
        compiled.diagnostics.extend(found)
