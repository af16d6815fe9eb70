"""Analysis of many files for `kdsl lint`: one warm worker, `jobs` contained runs at a time.

One `lsp.worker.AnalysisWorker` imports the compiler once and forks a fresh, contained run
process for every file (`keep_warm=0`), at most `jobs` at a time, so a file that hangs or
crashes costs only its own time limit and no file can affect the next one. Closing the
worker at the end kills every process the files started. It is asyncio inside;
`analyze_files` and `analyze_sources` are the synchronous entry points.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsl.compiler.artifacts import ModuleReport
from lsp.analysis import read_source
from lsp.worker import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Analysis, AnalysisWorker


async def analyze_all(
    sources: Mapping[str, str],
    *,
    worker: AnalysisWorker,
    target: str | None = None,
    on_done: Callable[[str, ModuleReport], None] | None = None,
) -> dict[str, Analysis]:
    """Analyses many files in `worker`, as many at a time as it runs; each result also says
    what the file's run imported (what lint's cache checks next time)."""
    results: dict[str, Analysis] = {}

    async def one(path: str) -> None:
        results[path] = analysis = await worker.analysis(sources[path], path, target)
        if on_done is not None:
            on_done(path, analysis.report)

    await asyncio.gather(*(one(path) for path in sources))
    return {path: results[path] for path in sources}


def make_worker(
    count: int,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    sandbox: str = "standard",
    views: bool = True,
    assemble: bool = True,
) -> AnalysisWorker:
    """Lint's worker: `count` runs at a time, each in a fresh process (`keep_warm=0`);
    `assemble=False`: the runs stop at PTX (`lsp.lint.assembly` assembles it)."""
    return AnalysisWorker(
        timeout=timeout, memory_mb=memory_mb, parallel=count, keep_warm=0, sandbox=sandbox, views=views,
        assemble=assemble,
    )


def job_count(jobs: int | None, files: int) -> int:
    return max(1, min(jobs or os.cpu_count() or 1, files))


async def analyze_sources_async(
    sources: Mapping[str, str],
    *,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    target: str | None = None,
    sandbox: str = "standard",
    on_done: Callable[[str, ModuleReport], None] | None = None,
) -> dict[str, ModuleReport]:
    """Analyses many files, `jobs` at a time; a pathological file costs only its own limit."""
    worker = make_worker(job_count(jobs, len(sources)), timeout=timeout, memory_mb=memory_mb, sandbox=sandbox)
    try:
        analyses = await analyze_all(sources, worker=worker, target=target, on_done=on_done)
    finally:
        await worker.close()
    return {path: analysis.report for path, analysis in analyses.items()}


def analyze_sources(sources: Mapping[str, str], **options: Any) -> dict[str, ModuleReport]:
    """Synchronous `analyze_sources_async` (runs its own event loop)."""
    return asyncio.run(analyze_sources_async(sources, **options))


def analyze_files(
    paths: Sequence[str],
    *,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    target: str | None = None,
    sandbox: str = "standard",
) -> dict[str, ModuleReport]:
    """Reads and analyses `paths` in parallel; unreadable files get a diagnostic, not an error."""
    sources: dict[str, str] = {}
    unreadable: dict[str, ModuleReport] = {}
    for path in paths:
        text, problems = read_source(path)
        if text is None:
            unreadable[path] = ModuleReport(path, diagnostics=problems)
        else:
            sources[path] = text
    reports = analyze_sources(
        sources, jobs=jobs, timeout=timeout, memory_mb=memory_mb, target=target, sandbox=sandbox
    )
    return {path: unreadable[path] if path in unreadable else reports[path] for path in paths}
