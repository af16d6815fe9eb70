"""IR for the DSL's built-in functions: the table from each intrinsic to its emitter.

`IMPLS` maps each user-facing object of `dsl.language.intrinsics` to a function
`(tracer, args, kwargs) -> value` that emits its ops at the current insertion point. The
emitters live by concept: `math_ops.py`, `warp_ops.py`, `atomic_ops.py`, `tensor_core_ops.py`; thread indices,
barriers, printf, casts and vectors are here, and Python's own `print` and `breakpoint` in a kernel:

- `print(*values, sep=" ", end="\n")` is a `gpu.printf` of each thread, prefixed with its block and
  thread indices (`[block (0, 0, 0) thread (5, 0, 0)] x = 3`), on the GPU and in the interpreter
  alike. Integers print in decimal (bools as 0 / 1), floats with printf's `%g`, vectors as tuples.
- `breakpoint()` is a marker that carries the values of the names in scope: a dead
  `builtin.unrealized_conversion_cast` with a `kdsl.breakpoint` attribute naming them. The
  interpreter stops there in pdb (`dsl.interpreter.debug`); the GPU lowering's first
  `canonicalize` removes it (it has no effect), so a GPU build is the same with or without it.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import atomic_ops, math_ops, ops, tensor_core_ops, warp_ops
from dsl.frontend.math_ops import classify, exp2_based, math_op
from dsl.frontend.values import DSLTypeError, Scalar, TensorRef, Vector, type_name
from dsl.language import intrinsics as I
from dsl.language.types import DType, i32


@functools.cache
def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def check_arguments(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """DSL301 when a call does not bind to the intrinsic's surface signature as a Python call
    would: an emitter that failed on a missing or extra argument reports the user's mistake,
    with the signature, rather than its own failure (most emitters check and say more)."""
    signature = _signature(fn)
    if signature is None:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        plain = signature.replace(parameters=[p.replace(annotation=inspect.Parameter.empty)
                                              for p in signature.parameters.values()],
                                  return_annotation=inspect.Signature.empty)
        raise DSLTypeError(f"dsl.{getattr(fn, '__name__', fn)}{plain}: {err}") from None


def bind_method(name: str, signature_of: Any, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A method call's arguments by name (defaults applied), bound to `signature_of`."""
    try:
        bound = inspect.signature(signature_of).bind(*args, **kwargs)
    except TypeError as err:
        raise DSLTypeError(f".{name}(): {err}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _index_to_i32(v: Any) -> Scalar:
    return Scalar(ops.value("arith.index_castui", i32.mlir_type(), v), i32)


def dim3(tracer: Any, which: str, axis: str) -> Scalar:
    """`thread_idx.x` and friends as i32; `block_dim` folds to the known block size."""
    if which == "block_dim" and tracer.block is not None:
        return A.constant(tracer.block["xyz".index(axis)], i32)
    op = {"thread_idx": "thread_id", "block_idx": "block_id", "block_dim": "block_dim", "grid_dim": "grid_dim"}[which]
    return _index_to_i32(ops.gpu_dimension(op, axis))


def _barrier(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    if args or kwargs:
        raise DSLTypeError("dsl.barrier() takes no arguments")
    ops.create("gpu.barrier")


def _lane_id(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
    return _index_to_i32(ops.value("gpu.lane_id", ir.IndexType.get()))


def _printf(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    if not args or not isinstance(args[0], str):
        raise DSLTypeError("dsl.printf needs a format string literal first")
    values = []
    for a in args[1:]:
        v = A.to_scalar(a) if not isinstance(a, Scalar) else a
        if not isinstance(v, Scalar):
            raise DSLTypeError(f"dsl.printf cannot print {type_name(a)}")
        if v.dtype.is_float and v.dtype.bits < 64:
            with A.target_scope(getattr(tracer, "target", None)):
                v = A.cast(v, DType("f64", "float", 64))  # C varargs promote floats to double
        values.append(v.value)
    ops.create("gpu.printf", operands=values, attributes={"format": ir.StringAttr.get(args[0])})


def _print_spec(v: Any, target: Any) -> tuple[str, list[Any]]:
    """(printf conversion, operands) for one value `print` shows."""
    if isinstance(v, Vector):
        parts = [_print_spec(Scalar(ops.vector_extract(v.value, k), v.dtype), target) for k in range(v.width)]
        return "(" + ", ".join(p[0] for p in parts) + ")", [x for p in parts for x in p[1]]
    if isinstance(v, list | tuple):
        parts = [_print_spec(x, target) for x in v]
        body = ", ".join(p[0] for p in parts)
        return (f"[{body}]" if isinstance(v, list) else f"({body}{',' if len(v) == 1 else ''})",
                [x for p in parts for x in p[1]])
    if not isinstance(v, Scalar):
        if isinstance(v, bool | int | float | str) or v is None:
            return str(v).replace("%", "%%"), []
        raise DSLTypeError(f"print() in a kernel prints run-time values and Python constants, not {type_name(v)}")
    dt = v.dtype
    with A.target_scope(target):
        if dt.is_float:
            return "%g", [A.cast(v if not dt.is_fp8 else A.cast(v, DType("f32", "float", 32)),
                                 DType("f64", "float", 64)).value]
        if dt.is_bool or (dt.is_int and dt.bits < 32 and dt.kind != "index"):
            return "%d", [A.cast(v, i32).value]
        if dt.kind == "index" or dt.bits == 64:
            return ("%llu" if dt.kind == "uint" else "%lld"), [A.cast(v, DType("i64", "int", 64)).value
                                                                if dt.kind == "index" else v.value]
        return ("%u" if dt.kind == "uint" else "%d"), [v.value]


def trace_print(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Python's `print` in a kernel: one line per thread, prefixed with its coordinates."""
    extra = set(kwargs) - {"sep", "end", "flush"}
    if extra:
        raise DSLTypeError(f"print() in a kernel writes to standard output; '{sorted(extra)[0]}=' is not supported")
    sep, end = kwargs.get("sep", " "), kwargs.get("end", "\n")
    for what, text in (("sep", sep), ("end", end)):
        if text is not None and not isinstance(text, str):
            raise DSLTypeError(f"print() {what}= must be a string literal")
    coords = [dim3(tracer, "block_idx", a).value for a in "xyz"] + [dim3(tracer, "thread_idx", a).value
                                                                      for a in "xyz"]
    parts = [_print_spec(a, getattr(tracer, "target", None)) for a in args]
    fmt = "[block (%d, %d, %d) thread (%d, %d, %d)] " + (" " if sep is None else sep.replace("%", "%%")).join(
        p[0] for p in parts) + ("\n" if end is None else end.replace("%", "%%"))
    operands = coords + [x for p in parts for x in p[1]]
    ops.create("gpu.printf", operands=operands, attributes={"format": ir.StringAttr.get(fmt)})


def constant_attr(value: Any) -> Any:
    """A compile-time Python value as the attribute a marker carries (None: not one of those)."""
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    return None


def trace_breakpoint(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Python's `breakpoint()` in a kernel: the marker the interpreter stops at (see above)."""
    if args or kwargs:
        raise DSLTypeError("breakpoint() in a kernel takes no arguments")
    names, values, constants, tensors = [], [], {}, {}
    for name, value in tracer.frame.env.items():
        if name.startswith("__"):
            continue
        if isinstance(value, Scalar | Vector):
            names.append(ir.StringAttr.get(name))
            values.append(value.value)
        elif isinstance(value, TensorRef):
            tensors[name] = ir.StringAttr.get(value.name)
        elif (attr := constant_attr(value)) is not None:
            constants[name] = attr
    ops.create("builtin.unrealized_conversion_cast", [ir.IntegerType.get_signless(1)], values, {
        "kdsl.breakpoint": ir.ArrayAttr.get(names), "kdsl.constants": ir.DictAttr.get(constants),
        "kdsl.tensors": ir.DictAttr.get(tensors)})


def _cast(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 2 or not isinstance(args[1], DType):
        raise DSLTypeError("dsl.cast(value, dtype) needs a DSL scalar type second")
    with A.target_scope(getattr(tracer, "target", None)):
        return A.cast(args[0], args[1])


def _bitcast(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 2 or kwargs or not isinstance(args[1], DType):
        raise DSLTypeError("dsl.bitcast(value, dtype) needs a DSL scalar type second")
    return A.bitcast(args[0], args[1])


def _vector(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    if len(args) < 2:
        raise DSLTypeError("dsl.vector takes two or more scalars")
    joined = next((a for a in args if isinstance(a, Vector)), None)
    if joined is not None:
        raise DSLTypeError(f"dsl.vector takes scalars, got {type_name(joined)}; to join vectors, unpack their "
                           "lanes: dsl.vector(*a, *b)")
    first = next((a for a in args if isinstance(a, Scalar)), None)
    dtype = first.dtype if first else A.literal_type(args[0])
    scalars = [A.to_scalar(a, dtype) for a in args]
    if any(s.dtype != dtype for s in scalars):
        raise DSLTypeError("dsl.vector needs scalars of one type")
    ty = ir.VectorType.get([len(args)], dtype.mlir_type())
    return Vector(ops.vector_from_elements(ty, [s.value for s in scalars]), dtype, len(args))


def _cdiv(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    a, b = args
    return A.binary("FloorDiv", A.binary("Sub", A.binary("Add", a, b), 1), b)


def _shared_allocator(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return tracer.make_allocator(*args, **kwargs)


IMPLS: dict[Any, Any] = {
    # math (math_ops.py)
    I.exp: exp2_based("exp"),
    I.log: exp2_based("log"),
    I.exp2: math_ops.exp2,
    I.log2: math_op("log2"),
    I.log1p: math_op("log1p"),
    I.expm1: math_op("expm1"),
    I.erf: math_op("erf"),
    I.erfc: math_op("erfc"),
    I.pow: math_op("pow", "math.powf", arity=2),
    I.atan2: math_op("atan2", arity=2),
    I.sqrt: math_op("sqrt", per_lane=False),
    I.rsqrt: math_op("rsqrt", per_lane=False),
    I.sin: math_op("sin"),
    I.cos: math_op("cos"),
    I.tanh: math_op("tanh"),
    I.floor: math_op("floor", per_lane=False),
    I.ceil: math_op("ceil", per_lane=False),
    I.round: math_op("round", "math.roundeven", per_lane=False),
    I.trunc: math_op("trunc", per_lane=False),
    I.isnan: classify("isnan"),
    I.isinf: classify("isinf"),
    I.fma: math_ops.fma,
    I.minimum: math_ops.minmax("min"),
    I.maximum: math_ops.minmax("max"),
    I.abs_: math_ops.absolute,
    # warp (warp_ops.py)
    I.shfl_xor: warp_ops.shuffle("xor"),
    I.shfl_down: warp_ops.shuffle("down"),
    I.shfl_up: warp_ops.shuffle("up"),
    I.shfl_idx: warp_ops.shuffle("idx"),
    I.ballot: warp_ops.vote("ballot", "ballot"),
    I.any_: warp_ops.vote("any", "any"),
    I.all_: warp_ops.vote("all", "all"),
    I.match_any: warp_ops.match_any,
    I.warp_reduce: warp_ops.warp_reduce,
    # atomics (atomic_ops.py)
    I.atomic_add: atomic_ops.atomic("add"),
    I.atomic_min: atomic_ops.atomic("min"),
    I.atomic_max: atomic_ops.atomic("max"),
    I.atomic_cas: atomic_ops.atomic_cas,
    # the rest
    I.barrier: _barrier,
    I.lane_id: _lane_id,
    I.printf: _printf,
    I.cast: _cast,
    I.bitcast: _bitcast,
    I.vector: _vector,
    I.cdiv: _cdiv,
    I.SharedAllocator: _shared_allocator,
    # tensor cores, async copies, TMA, mbarriers (tensor_core_ops.py)
    **tensor_core_ops.IMPLS,
}
