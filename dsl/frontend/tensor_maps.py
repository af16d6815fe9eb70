"""`dsl.tensor_map(tensor, box=..., swizzle=...)` in a `@jit` function: a TMA tensor map.

The map itself (a 128-byte `CUtensorMap`) holds the tensor's address, extents and strides,
so it is encoded per call by the generated launcher (`rt.tensor_map`, cached by its
arguments) and passed by value as a `__grid_constant__` kernel parameter. What is known
while tracing, the element type, the box and the swizzle, becomes part of the kernel's
specialization (a `tensor_map` parameter), so the kernel checks its TMA tiles against them.
In the host IR the map is the result of a call of a declared function, as device
attributes are: its value exists only at launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlir import ir

from dsl.frontend import ops
from dsl.frontend.host_values import HostTensor
from dsl.frontend.values import DSLTypeError, type_name
from dsl.language import tensor_cores as T
from dsl.language.types import DType

MAX_BOX = 256  # elements per box dimension (cuTensorMapEncodeTiled)


@dataclass
class HostTensorMap:
    """A tensor map in host code: the tensor it maps and the launcher's expression for it."""

    tensor: HostTensor
    box: tuple[int, ...]
    swizzle: int
    value: Any  # the host IR value (!llvm.ptr)
    expr: str

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    @property
    def rank(self) -> int:
        return self.tensor.rank


def check_box(dtype: DType, rank: int, box: Any, swizzle: Any) -> tuple[tuple[int, ...], int]:
    """The box and swizzle as ints, or a DSLTypeError naming the TMA limit they break."""
    if not 2 <= rank <= 5:
        raise DSLTypeError(f"dsl.tensor_map maps tensors of rank 2 to 5, not {rank}")
    items = tuple(box) if isinstance(box, tuple | list) else (box,)
    if len(items) != rank or not all(isinstance(b, int) and not isinstance(b, bool) for b in items):
        raise DSLTypeError(f"dsl.tensor_map box needs {rank} compile-time ints (outer to inner) for a rank-{rank} "
                           f"tensor, got {box!r}")
    for k, b in enumerate(items):
        if not 1 <= b <= MAX_BOX:
            raise DSLTypeError(f"dsl.tensor_map box dimension {k} is {b}; TMA boxes are 1 to {MAX_BOX} elements "
                               "per dimension")
    if isinstance(swizzle, bool) or swizzle not in (0, 32, 64, 128):
        raise DSLTypeError(f"dsl.tensor_map swizzle must be 0, 32, 64 or 128 (bytes), not {swizzle!r}")
    inner = items[-1] * dtype.nbytes
    if inner % 16:
        raise DSLTypeError(f"dsl.tensor_map box inner extent is {inner} bytes ({items[-1]} x {dtype.name}); TMA "
                           "needs a multiple of 16 bytes")
    if swizzle and inner > swizzle:
        raise DSLTypeError(f"dsl.tensor_map box inner extent is {inner} bytes, more than its {swizzle}-byte "
                           f"swizzle; use at most {swizzle // dtype.nbytes} elements")
    return items, swizzle


def tensor_map(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> HostTensorMap:
    from dsl.frontend.tensor_core_ops import bind

    got = bind(T.tensor_map, args, kwargs)
    tensor = got["tensor"]
    if not isinstance(tensor, HostTensor):
        raise DSLTypeError(f"dsl.tensor_map maps a tensor parameter of the jit function, not {type_name(tensor)}")
    if tensor.dtype.is_bool or tensor.dtype.kind == "index":
        raise DSLTypeError(f"dsl.tensor_map cannot map a tensor of {tensor.dtype.name}")
    box, swizzle = check_box(tensor.dtype, tensor.rank, got["box"], got["swizzle"])
    symbol = f"kdsl_tensor_map_{tensor.rank}d"
    operands = [tensor.ptr, *(s.value for s in tensor.shape), *(s.value for s in tensor.strides)]
    if symbol not in tracer._declared and tracer.declare_at is not None:
        tracer._declared.add(symbol)
        with tracer.declare_at, ir.Location.unknown():
            ops.create("func.func", attributes={
                "sym_name": ir.StringAttr.get(symbol), "sym_visibility": ir.StringAttr.get("private"),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get([v.type for v in operands],
                                                                     [ir.Type.parse("!llvm.ptr")]))}, regions=1)
    value = ops.create("func.call", results=[ir.Type.parse("!llvm.ptr")], operands=operands,
                       attributes={"callee": ir.FlatSymbolRefAttr.get(symbol)}).result
    name = tensor.name
    expr = (f"rt.tensor_map({name}_ptr, {name}_shape, {name}_strides, {tensor.dtype.name!r}, {box!r}, "
            f"{swizzle})")
    return HostTensorMap(tensor, box, swizzle, value, expr)
