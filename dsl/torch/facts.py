"""What a specialization's kernels do with its tensors, from the compiler's own launcher.

An operator's schema must say which tensors it mutates before any call, and its fake kernel
must check a call without running it. Both come from the jit function traced by the real
compiler (to the `traced` stage only: no lowering, no ptxas) for a call's argument types: the
generated launcher's `TENSOR_ACCESS` names the tensors some kernel writes (`dsl.compiler.access`
follows every store, atomic and inline-PTX use of each pointer), and its `launch` holds the
function's run-time `assert`s and launch checks, which `dsl.torch.fake` runs on fake tensors.

An autotuned function contributes every config: the tuner may pick any of them, so its writes
are the union of theirs, and a call passes its checks when some config's checks pass.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

from dsl.diagnostics import ArgumentError, CompileError
from dsl.torch.signature import OpSignature, UnsupportedSignature

_LOCK = threading.Lock()


@dataclass(frozen=True)
class ConfigFacts:
    """One config's (or a plain function's) traced specialization."""

    describe: str  # the autotuning config ("" for a function that is not autotuned)
    writes: frozenset[str]  # jit tensor parameters some kernel writes
    launcher: str  # the generated launcher's source
    target: str


@dataclass(frozen=True)
class Facts:
    """A specialization's configs (one, unless the function is autotuned)."""

    configs: tuple[ConfigFacts, ...]

    @functools.cached_property
    def writes(self) -> frozenset[str]:
        """What any config writes: the tuner may run any of them."""
        return frozenset().union(*(c.writes for c in self.configs))


def _configs(jit_fn: Any) -> list[Any]:
    tuning = getattr(jit_fn, "tuning", None)
    return list(tuning.configs) if tuning is not None else [None]


def _trace(jit_fn: Any, args: tuple, kwargs: dict) -> Facts:
    """The function traced for these arguments (specs or arrays), once per config."""
    from dsl.compiler.api import compile_function
    from dsl.compiler.build_options import BuildOptions
    from dsl.language.decorators import hint_overrides

    found = []
    for config in _configs(jit_fn):
        params = {} if config is None else config.params
        with hint_overrides({} if config is None else config.hints):
            compiled, diags = compile_function(jit_fn, args, {**kwargs, **params}, None, until="traced",
                                               options=BuildOptions(views=False))
        errors = [d for d in diags if d.is_error]
        if errors or compiled is None:
            raise CompileError(errors or diags)
        launcher = compiled.stages["launcher"]
        namespace: dict[str, Any] = {}
        exec(compile(launcher, f"<kdsl launcher {compiled.name}>", "exec"), namespace)
        access = namespace.get("TENSOR_ACCESS") or {}
        writes = frozenset(name for name, fact in access.items() if fact[2] is not None)
        found.append(ConfigFacts("" if config is None else config.describe(), writes, launcher, compiled.target))
    return Facts(tuple(found))


def _key_part(sig: OpSignature, name: str, value: Any) -> Any:
    """What of an argument picks the specialization: a tensor's dtype and rank, a scalar's
    nothing, a Constexpr's value (cheap: it is computed at every call)."""
    kind = sig.param(name).kind
    if kind == "tensor":
        shape = getattr(value, "shape", None)
        return (getattr(value, "dtype", None), None if shape is None else len(shape))
    if kind == "scalar":
        return None
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(f"{sig.function}: Constexpr argument '{name}' is {value!r}, which is not "
                            "hashable") from None
    return (type(value), value)


def _spec(sig: OpSignature, name: str, value: Any) -> Any:
    """What the compiler is given for this argument."""
    from dsl.language.types import TensorSpec, dtype_from_foreign

    p = sig.param(name)
    if p.kind == "tensor":
        dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
        if dtype is None or shape is None:
            raise ArgumentError(f"{sig.function}: argument '{name}' is a {type(value).__name__}, not a tensor")
        dt = dtype_from_foreign(dtype)
        if dt is None:
            raise ArgumentError(f"{sig.function}: argument '{name}' has element type {dtype}, which kdsl "
                                "kernels do not take")
        return TensorSpec(dt, rank=len(shape))
    return p.dtype if p.kind == "scalar" else value


def call_facts(jit_fn: Any, sig: OpSignature, named: dict[str, Any]) -> Facts:
    """The facts of the specialization a call with these arguments (every jit parameter, by
    name: real or fake tensors, scalars, Constexpr values) runs; traced once per key."""
    key = tuple((name, _key_part(sig, name, value)) for name, value in named.items())
    cache = jit_fn.__dict__.setdefault("_kdsl_torch_facts", {})
    found = cache.get(key)
    if found is None:
        with _LOCK:
            found = cache.get(key)
            if found is None:
                specs = {name: _spec(sig, name, value) for name, value in named.items()}
                found = cache[key] = _trace(jit_fn, (), specs)
    return found


def default_writes(jit_fn: Any, sig: OpSignature) -> frozenset[str]:
    """The tensors the function writes, known before any call: from its `examples=` (all of
    them), else from its annotations alone. A function that can be compiled neither way is
    refused: its operator's schema could not say what it mutates."""
    from dsl.compiler.api import parse_examples

    examples = parse_examples(jit_fn)
    try:
        if examples:
            writes: frozenset[str] = frozenset()
            for args, kwargs, _ in examples:
                writes |= _trace(jit_fn, args, kwargs).writes
            return writes
        return _trace(jit_fn, (), {}).writes
    except CompileError as err:
        if any(d.code == "DSL103" for d in err.diagnostics):
            raise UnsupportedSignature(
                f"kdsl cannot make a torch operator of {sig.function}: its schema must say which tensors it "
                "writes, which kdsl reads from the compiled function, and its annotations do not say enough to "
                "compile it without data; add examples=[...] to its @dsl.jit (e.g. dsl.TensorSpec(dsl.f32, "
                f"shape=(1024,)) for a tensor):\n{err}") from err
        raise
