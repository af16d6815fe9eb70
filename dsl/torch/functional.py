"""`dsl.torch.op(fn, outputs=...)`: a jit function as a functional torch operator.

A kdsl jit function writes its results into tensors it is given; torch code wants
`y = rmsnorm(x, w)`. The functional form takes the function's other parameters, allocates
the outputs (each a tensor parameter the kernels write) and returns them:

    rmsnorm = dsl.torch.op(run_rmsnorm, outputs={"y": "x", "rstd": lambda x: x.new_empty(x.shape[0])})
    y, rstd = rmsnorm(x, w)              # torch.ops.kdsl.run_rmsnorm_functional

An output's allocator is the name of an input to copy the shape, dtype and device of
(`torch.empty_like`), or a function of inputs, passed by the names of its parameters. It runs
on fake tensors too, so it must only make tensors (`empty`, `new_empty`, `zeros_like`: an
output the kernels read before they write it needs zeros). Nothing is mutated that the caller
sees, so the operator takes `register_autograd` (as torch's `CustomOpDef` does) for a backward
made of other kdsl operators and torch ops, and passes `torch.library.opcheck`.

The operator is registered on its first call (or `.custom_op`), not by `op`: a module that
defines operators imports without torch and without compiling anything, and an editor
analysing it registers nothing.
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from dsl.torch.facts import default_writes
from dsl.torch.kernels import run
from dsl.torch.registry import NAMESPACE, check, free_name, register, require_torch
from dsl.torch.signature import OpSignature, schema_text, signature_of

Allocator = Callable[[dict[str, Any]], Any]


def op(fn: Any, *, outputs: Mapping[str, str | Callable[..., Any]], name: str | None = None) -> FunctionalOp:
    """The functional operator of jit function `fn` (see the module docstring), named
    `torch.ops.kdsl.<name>` (default `<function>_functional`) when it is registered."""
    from dsl.language.decorators import JitFunction

    if not isinstance(fn, JitFunction):
        raise TypeError(f"dsl.torch.op takes a @dsl.jit function, not {fn!r}")
    if name is not None and not name.isidentifier():
        raise ValueError(f"dsl.torch.op({fn.fn.__qualname__}): name={name!r} is not an identifier")
    sig = signature_of(fn)
    allocators = _allocators(sig, outputs)
    if all(t in allocators for t in sig.tensors):
        raise TypeError(f"dsl.torch.op({sig.function}): every tensor is an output, so the operator would take no "
                        "tensor, and torch picks an operator's kernel (CPU or CUDA) by its tensor arguments; keep a "
                        "tensor input, or use the function's mutating operator, fn.torch_op")
    like = {out: make if isinstance(make, str) else None for out, make in outputs.items()}
    made = FunctionalOp(fn, sig, allocators, name, like)
    if sys.modules.get("torch") is not None:  # now, outside any trace: older Dynamo cannot call it there
        made._register()
    return made


class FunctionalOp:
    """A functional kdsl operator: call it like the function less its outputs; it returns the
    outputs (one tensor, or a tuple in `outputs=` order)."""

    def __init__(self, fn: Any, sig: OpSignature, allocators: dict[str, Allocator], name: str | None,
                 like: dict[str, str | None] | None = None):
        self.fn = fn
        self.signature = sig
        self.outputs = tuple(allocators)
        self.like = like or dict.fromkeys(allocators)  # output -> the input it is allocated like; None: a function
        self._allocators = allocators
        self._name = name
        self._custom_op: Any = None
        self._registered: str | None = None  # the operator's name, once registered
        self._autograd: tuple[Callable[..., Any], Callable[..., Any] | None] | None = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = self._registered or _registered_name(self)  # an attribute Dynamo reads as a constant
        from dsl.torch.dynamo import call_operator

        return call_operator(name, args, kwargs)

    @property
    def custom_op(self) -> Any:
        """torch's `CustomOpDef` of the operator (registering it): for `torch.library.opcheck`
        and torch's other `CustomOpDef` APIs."""
        _registered_name(self)
        return self._custom_op

    @property
    def name(self) -> str:
        """`kdsl::<name>` (registering the operator)."""
        return f"{NAMESPACE}::{_registered_name(self)}"

    def register_autograd(self, backward: Callable[..., Any], *,
                          setup_context: Callable[..., Any] | None = None) -> None:
        """Gives the operator a backward, as `torch.library.register_autograd`: `setup_context(ctx,
        inputs, output)` saves what `backward(ctx, *output_grads)` needs, which returns one
        gradient (or None) per input. Applied when the operator is registered."""
        with self._lock:
            self._autograd = (backward, setup_context)
            if self._custom_op is not None:
                self._custom_op.register_autograd(backward, setup_context=setup_context)

    def __repr__(self) -> str:
        return f"<dsl.torch.op {self.signature.function} -> {', '.join(self.outputs)}>"

    @property
    def base_name(self) -> str:
        """The name it asks for: `name=`, else `<function>_functional` (registering may number it)."""
        return self._name or f"{self.fn.fn.__name__}_functional"

    def operator_schema(self) -> tuple[tuple[str, ...], str]:
        """(the inputs it mutates, its schema), as registering defines them; needs no torch
        (`python -m dsl.torch.cpp_library` writes the same schema in C++)."""
        fn, sig, outs = self.fn, self.signature, self.outputs
        writes = default_writes(fn, sig)
        unwritten = [n for n in outs if n not in writes]
        if unwritten:
            raise TypeError(f"dsl.torch.op({sig.function}): its kernels never write "
                            f"{', '.join(map(repr, unwritten))}; an output is a tensor the kernels write")
        mutated = tuple(n for n in sig.tensors if n in writes and n not in outs)
        return mutated, schema_text(sig, mutated, returns=len(outs), without=outs)

    def _register(self) -> str:
        with self._lock:
            if self._registered is not None:
                return self._registered
            require_torch()
            fn, sig, outs = self.fn, self.signature, self.outputs
            mutated, schema = self.operator_schema()
            declared = mutated + outs
            name = free_name(fn, self._name, exact=True) if self._name else free_name(fn, self.base_name)
            label = f"torch.ops.{NAMESPACE}.{name}"

            def real(device: str) -> Callable[..., Any]:
                def kernel(*args: Any, **kwargs: Any) -> Any:
                    named, made = self._call(label, args, kwargs)
                    run(label, sig, fn, named, declared, device)
                    return self._result(made)

                return kernel

            def fake(*args: Any, **kwargs: Any) -> Any:
                named, made = self._call(label, args, kwargs)
                check(label, sig, fn, named, declared)
                return self._result(made)

            custom = register(name, sig, schema, mutated, real, fake)
            if self._autograd is not None:
                custom.register_autograd(self._autograd[0], setup_context=self._autograd[1])
            self._custom_op = custom
            self._registered = name
            return name

    def _call(self, label: str, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        """(every jit parameter by name, the outputs made) for a call of the operator."""
        inputs = self.signature.bind(args, kwargs, without=self.outputs)
        made = {out: _allocate(label, out, make, inputs) for out, make in self._allocators.items()}
        return {p.name: made[p.name] if p.name in made else inputs[p.name] for p in self.signature.params}, made

    def _result(self, made: dict[str, Any]) -> Any:
        return made[self.outputs[0]] if len(self.outputs) == 1 else tuple(made[o] for o in self.outputs)


def _registered_name(op: FunctionalOp) -> str:
    """The operator's name, registering it on first use; Dynamo calls it as a constant."""
    return op._registered or op._register()


_registered_name._dynamo_marked_constant = True  # type: ignore[attr-defined]  # torch._dynamo.assume_constant_result


def _allocators(sig: OpSignature, outputs: Mapping[str, Any]) -> dict[str, Allocator]:
    """Output name -> a function of the inputs (by name) that allocates it; refuses outputs that
    are not tensor parameters and allocators that ask for what is not an input."""
    where = f"dsl.torch.op({sig.function})"
    if not isinstance(outputs, Mapping) or not outputs:
        raise TypeError(f"{where}: outputs= maps each output tensor parameter to its allocator, e.g. "
                        "outputs={'y': 'x'}")
    inputs = [p.name for p in sig.params if p.name not in outputs]
    found: dict[str, Allocator] = {}
    for out, make in outputs.items():
        if out not in sig.tensors:
            raise TypeError(f"{where}: output {out!r} is not a tensor parameter of the function (its tensors: "
                            f"{', '.join(sig.tensors)})")
        if isinstance(make, str):
            if make not in sig.tensors or make in outputs:
                raise TypeError(f"{where}: output {out!r} is allocated like {make!r}, which is no tensor input")
            found[out] = _like(make)
        elif callable(make):
            found[out] = _by_name(where, out, make, inputs)
        else:
            raise TypeError(f"{where}: output {out!r}'s allocator must be an input's name or a function of inputs, "
                            f"not {make!r}")
    return found


def _like(source: str) -> Allocator:
    def make(inputs: dict[str, Any]) -> Any:
        import torch

        return torch.empty_like(inputs[source], memory_format=torch.contiguous_format)

    return make


def _by_name(where: str, out: str, make: Callable[..., Any], inputs: list[str]) -> Allocator:
    params = inspect.signature(make).parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return lambda values: make(**values)
    wanted = []
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            continue
        if p.name in inputs:
            wanted.append(p.name)
        elif p.default is inspect.Parameter.empty:
            raise TypeError(f"{where}: output {out!r}'s allocator takes {p.name!r}, which is not an input (the "
                            f"inputs: {', '.join(inputs)})")
    return lambda values: make(**{n: values[n] for n in wanted})


def _allocate(label: str, out: str, make: Allocator, inputs: dict[str, Any]) -> Any:
    import torch

    made = make(inputs)
    if not isinstance(made, torch.Tensor):
        raise TypeError(f"{label}: the allocator of output {out!r} returned {type(made).__name__}, not a tensor")
    if any(made is v for v in inputs.values()):
        raise TypeError(f"{label}: the allocator of output {out!r} returned an input; allocate a new tensor")
    return made
