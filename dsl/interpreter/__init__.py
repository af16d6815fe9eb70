"""Kernels without a GPU: `@dsl.jit` functions and their kernels run on the CPU, on NumPy arrays.

    with dsl.interpret():              # or KDSL_INTERPRET=1, or dsl.interpret(run_saxpy, x, y, 2.0)
        run_saxpy(x, y, 2.0)           # x, y: NumPy arrays (or CPU torch tensors), updated in place

A second back end of the same frontend: the function is traced and compiled by the real
compiler (so it is refused with the same diagnostics), then its launcher and the compiler's
traced kernels run here with GPU semantics: every thread of each block in lockstep
(`execute`), or each warp on its own when warps wait for one another (`scheduling`: mbarriers,
named barriers; a deadlock is an error, not a hang), barriers, shared memory, warp shuffles
and votes, atomics in thread order, wrapping integers and truncating division, f16 / bf16 /
fp8 rounding, and the tensor cores (`tensor_core_ops`: `mma.sync`, `ldmatrix`, wgmma, TMA
loads and stores with their swizzle). Out-of-bounds and
misaligned accesses, divergent barriers and shuffles reading inactive lanes raise a
`LaunchError` (DSL601), as a GPU fault does, naming the tensor, index, thread, block and line.
`print(...)`, `dsl.printf` and `breakpoint()` work inside kernels (`debug`).

Layers, in the order a call flows through them: `mode` (is it on?) -> `jit` (compile, cache,
bind the launcher) -> `runtime` (host arrays, launches) -> `execute` (blocks, batches) ->
`program` (IR to closures) -> the ops: `control_flow`, `arith_ops`, `cast_ops`, `gpu_ops`,
`llvm_ops`, `tensor_core_ops`, over `values`, `lanes` and `memory`; `debug` is `breakpoint()`,
`run` the editor's "Run on CPU (interpreter)".

What is not bit-exact, and why: the GPU may fuse `a * b + c` into one FMA when a kernel
is compiled with `contract=True` (the default) — the interpreter rounds both; functions the
GPU approximates (`dsl.exp` through `ex2.approx`, `rsqrt`, libdevice's `erf`, `sin`, ...)
are computed in float64 and rounded, so they agree to within the GPU's documented error;
tensor-core MMAs sum exact products in float64 and round once, where the hardware adds in an
order and precision of its own. A `cluster=` launch runs each cluster's blocks together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dsl.interpreter.mode import force, interpreting, restore

if TYPE_CHECKING:
    from dsl.interpreter.runtime import Bits, bits


@contextlib.contextmanager
def _interpreting() -> Iterator[None]:
    from dsl.runtime.jit_call import disarm_fast_paths

    token = force(True)
    disarm_fast_paths()  # a launcher armed by an earlier GPU call must not take these calls
    try:
        yield
    finally:
        restore(token)


def interpret(fn: Any = None, /, *args: Any, **kwargs: Any) -> Any:
    """`dsl.interpret()`: a context manager under which `@dsl.jit` calls run in the interpreter.
    `dsl.interpret(fn, *args, **kwargs)`: runs one call of the jit function `fn` there (an
    `@dsl.autotune` function runs its first config: tuning measures GPU time)."""
    if fn is None:
        if args or kwargs:
            raise TypeError("dsl.interpret() takes a jit function first, or nothing (a context manager)")
        return _interpreting()
    from dsl.language.decorators import JitFunction, hint_overrides, run_for_the_user

    if not isinstance(fn, JitFunction):
        raise TypeError(f"dsl.interpret runs @dsl.jit functions, not {fn!r}")
    from dsl.interpreter.jit import call_interpreted

    if fn.tuning is None:
        run_for_the_user(call_interpreted, fn, args, kwargs)
        return None
    config = fn.tuning.configs[0]
    with hint_overrides(config.hints):
        run_for_the_user(call_interpreted, fn, args, {**kwargs, **config.params}, config.describe())
    return None


def __getattr__(name: str) -> Any:
    if name in ("Bits", "bits"):
        from dsl.interpreter import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'dsl.interpreter' has no attribute {name!r}")


__all__ = ["Bits", "bits", "interpret", "interpreting"]
