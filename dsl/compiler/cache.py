"""Compile caches: in memory for a warm process (the editor's worker), keyed by named parts.

The key of a function is built in one place from: its own source, the source of every
user helper and kernel it reaches through its globals and closures (transitively), the
values of plain constants it names, the decorator options of each kernel (name,
`known_block_size`, compile hints such as `maxnreg` and `contract`), the specialization,
the target, the pipeline stage it was compiled to and the toolchain version. Changing a
helper or a hint changes the key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import types
from collections import OrderedDict
from typing import Any

from dsl import environment
from dsl.compiler.toolchain import toolchain_version

_SIMPLE = (int, float, bool, str, bytes, type(None))


def _referenced_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


def dependency_digest(fn: types.FunctionType) -> str:
    """Hashes the sources, places and constants a function depends on, following helpers.

    A function's place (file, line, column) is part of it: a compiled result names absolute
    source lines, so the same text moved down by an edit above it is a different entry."""
    shape, places = dependency_shape(fn)
    return hashlib.sha256(f"{shape}\n{places!r}".encode()).hexdigest()


Place = tuple[str, int, int]  # (file, first line including decorators, column) of a function


def dependency_shape(fn: types.FunctionType) -> tuple[str, tuple[Place, ...]]:
    """What `dependency_digest` hashes, with the places apart: a digest of the sources and
    constants alone, and where each function it reached is. Two functions with the same
    shape differ only by where they are (`dsl.compiler.relocation` shifts a result)."""
    from dsl.frontend.source import closure_vars, function_source, is_user_function
    from dsl.language.decorators import JitFunction, KernelFunction

    h = hashlib.sha256()
    places: list[Place] = []
    seen: set[int] = set()
    stack = [fn]
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        try:
            src = function_source(f)
            first = min([src.node.lineno] + [d.lineno for d in src.node.decorator_list])
            places.append((src.path, first, src.node.col_offset))
            h.update(f"{src.path}:{src.node.lineno - first}\n".encode())
            h.update(src.text.encode())
        except OSError:
            h.update(getattr(f.__code__, "co_code", b""))
        closure = closure_vars(f)
        for name in sorted(_referenced_names(f.__code__)):
            value = closure.get(name, f.__globals__.get(name, _MISSING))
            if value is _MISSING:
                continue
            if isinstance(value, KernelFunction):
                h.update(f"{name}=kernel:{value.options_key()!r}".encode())
                stack.append(value.fn)
            elif isinstance(value, JitFunction):
                stack.append(value.fn)
            elif isinstance(value, types.FunctionType) and is_user_function(value):
                stack.append(value)
            elif isinstance(value, _SIMPLE) or (
                    isinstance(value, tuple) and all(isinstance(v, _SIMPLE) for v in value)):
                h.update(f"{name}={value!r}".encode())
    return h.hexdigest(), tuple(places)


_MISSING = object()


@functools.cache
def compiler_identity() -> str:
    """kdsl's own code, for cache keys: what a cached launcher holds (its checks, its facts)
    changes with it. Each source file's size and modification time stand for its content, as
    the toolchain's do: a stat per file, where hashing the files would cost milliseconds on
    every cold first call."""
    return _tree_identity(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.cache
def kdsl_identity() -> str:
    """The compiler and the language server's code (`dsl/` and `lsp/`): what a cached lint
    result depends on besides the compiler, since the checks and their merging live there."""
    dsl_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lsp_root = os.path.join(os.path.dirname(dsl_root), "lsp")
    return compiler_identity() + (_tree_identity(lsp_root) if os.path.isdir(lsp_root) else "-")


def _tree_identity(root: str) -> str:
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(files):
            if name.endswith((".py", ".c")):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{folder[len(root):]}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def function_key(fn: Any, src: Any, params: list[Any], target: str, until: str) -> str:
    return place_key(*function_shape_key(fn, src, params, target, until))


def place_key(shape_key: str, places: tuple[Place, ...]) -> str:
    """The key of a function of `shape_key` at `places`."""
    return hashlib.sha256(f"{shape_key}\n{places!r}".encode()).hexdigest()


def function_shape_key(fn: Any, src: Any, params: list[Any], target: str, until: str
                       ) -> tuple[str, tuple[Place, ...]]:
    """The key of a function's result without the places of the functions it covers, and
    those places (`place_key` joins them): a result found under the same shape elsewhere can
    be shifted (`dsl.compiler.relocation`) instead of compiled again."""
    shape, places = dependency_shape(fn.fn)
    parts = [
        "shape=" + shape,
        "kind=" + type(fn).__name__,
        "options=" + repr(fn.options_key() if hasattr(fn, "options_key") else None),
        "params=" + repr([p.key() for p in params]),
        "target=" + target,
        "until=" + until,
        "toolchain=" + toolchain_version(),
        "compiler=" + compiler_identity(),
        "assembler=" + environment.choice("KDSL_ASSEMBLER"),
        "device_debug=" + str(environment.switch("KDSL_DEBUG")),
        "file=" + src.path,
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest(), places


class MemoryCache:
    """A small LRU of compile results, for warm processes; safe to share between threads (the
    counters say how many lookups hit and missed, which tests of recompilation read).

    Beside the results it remembers, per shape key (`function_shape_key`), where the latest
    result of that shape was: a function moved by an edit is found there and shifted."""

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._shapes: dict[str, tuple[str, tuple[Place, ...]]] = {}  # shape key -> (key, places)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
            return None

    def put(self, key: str, value: Any, shape: tuple[str, tuple[Place, ...]] | None = None) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            if shape is not None:
                self._shapes[shape[0]] = (key, shape[1])
                if len(self._shapes) > 2 * self.capacity:
                    self._shapes = {s: kp for s, kp in self._shapes.items() if kp[0] in self._items}

    def latest_of_shape(self, shape_key: str) -> tuple[tuple[Place, ...], Any] | None:
        """The places and the result of the latest function of this shape still cached."""
        with self._lock:
            found = self._shapes.get(shape_key)
            if found is None or found[0] not in self._items:
                return None
            return found[1], self._items[found[0]]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._shapes.clear()


MEMORY = MemoryCache()
