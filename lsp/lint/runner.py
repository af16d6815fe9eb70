"""Checks a list of files: read, static tier, compiler tier in a worker pool, merge, filter.

The order matters for safety: the static tier runs in this process and only parses; the
compiler tier (which runs the module's top-level code) happens only in worker processes,
and not at all with `--no-exec`. Files that cannot be read or decoded are reported and
never sent to a worker.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dsl.compiler.artifacts import ModuleReport
from dsl.diagnostics import Diagnostic
from lsp.analysis import filter_codes, merge, read_source, static_diagnostics
from lsp.lint.config import LintConfig
from lsp.lint.pool import analyze_sources


@dataclass
class FileResult:
    """One checked file: its text (None if unreadable) and its final diagnostics."""

    path: str  # absolute
    source: str | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


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
    results: dict[str, FileResult] = {}
    runnable: dict[str, str] = {}
    for file in paths:
        path = str(file)
        source, problems = read_source(path)
        result = results[path] = FileResult(path, source, problems)
        if source is None:
            if on_done is not None:
                on_done(path)
            continue
        result.diagnostics = static_diagnostics(source, path)
        if config.execute and not any(d.code == "DSL003" for d in result.diagnostics):
            runnable[path] = source
        elif on_done is not None:
            on_done(path)

    def finished(path: str, _report: ModuleReport) -> None:
        if on_done is not None:
            on_done(path)

    if runnable:
        reports = analyze_sources(
            runnable,
            jobs=config.jobs,
            timeout=config.timeout,
            memory_mb=config.memory_limit_mb,
            target=config.target,
            sandbox=config.sandbox,
            on_done=finished,
        )
        for path, report in reports.items():
            results[path].diagnostics = merge(results[path].diagnostics, report)
    for result in results.values():
        result.diagnostics = filter_codes(merge(result.diagnostics, None), config.select, config.ignore)
    return list(results.values())
