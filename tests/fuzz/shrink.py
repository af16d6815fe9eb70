"""Shrinks a failing program to a small one that fails the same way.

Greedy and one edit at a time, largest first: drop a statement, keep one side of an `if`,
empty a loop, drop a `while`'s extra condition, replace an expression by a same-typed part of
it or by a typed zero, drop the helper, launch one block. A barrier that separates two
phases of shared-memory use is never dropped: without it threads would race, and the
reference would fault for a reason the original program did not have. An edit is kept
when the smaller program still gets the same verdict (a mismatch stays a mismatch: an edit
that makes the program refused, or makes it agree, is undone). Every edit keeps the
program well typed, because each node carries its type and replacements are chosen by it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace

from tests.fuzz.program import (
    Assign,
    Atomic,
    Barrier,
    Call,
    Expr,
    For,
    If,
    Name,
    Program,
    ShStore,
    Stmt,
    Store,
    While,
    typed_zero,
)


def expr_edits(e: Expr) -> Iterator[Expr]:
    """Smaller expressions of the same type as `e`."""
    if isinstance(e, Name) or (isinstance(e, Call) and e.fn == "dsl.const_expr"):
        return
    zero = typed_zero(e.type)
    if zero != e:
        yield zero
    for kid in e.children():
        if kid.type == e.type and kid.type is not None:
            yield kid
    kids = e.children()
    for i, kid in enumerate(kids):
        for smaller in expr_edits(kid):
            yield e.with_children(kids[:i] + (smaller,) + kids[i + 1:])


def stmt_edits(s: Stmt) -> Iterator[tuple[Stmt, ...]]:
    """Replacements for one statement (a tuple: an `if` may give way to its body)."""
    if isinstance(s, If):
        yield s.body
        if s.orelse:
            yield s.orelse
            yield (replace(s, orelse=()),)
        for body in block_edits(s.body):
            yield (replace(s, body=body),)
        for orelse in block_edits(s.orelse):
            yield (replace(s, orelse=orelse),)
        for cond in expr_edits(s.cond):
            yield (replace(s, cond=cond),)
    elif isinstance(s, For):
        for body in block_edits(s.body):
            yield (replace(s, body=body),)
        for i, arg in enumerate(s.args):
            for smaller in expr_edits(arg):
                yield (replace(s, args=s.args[:i] + (smaller,) + s.args[i + 1:]),)
    elif isinstance(s, While):
        for body in block_edits(s.body):
            yield (replace(s, body=body),)
        if s.cond is not None:
            yield (replace(s, cond=None),)
            for cond in expr_edits(s.cond):
                yield (replace(s, cond=cond),)
        for limit in expr_edits(s.limit):
            yield (replace(s, limit=limit),)
    elif isinstance(s, Assign | Store | ShStore | Atomic):
        for value in expr_edits(s.value):
            yield (replace(s, value=value),)


def block_edits(stmts: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, ...]]:
    for i in range(len(stmts)):
        if not (isinstance(stmts[i], Barrier) and stmts[i].phase):  # type: ignore[attr-defined]
            yield stmts[:i] + stmts[i + 1:]  # (without a phase's barrier, threads would race)
    for i, s in enumerate(stmts):
        for new in stmt_edits(s):
            yield stmts[:i] + new + stmts[i + 1:]


def program_edits(p: Program) -> Iterator[Program]:
    """Smaller programs; one that lost (or changed) its ill-typed line no longer must be refused."""
    for edited in _edits(p):
        if edited.refusal_stmt is not None and edited.refusal_stmt not in edited.body:
            edited = replace(edited, refusal=None, refusal_stmt=None)
        yield edited


def _edits(p: Program) -> Iterator[Program]:
    if p.grid > 1:
        yield replace(p, grid=1)
    if p.helpers and "h0(" not in p.render().split("@dsl.kernel", 1)[1]:
        yield replace(p, helpers=())
    for body in block_edits(p.body):
        yield replace(p, body=body)
    if p.const > 1:
        yield replace(p, const=1)
    rest = "\n".join(line for stmt in p.body for line in stmt.render(1))
    if "sh[" not in rest and any(isinstance(s, Assign) and s.target == "sh" for s in p.prologue):
        yield replace(p, prologue=tuple(s for s in p.prologue if isinstance(s, Assign) and s.target != "sh"))
    if p.hist is not None and "dsl.atomic_" not in rest:
        yield replace(p, hist=None)
    for i, s in enumerate(p.prologue):  # a variable nothing reads any more
        if isinstance(s, Assign) and s.target != "sh" and not re.search(rf"\b{re.escape(s.target)}\b", rest):
            yield replace(p, prologue=p.prologue[:i] + p.prologue[i + 1:])
    for i, s in enumerate(p.prologue):
        if isinstance(s, Assign) and s.target != "acc":
            for value in expr_edits(s.value):
                yield replace(p, prologue=p.prologue[:i] + (replace(s, value=value),) + p.prologue[i + 1:])


def shrink(program: Program, still_fails: Callable[[Program], bool], budget: int = 400) -> Program:
    """The smallest program reached by edits that keep `still_fails` true, within `budget` tries."""
    current = program
    tries = 0
    progress = True
    while progress and tries < budget:
        progress = False
        for candidate in program_edits(current):
            tries += 1
            if still_fails(candidate):
                current = candidate
                progress = True
                break
            if tries >= budget:
                break
    return current
