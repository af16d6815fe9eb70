"""Fake kernels: the launcher's own checks, run on fake (or meta) tensors at trace time.

`torch.compile` and `opcheck` call an operator's fake kernel with tensors that have shapes,
strides, dtypes and devices but no memory. Ours binds the specialization's generated launcher
(`dsl.torch.facts`) to `ShapeCheckRuntime`, an `rt` that reads shapes and strides instead of
pointers and launches nothing: the launcher then checks the arguments against the
specialization (element types, ranks, the unit innermost stride), the jit function's run-time
`assert`s and the launch checks exactly as a real call does, so a call that would fail on
the GPU fails while tracing, with the same message, naming the function. With `dynamic=True`
the shapes are symbolic: an `assert` on them becomes a guard of the compiled graph.

Left to the real call (they need memory or a GPU): pointer alignment for vector accesses,
32-bit extents, and the device's own limits.
"""

from __future__ import annotations

import functools
from typing import Any

from dsl.diagnostics import ArgumentError
from dsl.runtime.dlpack import check_strides
from dsl.runtime.launch import Runtime
from dsl.torch.facts import Facts


class ShapeCheckRuntime:
    """The `rt` a launcher binds to check a call of fake tensors (see the module docstring)."""

    argument_error = staticmethod(Runtime.argument_error)
    check_smem = Runtime.check_smem
    check_block = Runtime.check_block

    @staticmethod
    def trunc_div(a: Any, b: Any) -> Any:
        """`Runtime.trunc_div` for symbolic integers too: the operands' signs are read as
        guards (a compiled graph serves every value of the same signs); comparing the two
        symbolic signs with each other is what torch cannot do."""
        if b == 0:
            raise ArgumentError("integer division by zero in the jit function's launch arithmetic")
        a_negative, b_negative = bool(a < 0), bool(b < 0)
        q = (-a if a_negative else a) // (-b if b_negative else b)
        return -q if a_negative != b_negative else q

    @staticmethod
    def trunc_mod(a: Any, b: Any) -> Any:
        return a - b * ShapeCheckRuntime.trunc_div(a, b)

    @staticmethod
    def cdiv(a: Any, b: Any) -> Any:
        return ShapeCheckRuntime.trunc_div(a + b - 1, b)

    def __init__(self, target: str):
        self.target = target
        self.launch_ranges: dict[str, Any] = {}  # read by the launch checks' errors

    def arg_reader(self, params: tuple) -> Any:
        def read(*args: Any) -> tuple:
            out: list[Any] = []
            for (name, dtype, rank), value in zip(params, args):
                if rank is None:
                    out.append(value)  # a scalar: the schema typed it; it may be symbolic
                else:
                    out.extend(_tensor(value, name, dtype, rank))
            out.append(0)  # the stream
            return tuple(out)

        return read

    def kernel(self, symbol: str, codes: tuple, cluster: tuple | None = None) -> Any:
        return lambda *launch: None

    def tensor_map(self, ptr: Any, shape: Any, strides: Any, dtype: str, box: tuple, swizzle: int) -> None:
        return None

    def device_attribute(self, name: str) -> int:
        from dsl.language.device import target_value

        return target_value(name, self.target)


def _tensor(value: Any, name: str, dtype: str, rank: int) -> tuple:
    """(no pointer, shape, strides) of a tensor argument, checked as the GPU reader checks one."""
    from dsl.language.types import dtype_from_foreign

    dt = dtype_from_foreign(getattr(value, "dtype", None))
    if dt is None or not hasattr(value, "stride"):
        raise ArgumentError(f"argument '{name}' is not a tensor kdsl takes ({type(value).__name__})")
    shape, strides = tuple(value.shape), tuple(value.stride())
    if dt.name != dtype:
        raise ArgumentError(f"argument '{name}' has element type {dt.name}, but this specialization takes "
                            f"Tensor[{dtype}, {rank}]")
    if len(shape) != rank:
        raise ArgumentError(f"argument '{name}' has rank {len(shape)} (shape {shape}), but this specialization "
                            f"takes Tensor[{dtype}, {rank}]")
    check_strides(name, shape, strides, rank, ".contiguous()")
    return None, shape, strides


def check_call(function: str, facts: Facts, runtime_values: dict[str, Any]) -> None:
    """Runs the launcher's checks on a call's arguments (runtime parameters by name, in the
    launcher's order); raises `ArgumentError` naming `function` when no config accepts it."""
    from dsl.runtime.driver import LaunchError

    devices = {str(v.device) for v in runtime_values.values() if hasattr(v, "device") and hasattr(v, "stride")}
    if len(devices) > 1:
        raise ArgumentError(f"{function}: its tensors are on {', '.join(sorted(devices))}; a kdsl call runs on one "
                            "device")
    failures = []
    for config in facts.configs:
        launch = _bind(config.launcher)(ShapeCheckRuntime(config.target))
        try:
            launch(**runtime_values)
            return
        except (ArgumentError, LaunchError) as err:
            failures.append(f"{config.describe}: {err}" if config.describe else str(err))
    raise ArgumentError(f"{function}: " + "; ".join(failures))


def _symbolic_extremum(builtin: Any, symbolic: str) -> Any:
    """`min` / `max` for the launcher's arithmetic that keeps a symbolic integer symbolic
    (`torch.sym_min` / `sym_max`): the builtin compares its arguments, which makes torch guard
    on the outcome, so a decode loop's growing KV length recompiled each time the number of
    its chunks changed."""
    def pick(*args: Any) -> Any:
        import torch

        values = list(args[0] if len(args) == 1 else args)
        if not any(isinstance(v, torch.SymInt) for v in values):
            return builtin(values)
        combine = getattr(torch, symbolic)
        result = values[0]
        for value in values[1:]:
            result = combine(result, value)
        return result

    return pick


_LAUNCHER_GLOBALS = {"min": _symbolic_extremum(min, "sym_min"), "max": _symbolic_extremum(max, "sym_max")}


@functools.lru_cache(maxsize=256)
def _bind(launcher: str) -> Any:
    """The launcher's `bind`, made once per launcher text (a fake kernel runs at every trace),
    with `min` and `max` that keep symbolic integers symbolic."""
    namespace: dict[str, Any] = dict(_LAUNCHER_GLOBALS)
    exec(compile(launcher, "<kdsl fake launcher>", "exec"), namespace)
    return namespace["bind"]
