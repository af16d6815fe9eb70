"""IR for the math intrinsics (`dsl.exp`, `dsl.erf`, `dsl.pow`, `dsl.isnan`, ...).

Where an instruction does the job it is used directly (`sqrt`, `floor`, `trunc`, `round`
as `cvt.rni`, f32 `exp`/`log` as `ex2`/`lg2`); the rest use the `math` dialect, which the
lowering turns into libdevice calls (`__nv_erff`, `__nv_powf`, ...) that are linked into
the PTX. libdevice functions take scalars, so those run lane by lane on vectors. f16 and
bf16 arguments are computed in f32 by libdevice and rounded once, as torch computes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsl.frontend import arith as A
from dsl.frontend import ops, vector_ops
from dsl.frontend.values import DSLTypeError, Scalar, Vector, type_name
from dsl.language.types import DType, boolean

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
Impl = Callable[[Any, list[Any], dict[str, Any]], Any]


def floats(name: str, *values: Any) -> tuple[list[Any], DType]:
    """The arguments of a float intrinsic, brought to one float type (literals take it)."""
    if len(values) == 1:
        v = values[0]
        if isinstance(v, int | float) and not isinstance(v, bool):
            v = A.to_scalar(float(v))
        if not isinstance(v, Scalar | Vector) or not v.dtype.is_float:
            raise DSLTypeError(f"dsl.{name} needs a float value, got {type_name(values[0])}; cast it first")
        if v.dtype.is_fp8:
            raise DSLTypeError(f"dsl.{name} on {v.dtype.name}; fp8 is a storage type: convert to f16, bf16 or "
                               "f32 first, e.g. dsl.cast(x, dsl.f32)")
        return [v], v.dtype
    acc = values[0]
    for other in values[1:]:
        acc, _, _ = A.common(acc, other, name)
    converted = [A.common(acc, v, name)[1] for v in values]
    ty = converted[0].dtype
    if not ty.is_float:
        raise DSLTypeError(f"dsl.{name} needs float values, got {ty.name}")
    return converted, ty


def wrap(like: Any, value: Any, dtype: DType) -> Any:
    return Vector(value, dtype, like.width) if isinstance(like, Vector) else Scalar(value, dtype)


def lanewise(args: list[Any], scalar: Callable[..., Any]) -> Any:
    """`scalar(*mlir values)` on scalars, or once per lane on vectors, rebuilt into a vector."""
    first = args[0]
    if not isinstance(first, Vector):
        return scalar(*[a.value for a in args])
    lanes = [scalar(*[ops.vector_extract(a.value, k) for a in args]) for k in range(first.width)]
    return ops.vector_from_elements(first.value.type, lanes)


def _arity(name: str, args: list[Any], kwargs: dict[str, Any], n: int) -> None:
    if len(args) != n or kwargs:
        raise DSLTypeError(f"dsl.{name} takes {('one', 'two', 'three')[n - 1]} argument{'s' if n > 1 else ''}")


def math_op(name: str, op: str | None = None, arity: int = 1, per_lane: bool = True) -> Impl:
    """A `math` dialect op (`op`, default `math.<name>`) on floats of one type.

    `per_lane` for ops that become libdevice calls; instruction-backed ones take vectors.
    """
    op = op or f"math.{name}"

    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        _arity(name, args, kwargs, arity)
        values, ty = floats(name, *args)
        if per_lane:
            return wrap(values[0], lanewise(values, lambda *xs: ops.same_type(op, *xs)), ty)
        return wrap(values[0], ops.same_type(op, *[v.value for v in values]), ty)

    return impl


def exp2_based(name: str) -> Impl:
    """exp and log on f32 through the hardware's ex2/lg2 (2 ulp), as CUDA's fast math does.

    The NVVM intrinsics map to single PTX instructions (`ex2.approx`, `lg2.approx`); other float types
    keep the `math` op (lowered through libdevice, correctly rounded).
    """
    libdevice = math_op(name)

    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        _arity(name, args, kwargs, 1)
        (v,), ty = floats(name, args[0])
        if ty.name != "f32":
            return libdevice(tracer, [v], {})
        scale = A.constant(LOG2E if name == "exp" else LN2, ty).value
        f32 = ty.mlir_type()

        def scalar(x: Any) -> Any:
            if name == "exp":
                scaled = ops.same_type("arith.mulf", x, scale)
                return ops.llvm_call_intrinsic(f32, "llvm.nvvm.ex2.approx.ftz.f", [scaled])
            log2 = ops.llvm_call_intrinsic(f32, "llvm.nvvm.lg2.approx.ftz.f", [x])
            return ops.same_type("arith.mulf", log2, scale)

        return wrap(v, lanewise([v], scalar), ty)  # the NVVM lowering takes these per lane

    return impl


def exp2(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """2**x: the `math` op (the hardware ex2 for f32, which keeps subnormal results); in a
    kernel compiled with `ftz=True` the f32 instruction's `.ftz` form, one instruction."""
    if not getattr(tracer, "flush_to_zero", False):
        return _exp2(tracer, args, kwargs)
    _arity("exp2", args, kwargs, 1)
    (v,), ty = floats("exp2", args[0])
    if ty.name != "f32":
        return _exp2(tracer, [v], {})
    return wrap(v, lanewise([v], lambda x: ops.llvm_call_intrinsic(ty.mlir_type(), "llvm.nvvm.ex2.approx.ftz.f",
                                                                   [x])), ty)


_exp2 = math_op("exp2")


def classify(name: str) -> Impl:
    """`isnan` / `isinf`: a bool (or bool vector) per value."""
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        _arity(name, args, kwargs, 1)
        (v,), ty = floats(name, args[0])
        if name == "isnan":
            result = ops.cmpf("uno", v.value, v.value)
        else:
            inf = A.constant(float("inf"), ty).value
            if isinstance(v, Vector):
                inf = ops.value("vector.broadcast", v.value.type, inf)
            result = ops.cmpf("oeq", ops.same_type("math.absf", v.value), inf)
        return wrap(v, result, boolean)

    return impl


def fma(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) != 3:
        raise DSLTypeError("dsl.fma takes three arguments")
    (a, b, c), ty = floats("fma", *args)
    return wrap(a, ops.same_type("math.fma", a.value, b.value, c.value), ty)


def minmax(kind: str) -> Impl:
    """`dsl.max(a, b, ...)` elementwise; `dsl.max(v)` of one vector reduces its lanes, as
    Python's `max(iterable)` does (the builtins `max` / `min` come here too)."""
    def impl(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if kwargs:
            raise DSLTypeError(f"dsl.{kind} takes no keyword arguments ({', '.join(kwargs)} given)")
        if len(args) == 1 and isinstance(args[0], Vector):
            return vector_ops.reduce_lanes(args[0], kind, f"{kind}(v)")
        if len(args) < 2:
            raise DSLTypeError(f"dsl.{kind} takes two or more values, or one vector (whose lanes it reduces); "
                               f"got {', '.join(type_name(a) for a in args) or 'nothing'}")
        if not any(isinstance(a, Scalar | Vector) for a in args):  # compile-time values
            return (min if kind == "min" else max)(args)
        acc = args[0]
        for other in args[1:]:
            acc = A.min_max(kind, acc, other)
        return acc

    return impl


def absolute(tracer: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    _arity("abs", args, kwargs, 1)
    (v,) = args
    v = A.to_scalar(v) if not isinstance(v, Scalar | Vector) else v
    if v.dtype.is_fp8:
        floats("abs", v)  # the storage-type message
    if v.dtype.is_float:
        return wrap(v, ops.same_type("math.absf", v.value), v.dtype)
    if v.dtype.is_signed:
        return wrap(v, ops.same_type("math.absi", v.value), v.dtype)
    return v
