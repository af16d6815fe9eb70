"""Registering jit functions as `torch.library` custom operators, and naming them.

`torch_op(fn)` registers the function itself, lazily, on first use (`fn.torch_op`, or a call
of `fn` inside `torch.compile`, see `dsl.torch.dynamo`): `torch.ops.kdsl.<function>` with the
schema of `dsl.torch.signature`, mutating the tensors its kernels write (`dsl.torch.facts`),
a fake kernel from its launcher's checks (`dsl.torch.fake`) and the real kernels of
`dsl.torch.kernels`. `dsl.torch.op` registers functional forms through `register` too.

Names: the function's name, `torch.ops.kdsl.run_saxpy`; where another function already took
it, qualified by module (`torch.ops.kdsl.models_attn_run_saxpy`), then numbered. A name, once
given, stays with its function for the process (torch cannot unregister an operator), so a
module run again (a reload, an editor's analysis) registers numbered twins. Registration
holds one lock: two threads asking for the same function get one operator.

torch is imported here only when an operator is registered: a module that defines operators
imports (and lints) without it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from dsl.torch.facts import call_facts, default_writes
from dsl.torch.fake import check_call
from dsl.torch.kernels import check_writes, run
from dsl.torch.signature import OpSignature, schema_text, signature_of

NAMESPACE = "kdsl"
_LOCK = threading.RLock()
_TAKEN: dict[str, tuple[str, str, str]] = {}  # operator name -> (file, module, qualified name) of its jit function


def require_torch() -> None:
    """Raises a `ModuleNotFoundError` that says what to install when torch is missing."""
    import importlib.util
    import sys

    if sys.modules.get("torch") is None and importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError(f"kdsl's PyTorch operators need torch, which {sys.executable} cannot import: "
                                  f"install it with `{sys.executable} -m pip install torch`", name="torch")


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text).strip("_") or "fn"


def _owner(jit_fn: Any) -> tuple[str, str, str]:
    fn = jit_fn.fn
    return (fn.__code__.co_filename, getattr(fn, "__module__", "") or "", fn.__qualname__)


def free_name(jit_fn: Any, base: str, exact: bool = False) -> str:
    """A name in the `kdsl` namespace for an operator of `jit_fn`: `base`, else qualified by
    the function's module, else numbered. `exact`: `base` itself, or its numbered twin when the
    same definition (file and name: a module run again) took it; another's is a ValueError."""
    with _LOCK:
        owner = _owner(jit_fn)
        module = _identifier(owner[1])
        if exact:
            if _free(base):
                return _take(base, owner)
            taken = _TAKEN.get(base)
            if taken is None or (taken[0], taken[2]) != (owner[0], owner[2]):
                raise ValueError(f"torch.ops.{NAMESPACE}.{base} is already registered (for {_describe(base)}); "
                                 "choose another name=")
            candidates = []
        else:
            base = _identifier(base)
            candidates = [base, f"{module}_{base}"] if module else [base]
        i = 2
        while True:
            for name in candidates:
                if _free(name):
                    return _take(name, owner)
            candidates = [f"{module}_{base}_{i}" if module and not exact else f"{base}_{i}"]
            i += 1


def _describe(name: str) -> str:
    owner = _TAKEN.get(name)
    return f"{owner[1]}.{owner[2]}" if owner else "another library"


def _free(name: str) -> bool:
    import torch

    return name not in _TAKEN and not hasattr(getattr(torch.ops, NAMESPACE), name)


def _take(name: str, owner: tuple[str, str, str]) -> str:
    _TAKEN[name] = owner
    return name


def release(name: str) -> None:
    """Gives back a name whose registration failed."""
    with _LOCK:
        _TAKEN.pop(name, None)


def register(name: str, sig: OpSignature, schema: str, mutated: tuple[str, ...],
             real: Callable[[str], Callable[..., Any]], fake: Callable[..., Any]) -> Any:
    """Defines `kdsl::name` with `schema`, the real kernel `real(device_type)` for "cpu" and
    "cuda", and `fake`; returns torch's `CustomOpDef`. Gives the name back on failure."""
    import torch

    try:
        try:
            op = torch.library.custom_op(f"{NAMESPACE}::{name}", real("cpu"), mutates_args=mutated,
                                         device_types="cpu", schema=schema)
        except RuntimeError as err:  # torch's schema parser: a name or default it does not take
            raise TypeError(f"torch refused the schema {schema} made for {sig.function}: {err}") from err
        op.register_kernel("cuda")(real("cuda"))
        op.register_fake(fake)
    except BaseException:
        release(name)
        raise
    return op


def torch_op(jit_fn: Any) -> Any:
    """`torch.ops.kdsl.<name>` for the jit function, registered on first use (inside
    `torch.compile` too)."""
    require_torch()
    from dsl.torch.dynamo import operator_of

    return operator_of(jit_fn)


def operator_name(jit_fn: Any) -> str:
    """The operator name of the jit function, registering it on first use. Dynamo calls it
    as a constant (its result never changes for a function), so a call of the function inside
    `torch.compile` registers the operator then, outside the traced code."""
    name = jit_fn.__dict__.get("_kdsl_torch_op_name")
    if name is not None:
        return name
    with _LOCK:
        name = jit_fn.__dict__.get("_kdsl_torch_op_name")
        if name is None:
            name = _register_function(jit_fn)
            jit_fn.__dict__["_kdsl_torch_op_name"] = name
    return name


operator_name._dynamo_marked_constant = True  # type: ignore[attr-defined]  # torch._dynamo.assume_constant_result


def function_schema(jit_fn: Any) -> tuple[OpSignature, tuple[str, ...], str]:
    """(signature, mutated tensors, schema) of the function's own operator, as `torch_op`
    registers it; needs no torch (`python -m dsl.torch.cpp_library` writes the same schema in C++)."""
    sig = signature_of(jit_fn)
    writes = default_writes(jit_fn, sig)
    mutated = tuple(n for n in sig.tensors if n in writes)
    return sig, mutated, schema_text(sig, mutated)


def _register_function(jit_fn: Any) -> str:
    sig, mutated, schema = function_schema(jit_fn)
    name = free_name(jit_fn, jit_fn.fn.__name__)
    label = f"torch.ops.{NAMESPACE}.{name}"

    def real(device: str) -> Callable[..., Any]:
        def kernel(*args: Any, **kwargs: Any) -> None:
            run(label, sig, jit_fn, sig.bind(args, kwargs), mutated, device)

        return kernel

    def fake(*args: Any, **kwargs: Any) -> None:
        check(label, sig, jit_fn, sig.bind(args, kwargs), mutated)

    register(name, sig, schema, mutated, real, fake)
    return name


def check(label: str, sig: OpSignature, jit_fn: Any, named: dict[str, Any], declared: tuple[str, ...]) -> None:
    """The fake kernel's work: the specialization's writes, then its launcher's checks."""
    facts = call_facts(jit_fn, sig, named)
    check_writes(label, sig, facts, declared)
    check_call(f"{label} ({sig.function})", facts,
               {n: v for n, v in named.items() if sig.param(n).kind != "constexpr"})
