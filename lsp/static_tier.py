"""The instant tier over an editor buffer: static checks that stay fast on huge documents.

Two things differ from running `dsl.static_checks(text, path, target)` on the buffer:

- **The file on disk is never read.** On a syntax error CPython reads the line from the
  file named in `filename` (when one exists there) and counts the column in *that* line,
  so a DSL003 column would depend on what was last saved. The checks run under
  `BUFFER_NAME`, a path below a regular file that can never be opened, and every range is
  moved back to the document's path afterwards.
- **Big documents are checked in groups.** Parsing 5 MB takes seconds, on every
  keystroke, on the event loop. Above `LARGE_DOCUMENT` characters the document is cut
  before top-level statements into blocks, the blocks are grouped by content (a group
  ends after a block whose first line's hash says so, or at `GROUP_MAX` characters, so an
  edit inside a block moves no edge), and each group's results are cached by its text: a
  keystroke re-checks one group. Groups that parse on their own parse the same way as
  the whole file (each starts at column 0 outside any bracket or string), so the results
  are the same with one exception: a launch is checked against a `known_block_size`
  declared in another group only by the compiler tier. A group that fails to parse
  because its text stops too early (an open bracket or string runs into the next group)
  is re-checked together with the following groups, up to `MERGE_LIMIT` characters.

Hover, symbols, lenses and code actions use the same groups (`functions`, `hover_source`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from dsl.diagnostics import Diagnostic, relocate
from lsp.text_model import TextBuffer

# A path inside a regular file: opening it fails on every OS, so CPython cannot read it.
BUFFER_NAME = os.path.join(os.path.abspath(__file__), "<buffer>")
LARGE_DOCUMENT = 16 * 1024  # a 1600-line file of kernels (44 KB) takes ~85 ms to check whole
GROUP_TARGET_BLOCKS = 16  # a group ends after a block with hash % this == 0 ...
GROUP_MAX = 32 * 1024  # ... or once it holds this many characters
MERGE_LIMIT = 1024 * 1024

_CONTINUATIONS = ("else", "elif", "except", "finally")
_STARTS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_@")
_TRUNCATED = ("was never closed", "unterminated triple-quoted", "unexpected EOF", "expected an indented block")

T = TypeVar("T")


def check_text(text: str, path: str, target: str | None = None) -> list[Diagnostic]:
    """`dsl.static_checks` on `text` for `target`, with ranges in `path`; never raises, never
    reads `path`."""
    import dsl
    from lsp.analysis import failure_diagnostic

    try:
        found = list(dsl.static_checks(text, BUFFER_NAME, target))
    except (RecursionError, MemoryError):
        message = "syntax error: this code nests too deeply for Python's parser"
        return [failure_diagnostic("DSL003", path, text, message)]
    except Exception as exc:  # a bug in the checks must not take the editor down
        return [failure_diagnostic("DSL002", path, text, f"The static checks failed: {exc!r}.")]
    return [relocate(d, BUFFER_NAME, path) for d in found]


@dataclasses.dataclass(frozen=True)
class Group:
    start: int  # first line, 0-based
    end: int  # one past the last line
    text: str


class DocumentIndex:
    """Per-document groups and their cached results; rebuilt lazily once per version."""

    def __init__(self) -> None:
        self._version: int | None = None
        self._target: str | None = None  # what the cached static results were checked for
        self._groups: list[Group] = []
        self._checks: dict[str, list[Diagnostic]] = {}  # static results per group text, lines from 1
        self._placed: dict[tuple[str, int], list[Diagnostic]] = {}  # ... and where the group is now
        self._relative: dict[str, list[Any]] = {}  # functions per group text, lines from 1
        self._functions: dict[tuple[str, int], list[Any]] = {}  # ... and where the group is now

    def groups(self, lines: Sequence[str], version: int) -> list[Group]:
        if self._version != version:
            self._groups = make_groups(lines)
            self._version = version
        return self._groups

    def static_diagnostics(
        self, buffer: TextBuffer, version: int, path: str, target: str | None = None
    ) -> list[Diagnostic]:
        return _finish(self._static_steps(buffer, version, path, target))

    async def static_diagnostics_async(
        self, buffer: TextBuffer, version: int, path: str, target: str | None = None
    ) -> list[Diagnostic]:
        """Like `static_diagnostics`, giving the event loop a turn after each group it checks."""
        return await _finish_async(self._static_steps(buffer, version, path, target))

    def _static_steps(
        self, buffer: TextBuffer, version: int, path: str, target: str | None
    ) -> Iterator[list[Diagnostic]]:
        if buffer.size < LARGE_DOCUMENT:
            return check_text(buffer.text, path, target)
        if target != self._target:  # results checked for another target's limits are no use
            self._checks, self._placed, self._target = {}, {}, target
        groups = self.groups(buffer.lines, version)
        used: set[str] = set()
        placed: set[tuple[str, int]] = set()
        out: list[Diagnostic] = []
        index = 0
        while index < len(groups):
            group, count = groups[index], 1
            found = yield from self._checked(used, group.text, path, target)
            while _truncated(found, group) and count < len(groups) - index and len(group.text) < MERGE_LIMIT:
                count = min(count * 2, len(groups) - index)
                last = groups[index + count - 1]
                text_of = "".join(g.text for g in groups[index : index + count])
                group = Group(groups[index].start, last.end, text_of)
                found = yield from self._checked(used, group.text, path, target)
            syntax = [d for d in found if d.code == "DSL003"]
            if syntax:  # the groups after it keep their results for the version that parses again
                return [relocate(syntax[0], path, path, group.start)]
            key = (group.text, group.start)
            placed.add(key)
            if key not in self._placed:
                self._placed[key] = [relocate(d, path, path, group.start) for d in found]
            out.extend(self._placed[key])
            index += count
        # Only a run that checked every group prunes: a cancelled one, or one stopped by a syntax
        # error (typing `dsl.`), leaves every cached result in place.
        self._checks = {text: self._checks[text] for text in used}
        self._placed = {key: self._placed[key] for key in placed}
        return out

    def _checked(self, used: set[str], text: str, path: str, target: str | None) -> Iterator[None]:
        used.add(text)
        found = self._checks.get(text)
        if found is None:
            found = self._checks[text] = check_text(text, path, target)
            yield None
        return found

    def functions(self, buffer: TextBuffer, version: int, path: str) -> list[Any]:
        """Every kernel and jit function (`lsp.features.symbols.DslFunction`), in source order;
        on a big document without their AST nodes (hover parses its own block)."""
        return _finish(self._function_steps(buffer, version, path))

    async def functions_async(self, buffer: TextBuffer, version: int, path: str) -> list[Any]:
        return await _finish_async(self._function_steps(buffer, version, path))

    def _function_steps(self, buffer: TextBuffer, version: int, path: str) -> Iterator[list[Any]]:
        from lsp.features.symbols import dsl_functions

        if buffer.size < LARGE_DOCUMENT:
            return dsl_functions(buffer.text, path)
        used: set[str] = set()
        placed: set[tuple[str, int]] = set()
        out: list[Any] = []
        for group in self.groups(buffer.lines, version):
            key = (group.text, group.start)
            used.add(group.text)
            placed.add(key)
            found = self._functions.get(key)
            if found is None:
                relative = self._relative.get(group.text)
                if relative is None:  # parse: the slow part, so the loop gets a turn after it
                    relative = self._relative[group.text] = [
                        dataclasses.replace(fn, node=None, decorator=None) for fn in dsl_functions(group.text, path)
                    ]
                    yield None
                found = self._functions[key] = [relocate(fn, path, path, group.start) for fn in relative]
                if found:
                    yield None
            out.extend(found)
        self._relative = {text: self._relative[text] for text in used}
        self._functions = {key: self._functions[key] for key in placed}
        return out

    def hover_source(self, buffer: TextBuffer, version: int, line: int) -> str:
        """Text for hovering at 1-based `line`: the whole document when it is small, else its
        first group (the imports) and the group holding `line`, other lines left blank so
        that line numbers stay those of the document."""
        if buffer.size < LARGE_DOCUMENT:
            return buffer.text
        groups = self.groups(buffer.lines, version)
        here = next((g for g in groups if g.start < line <= g.end), groups[-1])
        first = groups[0]
        if here is first:
            return first.text
        return first.text + "\n" * (here.start - first.end) + here.text


def make_groups(lines: Sequence[str]) -> list[Group]:
    """Cuts `lines` into groups of whole top-level blocks (see the module docstring)."""
    starts = [i for i, line in enumerate(lines) if line[:1] in _STARTS and not line.startswith(_CONTINUATIONS)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(lines))
    groups: list[Group] = []
    begin, size, pieces = 0, 0, []
    for a, b in itertools.pairwise(starts):
        block = "".join(lines[a:b])
        pieces.append(block)
        size += len(block)
        # A group never ends after a decorator: its function is the next block, and a group
        # that stops between them does not parse alone.
        # The block's first line decides (by a hash that is the same in every process): an edit
        # inside a function's body moves no edge, so a keystroke there re-checks one group.
        header = zlib.crc32(lines[a].encode("utf-8", "surrogatepass"))
        closes = (header % GROUP_TARGET_BLOCKS == 0 or size >= GROUP_MAX) and not block.startswith("@")
        if closes or b == len(lines):
            groups.append(Group(begin, b, "".join(pieces)))
            begin, size, pieces = b, 0, []
    return groups or [Group(0, len(lines), "".join(lines))]


def _finish(steps: Iterator[T]) -> Any:
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return done.value


async def _finish_async(steps: Iterator[T]) -> Any:
    try:
        while True:
            next(steps)
            await asyncio.sleep(0)
    except StopIteration as done:
        return done.value


def _truncated(found: list[Diagnostic], group: Group) -> bool:
    """Whether a group's syntax error may only mean its text stops before the construct ends."""
    for d in found:
        if d.code == "DSL003":
            last_line = group.end - group.start
            return d.range.line >= last_line or any(t in d.message for t in _TRUNCATED)
    return False
