"""A pool of analysis workers for `kdsl lint`: many files, a few warm processes, in parallel.

Each of `jobs` workers (`lsp.worker.AnalysisWorker`, one child process each) takes the next
file from a shared queue, so a file that hangs or crashes costs only its own time limit
and one restart, never the whole run. It is asyncio inside; `analyze_files` and
`analyze_sources` are the synchronous entry points and run their own event loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsl.compiler.artifacts import ModuleReport
from lsp.analysis import read_source
from lsp.worker import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, AnalysisWorker


async def analyze_sources_async(
    sources: Mapping[str, str],
    *,
    jobs: int | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    target: str | None = None,
    on_done: Callable[[str, ModuleReport], None] | None = None,
) -> dict[str, ModuleReport]:
    """Analyses many files with `jobs` warm workers; a pathological file costs only its own limit."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for path in sources:
        queue.put_nowait(path)
    results: dict[str, ModuleReport] = {}

    async def drive(worker: AnalysisWorker) -> None:
        try:
            while not queue.empty():
                path = queue.get_nowait()
                results[path] = report = await worker.analyze(sources[path], path, target)
                if on_done is not None:
                    on_done(path, report)
        finally:
            await worker.close()

    count = max(1, min(jobs or os.cpu_count() or 1, len(sources)))
    workers = [AnalysisWorker(timeout=timeout, memory_mb=memory_mb) for _ in range(count)]
    await asyncio.gather(*(drive(w) for w in workers))
    return {path: results[path] for path in sources}


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
    reports = analyze_sources(sources, jobs=jobs, timeout=timeout, memory_mb=memory_mb, target=target)
    return {path: unreadable[path] if path in unreadable else reports[path] for path in paths}
