"""DSL305's message and quick fix: a read of a wgmma accumulator before its wait
(`wgmma_groups` finds them).

The message names the wgmma (and the wait that left it running, if one did), and says what to
write with the accumulator's own name, read from the statement that assigned it. The fix puts
`name = dsl.wgmma_wait(name)` on a line of its own before the statement that reads `name`:
waiting for every group (pending=0) right before the read is always correct, if not always
the fastest (a pipelined kernel would rather wait once, further up).
"""

from __future__ import annotations

import ast
from typing import Any

from dsl.diagnostics import Diagnostic, Fix, Related, SourceRange, TextEdit
from dsl.frontend.wgmma_groups import InFlight, early_reads

CODE = "DSL305"


def check_accumulator_reads(tracer: Any, func: Any) -> list[Diagnostic]:
    """DSL305 for each read, in the traced `gpu.func` `func`, of an accumulator before the wait
    that retires it (none, at no cost, for a kernel that issues no wgmma)."""
    if not getattr(tracer, "wgmma_issued", False):
        return []
    return [early_read(where, fact) for where, fact in early_reads(func).items()]


def early_read(where: SourceRange, fact: InFlight) -> Diagnostic:
    """DSL305 at `where`, which reads the value `fact` is about."""
    name, prefix = _accumulator_name(fact.waited[0] if fact.waited else fact.issued)
    shown = name or "acc"
    issued = f"the dsl.wgmma at {_place(fact.issued, where)}"
    related = [Related(fact.issued, "the wgmma whose group may still run")] if fact.issued else []
    if fact.waited is None:
        why = f"it comes from {issued} and has not been through a dsl.wgmma_wait"
    else:
        at, pending = fact.waited
        groups = f"{pending} most recent wgmma group{'s' if pending != 1 else ''}"
        why = f"the dsl.wgmma_wait at {_place(at, where)} leaves the {groups} running, and {issued} is one of them"
        if at is not None:
            related.append(Related(at, f"this wait leaves the {groups} in flight"))
    message = (f"reads a wgmma accumulator that may still be in flight ({why}): the tensor cores may still be "
               f"writing its registers, a race on the GPU. Wait first and read what the wait returns: "
               f"`{shown} = {prefix or 'dsl.'}wgmma_wait({shown})` (pending=0 waits for every group)")
    fix = _insert_wait(where, name, prefix) if name and prefix else None
    return Diagnostic.make(CODE, message, where, related=related, fixes=[fix] if fix else [])


def _place(at: SourceRange | None, read: SourceRange) -> str:
    if at is None:
        return "an unknown place"
    return f"line {at.line}" if at.file == read.file else f"{at.file.rsplit('/', 1)[-1]}:{at.line}"


def _tree(path: str) -> Any:
    from dsl.frontend.source import load_file

    try:
        return load_file(path)
    except (OSError, SyntaxError, ValueError):
        return None


def _innermost_statement(file: Any, rng: SourceRange) -> ast.stmt | None:
    """The innermost statement of `file` that holds the start of `rng`."""
    start = SourceRange(rng.file, rng.line, rng.column, rng.line, rng.column)
    found = None
    todo: list[ast.AST] = list(file.tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.stmt) and _inside(start, file.range_of(node)):
            found = node
            todo = list(ast.iter_child_nodes(node))
    return found


def _accumulator_name(call: SourceRange | None) -> tuple[str | None, str | None]:
    """(the name the result of the wgmma or wait at `call` is assigned to, the module prefix the
    call spells: `dsl.`); None for what the statement is not `name = mod.f(...)` enough to say."""
    file = _tree(call.file) if call is not None else None
    stmt = _innermost_statement(file, call) if file is not None and call is not None else None
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None, None
    value = stmt.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name)):
        return stmt.targets[0].id, None
    return stmt.targets[0].id, f"{value.func.value.id}."


def _insert_wait(read: SourceRange, name: str, prefix: str) -> Fix | None:
    """The edit that waits on `name` on a line of its own before the statement that reads it,
    offered when that statement names it inside the read and starts its line."""
    file = _tree(read.file)
    stmt = _innermost_statement(file, read) if file is not None else None
    if file is None or stmt is None:
        return None
    line_text = file.lines[stmt.lineno - 1]
    column = file.char_column(stmt.lineno, stmt.col_offset)
    if line_text[:column].strip():
        return None
    named = any(isinstance(node, ast.Name) and node.id == name and _inside(file.range_of(node), read)
                for node in ast.walk(stmt))
    if not named:
        return None
    at = SourceRange(read.file, stmt.lineno, 0, stmt.lineno, 0)
    text = f"{line_text[:column]}{name} = {prefix}wgmma_wait({name})\n"
    return Fix(f"Wait for '{name}' before reading it", (TextEdit(at, text),))


def _inside(inner: SourceRange, outer: SourceRange) -> bool:
    return (inner.line, inner.column) >= (outer.line, outer.column) and \
        (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)
