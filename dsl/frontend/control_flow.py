"""AST facts the tracer needs before it traces a statement.

* Which names a block assigns (the candidates for `scf.if` results and loop-carried values).
* Which exits (`break`, `continue`, `return`) a loop body can take: a run-time loop that can
  be left early becomes an `scf.while` that carries exit flags.
* Early returns folded into `else` branches, so `if i >= n: return` followed by the rest of
  the kernel becomes one two-way `if` whose every path ends once (no flag is needed there).

The exit flags are ordinary names of the tracer's environment (`RETURN_FLAG`, `BREAK_FLAG`,
`CONTINUE_FLAG`): a compile-time `True` after a statement means every path left, a run-time
i1 means some paths may have, and the rest of the block is then traced under `if not flag`.
Because they are names, the machinery that merges branches and carries loop values carries
them too.
"""

from __future__ import annotations

import ast
import copy


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names stored anywhere in `stmts` (not inside nested defs), in first-seen order."""
    seen: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            seen.setdefault(node.id, None)
        if isinstance(node, ast.Return) and node.value is not None:
            seen.setdefault(RETURN_NAME, None)  # a bare `return` sets only the exit flag
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in stmts:
        visit(stmt)
    return list(seen)


RETURN_NAME = "__return__"  # the value a helper returns
RETURN_FLAG = "__returned__"  # the function has returned
BREAK_FLAG = "__break__"  # the innermost loop was left with `break`
CONTINUE_FLAG = "__continue__"  # the rest of this iteration is skipped
EXIT_FLAGS = (RETURN_FLAG, BREAK_FLAG, CONTINUE_FLAG)


def loop_exits(body: list[ast.stmt]) -> set[str]:
    """The exits a loop body can take: 'break'/'continue' of this loop, and 'return'."""
    found: set[str] = set()

    def visit(node: ast.AST, nested_loop: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return
        if isinstance(node, ast.Return):
            found.add("return")
        elif isinstance(node, ast.Break) and not nested_loop:
            found.add("break")
        elif isinstance(node, ast.Continue) and not nested_loop:
            found.add("continue")
        inner = nested_loop or isinstance(node, ast.For | ast.While | ast.AsyncFor)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    for stmt in body:
        visit(stmt, False)
    return found


def _terminates(stmts: list[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def fold_early_returns(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Moves the statements after `if c: ...; return` into that `if`'s other branch."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.If):
            body = fold_early_returns(stmt.body)
            orelse = fold_early_returns(stmt.orelse)
            rest = stmts[i + 1 :]
            if rest and (_terminates(body) or _terminates(orelse)):
                node = copy.copy(stmt)
                if _terminates(body) and not _terminates(orelse):
                    node.body, node.orelse = body, fold_early_returns(orelse + rest)
                elif _terminates(orelse) and not _terminates(body):
                    node.body, node.orelse = fold_early_returns(body + rest), orelse
                else:
                    node.body, node.orelse = body, orelse  # the rest is unreachable
                out.append(node)
                return out
            node = copy.copy(stmt)
            node.body, node.orelse = body, orelse
            out.append(node)
            continue
        out.append(stmt)
        if isinstance(stmt, ast.Return):
            return out
    return out
