"""Fixtures for compiler tests: write a kernel file, analyse it with the real compiler."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import dsl
from dsl.compiler.artifacts import ModuleReport


class Analysed:
    """A report plus helpers to find a line's number and a function's stages."""

    def __init__(self, path: Path, source: str, report: ModuleReport):
        self.path = str(path)
        self.source = source
        self.report = report

    def line_of(self, needle: str) -> int:
        for i, line in enumerate(self.source.splitlines(), 1):
            if needle in line:
                return i
        raise AssertionError(f"{needle!r} not in source")

    def col_of(self, needle: str, occurrence_in_line: str | None = None) -> int:
        line = self.source.splitlines()[self.line_of(occurrence_in_line or needle) - 1]
        return line.index(needle)

    def stage(self, function: str, stage: str) -> str:
        fn = self.report.function(function)
        assert fn is not None and fn.compiled is not None, [d.format() for d in self.diagnostics]
        return fn.compiled.sass if stage == "sass" else fn.compiled.stages[stage]

    @property
    def diagnostics(self):
        return self.report.all_diagnostics()

    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]


@pytest.fixture
def analyse(tmp_path):
    def run(source: str, name: str = "kern.py", target: str | None = None) -> Analysed:
        source = textwrap.dedent(source).lstrip("\n")
        path = tmp_path / name
        path.write_text(source)
        return Analysed(path, source, dsl.analyze_source(source, str(path), target=target))

    return run
