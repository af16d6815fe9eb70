"""Per-thread arrays through run-time control flow: the elements of lists and tuples.

A kernel's per-thread arrays are Python lists (or tuples) of DSL values: `acc = [0.0] * 64`,
`acc[k] += a * b` with compile-time `k`. An `scf.if` or a loop cannot hold a Python list, so
what a run-time construct changes is carried element by element and the containers are
rebuilt after it:

* a name the body rebinds to a list or tuple (`pair = (pair[1], pair[0] + pair[1])`)
  carries each element, and gets a new container of the same kind and length after;
* a list the body changes in place (`acc[k] = v`, `acc.append(...)` is refused: the length
  is fixed) carries its elements by the list's identity, so every name bound to that list,
  a helper's parameter included, sees the change, as in Python.

The lists in question are found, not guessed: the construct is traced, the lists reachable
from the environment are compared with what they held before, and a loop whose body
changed one that it did not carry is traced again carrying it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_ELEMENTS = 4096  # longer lists are compile-time tables, never carried
LIST_KEY = "\x00list"  # prefix of the environment keys that stand for in-place list elements


def reachable_lists(env: dict[str, Any]) -> list[list[Any]]:
    """The lists reachable from the environment's values (through lists and tuples), once each."""
    seen: dict[int, list[Any]] = {}
    stack = [v for v in env.values() if isinstance(v, list | tuple)]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            if id(value) in seen or len(value) > MAX_ELEMENTS:
                continue
            seen[id(value)] = value
        elif len(value) > MAX_ELEMENTS:
            continue
        stack.extend(v for v in value if isinstance(v, list | tuple))
    return list(seen.values())


def snapshot(lists: list[list[Any]]) -> list[list[Any]]:
    return [list(lst) for lst in lists]


def restore(lists: list[list[Any]], saved: list[list[Any]]) -> None:
    for lst, contents in zip(lists, saved):
        lst[:] = contents


def changed(lists: list[list[Any]], saved: list[list[Any]]) -> list[int]:
    """Indices of the lists whose length or any element differs from `saved`."""
    return [k for k, (lst, old) in enumerate(zip(lists, saved))
            if len(lst) != len(old) or any(a is not b for a, b in zip(lst, old))]


def label_of(lst: list[Any], env: dict[str, Any]) -> str:
    for name, value in env.items():
        if value is lst:
            return f"'{name}'"
    return "a list"


class LengthChanged(Exception):
    """A carried list or tuple has another length after the construct: not expressible."""

    def __init__(self, label: str):
        self.label = label


@dataclass
class _Leaf:
    label: str
    name: str | None = None  # an environment name, or the name of a rebound container
    index: int = -1  # the element of that container, or of `target`
    target: list[Any] | None = None  # a list changed in place


class CarriedState:
    """The values a loop carries, flattened: names, elements of rebound containers, and
    elements of lists changed in place."""

    def __init__(self, names: list[str], env: dict[str, Any], lists: list[list[Any]]):
        self.leaves: list[_Leaf] = []
        self.kinds: dict[str, tuple[type, int]] = {}
        self.lengths = [len(lst) for lst in lists]
        for name in names:
            value = env[name]
            if isinstance(value, list | tuple) and not any(value is lst for lst in lists):
                self.kinds[name] = (type(value), len(value))
                self.leaves += [_Leaf(f"{name}[{i}]", name, i) for i in range(len(value))]
            else:
                self.leaves.append(_Leaf(name, name))
        self.lists = lists
        for lst in lists:
            label = label_of(lst, env).strip("'")
            self.leaves += [_Leaf(f"{label}[{i}]", None, i, lst) for i in range(len(lst))]

    @property
    def labels(self) -> list[str]:
        return [leaf.label for leaf in self.leaves]

    def read(self, env: dict[str, Any]) -> list[Any]:
        for lst, length in zip(self.lists, self.lengths):
            if len(lst) != length:
                raise LengthChanged(label_of(lst, env))
        out = []
        for leaf in self.leaves:
            if leaf.target is not None:
                out.append(leaf.target[leaf.index])
            elif leaf.name in self.kinds:
                container = env.get(leaf.name)
                kind, length = self.kinds[leaf.name]
                if not isinstance(container, kind) or len(container) != length:
                    raise LengthChanged(f"'{leaf.name}'")
                out.append(container[leaf.index])
            else:
                out.append(env.get(leaf.name))  # type: ignore[arg-type]
        return out

    def write(self, env: dict[str, Any], values: list[Any]) -> None:
        rebuilt: dict[str, list[Any]] = {}
        for leaf, value in zip(self.leaves, values):
            if leaf.target is not None:
                leaf.target[leaf.index] = value
            elif leaf.name in self.kinds:
                rebuilt.setdefault(leaf.name, [None] * self.kinds[leaf.name][1])[leaf.index] = value
            else:
                env[leaf.name] = value  # type: ignore[index]
        for name, items in rebuilt.items():
            env[name] = self.kinds[name][0](items)
