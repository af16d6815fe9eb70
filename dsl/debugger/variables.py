"""The variables view of a stop: scopes, variables and their children, by reference.

A client asks for a scope's variables, then for the children of any that has some, by the
integer reference each carries; references live until the program resumes (`References`).
What has children:
- a scalar or vector: its values in the focus thread's warp and in its whole block (arrays,
  inactive threads marked), so one variable can be read across threads;
- a per-thread list or tuple: its elements; a tensor or shared array: its rows and elements;
- arrays longer than `CHUNK` are split into ranges of `CHUNK`, which any client can page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dsl.debugger.thread_values import format_value, scalar

CHUNK = 100


@dataclass
class Variable:
    name: str
    value: str
    type: str = ""
    reference: int = 0  # > 0: it has children
    evaluate_name: str | None = None
    count: int = 0  # how many children (an array's elements), 0 when unknown or none


class References:
    """Integer handles for things with children, valid until the program resumes."""

    def __init__(self) -> None:
        self._items: dict[int, Callable[[], list[Variable]]] = {}

    def add(self, children: Callable[[], list[Variable]]) -> int:
        ref = len(self._items) + 1
        self._items[ref] = children
        return ref

    def children(self, ref: int) -> list[Variable] | None:
        found = self._items.get(ref)
        return None if found is None else found()

    def clear(self) -> None:
        self._items.clear()


def array_variable(refs: References, name: str, array: np.ndarray, type_: str, evaluate_name: str | None,
                   marks: np.ndarray | None = None, labels: list[str] | None = None) -> Variable:
    """An array as a variable: a summary value, its elements as children (chunked)."""
    summary = _summary(array, marks)
    ref = refs.add(lambda: array_children(refs, array, evaluate_name, 0, len(array), marks, labels)) if len(
        array) else 0
    return Variable(name, summary, type_, ref, evaluate_name, len(array))


def array_children(refs: References, array: np.ndarray, evaluate_name: str | None, start: int, stop: int,
                   marks: np.ndarray | None = None, labels: list[str] | None = None) -> list[Variable]:
    """Elements `start`..`stop` of `array` (rows, for more than one dimension), in chunks when long."""
    count = stop - start
    if count > CHUNK:
        step = CHUNK
        while count > step * CHUNK:
            step *= CHUNK
        out = []
        for lo in range(start, stop, step):
            hi = min(lo + step, stop)
            out.append(Variable(f"[{lo}..{hi - 1}]", "", "", refs.add(
                lambda lo=lo, hi=hi: array_children(refs, array, evaluate_name, lo, hi, marks, labels)), None,
                hi - lo))
        return out
    out = []
    for i in range(start, stop):
        item = array[i]
        label = labels[i] if labels is not None else f"[{i}]"
        sub = f"{evaluate_name}[{i}]" if evaluate_name else None
        inactive = marks is not None and not marks[i]
        if isinstance(item, np.ndarray) and item.ndim >= 1 and array.ndim > 1:
            out.append(array_variable(refs, label, item, f"{item.dtype}{list(item.shape)}", sub))
        else:
            text = format_value(scalar(item))
            out.append(Variable(label, f"{text} (inactive)" if inactive else text, str(np.asarray(item).dtype), 0,
                                sub))
    return out


def _summary(array: np.ndarray, marks: np.ndarray | None) -> str:
    shape = "x".join(str(d) for d in array.shape)
    head = [format_value(scalar(array[i])) for i in range(min(len(array), 8))] if array.ndim == 1 or (
        array.ndim == 2 and array.shape[1] <= 8 and marks is not None) else []
    body = f"[{', '.join(head)}{', ...' if len(array) > len(head) else ''}]" if head else ""
    active = f", {int(marks.sum())} active" if marks is not None else ""
    return f"{array.dtype} [{shape}]{active} {body}".rstrip()


def list_variable(refs: References, name: str, items: list[tuple[str, Any]], evaluate_name: str,
                  make: Callable[[str, Any, str], Variable]) -> Variable:
    """A per-thread list or tuple: `items` are (element label, value) with the elements in order."""
    preview = ", ".join(make(label, v, "").value for label, v in items[:6])
    more = ", ..." if len(items) > 6 else ""
    ref = refs.add(lambda: [make(label, v, f"{evaluate_name}{label}") for label, v in items])
    return Variable(name, f"[{preview}{more}]", f"list[{len(items)}]", ref, evaluate_name, len(items))


def leaf(name: str, value: Any, type_: str = "", evaluate_name: str | None = None) -> Variable:
    return Variable(name, format_value(value) if not isinstance(value, str) else value, type_, 0, evaluate_name)
