"""Where the cursor is, read from the lines around it: the DSL function it is in, the call it
is writing, and a small piece of source for jedi to resolve names in.

Completion and signature help run while the user types, so the document rarely parses and
must not be parsed whole on every keystroke (a file of a hundred kernels takes tens of
milliseconds to parse, and as long for jedi). Everything here reads only the lines it needs,
tolerates half-written code, and never raises for odd input: a question it cannot answer
has the answer "nothing known" (`MODULE` context, no call).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dsl.frontend.static_checks import decorator_kind
from lsp.text_model import line_content

KERNEL, JIT, HELPER, MODULE = "kernel", "jit", "helper", "module"  # what the cursor's code is

_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")
_CLOSERS = (")", "]", "}")
_IDENT_CHARS = re.compile(r"[\w.]")
_KEYWORD_ARG = re.compile(r"^\s*(\w+)\s*=(?!=)")


@dataclass(frozen=True)
class Enclosing:
    """The function whose body holds the cursor: KERNEL, JIT, HELPER (any other def) or MODULE."""

    kind: str
    name: str | None = None
    start: int = 0  # 0-based line of its first decorator (or of the `def`)
    def_line: int = 0  # 0-based line of the `def`


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def decorators_kind(lines: Sequence[str], def_line: int) -> tuple[str | None, int]:
    """("kernel" | "jit" | None, first decorator line) of the `def` at 0-based `def_line`."""
    depth = _indent(line_content(lines[def_line]))
    first = def_line
    j = def_line - 1
    while j >= 0:
        text = line_content(lines[j])
        stripped = text.strip()
        if not stripped or (_indent(text) <= depth and not stripped.startswith(("@", *_CLOSERS))):
            break
        if stripped.startswith("@") and _indent(text) == depth:
            first = j
        j -= 1
    kind = None
    block = "\n".join(line_content(lines[k]).strip() for k in range(first, def_line))
    for piece in re.split(r"\n(?=@)", block):
        try:
            node = ast.parse(piece.lstrip("@").replace("\n", " "), mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        kind = kind or decorator_kind(node)
    return kind, first


def enclosing_function(lines: Sequence[str], line: int, column: int) -> Enclosing:
    """The function whose body holds 0-based (`line`, `column`), from indentation alone."""
    if not 0 <= line < len(lines):
        return Enclosing(MODULE)
    here = line_content(lines[line])
    limit = _indent(here) if here[:column].strip() else column  # the indentation the cursor's code has
    for k in range(line - 1, -1, -1):
        text = line_content(lines[k])
        stripped = text.strip()
        if not stripped or stripped.startswith(("#", *_CLOSERS)):
            continue
        depth = _indent(text)
        if depth >= limit:
            continue
        match = _DEF.match(text)
        if match is None:
            limit = depth  # a compound statement: what holds it is less indented still
            if depth == 0:
                return Enclosing(MODULE)
            continue
        kind, first = decorators_kind(lines, k)
        return Enclosing(kind or HELPER, match.group(2), first, k)
    return Enclosing(MODULE)


def dsl_function_kinds(lines: Sequence[str]) -> dict[str, str]:
    """Every decorated kernel and jit function of the document by name, read line by line."""
    out: dict[str, str] = {}
    for k, raw in enumerate(lines):
        if "def" not in raw:
            continue
        match = _DEF.match(line_content(raw))
        if match is not None:
            kind, _ = decorators_kind(lines, k)
            if kind is not None:
                out.setdefault(match.group(2), kind)
    return out


def def_header(lines: Sequence[str], name: str) -> ast.FunctionDef | None:
    """The parsed `def name(...)` line(s) of the document, without its body."""
    for k, raw in enumerate(lines):
        match = _DEF.match(line_content(raw))
        if match is None or match.group(2) != name:
            continue
        header = []
        for j in range(k, min(k + 40, len(lines))):
            header.append(line_content(lines[j]).strip())
            try:
                tree = ast.parse(" ".join(header) + " pass")
            except (SyntaxError, ValueError, RecursionError):
                continue
            node = tree.body[0] if tree.body else None
            return node if isinstance(node, ast.FunctionDef) else None
        return None
    return None


# -- a snippet for jedi ------------------------------------------------------------------------


def imports(lines: Sequence[str]) -> list[str]:
    """The module's top-level import statements (continuation lines included)."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        text = line_content(lines[k])
        if text.startswith(("import ", "from ")):
            statement = [text]
            depth = text.count("(") - text.count(")")
            while (depth > 0 or statement[-1].endswith("\\")) and k + 1 < len(lines):
                k += 1
                more = line_content(lines[k])
                statement.append(more)
                depth += more.count("(") - more.count(")")
            out += statement
        k += 1
    return out


@dataclass(frozen=True)
class Snippet:
    """The imports and the enclosing function up to the cursor's line: enough for jedi to
    resolve what a name at the cursor is, a fraction of the document to parse."""

    text: str
    first_line: int  # the document's 0-based line that is the snippet's line `offset` + 1
    offset: int

    def line_of(self, document_line: int) -> int:
        """The snippet's 1-based line (jedi's) of a document's 0-based line."""
        return document_line - self.first_line + self.offset + 1


def snippet(lines: Sequence[str], where: Enclosing, line: int, first: int | None = None) -> Snippet:
    """The imports and lines `first` (default: the enclosing function's first) to `line`."""
    top = imports(lines)
    if first is None:
        first = where.start if where.kind != MODULE else line
    body = [line_content(lines[k]) for k in range(first, min(line + 1, len(lines)))]
    return Snippet("\n".join([*top, *body]) + "\n", first, len(top))


# -- the call being written ----------------------------------------------------------------------


@dataclass(frozen=True)
class CallAtCursor:
    """The innermost call whose argument list holds the cursor."""

    callee: str  # the text before its "(": "dsl.shfl_xor", "saxpy", "saxpy(x, y).launch"
    callee_end: tuple[int, int]  # 0-based (line, column) just after the callee's last name
    argument: int  # 0-based index of the argument being written
    keyword: str | None  # `name=` the argument being written starts with
    keywords: frozenset[str] = field(default_factory=frozenset)  # every `name=` given so far
    partial: str = ""  # the word being typed at the cursor


def _scan(text: str) -> list[tuple[str, int]]:
    """The brackets still open at the end of `text`, as (bracket, offset), skipping strings
    and comments (a best effort on half-written code)."""
    stack: list[tuple[str, int]] = []
    i, n = 0, len(text)
    pairs = {")": "(", "]": "[", "}": "{"}
    while i < n:
        ch = text[i]
        if ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif ch in "'\"":
            quote = text[i:i + 3] if text[i:i + 3] in ("'''", '"""') else ch
            end = text.find(quote, i + len(quote))
            while end > 0 and len(quote) == 1 and text[end - 1] == "\\":
                end = text.find(quote, end + 1)
            i = n if end < 0 else end + len(quote)
            continue
        elif ch in "([{":
            stack.append((ch, i))
        elif ch in pairs and stack and stack[-1][0] == pairs[ch]:
            stack.pop()
        i += 1
    return stack


def callee_start(text: str, end: int) -> int:
    """Where the callee expression ending at `end` starts: names, dots and whole bracket
    groups (`saxpy(x, y).launch`)."""
    i = end
    while i > 0:
        ch = text[i - 1]
        if _IDENT_CHARS.match(ch):
            i -= 1
        elif ch in ")]":
            depth, j = 0, i - 1
            while j >= 0:
                depth += {")": 1, "]": 1, "(": -1, "[": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j -= 1
            if j < 0:
                break
            i = j
        else:
            break
    return i


def _arguments(text: str) -> list[str]:
    """`text` (an argument list without its parentheses) split at its top-level commas."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def call_at(lines: Sequence[str], where: Enclosing, line: int, column: int) -> CallAtCursor | None:
    """The call whose parentheses hold 0-based (`line`, `column`), if any."""
    if not 0 <= line < len(lines):
        return None
    first = where.def_line + 1 if where.kind != MODULE else max(0, line - 20)
    first = min(first, line)
    rows = [line_content(lines[k]) for k in range(first, line)] + [line_content(lines[line])[:column]]
    text = "\n".join(rows)
    stack = _scan(text)
    if not stack or stack[-1][0] != "(":
        return None
    paren = stack[-1][1]
    start = callee_start(text, paren)
    callee = text[start:paren].strip()
    if not callee or not (callee[-1].isalnum() or callee[-1] == "_"):
        return None
    args = _arguments(text[paren + 1:])
    keywords = frozenset(m.group(1) for a in args if (m := _KEYWORD_ARG.match(a)))
    current = _KEYWORD_ARG.match(args[-1])
    before = text[:paren]
    callee_line = first + before.count("\n")
    callee_column = len(before) - (before.rfind("\n") + 1)
    partial = re.search(r"\w*$", args[-1])
    return CallAtCursor(callee, (callee_line, callee_column), len(args) - 1, current.group(1) if current else None,
                        keywords, partial.group(0) if partial else "")
