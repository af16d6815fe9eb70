"""Scalar and vector arithmetic: Python operators to `arith`/`math` ops, with promotion.

Everything here emits at the current MLIR insertion point and location (the tracer sets
both), and raises `DSLTypeError` for mistakes so the tracer can point at the expression.
Integer `//` and `%` truncate toward zero, as in C, CUDA and Triton. fp8 values only
convert (`fp8.py`); conversions that depend on the GPU read the target of the kernel being
traced (`target_scope`).
"""

from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Iterator
from typing import Any

from mlir import ir

from dsl.frontend import fp8, ops
from dsl.frontend.values import DSLTypeError, Scalar, Vector, type_name
from dsl.language.types import DType, boolean, f16, f32, i32, promote, u32

_TARGET: contextvars.ContextVar[Any] = contextvars.ContextVar("kdsl_trace_target", default=None)


@contextlib.contextmanager
def target_scope(target: Any) -> Iterator[None]:
    """While a kernel is traced: the `Target` its instructions must exist on."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def current_target() -> Any:
    """The target of the kernel being traced, or None where it is not known."""
    return _TARGET.get()

PY_OPS = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv,
    "FloorDiv": operator.floordiv, "Mod": operator.mod, "Pow": operator.pow,
    "LShift": operator.lshift, "RShift": operator.rshift, "BitAnd": operator.and_,
    "BitOr": operator.or_, "BitXor": operator.xor, "MatMult": operator.matmul,
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le,
    "Gt": operator.gt, "GtE": operator.ge,
}
SYMBOLS = {
    "Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%", "Pow": "**",
    "LShift": "<<", "RShift": ">>", "BitAnd": "&", "BitOr": "|", "BitXor": "^", "MatMult": "@",
    "Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=",
}


def constant(py: Any, dtype: DType) -> Scalar:
    """A constant of `dtype`; a float literal for an integer type is a type error."""
    ty = dtype.mlir_type()
    if dtype.is_fp8:
        bits = fp8.encode(float(py), dtype)
        return Scalar(ops.constant(ty, bits - 256 if bits >= 128 else bits), dtype)
    if dtype.is_float:
        return Scalar(ops.constant(ty, float(py)), dtype)
    if isinstance(py, float) and not float(py).is_integer():
        raise DSLTypeError(f"float literal {py} used as {dtype.name}; cast explicitly")
    if isinstance(py, float):
        raise DSLTypeError(f"float literal {py} used as {dtype.name}; write an int or cast")
    value = int(py)
    if dtype.is_bool:
        return Scalar(ops.constant(ty, 1 if value else 0), dtype)
    if dtype.kind == "index":
        return Scalar(ops.constant(ty, value), dtype)
    bits = dtype.bits
    lo, hi = (-(2 ** (bits - 1)), 2**bits - 1)
    if not lo <= value <= hi:
        raise DSLTypeError(f"literal {value} does not fit in {dtype.name}")
    if value >= 2 ** (bits - 1):
        value -= 2**bits  # the same bits, as MLIR's signed attribute wants them
    return Scalar(ops.constant(ty, value), dtype)


def zero_vector(dtype: DType, width: int) -> Vector:
    """A `vector<width x dtype>` of zeros (fp8 zero is the all-zero bit pattern)."""
    ty = ir.VectorType.get([width], dtype.mlir_type())
    element = dtype.mlir_type()
    zero = ir.FloatAttr.get(element, 0.0) if dtype.is_float and not dtype.is_fp8 else ir.IntegerAttr.get(element, 0)
    return Vector(ops.constant(ty, ir.DenseElementsAttr.get_splat(ty, zero)), dtype, width)


def literal_type(py: Any) -> DType:
    """The type a lone Python literal takes when it must become a run-time value."""
    if isinstance(py, bool):
        return boolean
    if isinstance(py, int):
        return i32
    if isinstance(py, float):
        return f32
    raise DSLTypeError(f"{type_name(py)} value {py!r} cannot be used as a kernel value")


def to_scalar(value: Any, like: DType | None = None) -> Scalar:
    """A run-time scalar from a DSL scalar or a Python literal (typed like `like`)."""
    if isinstance(value, Scalar):
        return value
    if isinstance(value, bool | int | float):
        if like is not None and isinstance(value, float) and not like.is_float:
            raise DSLTypeError(f"float literal {value} mixed with {like.name}; cast explicitly")
        return constant(value, like or literal_type(value))
    raise DSLTypeError(f"expected a scalar value, got {type_name(value)}")


def cast(value: Any, to: DType) -> Scalar | Vector:
    """Explicit conversion between any two scalar types (vectors convert elementwise)."""
    if isinstance(value, Vector):
        src = value.dtype
        if src == to:
            return value
        ty = ir.VectorType.get([value.width], to.mlir_type())
        return Vector(_convert(value.value, src, to, ty), to, value.width)
    if not isinstance(value, Scalar):
        if isinstance(value, bool | int | float):
            if to.is_float:
                return constant(float(value), to)
            if isinstance(value, float):  # the float-to-int rule, for a literal too
                return constant(value != 0 if to.is_bool else _saturated(value, to), to)
            return constant(int(value), to)
        raise DSLTypeError(f"cannot cast {type_name(value)} to {to.name}")
    if value.dtype == to:
        return value
    return Scalar(_convert(value.value, value.dtype, to, to.mlir_type()), to)


def _convert(v: Any, src: DType, to: DType, ty: Any) -> Any:
    if src.is_fp8 or to.is_fp8:
        return _convert_fp8(v, src, to, ty)
    if src.is_bool and not to.is_bool:
        if to.is_float:
            return ops.value("arith.uitofp", ty, v)
        return ops.value("arith.extui" if to.kind != "index" else "arith.index_castui", ty, v)
    if to.is_bool:
        if src.is_float:
            if isinstance(v.type, ir.VectorType):
                raise DSLTypeError("cannot cast a float vector to bool")
            return ops.cmpf("une", v, ops.constant(src.mlir_type(), 0.0))
        return ops.cmpi("ne", v, constant(0, src).value)
    if src.kind == "index" or to.kind == "index":
        if src.is_float or to.is_float:
            mid = i32 if src.kind == "index" else DType("i64", "int", 64)
            step = _convert(v, src, mid, mid.mlir_type())
            return _convert(step, mid, to, ty)
        return ops.value("arith.index_cast" if src.is_signed else "arith.index_castui", ty, v)
    if src.is_int and to.is_int:
        if to.bits > src.bits:
            return ops.value("arith.extsi" if src.is_signed else "arith.extui", ty, v)
        if to.bits < src.bits:
            return ops.value("arith.trunci", ty, v)
        return v  # same width, other signedness: the same bits
    if src.is_int and to.is_float:
        return ops.value("arith.sitofp" if src.is_signed else "arith.uitofp", ty, v)
    if src.is_float and to.is_int:
        if to.bits < 32:
            return _narrow_from_float(v, to, ty)
        return _saturating_to_int(v, src, to, ty)
    if src.bits < to.bits or (src.bits == to.bits and src != to):
        if src.bits == to.bits:  # f16 <-> bf16 through f32
            wide = ops.value("arith.extf", f32.mlir_type() if not isinstance(ty, ir.VectorType) else
                             ir.VectorType.get(ty.shape, f32.mlir_type()), v)
            return ops.value("arith.truncf", ty, wide)
        return ops.value("arith.extf", ty, v)
    return ops.value("arith.truncf", ty, _rounded_apart(v, src))


_MANTISSA = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53}


def _rounded_apart(v: Any, src: DType) -> Any:
    """`v`, made so that narrowing it rounds again. MLIR's canonicalizer folds
    `truncf(uitofp x)` into one conversion straight to the narrow type, which rounds once
    where the program rounds twice (a u64 near 2**62 cast to f64, then to f32, came out one
    ulp apart on an H200). Where the first conversion may round (its integer is wider than
    `src`'s significand), `copysign(v, v)` stands between them: the canonicalizer does not look
    through it, and LLVM, which keeps exactness in mind, removes it (it is libdevice's
    `__nv_copysign`, inlined away: the PTX is the two `cvt.rn`s)."""
    owner = getattr(v, "owner", None)
    name = getattr(owner, "name", "")
    if name not in ("arith.sitofp", "arith.uitofp"):
        return v
    source = owner.operands[0].type
    element = ir.VectorType(source).element_type if isinstance(source, ir.VectorType) else source
    if isinstance(element, ir.IntegerType) and element.width <= _MANTISSA.get(src.name, 0):
        return v  # the integer converts exactly: one rounding is the program's rounding
    return ops.same_type("math.copysign", v, v)


def _integer_range(t: DType) -> tuple[int, int]:
    return (-(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1) if t.is_signed else (0, 2**t.bits - 1)


def _saturated(value: float, to: DType) -> int:
    """A Python float converted as `cvt.rzi` converts: toward zero, saturating, NaN to 0."""
    if value != value:
        return 0
    lo, hi = _integer_range(to)
    return lo if value <= lo else hi if value >= hi else int(value)


def _saturating_to_int(v: Any, src: DType | None, to: DType, ty: Any) -> Any:
    """Float to a 32- or 64-bit integer as the README says (toward zero, saturating, NaN to 0).
    LLVM's `fptosi`/`fptoui` are poison out of range, and it used that: on an H200 a NaN or a
    negative f64 cast to u64 came back as 2**63. So the edges are selected explicitly (the
    out-of-range lanes' poison is never chosen); in range it is one `cvt.rzi`. The limits are
    powers of two, exact in every float type (or infinite in f16, which then never reaches
    them but at infinity)."""
    float_ty = v.type
    shape = ir.VectorType(ty).shape if isinstance(ty, ir.VectorType) else None
    elem_float = ir.VectorType(float_ty).element_type if shape else float_ty
    elem_int = ir.VectorType(ty).element_type if shape else ty

    def const(t: Any, n: Any, wide: Any) -> Any:
        if isinstance(n, int) and n >= 2**63:  # the bindings take a signed 64-bit value: the same bits
            n -= 2**64
        c = ops.constant(t, n)
        return ops.value("vector.broadcast", wide, c) if shape else c

    bits = to.bits
    lo, hi = _integer_range(to)
    converted = ops.value("arith.fptosi" if to.is_signed else "arith.fptoui", ty, v)
    above = ops.cmpf("oge", v, const(elem_float, float(2 ** (bits - 1) if to.is_signed else 2**bits), float_ty))
    below = ops.cmpf("ole" if to.is_signed else "olt", v,
                     const(elem_float, float(-(2 ** (bits - 1))) if to.is_signed else 0.0, float_ty))
    out = ops.value("arith.select", ty, above, const(elem_int, hi, ty), converted)
    out = ops.value("arith.select", ty, below, const(elem_int, lo, ty), out)
    nan = ops.cmpf("uno", v, v)
    return ops.value("arith.select", ty, nan, const(elem_int, 0, ty), out)


def _narrow_from_float(v: Any, to: DType, ty: Any) -> Any:
    """Float to an 8- or 16-bit integer, saturating to its range as the README says. PTX
    converts to 16 or 32 bits only (LLVM writes `cvt.rzi.s16.f32`, whose result it then
    truncates: 300.0 would give 44 in an i8), so convert to 32 bits, clamp and truncate."""
    shape = ir.VectorType(ty).shape if isinstance(ty, ir.VectorType) else None
    word_ty = ir.VectorType.get(shape, i32.mlir_type()) if shape else i32.mlir_type()

    def word(n: int) -> Any:
        c = ops.constant(i32.mlir_type(), n)
        return ops.value("vector.broadcast", word_ty, c) if shape else c

    lo, hi = _integer_range(to)
    wide = _saturating_to_int(v, None, i32 if to.is_signed else u32, word_ty)
    if to.is_signed:
        clamped = ops.same_type("arith.maxsi", ops.same_type("arith.minsi", wide, word(hi)), word(lo))
    else:
        clamped = ops.same_type("arith.minui", wide, word(hi))
    return ops.value("arith.trunci", ty, clamped)


def _convert_fp8(v: Any, src: DType, to: DType, ty: Any) -> Any:
    """To or from fp8 through f16 (exact) and f32, with the target's cvt instructions."""
    target = current_target()
    fp8.check_target(target, src if src.is_fp8 else to)
    native = target is not None  # else inline PTX: ptxas, not LLVM, meets a target without the cvt
    shape = ir.VectorType(ty).shape if isinstance(ty, ir.VectorType) else None

    def typed(d: DType) -> Any:
        return ir.VectorType.get(shape, d.mlir_type()) if shape else d.mlir_type()

    if src.is_fp8:
        half = fp8.to_f16(v, src, native)
        return half if to == f16 else _convert(half, f16, to, ty)
    wide = v if src == f32 else _convert(v, src, f32, typed(f32))
    return fp8.from_f32(wide, to, native)


def _suggested_cast(a: DType, b: DType) -> DType:
    """The type to cast to in a mixed-type message: the float one beside an integer."""
    if a.is_float != b.is_float:
        return a if a.is_float else b
    return b


def _no_fp8_arithmetic(ty: DType, what: str) -> None:
    if ty.is_fp8:
        raise DSLTypeError(f"'{what}' on {ty.name} values; fp8 is a storage type: convert to f16, bf16 or f32 "
                           f"first, e.g. dsl.cast(x, dsl.f32)")


def common(a: Any, b: Any, what: str) -> tuple[Any, Any, DType]:
    """Brings two operands to one type by the promotion rules (see `dsl.language.types`)."""
    if isinstance(a, Vector) or isinstance(b, Vector):
        return _common_vector(a, b, what)
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        for t in (a.dtype, b.dtype):
            _no_fp8_arithmetic(t, what)
        ty = promote(a.dtype, b.dtype)
        if ty is None:
            raise DSLTypeError(
                f"mixed types {a.dtype.name} and {b.dtype.name} in '{what}'; cast one explicitly, "
                f"e.g. dsl.cast(x, dsl.{_suggested_cast(a.dtype, b.dtype).name})"
            )
        return cast(a, ty), cast(b, ty), ty
    if isinstance(a, Scalar):
        _no_fp8_arithmetic(a.dtype, what)
        return a, to_scalar(b, a.dtype), a.dtype
    if isinstance(b, Scalar):
        _no_fp8_arithmetic(b.dtype, what)
        return to_scalar(a, b.dtype), b, b.dtype
    raise DSLTypeError(f"unsupported operands {type_name(a)} and {type_name(b)} for '{what}'")


def _common_vector(a: Any, b: Any, what: str) -> tuple[Any, Any, DType]:
    va = a if isinstance(a, Vector) else None
    vb = b if isinstance(b, Vector) else None
    for v in (va, vb):
        if v is not None:
            _no_fp8_arithmetic(v.dtype, what)
    if va and vb:
        if va.dtype != vb.dtype or va.width != vb.width:
            raise DSLTypeError(f"mixed vector types {type_name(va)} and {type_name(vb)} in '{what}'")
        return va, vb, va.dtype
    vec = va or vb
    other = b if va else a
    scalar = to_scalar(other, vec.dtype)
    if scalar.dtype != vec.dtype:
        raise DSLTypeError(f"mixed types {type_name(vec)} and {scalar.dtype.name} in '{what}'")
    splat = Vector(ops.value("vector.broadcast", vec.value.type, scalar.value), vec.dtype, vec.width)
    return (vec, splat, vec.dtype) if va else (splat, vec, vec.dtype)


def _wrap(like: Any, value: Any, dtype: DType) -> Any:
    if isinstance(like, Vector):
        return Vector(value, dtype, like.width)
    return Scalar(value, dtype)


def binary(op: str, a: Any, b: Any) -> Any:
    """`a <op> b` where `op` is an `ast` operator name; folds when both are Python values."""
    if not (isinstance(a, Scalar | Vector) or isinstance(b, Scalar | Vector)):
        return _python(op, a, b)
    sym = SYMBOLS[op]
    if op == "Pow":
        return _power(a, b)
    if op == "MatMult":
        raise DSLTypeError("'@' is not defined for DSL values; tensor-core products are dsl.mma_sync and "
                           "dsl.wgmma, and a dot product of two vectors is (a * b).sum()")
    x, y, ty = common(a, b, sym)
    if ty.is_bool and op not in ("BitAnd", "BitOr", "BitXor"):
        raise DSLTypeError(f"'{sym}' on bool values; cast to an integer type first")
    if ty.is_float:
        table = {"Add": "addf", "Sub": "subf", "Mult": "mulf", "Div": "divf", "Mod": "remf"}
        if op not in table:
            hint = " (use / for float division)" if op == "FloorDiv" else ""
            raise DSLTypeError(f"'{sym}' is not defined for {ty.name}{hint}")
        return _wrap(x, ops.same_type(f"arith.{table[op]}", x.value, y.value), ty)
    if op == "Div":
        raise DSLTypeError(f"'/' on integer type {ty.name}; use '//' or cast to a float type")
    static = b if isinstance(b, int) and not isinstance(b, bool) else None
    if op in ("LShift", "RShift"):
        return _shift(op, x, y, ty, static)
    signed = ty.is_signed
    if signed and op in ("FloorDiv", "Mod") and (static is None or static == -1):  # a literal -1 overflows too
        y = _no_overflow_divisor(x, y)
    table = {
        "Add": "addi", "Sub": "subi", "Mult": "muli", "FloorDiv": "divsi" if signed else "divui",
        "Mod": "remsi" if signed else "remui", "LShift": "shli", "RShift": "shrsi" if signed else "shrui",
        "BitAnd": "andi", "BitOr": "ori", "BitXor": "xori",
    }
    return _wrap(x, ops.same_type(f"arith.{table[op]}", x.value, y.value), ty)


def _shift(op: str, x: Any, y: Any, ty: DType, static: int | None) -> Any:
    """`x << y` / `x >> y` with the README's rule: an amount (read unsigned) of the width or more
    gives 0, or the sign for `>>` of a signed value, as PTX's clamped shifts do. LLVM's shifts
    are poison there (a constant amount folds the whole store away), so the clamp is written
    out: decided here for a compile-time amount, a `min` or a select (that folds when the
    amount is masked) for a run-time one."""
    bits = ty.bits
    name = "shli" if op == "LShift" else "shrsi" if ty.is_signed else "shrui"
    if static is not None and static % (1 << bits) < bits:
        return _wrap(x, ops.same_type(f"arith.{name}", x.value, y.value), ty)
    if name == "shrsi":  # the sign fills the value from `bits - 1` on
        limit = common(y, bits - 1, ">>")[1]
        amount = limit.value if static is not None else ops.same_type("arith.minui", y.value, limit.value)
        return _wrap(x, ops.same_type("arith.shrsi", x.value, amount), ty)
    zero = common(x, 0, SYMBOLS[op])[1]
    if static is not None:
        return zero
    inside = ops.cmpi("ult", y.value, common(y, bits, SYMBOLS[op])[1].value)
    shifted = ops.same_type(f"arith.{name}", x.value, y.value)
    return _wrap(x, ops.value("arith.select", shifted.type, inside, shifted, zero.value), ty)


def _no_overflow_divisor(x: Any, y: Any) -> Any:
    """The divisor of a signed `//` / `%`, 1 where `x` is the type's minimum and `y` is -1: the
    README's `INT_MIN // -1 == INT_MIN` and `INT_MIN % -1 == 0` (two's complement wraps), which
    LLVM's `sdiv` / `srem` leave undefined."""
    smallest = -(2 ** (x.dtype.bits - 1))
    overflow = ops.same_type("arith.andi", ops.cmpi("eq", x.value, common(x, smallest, "//")[1].value),
                             ops.cmpi("eq", y.value, common(y, -1, "//")[1].value))
    one = common(y, 1, "//")[1]
    return _wrap(y, ops.value("arith.select", y.value.type, overflow, one.value, y.value), y.dtype)


def _python(op: str, a: Any, b: Any) -> Any:
    """A compile-time operation; Python's own errors become type errors at the expression."""
    try:
        return PY_OPS[op](a, b)
    except TypeError:  # Python's message names the compiler's classes: say it in the user's types
        raise DSLTypeError(f"'{SYMBOLS[op]}' is not defined for {type_name(a)} and {type_name(b)}") from None
    except Exception as err:
        raise DSLTypeError(f"'{SYMBOLS[op]}' on {type_name(a)} and {type_name(b)}: {err}") from None


def _power(a: Any, b: Any) -> Any:
    if isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 16:
        result = None
        for _ in range(b):
            result = a if result is None else binary("Mult", result, a)
        return result if result is not None else binary("Add", binary("Mult", a, 0), 1)
    x, y, ty = common(a, b, "**")
    if not ty.is_float:
        raise DSLTypeError("'**' with a run-time integer exponent is not supported; use a float type")
    return _wrap(x, ops.same_type("math.powf", x.value, y.value), ty)


_CMPI = {
    ("Eq", True): "eq", ("NotEq", True): "ne", ("Lt", True): "slt", ("LtE", True): "sle",
    ("Gt", True): "sgt", ("GtE", True): "sge", ("Eq", False): "eq", ("NotEq", False): "ne",
    ("Lt", False): "ult", ("LtE", False): "ule", ("Gt", False): "ugt", ("GtE", False): "uge",
}
_CMPF = {"Eq": "oeq", "NotEq": "une", "Lt": "olt", "LtE": "ole", "Gt": "ogt", "GtE": "oge"}


def compare(op: str, a: Any, b: Any) -> Any:
    if not (isinstance(a, Scalar) or isinstance(b, Scalar)):
        if isinstance(a, Vector) or isinstance(b, Vector):
            raise DSLTypeError("comparisons of vectors are not supported; compare elements")
        return _python(op, a, b)
    x, y, ty = common(a, b, SYMBOLS[op])
    if ty.is_float:
        return Scalar(ops.cmpf(_CMPF[op], x.value, y.value), boolean)
    # A bool is i1, whose signed reading of True is -1: ordering it unsigned gives Python's False < True.
    return Scalar(ops.cmpi(_CMPI[(op, ty.is_signed and not ty.is_bool)], x.value, y.value), boolean)


def unary(op: str, a: Any) -> Any:
    if not isinstance(a, Scalar | Vector):
        fn = {"USub": operator.neg, "UAdd": operator.pos, "Not": operator.not_, "Invert": operator.invert}[op]
        try:
            return fn(a)
        except TypeError:
            symbol = {"USub": "-", "UAdd": "+", "Not": "not", "Invert": "~"}[op]
            raise DSLTypeError(f"unary '{symbol}' is not defined for {type_name(a)}") from None
    if op == "UAdd":
        return a
    _no_fp8_arithmetic(a.dtype, {"USub": "-", "Not": "not", "Invert": "~"}.get(op, op))
    if op == "USub":
        if a.dtype.is_float:
            return _wrap(a, ops.same_type("arith.negf", a.value), a.dtype)
        return binary("Sub", binary("Mult", a, 0), a)
    if op == "Not":
        return Scalar(ops.same_type("arith.xori", truth(a).value, constant(1, boolean).value), boolean)
    if op == "Invert":
        if a.dtype.is_float:
            raise DSLTypeError(f"'~' on {a.dtype.name}")
        return binary("BitXor", a, -1 if a.dtype.is_signed else 2**a.dtype.bits - 1)
    raise DSLTypeError(f"unsupported unary operator {op}")


def bitcast(value: Any, to: DType) -> Scalar | Vector:
    """The same bits as `to`: a scalar when the widths match, else a vector of `to` lanes."""
    if isinstance(value, bool | int | float):
        value = to_scalar(value)
    if not isinstance(value, Scalar | Vector):
        raise DSLTypeError(f"dsl.bitcast needs a DSL value, got {type_name(value)}")
    for t in (value.dtype, to):
        if t.is_bool or t.kind == "index":
            raise DSLTypeError(f"dsl.bitcast does not take {t.name} (its width is not its storage)")
    bits = value.dtype.bits * (value.width if isinstance(value, Vector) else 1)
    lanes, rest = divmod(bits, to.bits)
    if rest or lanes not in (1, 2, 4, 8, 16):
        raise DSLTypeError(f"dsl.bitcast of {bits} bits ({type_name(value)}) to {to.name} leaves "
                           f"{bits / to.bits:g} lanes; it needs 1, 2, 4, 8 or 16")
    if isinstance(value, Scalar) and lanes == 1:
        if value.dtype.mlir_type() == to.mlir_type():
            return Scalar(value.value, to)
        return Scalar(ops.value("arith.bitcast", to.mlir_type(), value.value), to)
    src = value.value
    if isinstance(value, Scalar):  # a scalar to a vector: through a one-lane vector
        src = ops.vector_from_elements(ir.VectorType.get([1], value.dtype.mlir_type()), [src])
    out = ops.vector_bitcast(ir.VectorType.get([lanes], to.mlir_type()), src)
    if lanes == 1:
        return Scalar(ops.vector_extract(out, 0), to)
    return Vector(out, to, lanes)


def min_max(kind: str, a: Any, b: Any) -> Any:
    """`dsl.min` / `dsl.max` of two values (lanewise on vectors): floats propagate NaN and order
    -0.0 below +0.0 (`arith.minimumf` / `maximumf`, PTX `min.NaN`); ints by their signedness."""
    x, y, ty = common(a, b, kind)
    if ty.is_bool:
        raise DSLTypeError(f"dsl.{kind} on bool values")
    suffix = "imumf" if ty.is_float else "si" if ty.is_signed else "ui"
    return _wrap(x, ops.same_type(f"arith.{kind}{suffix}", x.value, y.value), ty)


def truth(value: Any) -> Scalar:
    """A condition as i1: bools as they are, numbers compared with zero."""
    if isinstance(value, Scalar):
        if value.dtype.is_bool:
            return value
        return cast(value, boolean)  # type: ignore[return-value]
    raise DSLTypeError(f"{type_name(value)} cannot be used as a condition")


def logical(op: str, a: Any, b: Any) -> Scalar:
    """`and` / `or` on run-time conditions (both sides are evaluated: no short circuit)."""
    name = "arith.andi" if op == "And" else "arith.ori"
    return Scalar(ops.same_type(name, truth(a).value, truth(b).value), boolean)
