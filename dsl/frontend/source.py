"""Where Python code lives: the AST of a function and exact ranges of its nodes.

Functions are found by parsing their whole file (from `linecache`, so an editor buffer
placed there is what we read) and picking the `def` at the function's first line; that
keeps every node's line and column exactly as in the file, with no dedent offsets.
Python's `ast` counts columns in UTF-8 bytes; ranges here count characters
(`char_column`, the one conversion the compiler and the language server share). Lines end
at `\n`, `\r\n` and `\r` only, as for Python's tokenizer and for LSP (`source_lines`):
`str.splitlines` also breaks at form feeds, U+2028 and others, which would shift every
line number after one.
"""

from __future__ import annotations

import ast
import collections
import functools
import hashlib
import inspect
import itertools
import linecache
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import SourceRange

_LINE_END = re.compile(r"\r\n|\r|\n")


_LIBRARY_PATHS = ("site-packages", "dist-packages", "/lib/python", "<frozen")
_OWN_PACKAGES = ("dsl", "lsp")


def is_user_code(module: str, path: str) -> bool:
    """Whether a module or function is the user's (traced inline, hashed into cache keys, dropped
    after an analysis run) rather than a library's or kdsl's own. The one answer to that."""
    if module.split(".", 1)[0] in _OWN_PACKAGES:
        return False
    return not any(part in path for part in _LIBRARY_PATHS)


def is_user_function(fn: types.FunctionType) -> bool:
    return is_user_code(fn.__module__ or "", fn.__code__.co_filename)


def closure_vars(fn: types.FunctionType) -> dict[str, Any]:
    """The values of a function's free variables (cells not yet filled are left out)."""
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def source_lines(text: str) -> list[str]:
    """The lines of `text` without their endings, split where Python and LSP end a line."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # a final line ending starts no new line (as with str.splitlines)
    return lines


def char_column(line_text: str, byte_col: int) -> int:
    """`ast`'s UTF-8 byte column on a line of text -> a character column."""
    if line_text.isascii():
        return byte_col
    return len(line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    tree: ast.Module

    @functools.cached_property
    def lines(self) -> list[str]:
        return source_lines(self.text)

    @functools.cached_property
    def _line_starts(self) -> list[int]:
        """The offset in `text` where each line begins (line 1 first), for slicing segments."""
        return [0, *(m.end() for m in _LINE_END.finditer(self.text))]

    @functools.cached_property
    def _defs(self) -> dict[tuple[str, int], ast.FunctionDef]:
        """Every `def` by (name, line of the `def` or of one of its decorators): one walk per file,
        so finding each of a file's functions does not walk the whole tree again."""
        out: dict[tuple[str, int], ast.FunctionDef] = {}
        for node in _statements(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for line in (node.lineno, *(d.lineno for d in node.decorator_list)):
                    out.setdefault((node.name, line), node)  # type: ignore[arg-type]
        return out

    def char_column(self, line: int, byte_col: int) -> int:
        """Converts `ast`'s UTF-8 byte column on 1-based `line` to a character column."""
        if not 1 <= line <= len(self.lines):
            return byte_col
        return char_column(self.lines[line - 1], byte_col)

    def segment(self, node: ast.AST) -> str:
        """The text of `node`, as `ast.get_source_segment` gives it, but slicing only the node's
        own lines: that function splits the whole file on every call."""
        try:
            line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return ""
        if end_line is None or end_col is None or not 1 <= line <= end_line <= len(self.lines):
            return ""
        starts = self._line_starts
        if line == end_line:
            return _byte_slice(self.lines[line - 1], col, end_col)
        last = end_line - 1
        first = _byte_slice(self.text[starts[line - 1] : starts[line]], col, None)
        middle = self.text[starts[line] : starts[last]]
        return first + middle + _byte_slice(self.lines[last], 0, end_col)

    def range_of(self, node: ast.AST) -> SourceRange:
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        col = self.char_column(line, getattr(node, "col_offset", 0))
        end_col = self.char_column(end_line, getattr(node, "end_col_offset", None) or 0)
        return SourceRange(self.path, line, col, end_line, end_col)

    def def_name_range(self, fn: ast.FunctionDef) -> SourceRange:
        """The range of a function's name in its `def` line, where editors expect it."""
        line_text = self.lines[fn.lineno - 1] if fn.lineno <= len(self.lines) else ""
        start = self.char_column(fn.lineno, fn.col_offset)
        at = line_text.find(fn.name, start)
        if at < 0:
            return self.range_of(fn)
        return SourceRange(self.path, fn.lineno, at, fn.lineno, at + len(fn.name))

    def function_at(self, name: str, line: int) -> ast.FunctionDef | None:
        """The `def name` whose `def` line or a decorator's line is `line`."""
        return self._defs.get((name, line))


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements of `tree` in `ast.walk`'s order, without visiting expressions (a `def`
    is a statement, and no expression holds one): a tenth of the nodes of a kernel file."""
    todo = collections.deque([tree])
    while todo:
        node = todo.popleft()
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCKS))
        yield node


def _byte_slice(text: str, start: int, end: int | None) -> str:
    """`text[start:end]` counted in UTF-8 bytes, as `ast` counts columns."""
    if text.isascii():
        return text[start:end]
    return text.encode("utf-8")[start:end].decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=256)
def _parse(path: str, digest: str, text: str) -> SourceFile:
    return SourceFile(path, text, parse_module(text, path))


_BLOCK_STARTS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_@")
_CONTINUATIONS = ("else", "elif", "except", "finally")
# filename -> the statements of each top-level block (None: it does not parse alone) of its last
# parse, by (text, first line)
_PARSED_BLOCKS: dict[str, dict[tuple[str, int], list[ast.stmt] | None]] = {}


def parse_module(text: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(text, filename)`, parsing again only the top-level blocks that changed.

    After an edit, a file of a hundred kernels differs from the last one parsed in one block;
    parsing all of it again was most of the time of re-reading it. The text is cut before the
    lines that start a top-level statement (at column 0, not a continuation such as `else:`,
    not the `def` under a decorator), and each block is parsed alone and kept by its text and
    first line. A block that does not parse alone (the cut fell in a string, a docstring's
    lines, or an open bracket) is parsed together with the next 1, 2, 4, ... blocks; that
    failure is kept too, so the next parse does not try again. A block that parses alone
    starts and ends outside any string or bracket, so it parses as within the file. When no
    such grouping parses (a syntax error), the whole text is parsed, so the error is the one
    Python reports."""
    blocks = _top_level_blocks(text)
    known = _PARSED_BLOCKS.get(filename, {})
    kept: dict[tuple[str, int], list[ast.stmt] | None] = {}
    body: list[ast.stmt] = []
    index = 0
    while index < len(blocks):
        count = 1
        while True:
            unit = ("".join(b[0] for b in blocks[index : index + count]), blocks[index][1])
            statements = known.get(unit, _UNPARSED) if unit not in kept else kept[unit]
            if statements is _UNPARSED:
                statements = _parse_block(unit, filename)
            kept[unit] = statements
            if statements is not None or index + count >= len(blocks):
                break
            count = min(count * 2, len(blocks) - index)
        if statements is None:
            _PARSED_BLOCKS[filename] = kept
            return ast.parse(text, filename=filename)  # raises Python's own SyntaxError
        body.extend(statements)
        index += count
    _PARSED_BLOCKS[filename] = kept
    return ast.Module(body=body, type_ignores=[])


_UNPARSED: Any = object()


def _parse_block(block: tuple[str, int], filename: str) -> list[ast.stmt] | None:
    """The statements of a block, None when it does not parse alone; blank lines before it give
    its nodes the file's line numbers."""
    try:
        return ast.parse("\n" * (block[1] - 1) + block[0], filename=filename).body
    except SyntaxError:
        return None


def _top_level_blocks(text: str) -> list[tuple[str, int]]:
    """`text` cut into (block text, first line) before each line that starts a statement."""
    if not text:
        return []
    starts = [0, *(m.end() for m in _LINE_END.finditer(text))]
    if starts[-1] == len(text):
        starts.pop()
    cuts: list[int] = []  # indexes into `starts`
    decorated = False
    for number, at in enumerate(starts):
        first = text[at : at + 1]
        if first not in _BLOCK_STARTS or text.startswith(_CONTINUATIONS, at):
            continue
        if decorated and first != "@":  # the def or class a decorator belongs to
            decorated = False
            continue
        decorated = first == "@"
        cuts.append(number)
    if not cuts or cuts[0] != 0:
        cuts.insert(0, 0)
    bounds = [starts[c] for c in cuts] + [len(text)]
    return [(text[a:b], cuts[i] + 1) for i, (a, b) in enumerate(itertools.pairwise(bounds)) if b > a]


# path -> (the line list linecache held, its SourceFile): a buffer installed once is hashed
# and parsed once, however many of its functions are looked up.
_LOADED: dict[str, tuple[list[str], SourceFile]] = {}


def load_file(path: str) -> SourceFile:
    """The parsed file as linecache holds it now (cached by content)."""
    lines = linecache.getlines(path)
    known = _LOADED.get(path)
    if known is not None and known[0] is lines:
        return known[1]
    text = "".join(lines)
    digest = hashlib.sha1(text.encode()).hexdigest()
    file = _parse(path, digest, text)
    _LOADED[path] = (lines, file)
    return file


@dataclass(frozen=True)
class FunctionSource:
    file: SourceFile
    node: ast.FunctionDef

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def text(self) -> str:
        return self.file.segment(self.node)


def function_source(fn: Any) -> FunctionSource:
    """Finds the `def` of a Python function in its file; raises OSError when it has none."""
    fn = inspect.unwrap(fn)
    code = fn.__code__
    path = code.co_filename
    linecache.checkcache(path) if not path.startswith("<") else None
    file = load_file(path)
    if not file.text:
        raise OSError(f"no source for {fn.__qualname__} ({path})")
    node = file.function_at(fn.__name__, code.co_firstlineno)
    if node is None:
        raise OSError(f"cannot find the source of {fn.__qualname__} in {path}")
    return FunctionSource(file, node)


def location(rng: SourceRange) -> Any:
    """An MLIR `FileLineColRange` location for a source range."""
    from mlir import ir

    return ir.Location.file(rng.file, rng.line, rng.column + 1, rng.end_line, rng.end_column + 1)
