"""Step markers for the debugger: before each kernel statement, the values its names hold.

A debug session (`dsl.debugger`) compiles with `stepping()` on. The kernel tracer then emits,
before every statement of a kernel and of the helpers it traces inline, a marker like the one
`breakpoint()` makes (`intrinsic_ops.trace_breakpoint`): a dead
`builtin.unrealized_conversion_cast` at the statement's location whose operands are the
run-time values of the names in scope, in every frame of the inline call stack. The
interpreter hands each marker it reaches to the attached debugger, which decides whether to
stop there; the GPU lowering's first `canonicalize` removes markers, as it removes
`breakpoint()`'s.

The marker's attributes say what its operands are:
- `kdsl.breakpoint`: one name per operand, `"D:name"` with `D` the frame depth (0: the
  kernel) and `name` the Python name, or `name[i]` / `name[i][j]` for the elements of
  per-thread lists and tuples;
- `kdsl.types`: the DSL type of each scalar and vector (`"D:name"` -> `"u32"`: MLIR's integers are
  signless, and a debugger shows a `u32` as unsigned);
- `kdsl.shared`: the shared arrays among them, `"D:name"` -> `"dtype;d0xd1;swizzle"`;
- `kdsl.constants` and `kdsl.tensors`: compile-time values and tensor parameters, `"D:name"`;
- `kdsl.step`: the stack, outermost first, one `"function\\tfile\\tline"` per frame (the
  line a caller frame is at is its call of the next frame).
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from mlir import ir

from dsl.frontend import ops
from dsl.frontend.intrinsic_ops import constant_attr
from dsl.frontend.values import Scalar, SharedArray, TensorRef, Vector

_STEPPING: contextvars.ContextVar[bool] = contextvars.ContextVar("kdsl_debug_steps", default=False)

_MAX_ELEMENTS = 256  # per-thread list elements a marker carries per name


def stepping_traced() -> bool:
    """Whether kernels traced now get step markers."""
    return _STEPPING.get()


@contextlib.contextmanager
def stepping(on: bool = True) -> Iterator[None]:
    """Traces kernels with step markers inside this block (a debug session's compiles)."""
    token = _STEPPING.set(on)
    try:
        yield
    finally:
        _STEPPING.reset(token)


def _elements(name: str, value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, run-time value) of a list or tuple's DSL values, element by element."""
    if isinstance(value, Scalar | Vector):
        yield name, value
    elif isinstance(value, list | tuple) and depth < 3:
        for i, item in enumerate(value[:_MAX_ELEMENTS]):
            yield from _elements(f"{name}[{i}]", item, depth + 1)


def trace_step(tracer: Any, stmt: ast.stmt) -> None:
    """The marker before `stmt` (see the module docstring); emitted at the statement's location."""
    names: list[Any] = []
    values: list[Any] = []
    shared: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    tensors: dict[str, Any] = {}
    dtypes: dict[str, Any] = {}
    stack: list[Any] = []
    frames = tracer.frames
    for depth, frame in enumerate(frames):
        line = stmt.lineno if depth == len(frames) - 1 else frames[depth + 1].call_range.line
        stack.append(ir.StringAttr.get(f"{frame.name}\t{frame.src.path}\t{line}"))
        for name, value in frame.env.items():
            if name.startswith("__"):
                continue
            key = f"{depth}:{name}"
            if isinstance(value, TensorRef):
                tensors[key] = ir.StringAttr.get(value.name)
            elif isinstance(value, SharedArray):
                names.append(ir.StringAttr.get(key))
                values.append(value.ptr)
                shape = "x".join(str(d) for d in value.shape)
                shared[key] = ir.StringAttr.get(f"{value.dtype.name};{shape};{value.swizzle}")
            elif isinstance(value, Scalar | Vector | list | tuple):
                for path, item in _elements(key, value):
                    names.append(ir.StringAttr.get(path))
                    values.append(item.value)
                    dtypes[path] = ir.StringAttr.get(item.dtype.name)
            elif (attr := constant_attr(value)) is not None:
                constants[key] = attr
    ops.create("builtin.unrealized_conversion_cast", [ir.IntegerType.get_signless(1)], values, {
        "kdsl.breakpoint": ir.ArrayAttr.get(names), "kdsl.constants": ir.DictAttr.get(constants),
        "kdsl.tensors": ir.DictAttr.get(tensors), "kdsl.shared": ir.DictAttr.get(shared),
        "kdsl.types": ir.DictAttr.get(dtypes),
        "kdsl.step": ir.ArrayAttr.get(stack)})
