"""What Dynamo traces: kdsl operators reached from Python code inside `torch.compile`.

`JitFunction.__call__` is C (`dsl/language/_jitcall.c`), which Dynamo cannot trace: a plain
`run_saxpy(x, y, 2.0)` in a compiled model would break the graph. `install` registers, with
`torch.compiler.substitute_in_graph`, a Python stand-in that Dynamo traces instead of it
(never used outside Dynamo, so eager calls keep their fast path): it calls
`torch.ops.kdsl.<function>`, whose name `registry.operator_name` gives as a constant
(registering the operator then, the first time, outside the traced code).

Every path to an operator goes through `torch.ops.kdsl` spelt out on this module's `torch`:
Dynamo follows a module global's attributes, not a module object it cannot name.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from dsl.torch.registry import operator_name

_installed = False


def operator_of(jit_fn: Any) -> Any:
    """`torch.ops.kdsl.<name>` of the jit function (registered on first use)."""
    return getattr(torch.ops.kdsl, operator_name(jit_fn))


def registered_name(jit_fn: Any) -> str:
    """The operator's name, read as an attribute where it is registered already: torch 2.11's
    Dynamo calls a constant function only with constant arguments, and a jit function is none."""
    return getattr(jit_fn, "_kdsl_torch_op_name", None) or operator_name(jit_fn)


def call_operator(name: str, args: tuple, kwargs: dict) -> Any:
    """Calls `torch.ops.kdsl.<name>`."""
    return getattr(torch.ops.kdsl, name)(*args, **kwargs)


def install() -> bool:
    """Installs the stand-in once; False where this torch takes none (a plain call then breaks
    the graph, and `fn.torch_op(...)` is the way)."""
    global _installed
    if _installed:
        return True
    from dsl.language import decorators
    from dsl.language.decorators import JitFunction

    # The pure-Python `__call__` (no C fast path, KDSL_PURE_PYTHON=1) asks itself whether it is
    # being traced: Dynamo answers `torch.compiler.is_compiling()` with a constant, on every torch.
    decorators._torch_graph_call = lambda fn, args, kwargs: call_operator(registered_name(fn), args, kwargs)
    decorators._torch_compiling = torch.compiler.is_compiling

    substitute = getattr(torch.compiler, "substitute_in_graph", None)
    if substitute is None:
        return False

    def jit_call_in_graph(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(torch.ops.kdsl, registered_name(self))(*args, **kwargs)

    try:
        substitute(inspect.getattr_static(JitFunction, "__call__"), skip_signature_check=True)(jit_call_in_graph)
    except (TypeError, ValueError):  # a torch whose stand-ins take no slot wrapper
        return False
    _installed = True
    return True
