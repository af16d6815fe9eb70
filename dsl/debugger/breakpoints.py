"""Line breakpoints as a debugger client sets them, verified against the file's code.

A breakpoint can stop on a statement of a kernel, of a helper a kernel calls (any function
of a file that imports `dsl`: helpers are traced inline), or on a kernel launch of a jit
function (its other statements run on the host, in the generated launcher, where there is
nothing to stop at). A line that starts no such statement (a blank line, a comment, an
`else:`, the middle of a statement) moves to the next one that does in the same function, as
debuggers do; a line outside any function, or in a file that does not import `dsl`, stays
unverified with the reason.

A breakpoint's `condition` is an expression in the kernel's terms, `hit_condition` counts
hits (`5` or `==5`: the fifth only; `>=5`, `>5`, `<5`, `<=5`; `%5`: every fifth), and a
`log_message` makes it a logpoint (`{expression}` parts are evaluated for the focus thread).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

_HIT = re.compile(r"^\s*(==|>=|<=|>|<|%)?\s*(\d+)\s*$")


@dataclass
class Breakpoint:
    """One breakpoint of a file, after verification."""

    id: int
    path: str
    requested_line: int
    line: int
    verified: bool
    message: str = ""
    condition: str | None = None
    hit_condition: str | None = None
    log_message: str | None = None
    launches: bool = False  # on a jit function's launch (not a kernel statement)
    hits: int = 0

    def counts(self) -> bool:
        """Counts one more hit; whether this hit is one to take (`hit_condition`)."""
        self.hits += 1
        if not self.hit_condition:
            return True
        m = _HIT.match(self.hit_condition)
        assert m is not None  # verified when set
        op, n = m.group(1) or "==", int(m.group(2))
        return {"==": self.hits == n, ">=": self.hits >= n, "<=": self.hits <= n, ">": self.hits > n,
                "<": self.hits < n, "%": n > 0 and self.hits % n == 0}[op]


@dataclass
class _Function:
    name: str
    kind: str  # "kernel", "jit" or "helper"
    first: int
    last: int
    lines: list[int] = field(default_factory=list)  # where a stop can be, ascending


def _decorator_kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if name == "kernel":
            return "kernel"
        if name in ("jit", "autotune"):
            return "jit"
    return "helper"


def _statement_lines(stmts: list[ast.stmt]) -> list[int]:
    """First lines of every statement, nested bodies included (not nested defs, not docstrings)."""
    out: list[int] = []
    for stmt in stmts:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            out.append(stmt.lineno)
        for body in ("body", "orelse", "finalbody"):
            out += _statement_lines(getattr(stmt, body, []) or [])
    return out


def _launch_lines(stmts: list[ast.stmt]) -> list[int]:
    """Lines of a jit function's statements that launch a kernel (`k(...).launch(...)`, `k[g, b](...)`)."""
    out = []
    for line, stmt in ((s.lineno, s) for s in _walk_statements(stmts)):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "launch")
                    or isinstance(node.func, ast.Subscript)):
                out.append(line)
                break
    return out


def _walk_statements(stmts: list[ast.stmt]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        nested = [getattr(stmt, body, []) or [] for body in ("body", "orelse", "finalbody")]
        if any(nested):
            out += _walk_statements([s for body in nested for s in body])
        else:
            out.append(stmt)
    return out


def code_map(source: str) -> tuple[list[_Function] | None, str]:
    """The functions of a file where breakpoints can stop, or (None, why none can)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return None, f"the file does not parse: {err.msg} (line {err.lineno})"
    imports_dsl = any(
        (isinstance(n, ast.Import) and any(a.name == "dsl" or a.name.startswith("dsl.") for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "dsl")
        for n in ast.walk(tree))
    if not imports_dsl:
        return None, "not a kdsl file: breakpoints stop in kernels, their helpers and jit functions' launches"
    functions = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = _decorator_kind(node)
            lines = _launch_lines(node.body) if kind == "jit" else _statement_lines(node.body)
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            functions.append(_Function(node.name, kind, first, node.end_lineno or node.lineno, sorted(set(lines))))
    return functions, ""


class BreakpointTable:
    """Every file's breakpoints, replaced file by file as `setBreakpoints` does."""

    def __init__(self) -> None:
        self._by_path: dict[str, list[Breakpoint]] = {}
        self._next_id = 1

    def set(self, path: str, requested: list[dict], source: str | None = None) -> list[Breakpoint]:
        """Replaces `path`'s breakpoints (`requested`: DAP `SourceBreakpoint`s); returns them verified."""
        path = os.path.realpath(path)
        if source is None:
            try:
                with open(path, encoding="utf-8") as f:
                    source = f.read()
            except OSError as err:
                source, functions, why = None, None, f"cannot read the file: {err.strerror}"
        if source is not None:
            functions, why = code_map(source)
        out = []
        for spec in requested:
            line = int(spec.get("line", 0))
            bp = Breakpoint(self._next_id, path, line, line, False, why, spec.get("condition") or None,
                            spec.get("hitCondition") or None, spec.get("logMessage") or None)
            self._next_id += 1
            if functions is not None:
                self._place(bp, functions)
            if bp.verified and bp.hit_condition and not _HIT.match(bp.hit_condition):
                bp.verified, bp.message = False, (f"hit count '{bp.hit_condition}' is not N, ==N, >=N, >N, <N, "
                                                  "<=N or %N")
            if bp.verified and bp.condition:
                try:
                    compile(bp.condition, "<condition>", "eval")
                except SyntaxError as err:
                    bp.verified, bp.message = False, f"the condition does not parse: {err.msg}"
            out.append(bp)
        self._by_path[path] = out
        return out

    @staticmethod
    def _place(bp: Breakpoint, functions: list[_Function]) -> None:
        inside = [f for f in functions if f.first <= bp.requested_line <= f.last]
        if not inside:
            bp.message = "not inside a function: breakpoints stop in kernels, their helpers and jit functions' launches"
            return
        fn = min(inside, key=lambda f: f.last - f.first)  # the innermost
        later = [n for n in fn.lines if n >= bp.requested_line]
        if not later:
            what = "kernel launch" if fn.kind == "jit" else "statement"
            bp.message = f"no {what} of '{fn.name}' at or after line {bp.requested_line}"
            return
        bp.line, bp.verified, bp.launches, bp.message = later[0], True, fn.kind == "jit", ""

    def at(self, path: str, line: int) -> list[Breakpoint]:
        """The verified breakpoints on `path`:`line`."""
        return [b for b in self._by_path.get(os.path.realpath(path), ()) if b.verified and b.line == line]

    def has_any(self) -> bool:
        return any(b.verified for bps in self._by_path.values() for b in bps)
