"""`@dsl.autotune(configs=[dsl.Config(...)], key=[...])`: the surface of autotuning a jit function.

A `Config` names values for the jit function's Constexpr parameters and compile hints
(`maxnreg`, `minnctapersm`, `fastmath`, `contract`) for every kernel the function launches.
`autotune` checks the configs against the function once, at decoration, so a misspelt
parameter is an error that names it rather than a config that silently tunes nothing, and
attaches an `AutotuneSpec` to the `JitFunction`. What a call then does (benchmark each config
on the first call with a new key, remember the fastest on disk) is the runtime's:
`dsl.runtime.autotune`, plugged in by the `dsl` package so this layer imports nothing above it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dsl.language.decorators import HINT_DEFAULTS, JitFunction
from dsl.language.types import DType, Tensor, TensorType, evaluate_annotation

_J = TypeVar("_J", bound="JitFunction[Any, Any]")
_UNSET: Any = object()


class Config:
    """One candidate of an autotuned jit function.

    Keyword arguments other than the hints are Constexpr parameters of the function
    (`Config(BLOCK=256)`); the hints override the `@dsl.kernel(...)` hints of every kernel the
    function launches, for this config only (`Config(BLOCK=256, maxnreg=128)`).
    """

    def __init__(self, *, maxnreg: int | None = _UNSET, minnctapersm: int | None = _UNSET,
                 fastmath: bool = _UNSET, contract: bool = _UNSET, ftz: bool = _UNSET, **params: Any) -> None:
        given = {"maxnreg": maxnreg, "minnctapersm": minnctapersm, "fastmath": fastmath, "contract": contract,
                 "ftz": ftz}
        self.hints: dict[str, Any] = {k: v for k, v in given.items() if v is not _UNSET}
        self.params: dict[str, Any] = dict(params)
        for name, value in self.params.items():
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"Config({name}={value!r}): a Constexpr value must be hashable") from None

        parts = [f"{k}={v!r}" for k, v in sorted(self.params.items())]
        parts += [f"{k}={self.hints[k]!r}" for k in HINT_DEFAULTS if k in self.hints]
        self._text = ", ".join(parts) or "defaults"

    def describe(self) -> str:
        """`BLOCK=256, maxnreg=128`: the config's identity in records, tables and messages."""
        return self._text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and other.describe() == self.describe()

    def __hash__(self) -> int:
        return hash(self.describe())

    def __repr__(self) -> str:
        return f"Config({self.describe()})" if self.params or self.hints else "Config()"


@dataclass(frozen=True)
class AutotuneSpec:
    """What `@dsl.autotune` declared, checked against the function's parameters."""

    configs: tuple[Config, ...]
    key: tuple[str, ...]  # parameters whose values (a tensor: its dtype and shape) pick a tuning
    restore: tuple[str, ...] | None  # tensors restored between trials; None: those the kernels write
    flops: Callable[..., float] | None  # floating-point operations of one call, for TFLOP/s

    @property
    def tuned(self) -> frozenset[str]:
        """The parameters some config sets (a call must not pass them)."""
        return frozenset(name for c in self.configs for name in c.params)


def autotune(configs: Sequence[Config], key: Sequence[str] = (), *, restore: Sequence[str] | None = None,
             flops: Callable[..., float] | None = None) -> Callable[[_J], _J]:
    """Tunes a `@dsl.jit` function (put it above `@dsl.jit`) over `configs`, once per value of
    the `key` parameters. `restore` names the tensors to put back between trials (default:
    every tensor its kernels write; `restore=[]` for outputs fully overwritten by each call);
    `flops(*args)` gives a call's floating-point operations, so tables show TFLOP/s."""

    def attach(fn: _J) -> _J:
        if not isinstance(fn, JitFunction):
            raise TypeError(f"@dsl.autotune goes above @dsl.jit, on a jit function, not on {fn!r}")
        for what, names in (("key", key), ("restore", restore)):
            if isinstance(names, str):
                raise TypeError(f"@dsl.autotune on '{fn.fn.__name__}': {what}= takes a list of parameter names, "
                                f"not {names!r}")
        spec = AutotuneSpec(tuple(configs), tuple(key), None if restore is None else tuple(restore), flops)
        check_spec(fn, spec)
        target: Any = fn
        target.tuning = spec
        return fn

    return attach


def spec_of(fn: Any) -> AutotuneSpec | None:
    """What `@dsl.autotune` attached to a jit function, or None when it is not autotuned."""
    return getattr(fn, "tuning", None)


def check_spec(fn: Any, spec: AutotuneSpec) -> None:
    """Raises TypeError or ValueError naming the first config, key or restore entry that does
    not fit the function's parameters."""
    name = fn.fn.__name__
    params = inspect.signature(fn.fn).parameters
    kinds = {p: parameter_kind(fn, params[p].annotation) for p in params}
    listing = ", ".join(params) or "none"
    if isinstance(spec.configs, Config) or not spec.configs:
        raise TypeError(f"@dsl.autotune on '{name}' needs a non-empty list of dsl.Config, got {spec.configs!r}")
    seen: dict[Config, int] = {}
    for i, config in enumerate(spec.configs):
        if not isinstance(config, Config):
            raise TypeError(f"@dsl.autotune on '{name}': configs[{i}] is {config!r}, not a dsl.Config")
        if config in seen:
            raise ValueError(f"@dsl.autotune on '{name}': configs[{seen[config]}] and configs[{i}] are the same "
                             f"({config.describe()})")
        seen[config] = i
        for param in config.params:
            if param not in params:
                raise TypeError(f"@dsl.autotune on '{name}': Config({param}=...) names no parameter of '{name}' "
                                f"(its parameters: {listing})")
            if kinds[param] != "compile-time":
                raise TypeError(f"@dsl.autotune on '{name}': Config({param}=...) sets a run-time parameter; a "
                                f"Config sets Constexpr parameters (annotate '{param}' with dsl.Constexpr[...])")
    for hint in HINT_DEFAULTS:
        if hint in params:
            raise TypeError(f"@dsl.autotune on '{name}': parameter '{hint}' has the name of a compile hint, "
                            "which a Config could not set; rename it")
    for what, names in (("key", spec.key), ("restore", spec.restore or ())):
        for entry in names:
            if entry not in params:
                raise TypeError(f"@dsl.autotune on '{name}': {what}={list(names)!r} names '{entry}', which is no "
                                f"parameter of '{name}' (its parameters: {listing})")
            if what == "key" and entry in spec.tuned:
                raise TypeError(f"@dsl.autotune on '{name}': '{entry}' is both tuned and in key=")
            if what == "restore" and kinds[entry] == "scalar":
                raise TypeError(f"@dsl.autotune on '{name}': restore= names '{entry}', a scalar; it takes tensors")
    if spec.flops is not None and not callable(spec.flops):
        raise TypeError(f"@dsl.autotune on '{name}': flops= must be a function of the call's arguments")


def parameter_kind(fn: Any, annotation: Any) -> str:
    """"tensor", "scalar" (a run-time value) or "compile-time" (Constexpr or unannotated) for a
    parameter of jit function `fn` annotated `annotation`."""
    ann = evaluate_annotation(fn.fn, annotation)
    if isinstance(ann, TensorType) or ann is Tensor:
        return "tensor"
    if isinstance(ann, DType):
        return "scalar"
    return "compile-time"  # Constexpr, unannotated, or an annotation the compiler reports (DSL102)
