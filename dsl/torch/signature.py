"""A `@dsl.jit` signature read as a torch operator schema.

Each parameter becomes one schema argument, from its annotation alone (no call is needed):
`Tensor[...]` or bare `Tensor` -> `Tensor` (a schema cannot say an element type or rank: the
operator specializes on the tensors' own, as a plain call does); a scalar type -> `float`, `SymInt`
(integers: a size passed under `torch.compile(dynamic=True)` stays symbolic) or `bool`;
`Constexpr[int | float | bool | str]` -> `int`, `float`, `bool`, `str`, a compile-time
attribute of the call (each value is its own kdsl specialization). Defaults carry over.
Tensors the kernels write get an alias annotation (`Tensor(a!) y`): that is how torch knows
what the operator mutates. Anything a schema cannot express is refused here, naming the
function and the parameter, so no operator is registered that would misbehave later.
"""

from __future__ import annotations

import functools
import inspect
import math
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dsl.language.tensor_cores import TensorMap
from dsl.language.types import ConstexprType, DType, Tensor, TensorType, evaluate_annotation

_EMPTY = inspect.Parameter.empty
_CONSTEXPR_TYPES = {int: "int", float: "float", bool: "bool", str: "str"}


class UnsupportedSignature(TypeError):
    """A jit function whose signature has no torch schema (the message names the parameter)."""


@dataclass(frozen=True)
class OpParam:
    """One jit parameter as a schema argument."""

    name: str
    kind: str  # "tensor" | "scalar" | "constexpr"
    schema_type: str  # Tensor, SymInt, float, bool, int, str (with "?" when it defaults to None)
    dtype: DType | None  # a tensor's element type or a scalar's type; None for a bare `Tensor`
    rank: int | None  # a `Tensor[dtype, rank]`'s rank; None for a bare `Tensor` and non-tensors
    default: Any  # inspect.Parameter.empty when there is none
    keyword_only: bool


@dataclass(frozen=True)
class OpSignature:
    """The schema arguments of a jit function, in its parameter order."""

    function: str  # the qualified name, for messages
    params: tuple[OpParam, ...]
    tuned: frozenset[str]  # parameters an autotuning config sets: not part of the schema
    order: tuple[str, ...]  # every parameter of the jit function, tuned ones included

    @functools.cached_property
    def _by_name(self) -> dict[str, OpParam]:
        return {p.name: p for p in self.params}

    def param(self, name: str) -> OpParam:
        return self._by_name[name]

    @property
    def tensors(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.kind == "tensor")

    def bind(self, args: tuple, kwargs: dict, without: Iterable[str] = ()) -> dict[str, Any]:
        """{parameter: value}, in parameter order, of a call of the operator whose arguments are
        the schema's parameters less `without` (a functional form's outputs), defaults filled in."""
        skip = set(without)
        params = [p for p in self.params if p.name not in skip]
        positional = [p for p in params if not p.keyword_only]
        if len(args) > len(positional):
            raise TypeError(f"{self.function}() takes {len(positional)} positional arguments but {len(args)} "
                            "were given")
        named = {p.name: a for p, a in zip(positional, args)}
        for name, value in kwargs.items():
            if name in named or all(p.name != name for p in params):
                raise TypeError(f"{self.function}() got an unexpected or repeated argument '{name}'")
            named[name] = value
        for p in params:
            if p.name not in named:
                if p.default is _EMPTY:
                    raise TypeError(f"{self.function}() missing argument '{p.name}'")
                named[p.name] = p.default
        return {p.name: named[p.name] for p in params}

    def call_arguments(self, named: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        """(args, kwargs) of the jit call for these values: positional up to the first tuned or
        keyword-only parameter (the jit fast path takes positional calls), by name after it."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        positional = True
        for name in self.order:
            if name in self.tuned:
                positional = False
                continue
            if self.param(name).keyword_only:
                positional = False
            if positional:
                args.append(named[name])
            else:
                kwargs[name] = named[name]
        return tuple(args), kwargs


def signature_of(jit_fn: Any) -> OpSignature:
    """The jit function's parameters as schema arguments; `UnsupportedSignature` names the
    first parameter that has none."""
    fn = jit_fn.fn
    tuning = getattr(jit_fn, "tuning", None)
    tuned = frozenset(tuning.tuned) if tuning is not None else frozenset()
    every = inspect.signature(fn).parameters
    params = tuple(_param(jit_fn, p) for p in every.values() if p.name not in tuned)
    return OpSignature(fn.__qualname__, params, tuned, tuple(every))


def _param(jit_fn: Any, p: inspect.Parameter) -> OpParam:
    where = f"parameter '{p.name}'"

    def refuse(why: str) -> UnsupportedSignature:
        return UnsupportedSignature(f"kdsl cannot make a torch operator of {jit_fn.fn.__qualname__}: {where} {why}")

    if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
        raise refuse("collects arguments (*args / **kwargs); a torch schema lists each argument")
    if p.kind == p.POSITIONAL_ONLY:
        raise refuse("is positional-only; a torch schema names every argument")
    ann = evaluate_annotation(jit_fn.fn, p.annotation)
    keyword_only = p.kind == p.KEYWORD_ONLY
    if isinstance(ann, TensorType) or ann is Tensor:
        if p.default is not _EMPTY:
            raise refuse("is a tensor with a default; an operator's tensors are always passed")
        dtype = ann.dtype if isinstance(ann, TensorType) else None
        rank = ann.rank if isinstance(ann, TensorType) and dtype is not None else None
        return OpParam(p.name, "tensor", "Tensor", dtype, rank, _EMPTY, keyword_only)
    if ann is TensorMap:
        raise refuse("is a dsl.TensorMap; pass the tensor and make the map in the jit function with "
                     "dsl.tensor_map(tensor, box=...)")
    if isinstance(ann, DType):
        schema = "float" if ann.is_float else "bool" if ann.is_bool else "SymInt"
        return OpParam(p.name, "scalar", schema, ann, None, _default(p.default, schema, refuse), keyword_only)
    if isinstance(ann, ConstexprType):
        schema = _CONSTEXPR_TYPES.get(ann.py_type)
        if schema is None:
            raise refuse(f"is {ann!r}; a torch schema takes Constexpr[int], Constexpr[float], Constexpr[bool] "
                         "or Constexpr[str]")
        return OpParam(p.name, "constexpr", schema, None, None, _default(p.default, schema, refuse), keyword_only)
    if ann is _EMPTY and p.default is not _EMPTY and type(p.default) in _CONSTEXPR_TYPES:
        # unannotated with a default: a compile-time value to kdsl, typed by its default
        schema = _CONSTEXPR_TYPES[type(p.default)]
        return OpParam(p.name, "constexpr", schema, None, None, p.default, keyword_only)
    if ann is _EMPTY:
        raise refuse("has no annotation; a torch schema needs its type (Tensor[...], a scalar type such as "
                     "dsl.Float32, or Constexpr[int])")
    raise refuse(f"is annotated {ann!r}, which is no kdsl type a torch schema can express")


def _default(value: Any, schema: str, refuse: Any) -> Any:
    if value is _EMPTY or value is None:
        return value
    ok = {"float": (int, float), "SymInt": (int,), "int": (int,), "bool": (bool,), "str": (str,)}[schema]
    if not isinstance(value, ok) or (schema != "bool" and isinstance(value, bool)):
        raise refuse(f"defaults to {value!r}, which is no {schema}")
    if isinstance(value, float) and not math.isfinite(value):
        raise refuse(f"defaults to {value!r}; a torch schema's float defaults are finite")
    return value


def _literal(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _alias_sets() -> Iterator[str]:
    yield from string.ascii_lowercase
    i = 0
    while True:
        yield f"a{i}"
        i += 1


def schema_text(sig: OpSignature, mutated: Iterable[str], returns: int = 0, without: Iterable[str] = ()) -> str:
    """`(Tensor x, Tensor(a!) y, float a, int BLOCK=256) -> ()`: the schema of an operator
    over `sig` less the parameters `without`, writing `mutated`, returning `returns` tensors."""
    written = set(mutated)
    skip = set(without)
    aliases = _alias_sets()
    parts: list[str] = []
    starred = False
    for p in sig.params:
        if p.name in skip:
            continue
        if p.keyword_only and not starred:
            parts.append("*")
            starred = True
        kind = p.schema_type
        if p.name in written:
            kind = f"Tensor({next(aliases)}!)"
        elif p.default is None:
            kind += "?"
        text = f"{kind} {p.name}"
        if p.default is not _EMPTY:
            text += f"={_literal(p.default)}"
        parts.append(text)
    result = "()" if returns == 0 else "Tensor" if returns == 1 else "(" + ", ".join(["Tensor"] * returns) + ")"
    return f"({', '.join(parts)}) -> {result}"
