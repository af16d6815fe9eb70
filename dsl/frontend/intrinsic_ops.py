"""IR for the DSL's built-in functions (`dsl.barrier`, shuffles, math, atomics, ...).

`IMPLS` maps each user-facing object of `dsl.language.intrinsics` to a function
`(tracer, args, kwargs) -> value` that emits its ops at the current insertion point.
Transcendentals use the `math` dialect; lowering links them against libdevice.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from dsl.frontend import arith as A
from dsl.frontend import memory, ops
from dsl.frontend.values import DSLTypeError, Scalar, Vector, type_name
from dsl.language import intrinsics as I
from dsl.language.types import DType, i32


def _index_to_i32(v: Any) -> Scalar:
    return Scalar(ops.value("arith.index_castui", i32.mlir_type(), v), i32)


def dim3(tracer: Any, which: str, axis: str) -> Scalar:
    """`thread_idx.x` and friends as i32; `block_dim` folds to the known block size."""
    if which == "block_dim" and tracer.block is not None:
        return A.constant(tracer.block["xyz".index(axis)], i32)
    op = {"thread_idx": "thread_id", "block_idx": "block_id", "block_dim": "block_dim", "grid_dim": "grid_dim"}[which]
    return _index_to_i32(ops.gpu_dimension(op, axis))


def _float(name: str, *values: Any) -> tuple[list[Any], DType]:
    if any(isinstance(v, Vector) for v in values) and len(values) == 1:
        v = values[0]
        if not v.dtype.is_float:
            raise DSLTypeError(f"dsl.{name} needs float values, got {type_name(v)}")
        return [v], v.dtype
    vals = list(values)
    if len(vals) == 1:
        v = vals[0]
        if isinstance(v, int | float) and not isinstance(v, bool):
            v = A.to_scalar(float(v))
        if not isinstance(v, Scalar | Vector) or not v.dtype.is_float:
            raise DSLTypeError(f"dsl.{name} needs a float value, got {type_name(vals[0])}; cast it first")
        return [v], v.dtype
    acc = vals[0]
    for other in vals[1:]:
        acc, _, _ = A.common(acc, other, name)
    converted = [A.common(acc, v, name)[1] for v in vals]
    ty = converted[0].dtype
    if not ty.is_float:
        raise DSLTypeError(f"dsl.{name} needs float values, got {ty.name}")
    return converted, ty


def _wrap(like: Any, value: Any, dtype: DType) -> Any:
    return Vector(value, dtype, like.width) if isinstance(like, Vector) else Scalar(value, dtype)


def _unary_math(name: str) -> Any:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) != 1 or kwargs:
            raise DSLTypeError(f"dsl.{name} takes one argument")
        (v,), ty = _float(name, args[0])
        return _wrap(v, ops.same_type(f"math.{name}", v.value), ty)

    return impl


LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _exp2_based(name: str) -> Any:
    """exp and log on f32 through the hardware's ex2/lg2 (2 ulp), as CUDA's fast math does.

    The NVVM intrinsics map to single PTX instructions (`ex2.approx`, `lg2.approx`); other float types
    keep the `math` op (lowered through libdevice, correctly rounded).
    """
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) != 1 or kwargs:
            raise DSLTypeError(f"dsl.{name} takes one argument")
        (v,), ty = _float(name, args[0])
        if ty.name != "f32":
            return _wrap(v, ops.same_type(f"math.{name}", v.value), ty)
        scale = A.constant(LOG2E if name == "exp" else LN2, ty).value

        f32 = ty.mlir_type()

        def scalar(x: Any) -> Any:
            if name == "exp":
                scaled = ops.same_type("arith.mulf", x, scale)
                return ops.llvm_call_intrinsic(f32, "llvm.nvvm.ex2.approx.ftz.f", [scaled])
            log2 = ops.llvm_call_intrinsic(f32, "llvm.nvvm.lg2.approx.ftz.f", [x])
            return ops.same_type("arith.mulf", log2, scale)

        if isinstance(v, Vector):  # the NVVM lowering takes these per lane
            lanes = [scalar(ops.vector_extract(v.value, k)) for k in range(v.width)]
            return Vector(ops.vector_from_elements(v.value.type, lanes), ty, v.width)
        return Scalar(scalar(v.value), ty)

    return impl


def _fma(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 3:
        raise DSLTypeError("dsl.fma takes three arguments")
    (a, b, c), ty = _float("fma", *args)
    return _wrap(a, ops.same_type("math.fma", a.value, b.value, c.value), ty)


def _minmax(kind: str) -> Any:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) < 2:
            raise DSLTypeError(f"dsl.{kind} takes at least two arguments")
        if not any(isinstance(a, Scalar | Vector) for a in args):  # compile-time values
            return (min if kind == "min" else max)(args)
        acc = args[0]
        for other in args[1:]:
            x, y, ty = A.common(acc, other, kind)
            if ty.is_bool:
                raise DSLTypeError(f"dsl.{kind} on bool values")
            suffix = "imumf" if ty.is_float else "si" if ty.is_signed else "ui"
            acc = _wrap(x, ops.same_type(f"arith.{kind}{suffix}", x.value, y.value), ty)
        return acc

    return impl


def _abs(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    (v,) = args
    v = A.to_scalar(v) if not isinstance(v, Scalar | Vector) else v
    if v.dtype.is_float:
        return _wrap(v, ops.same_type("math.absf", v.value), v.dtype)
    if v.dtype.is_signed:
        return _wrap(v, ops.same_type("math.absi", v.value), v.dtype)
    return v


def _shuffle(mode: str) -> Any:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(args) < 2:
            raise DSLTypeError(f"dsl.shfl_{mode} takes a value and a lane offset")
        value, offset = args[0], args[1]
        width = args[2] if len(args) > 2 else kwargs.get("width", 32)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = A.to_scalar(value)
        if not isinstance(value, Scalar) or value.dtype.bits != 32:
            raise DSLTypeError(f"shuffles move 32-bit scalars (i32, u32, f32), got {type_name(value)}")
        if isinstance(width, int) and (width < 1 or width > 32 or width & (width - 1)):
            raise DSLTypeError(f"shuffle width must be a power of two from 1 to 32, not {width}")
        off = A.cast(A.to_scalar(offset, i32), i32)
        wid = A.cast(A.to_scalar(width, i32), i32)
        op = ops.create("gpu.shuffle", [value.value.type, ir.IntegerType.get_signless(1)],
                        [value.value, off.value, wid.value], {"mode": ops.parsed(f"#gpu<shuffle_mode {mode}>")})
        return Scalar(op.results[0], value.dtype)

    return impl


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
            v = A.cast(v, DType("f64", "float", 64))  # C varargs promote floats to double
        values.append(v.value)
    ops.create("gpu.printf", operands=values, attributes={"format": ir.StringAttr.get(args[0])})


def _cast(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 2 or not isinstance(args[1], DType):
        raise DSLTypeError("dsl.cast(value, dtype) needs a DSL scalar type second")
    return A.cast(args[0], args[1])


def _vector(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Vector:
    if len(args) not in (2, 4, 8, 16):
        raise DSLTypeError("dsl.vector takes 2, 4, 8 or 16 scalars")
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


def _atomic(kind: str) -> Any:
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
        if len(args) != 3:
            raise DSLTypeError(f"dsl.atomic_{kind}(ref, index, value) takes three arguments")
        return memory.atomic(kind, *args)

    return impl


def _atomic_cas(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Scalar:
    if len(args) != 4:
        raise DSLTypeError("dsl.atomic_cas(ref, index, compare, value) takes four arguments")
    return memory.atomic_cas(*args)


def _shared_allocator(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return tracer.make_allocator(*args, **kwargs)


IMPLS: dict[Any, Any] = {
    I.exp: _exp2_based("exp"),
    I.log: _exp2_based("log"),
    I.sqrt: _unary_math("sqrt"),
    I.rsqrt: _unary_math("rsqrt"),
    I.sin: _unary_math("sin"),
    I.cos: _unary_math("cos"),
    I.tanh: _unary_math("tanh"),
    I.floor: _unary_math("floor"),
    I.ceil: _unary_math("ceil"),
    I.fma: _fma,
    I.minimum: _minmax("min"),
    I.maximum: _minmax("max"),
    I.abs_: _abs,
    I.shfl_xor: _shuffle("xor"),
    I.shfl_down: _shuffle("down"),
    I.shfl_up: _shuffle("up"),
    I.shfl_idx: _shuffle("idx"),
    I.barrier: _barrier,
    I.lane_id: _lane_id,
    I.printf: _printf,
    I.cast: _cast,
    I.vector: _vector,
    I.cdiv: _cdiv,
    I.atomic_add: _atomic("add"),
    I.atomic_min: _atomic("min"),
    I.atomic_max: _atomic("max"),
    I.atomic_cas: _atomic_cas,
    I.SharedAllocator: _shared_allocator,
}
