"""Expressions in a thread's scope: watch, hover, the debug console, conditions and logpoints.

An expression sees what the statement it stopped at sees: the names of the frame, each as the
thread holds it (NumPy scalars: `i + 1` wraps as an `i32` does), per-thread lists as lists,
tensors as the caller's NumPy arrays, shared arrays as the block's contents, compile-time
values as they are; and `dsl.thread_idx`, `dsl.block_idx`, `dsl.block_dim`, `dsl.grid_dim`
(`.x`, `.y`, `.z`), `dsl.lane_id()` and `dsl.warp_id()` of that thread, and `np`.

A breakpoint condition is evaluated for every thread at the statement at once: the same
names hold arrays over the threads, and `and`, `or`, `not`, chained comparisons and `x if c
else y` are rewritten to their elementwise forms, which give what Python gives thread by
thread for the expressions conditions are made of. One that does not evaluate that way (it
calls a function on a scalar, say) is evaluated thread by thread instead.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

_ELEMENT = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Dim3:
    x: Any
    y: Any
    z: Any

    def __repr__(self) -> str:
        return f"({self.x}, {self.y}, {self.z})"


class ThreadView:
    """`dsl` as an expression sees it: one thread's (or every candidate thread's) coordinates."""

    def __init__(self, thread: Dim3, block: Dim3, block_dim: Dim3, grid_dim: Dim3, linear: Any):
        self.thread_idx, self.block_idx, self.block_dim, self.grid_dim = thread, block, block_dim, grid_dim
        self._linear = linear

    def lane_id(self) -> Any:
        return self._linear % 32

    def warp_id(self) -> Any:
        return self._linear // 32


def nest(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """`[("x", v), ("acc[0]", a), ("acc[1]", b)]` -> `{"x": v, "acc": [a, b]}` (lists nest)."""
    out: dict[str, Any] = {}
    for path, value in items:
        base = path.split("[", 1)[0]
        indices = [int(m) for m in _ELEMENT.findall(path[len(base):])]
        if not indices:
            out[base] = value
            continue
        node = out.setdefault(base, [])
        for depth, index in enumerate(indices):
            while len(node) <= index:
                node.append([] if depth < len(indices) - 1 else None)
            if depth == len(indices) - 1:
                node[index] = value
            else:
                if not isinstance(node[index], list):
                    node[index] = []
                node = node[index]
    return out


def evaluate(expression: str, namespace: dict[str, Any]) -> Any:
    """`expression` in `namespace` (raises what it raises: the caller reports it)."""
    code = compile(expression.strip(), "<expression>", "eval")
    with np.errstate(all="ignore"):
        return eval(code, {"np": np, "__builtins__": __builtins__}, dict(namespace))


class _Elementwise(ast.NodeTransformer):
    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        fn = "__and" if isinstance(node.op, ast.And) else "__or"
        return _call(fn, node.values)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        return _call("__not", [node.operand]) if isinstance(node.op, ast.Not) else node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(ast.Compare(left=left, ops=[op], comparators=[right]))
            left = right
        return _call("__and", parts)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        return _call("__where", [node.test, node.body, node.orelse])


def _call(name: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])


def _fold(fn: Any) -> Any:
    def apply(*values: Any) -> Any:
        out = np.asarray(values[0], dtype=bool)
        for v in values[1:]:
            out = fn(out, np.asarray(v, dtype=bool))
        return out

    return apply


_HELPERS = {"__and": _fold(np.logical_and), "__or": _fold(np.logical_or), "__not": np.logical_not,
            "__where": lambda c, a, b: np.where(np.asarray(c, dtype=bool), a, b)}


def condition_mask(condition: str, vectorized: dict[str, Any], per_lane: Any, lanes: int) -> np.ndarray:
    """Which of `lanes` candidate threads satisfy `condition`.

    `vectorized`: the namespace with arrays over the candidates; `per_lane(k)`: the namespace
    of candidate `k` alone, for the thread-by-thread fallback."""
    tree = ast.fix_missing_locations(_Elementwise().visit(ast.parse(condition.strip(), mode="eval")))
    try:
        with np.errstate(all="ignore"):
            got = eval(compile(tree, "<condition>", "eval"), {"np": np, "__builtins__": __builtins__, **_HELPERS},
                       dict(vectorized))
        mask = np.asarray(got)
        if mask.dtype == object:
            raise TypeError("not elementwise")
        return np.broadcast_to(mask.astype(bool), (lanes,)).copy()
    except Exception:
        return np.array([bool(evaluate(condition, per_lane(k))) for k in range(lanes)], dtype=bool)
