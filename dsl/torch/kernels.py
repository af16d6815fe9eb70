"""The real kernels behind a kdsl operator: the interpreter on CPU tensors, the GPU on CUDA ones.

Both run the jit function itself, so an operator computes what a plain call computes: on CPU
tensors through the interpreter (`dsl.interpret`: the same compiler, launcher and checks, run
with NumPy on the tensors' memory), so model code that calls kdsl operators runs on a laptop
and in CI; on CUDA tensors as a normal launch, on torch's current stream.

Two checks come first. The specialization a call runs must write no tensor the schema calls
read-only (the schema was made from the function's default specialization; a Constexpr branch
could write another): functionalization would otherwise keep a stale copy. And a CUDA call
inside a CUDA-graph capture must not be the specialization's first: compiling and loading a
module is no work a graph can record, so it is refused, naming the function, with the remedy
(call it once before capturing; `mode="reduce-overhead"` does so in its warm-up runs).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsl.diagnostics import ArgumentError
from dsl.torch.facts import Facts, call_facts
from dsl.torch.signature import OpSignature


class CaptureError(RuntimeError):
    """A kdsl operator's first call (which compiles) was made inside a CUDA-graph capture."""


def check_writes(op_name: str, sig: OpSignature, facts: Facts, declared: Iterable[str]) -> None:
    """Refuses a specialization that writes a tensor the operator's schema says it only reads."""
    undeclared = sorted(facts.writes - set(declared))
    if undeclared:
        names = ", ".join(f"'{n}'" for n in undeclared)
        raise ArgumentError(
            f"{op_name} ({sig.function}): this call's specialization writes {names}, which the operator's schema "
            "(made from the function's default specialization) does not mark as mutated; add an example that "
            "writes it to the function's @dsl.jit(examples=[...]) so the schema says so")


def run(op_name: str, sig: OpSignature, jit_fn: Any, named: dict[str, Any], declared: Iterable[str],
        device: str) -> None:
    """Runs the jit function on these arguments (every parameter, by name) on `device`'s kind."""
    check_writes(op_name, sig, call_facts(jit_fn, sig, named), declared)
    args, kwargs = sig.call_arguments(named)
    if device == "cpu":
        from dsl.interpreter import interpret

        interpret(jit_fn, *args, **kwargs)
        return
    refuse_compiling_in_capture(op_name, sig, jit_fn, args, kwargs)
    jit_fn(*args, **kwargs)


def refuse_compiling_in_capture(op_name: str, sig: OpSignature, jit_fn: Any, args: tuple, kwargs: dict) -> None:
    import torch

    if not torch.cuda.is_current_stream_capturing() or _ready(jit_fn, args, kwargs):
        return
    raise CaptureError(
        f"{op_name} ({sig.function}) is called for the first time with these argument types inside a CUDA graph "
        "capture, where kdsl would compile and load its kernels, which a graph cannot record; call it once before "
        "capturing (torch.compile(mode='reduce-overhead') does so in its warm-up runs)")


def _ready(jit_fn: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a GPU call with these arguments has its specialization loaded (no compile, no
    tuning). Reads the runtime's own keys: what decides whether a call compiles."""
    if getattr(jit_fn, "tuning", None) is not None:
        from dsl.runtime.autotune import tuner

        chosen = tuner(jit_fn)
        return chosen._call_key(args, kwargs) in chosen._chosen
    from dsl.runtime import jit_call

    state = jit_call.state_of(jit_fn)
    return jit_call._spec_key(state, args, kwargs) in state.specs
