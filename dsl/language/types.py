"""The DSL's value types: scalars, `Tensor[...]` annotations, `Constexpr[...]`, specs.

Scalar types are singletons (`dsl.f32`, `dsl.Int32`, ...) used both as annotations and as
cast functions inside kernels (`f32(x)`). Promotion rules, applied by the frontend to
binary operations (documented in the README):

1. Two values of the same type need nothing.
2. A Python literal takes the type of the DSL value beside it (`x * 2`, `y + 0.5`); a float
   literal next to an integer value is an error (DSL301) — cast explicitly.
3. Two integer types of the same signedness widen to the wider one; mixed signedness is
   DSL301.
4. Two float types widen to the wider one (f16 with bf16 becomes f32).
5. Integer with float, and bool with arithmetic, are DSL301: write the cast.
6. The fp8 types `f8e4m3` and `f8e5m2` are storage types: they load, store, shuffle and
   convert (explicitly, on sm_89 and newer), but take part in no arithmetic and no
   promotion; convert to f16, bf16 or f32 first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DType:
    """A scalar type: its name, kind ('int', 'uint', 'float', 'bool', 'index') and width."""

    name: str
    kind: str
    bits: int

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "index")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "index")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_fp8(self) -> bool:
        return self.kind == "float" and self.bits == 8

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    def mlir_type(self) -> Any:
        """The MLIR type; ints of either signedness are signless, as MLIR wants.

        fp8 values are kept as their i8 bits: the LLVM dialect has no fp8 type, and the
        conversions that give them meaning are explicit instructions (`cvt ... e4m3x2`).
        """
        from mlir import ir

        if self.kind == "index":
            return ir.IndexType.get()
        if self.kind == "float" and self.bits > 8:
            return {
                "f16": ir.F16Type.get,
                "bf16": ir.BF16Type.get,
                "f32": ir.F32Type.get,
                "f64": ir.F64Type.get,
            }[self.name]()
        return ir.IntegerType.get_signless(self.bits)

    def __call__(self, value: Any) -> Any:
        raise TypeError(f"dsl.{self.name}(...) casts values inside @kernel and @jit functions only")

    def __repr__(self) -> str:
        return f"dsl.{self.name}"


boolean = DType("bool", "bool", 1)
i8 = DType("i8", "int", 8)
i16 = DType("i16", "int", 16)
i32 = DType("i32", "int", 32)
i64 = DType("i64", "int", 64)
u8 = DType("u8", "uint", 8)
u16 = DType("u16", "uint", 16)
u32 = DType("u32", "uint", 32)
u64 = DType("u64", "uint", 64)
f16 = DType("f16", "float", 16)
bf16 = DType("bf16", "float", 16)
f32 = DType("f32", "float", 32)
f64 = DType("f64", "float", 64)
f8e4m3 = DType("f8e4m3", "float", 8)  # OCP E4M3 "fn": no infinities, max 448, NaN 0x7F / 0xFF
f8e5m2 = DType("f8e5m2", "float", 8)  # OCP E5M2: IEEE-like, max 57344, with infinities
index = DType("index", "index", 64)

# Annotation-style aliases, as kernel authors know them from CuTe DSL and FlyDSL.
Boolean, Int8, Int16, Int32, Int64 = boolean, i8, i16, i32, i64
Uint8, Uint16, Uint32, Uint64 = u8, u16, u32, u64
Float16, BFloat16, Float32, Float64, Index = f16, bf16, f32, f64, index
Float8E4M3, Float8E5M2 = f8e4m3, f8e5m2

SCALAR_TYPES: dict[str, DType] = {
    t.name: t for t in (boolean, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2, index)
}

# Names that array libraries use for their dtypes (torch.float32, cupy/numpy 'float32', ...).
_FOREIGN_DTYPE_NAMES = {
    "bool": boolean, "int8": i8, "int16": i16, "int32": i32, "int64": i64,
    "uint8": u8, "uint16": u16, "uint32": u32, "uint64": u64,
    "float16": f16, "half": f16, "bfloat16": bf16, "float32": f32, "float": f32,
    "float64": f64, "double": f64, "float8_e4m3fn": f8e4m3, "float8_e5m2": f8e5m2,
}


def dtype_from_foreign(dtype: Any) -> DType | None:
    """Maps a torch / CuPy / NumPy / JAX dtype object or name to a DSL scalar type."""
    if isinstance(dtype, DType):
        return dtype
    name = str(dtype).rsplit(".", 1)[-1].strip("'\"<>")
    return _FOREIGN_DTYPE_NAMES.get(name) or SCALAR_TYPES.get(name)


def promote(a: DType, b: DType) -> DType | None:
    """The common type of two DSL values under the rules above, or None if they don't mix."""
    if a == b:
        return a
    if a.is_fp8 or b.is_fp8:  # storage types: converted explicitly, never promoted
        return None
    if a.is_float and b.is_float:
        if a.bits == b.bits:  # f16 with bf16
            return f32
        return a if a.bits > b.bits else b
    if a.is_int and b.is_int and a.kind != "index" and b.kind != "index" and a.is_signed == b.is_signed:
        return a if a.bits > b.bits else b
    return None


@dataclass(frozen=True)
class TensorType:
    """`Tensor[dtype]` (rank 1) or `Tensor[dtype, rank]`: a global-memory view.

    The innermost dimension has unit stride (checked at launch), which is what lets the
    compiler emit coalesced and 128-bit vector accesses; outer strides are dynamic.
    """

    dtype: DType | None
    rank: int = 1

    def __repr__(self) -> str:
        if self.dtype is None:
            return "Tensor"
        return f"Tensor[{self.dtype!r}, {self.rank}]"


class _TensorAnnotation:
    """`Tensor[f32]`, `Tensor[f32, 2]`; bare `Tensor` has no dtype (needs examples)."""

    def __getitem__(self, params: Any) -> TensorType:
        if not isinstance(params, tuple):
            params = (params,)
        dtype = params[0]
        rank = params[1] if len(params) > 1 else 1
        if not isinstance(dtype, DType):
            raise TypeError(f"Tensor[...] needs a DSL scalar type such as dsl.f32, not {dtype!r}")
        if not isinstance(rank, int) or rank < 1 or rank > 8:
            raise TypeError(f"Tensor rank must be an int between 1 and 8, not {rank!r}")
        return TensorType(dtype, rank)

    def __repr__(self) -> str:
        return "dsl.Tensor"


Tensor = _TensorAnnotation()
UNTYPED_TENSOR = TensorType(None, 1)


@dataclass(frozen=True)
class ConstexprType:
    """`Constexpr[int]`: a compile-time parameter; each value is its own specialization."""

    py_type: Any = None

    def __repr__(self) -> str:
        return f"Constexpr[{getattr(self.py_type, '__name__', self.py_type)}]"


class _ConstexprAnnotation:
    def __getitem__(self, py_type: Any) -> ConstexprType:
        return ConstexprType(py_type)

    def __repr__(self) -> str:
        return "dsl.Constexpr"


Constexpr = _ConstexprAnnotation()


@dataclass(frozen=True)
class TensorSpec:
    """An abstract tensor argument for compiling without data: dtype and shape or rank."""

    dtype: DType
    shape: tuple[int, ...] | None = None
    rank: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DType):  # 'f32', torch.float32, numpy.float32 ...
            dtype = dtype_from_foreign(self.dtype)
            if dtype is None:
                raise TypeError(f"TensorSpec dtype {self.dtype!r} is not a kdsl element type "
                                f"(one of {', '.join(SCALAR_TYPES)})")
            object.__setattr__(self, "dtype", dtype)
        if self.shape is not None:
            object.__setattr__(self, "shape", tuple(self.shape))
        if self.rank is None:
            object.__setattr__(self, "rank", len(self.shape) if self.shape is not None else 1)

    @property
    def type(self) -> TensorType:
        return TensorType(self.dtype, self.rank or 1)


def is_dsl_annotation(annotation: Any) -> bool:
    """Whether an annotation names a DSL value type (else DSL102)."""
    from dsl.language.tensor_cores import TensorMap

    return isinstance(annotation, DType | TensorType | ConstexprType) or annotation in (Tensor, TensorMap)


def evaluate_annotation(fn: Any, annotation: Any) -> Any:
    """Annotations may be strings (`from __future__ import annotations`); evaluate them in the
    function's globals (the user's own annotation expression), else keep the string."""
    if isinstance(annotation, str):
        try:
            return eval(annotation, fn.__globals__)
        except Exception:
            return annotation
    return annotation
