"""Checks a list of files: read, the cache, static tier, compiler tier in a worker pool, merge, filter.

The order matters for safety: the static tier runs in this process and only parses; the
compiler tier (which runs the module's top-level code) happens only in worker processes,
and not at all with `--no-exec`. Files that cannot be read or decoded are reported and
never sent to a worker. A file whose result is kept in the cache (`lsp.lint.cache`: same
text, dependencies, options and toolchain: `lsp.result_cache`) is neither checked nor run
again.

Without views, without ptxas: lint asks the worker for reports without stage texts or
source maps, which it never shows, compiled to PTX only; `lsp.lint.assembly` then finds the
kernels' resources for many files in one ptxas run and adds the diagnostics they call for.
The diagnostics are the editor's, computed the same way; only a failure in translating to
LLVM IR, a stage that needs the views, then shows as PTX generation failing (DSL402 either
way).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic
from lsp import result_cache
from lsp.analysis import filter_codes, merge, read_source, static_diagnostics
from lsp.lint.assembly import Assembler
from lsp.lint.config import LintConfig
from lsp.lint.pool import analyze_all, job_count, make_worker


@dataclass
class FileResult:
    """One checked file: its text (None if unreadable), its final diagnostics, and whether
    they came from the cache."""

    path: str  # absolute
    source: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    cached: bool = False


class Progress:
    """`[#####.....] 12/40 path` redrawn in place on a terminal; silent anywhere else."""

    WIDTH = 20

    def __init__(self, total: int, stream: TextIO = sys.stderr, enabled: bool | None = None):
        self.total = total
        self.done = 0
        self.stream = stream
        if enabled is None:
            enabled = total > 3 and stream.isatty()
        self.enabled = enabled

    def advance(self, path: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        filled = self.WIDTH * self.done // max(1, self.total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        name = os.path.relpath(path) if os.path.isabs(path) else path
        self.stream.write(f"\r\x1b[K[{bar}] {self.done}/{self.total} {name}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def lint_files(
    paths: Sequence[Path], config: LintConfig, on_done: Callable[[str], None] | None = None
) -> list[FileResult]:
    """Every file's diagnostics after merging both tiers and applying select/ignore."""
    return asyncio.run(_lint_files(paths, config, on_done or (lambda _path: None)))


async def _lint_files(paths: Sequence[Path], config: LintConfig, on_done: Callable[[str], None]) -> list[FileResult]:
    fingerprints = result_cache.Fingerprints()
    results: dict[str, FileResult] = {}
    keys: dict[str, str] = {}
    for file in paths:
        path = str(file)
        source, problems = read_source(path)
        result = results[path] = FileResult(path, source, problems)
        if source is not None and config.cache:
            keys[path] = result_cache.entry_key(result_cache.LINT, path, source, _options(config))
            kept = result_cache.load_diagnostics(keys[path], fingerprints)
            if kept is not None:
                result.diagnostics, result.cached = kept, True
        if source is None or result.cached:
            on_done(path)
    todo = {r.path: r.source for r in results.values() if r.source is not None and not r.cached}
    jobs = job_count(config.jobs, len(todo))
    worker = make_worker(jobs, timeout=config.timeout, memory_mb=config.memory_limit_mb, sandbox=config.sandbox,
                         views=False, assemble=False)
    assembler = Assembler(jobs, on_done, timeout=config.timeout, memory_mb=config.memory_limit_mb)

    def keep(path: str, imported: list[str] | None) -> None:
        if path in keys:
            result_cache.store_diagnostics(keys[path], results[path].diagnostics, imported, fingerprints)

    try:
        # The worker imports the compiler in its own process while this one runs the static tier.
        starting = worker.start() if config.execute and todo else asyncio.sleep(0)
        _, static = await asyncio.gather(starting, asyncio.to_thread(_static_tier, todo, config.target))
        runnable: dict[str, str] = {}
        for path, found in static.items():
            results[path].diagnostics = found
            if config.execute and not any(d.code == "DSL003" for d in found):
                runnable[path] = todo[path]
            else:
                keep(path, [])
                on_done(path)

        def finished(path: str, report: ModuleReport) -> None:
            assembler.add(path, report)  # the file is done once its PTX is assembled

        analyses = await analyze_all(runnable, worker=worker, target=config.target, on_done=finished)
        await assembler.finish()
        for path, analysis in analyses.items():
            results[path].diagnostics = merge(results[path].diagnostics, analysis.report)
            keep(path, analysis.imported)
    finally:
        await worker.close()
    for result in results.values():
        result.diagnostics = filter_codes(merge(result.diagnostics, None), config.select, config.ignore)
    return list(results.values())


def _options(config: LintConfig) -> dict[str, object]:
    """What of the configuration changes a file's diagnostics (select / ignore apply after)."""
    return {"target": config.target, "execute": config.execute, "timeout": config.timeout,
            "memory": config.memory_limit_mb, "sandbox": config.sandbox}


def _static_tier(sources: dict[str, str], target: str | None) -> dict[str, list[Diagnostic]]:
    return {path: static_diagnostics(source, path, target) for path, source in sources.items()}
