"""A compiled function moved by an edit above it: its result shifted, not compiled again.

Typing a line in a file moves every function below it. A result names absolute source lines
(its diagnostics, source maps, trace facts, the debug locations in its IR texts, the line
table of its cubin), so the compile key names each function's place, and without this every
moved function compiled again: 3.5 s for a line added at the top of a 100-kernel file.

A function whose key differs from a cached one only by the places of the functions it covers
(`dsl.compiler.cache.function_shape_key`), all in one file and all moved by the same number
of lines, compiles to the same result with every line of that file shifted by that number.
`relocate_entry` makes that result: every `SourceRange` of the file, and the line numbers in each
stage's text. Whatever it cannot shift exactly — a text that names another file, a stage it
does not know — makes it answer None, and the function is compiled again. The cubin is kept
as it is; the lines its line table names are shifted when its SASS is shown
(`CompiledFunction.cubin_line_shift`). A result without a cubin yet gets one made from its
moved PTX, which names the moved lines.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import weakref
from collections.abc import Callable
from typing import Any

from dsl.diagnostics import relocate
from dsl.records import Record

Place = tuple[str, int, int]


def moved_by(old: tuple[Place, ...], new: tuple[Place, ...]) -> tuple[str, int] | None:
    """(file, lines) when every function moved by the same non-zero number of lines, within
    one file and keeping its column; None otherwise."""
    pairs = list(zip(old, new))
    if len(old) != len(new) or not new or any(f0 != f1 or c0 != c1 for (f0, _, c0), (f1, _, c1) in pairs):
        return None
    files = {f for f, _, _ in new}
    deltas = {l1 - l0 for (_, l0, _), (_, l1, _) in pairs}
    if len(files) != 1 or len(deltas) != 1:
        return None
    delta = deltas.pop()
    return (files.pop(), delta) if delta else None


Entry = tuple[Any, tuple, tuple | None]  # the memory cache's (compiled, diagnostics, facts)


def relocate_entry(entry: Entry, file: str, delta: int) -> Entry | None:
    """A memory-cache entry `(compiled, diagnostics, facts)` moved `delta` lines down in `file`
    (up when negative), or None when something in it cannot be shifted exactly."""
    compiled, diagnostics, facts = entry
    moved_facts = relocate(facts, file, file, delta)
    if compiled is None:
        return None, relocate(diagnostics, file, file, delta), moved_facts
    stages = {}
    for stage, text in compiled.stages.items():
        shifter = _TEXTS.get(stage)
        moved = shifter(text, file, delta) if shifter is not None else None
        if moved is None:
            return None
        stages[stage] = moved
    moved_compiled = copy.copy(compiled)
    moved_compiled.stages = stages
    moved_compiled.source_maps = relocate(compiled.source_maps, file, file, delta)
    moved_compiled.diagnostics = relocate(compiled.diagnostics, file, file, delta)
    moved_compiled.kernels = relocate(compiled.kernels, file, file, delta)
    moved_compiled.launches = [_launch(launch, file, delta) for launch in compiled.launches]
    if compiled.cubin is not None:  # one made later is made from the moved PTX: at the moved lines already
        cubin_shift = dict(compiled.cubin_line_shift)
        cubin_shift[file] = cubin_shift.get(file, 0) + delta
        moved_compiled.cubin_line_shift = cubin_shift
    # not a field: lets a report's wire say "that result, moved" (weak: no chain of old versions)
    moved_compiled.moved_from = (weakref.ref(compiled), file, delta)
    return moved_compiled, relocate(diagnostics, file, file, delta), moved_facts


def relocate_report(report: Any, file: str, delta: int) -> Any:
    """A `FunctionReport` moved `delta` lines in `file`, compiled result and all (None when its
    result cannot be shifted): what a run process's `relocate_entry` made of the same function."""
    compiled = None
    if report.compiled is not None:
        moved = relocate_entry((report.compiled, (), None), file, delta)
        if moved is None:
            return None
        compiled = moved[0]
        del compiled.moved_from
    rest = relocate(dataclasses.replace(report, compiled=None), file, file, delta)
    return dataclasses.replace(rest, compiled=compiled)


def _launch(launch: Any, file: str, delta: int) -> Any:
    """A launch of a jit function: a `LaunchFact` record, or the host tracer's record of it
    (which also holds the traced kernel, read for its name and specialization only)."""
    if isinstance(launch, Record):
        return relocate(launch, file, file, delta)
    moved = copy.copy(launch)
    moved.range = relocate(launch.range, file, file, delta)
    return moved


def _lines_of(pattern: str, text: str, delta: int) -> str:
    """Adds `delta` to the positive line number in group 2 of each match (0 means no line)."""
    def shift(m: re.Match[str]) -> str:
        line = int(m.group(2))
        return m.group(1) + str(line + delta if line > 0 else line)

    return re.sub(pattern, shift, text)


_UNKNOWN = "<unknown>"  # the compile unit's file: no line names it


def _no_lines(text: str, file: str, delta: int) -> str | None:
    """The traced MLIR is printed without locations (its source map holds them)."""
    return None if "loc(" in text else text


def _mlir(text: str, file: str, delta: int) -> str | None:
    """The lowered MLIR: the debug attributes (`#llvm.di_file`, `line = N`, `scopeLine = N`)."""
    if "loc(" in text:
        return None
    files = {os.path.join(d, n) for n, d in re.findall(r'#llvm\.di_file<"([^"]*)" in "([^"]*)">', text)}
    if files - {file, _UNKNOWN}:
        return None
    return _lines_of(r"(\b(?:line|scopeLine) = )(\d+)", text, delta)


def _llvm(text: str, file: str, delta: int) -> str | None:
    """LLVM IR: `!DIFile`, and `line: N` / `scopeLine: N` of the debug metadata."""
    files = {os.path.join(d, n) for n, d in re.findall(r'!DIFile\(filename: "([^"]*)", directory: "([^"]*)"', text)}
    if files - {file, _UNKNOWN}:
        return None
    return _lines_of(r"(\b(?:line|scopeLine): )(\d+)", text, delta)


def _ptx(text: str, file: str, delta: int) -> str | None:
    """PTX: `.loc FILE LINE COLUMN` and `inlined_at FILE LINE COLUMN`, one `.file` only."""
    files = set(re.findall(r'^\s*\.file\s+\d+\s+"([^"]*)"', text, re.M))
    if files - {file}:
        return None
    return _lines_of(r"((?:\.loc|inlined_at)\s+\d+\s+)(\d+)", text, delta)


def sass_lines(text: str, file: str, delta: int) -> str | None:
    """SASS from nvdisasm: `"FILE", line N` in its `//## File ...` (and `inlined at`) comments."""
    if set(re.findall(r'"([^"]*)", line \d+', text)) - {file}:
        return None
    return _lines_of(r'("' + re.escape(file) + r'", line )(\d+)', text, delta)


def shift_sass_view(view: tuple[str, Any], shifts: dict[str, int]) -> tuple[str, Any] | None:
    """A SASS text and its source map made from a moved result's cubin, at the source's lines."""
    text, source_map = view
    for file, delta in shifts.items():
        moved = sass_lines(text, file, delta)
        if moved is None:
            return None
        text, source_map = moved, relocate(source_map, file, file, delta)
    return text, source_map


def _launcher(text: str, file: str, delta: int) -> str | None:
    """The Python launcher names each launch's line in a comment: `# NAME.py:LINE`."""
    name = re.escape(file.rsplit("/", 1)[-1])
    return _lines_of(r"(?m)(^\s*# " + name + r":)(\d+)$", text, delta)


_TEXTS: dict[str, Callable[[str, str, int], str | None]] = {
    "traced": _no_lines,
    "lowered": _mlir,
    "llvm": _llvm,
    "ptx": _ptx,
    "sass": sass_lines,
    "launcher": _launcher,
}
