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
import functools
import hashlib
import inspect
import linecache
import re
import types
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

    def char_column(self, line: int, byte_col: int) -> int:
        """Converts `ast`'s UTF-8 byte column on 1-based `line` to a character column."""
        if not 1 <= line <= len(self.lines):
            return byte_col
        return char_column(self.lines[line - 1], byte_col)

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


@functools.lru_cache(maxsize=256)
def _parse(path: str, digest: str, text: str) -> SourceFile:
    return SourceFile(path, text, ast.parse(text, filename=path))


def load_file(path: str) -> SourceFile:
    """The parsed file as linecache holds it now (cached by content)."""
    text = "".join(linecache.getlines(path))
    digest = hashlib.sha1(text.encode()).hexdigest()
    return _parse(path, digest, text)


@dataclass(frozen=True)
class FunctionSource:
    file: SourceFile
    node: ast.FunctionDef

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def text(self) -> str:
        return ast.get_source_segment(self.file.text, self.node) or ""


def function_source(fn: Any) -> FunctionSource:
    """Finds the `def` of a Python function in its file; raises OSError when it has none."""
    fn = inspect.unwrap(fn)
    code = fn.__code__
    path = code.co_filename
    linecache.checkcache(path) if not path.startswith("<") else None
    file = load_file(path)
    if not file.text:
        raise OSError(f"no source for {fn.__qualname__} ({path})")
    first = code.co_firstlineno
    for node in ast.walk(file.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == fn.__name__:
            starts = [node.lineno] + [d.lineno for d in node.decorator_list]
            if first in starts:
                return FunctionSource(file, node)  # type: ignore[arg-type]
    raise OSError(f"cannot find the source of {fn.__qualname__} in {path}")


def location(rng: SourceRange) -> Any:
    """An MLIR `FileLineColRange` location for a source range."""
    from mlir import ir

    return ir.Location.file(rng.file, rng.line, rng.column + 1, rng.end_line, rng.end_column + 1)
