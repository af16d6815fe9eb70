"""What type checkers see of `dsl.language.types` (pyright, Pylance, mypy).

At run time a scalar type (`dsl.f32`) is a `DType` instance and `Tensor[f32, 2]` builds a
`TensorType`; the tracer reads those. Here each scalar type is a class instead: the type of
the values a kernel computes with, so `x[i] * 2` has a type and `dsl.f32(x)` reads as the
cast it is. Its metaclass is `DType`, so the class still is a `DType` (`f32.bits`, passing it
where a `DType` is wanted).

- Operators follow the promotion rules of `types.py`: same types, a Python literal beside
  a value, wider ints of one signedness, wider floats (f16 with bf16 gives f32). Pairs the
  DSL rejects (DSL301: int with float, mixed signedness, `/` on ints, arithmetic on bools
  or fp8) have no operator here, so the checker reports them too.
- Float values subclass `float`, so `acc = 0.0` followed by `acc += x[i]` (and a list
  `[0.0] * 8` of accumulators) keeps one type for mypy. Integer values do not subclass
  `int`: an int would count as a float for the checkers and hide an int-with-float mix.
- Comparisons give `boolean` values, not Python bools.
- `Int32`, `Float32`, ... are annotations a caller may also pass a Python number to
  (`eps: Float32 = 1e-5`), so they mean `i32 | int`, `f32 | float`, ...; the lower-case
  names are the value types and the cast functions.
- `Tensor[f32, 2]` has a bare int in it, which no type expression allows. `Tensor` is
  therefore a class with its own `__class_getitem__`: pyright then accepts any subscript and
  reads the element type as unknown (`Any`). mypy needs `dsl.mypy_plugin`, which reads
  `Tensor[f32, 2]` as `TypedTensor[f32, Literal[2]]`, whose elements are `f32`.
- `Constexpr[T]` is `T` (an `Annotated` alias).
"""

from typing import Annotated, Any, Generic, TypeAlias, TypeVar, overload, type_check_only

from typing_extensions import Self

_T = TypeVar("_T")
_S = TypeVar("_S", bound=_Value)
_E = TypeVar("_E")
_R = TypeVar("_R")
_I = TypeVar("_I", bound=_Integer)
_SI = TypeVar("_SI", bound=_Signed)
_UI = TypeVar("_UI", bound=_Unsigned)
_FL = TypeVar("_FL", bound=_Floating)

class DType(type):
    """A scalar type: its name, kind ('int', 'uint', 'float', 'bool', 'index') and width."""

    name: str
    kind: str
    bits: int
    def __new__(cls, name: str, kind: str, bits: int) -> DType: ...
    def __init__(self, name: str, kind: str, bits: int) -> None: ...
    @property
    def is_float(self) -> bool: ...
    @property
    def is_int(self) -> bool: ...
    @property
    def is_signed(self) -> bool: ...
    @property
    def is_bool(self) -> bool: ...
    @property
    def is_fp8(self) -> bool: ...
    @property
    def nbytes(self) -> int: ...
    def mlir_type(self) -> Any: ...

# ----- values ---------------------------------------------------------------------------

@type_check_only
class _Value:
    """A run-time value of a kernel or jit function (a register, not a Python object)."""

    def __new__(cls, value: _Value | float, /) -> Self: ...
    def to(self, dtype: type[_S], /) -> _S: ...
    def __eq__(self, other: object, /) -> boolean: ...  # type: ignore[override]
    def __ne__(self, other: object, /) -> boolean: ...  # type: ignore[override]

@type_check_only
class _Integer(_Value):
    def __index__(self) -> int: ...  # lets `range(n)` take a run-time bound, as the tracer does
    def __neg__(self) -> Self: ...
    def __pos__(self) -> Self: ...
    def __abs__(self) -> Self: ...
    def __invert__(self) -> Self: ...
    def __radd__(self, other: int, /) -> Self: ...
    __rsub__ = __radd__
    __rmul__ = __radd__
    __rfloordiv__ = __radd__
    __rmod__ = __radd__
    __rand__ = __radd__
    __ror__ = __radd__
    __rxor__ = __radd__
    __rlshift__ = __radd__
    __rrshift__ = __radd__
    def __pow__(self, exponent: int, /) -> Self: ...  # a small constant exponent multiplies

@type_check_only
class _Signed(_Integer):
    @overload
    def __add__(self: i64, other: i8 | i16 | i32, /) -> i64: ...
    @overload
    def __add__(self: i32, other: i8 | i16, /) -> i32: ...
    @overload
    def __add__(self: i16, other: i8, /) -> i16: ...
    @overload
    def __add__(self: i8 | i16 | i32, other: i64, /) -> i64: ...
    @overload
    def __add__(self: i8 | i16, other: i32, /) -> i32: ...
    @overload
    def __add__(self: i8, other: i16, /) -> i16: ...
    @overload
    def __add__(self: _SI, other: _SI | int, /) -> _SI: ...
    __sub__ = __add__
    __mul__ = __add__
    __floordiv__ = __add__
    __mod__ = __add__
    __and__ = __add__
    __or__ = __add__
    __xor__ = __add__
    __lshift__ = __add__
    __rshift__ = __add__
    def __lt__(self, other: _Signed | int, /) -> boolean: ...
    __le__ = __lt__
    __gt__ = __lt__
    __ge__ = __lt__

@type_check_only
class _Unsigned(_Integer):
    @overload
    def __add__(self: u64, other: u8 | u16 | u32, /) -> u64: ...
    @overload
    def __add__(self: u32, other: u8 | u16, /) -> u32: ...
    @overload
    def __add__(self: u16, other: u8, /) -> u16: ...
    @overload
    def __add__(self: u8 | u16 | u32, other: u64, /) -> u64: ...
    @overload
    def __add__(self: u8 | u16, other: u32, /) -> u32: ...
    @overload
    def __add__(self: u8, other: u16, /) -> u16: ...
    @overload
    def __add__(self: _UI, other: _UI | int, /) -> _UI: ...
    __sub__ = __add__
    __mul__ = __add__
    __floordiv__ = __add__
    __mod__ = __add__
    __and__ = __add__
    __or__ = __add__
    __xor__ = __add__
    __lshift__ = __add__
    __rshift__ = __add__
    def __lt__(self, other: _Unsigned | int, /) -> boolean: ...
    __le__ = __lt__
    __gt__ = __lt__
    __ge__ = __lt__

@type_check_only
class _Floating(_Value, float):  # type: ignore[misc]
    # Written out, not aliased (`__sub__ = __add__`): pyright would read an alias as
    # `float`'s own method.
    @overload
    def __add__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __add__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __add__(self: _FL, other: _FL | float, /) -> _FL: ...
    @overload
    def __sub__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __sub__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __sub__(self: _FL, other: _FL | float, /) -> _FL: ...
    @overload
    def __mul__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __mul__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __mul__(self: _FL, other: _FL | float, /) -> _FL: ...
    @overload
    def __truediv__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __truediv__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __truediv__(self: _FL, other: _FL | float, /) -> _FL: ...
    @overload
    def __mod__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __mod__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __mod__(self: _FL, other: _FL | float, /) -> _FL: ...
    @overload
    def __pow__(self: f16 | bf16 | f32, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self: f16 | bf16, other: f32, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self: f16, other: bf16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self: bf16, other: f16, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self: f64, other: f32 | f16 | bf16, /) -> f64: ...
    @overload
    def __pow__(self: f32, other: f16 | bf16, /) -> f32: ...
    @overload
    def __pow__(self: _FL, other: _FL | float, /) -> _FL: ...  # pyright: ignore[reportIncompatibleMethodOverride]
    def __radd__(self, other: float, /) -> Self: ...
    def __rsub__(self, other: float, /) -> Self: ...
    def __rmul__(self, other: float, /) -> Self: ...
    def __rtruediv__(self, other: float, /) -> Self: ...
    def __rmod__(self, other: float, /) -> Self: ...
    def __rpow__(self, other: float, /) -> Self: ...  # pyright: ignore[reportIncompatibleMethodOverride]
    def __lt__(self, other: float, /) -> boolean: ...  # type: ignore[override]
    def __le__(self, other: float, /) -> boolean: ...  # type: ignore[override]
    def __gt__(self, other: float, /) -> boolean: ...  # type: ignore[override]
    def __ge__(self, other: float, /) -> boolean: ...  # type: ignore[override]
    def __neg__(self) -> Self: ...
    def __pos__(self) -> Self: ...
    def __abs__(self) -> Self: ...

class boolean(_Value, metaclass=DType):
    """A run-time bool (`i1`): comparisons give it; `& | ^` combine it, no arithmetic."""

    def __and__(self, other: boolean | bool, /) -> boolean: ...
    __or__ = __and__
    __xor__ = __and__
    def __rand__(self, other: bool, /) -> boolean: ...
    __ror__ = __rand__
    __rxor__ = __rand__
    def __bool__(self) -> bool: ...  # `if p:` on a run-time value becomes scf.if

class i8(_Signed, metaclass=DType): ...
class i16(_Signed, metaclass=DType): ...
class i32(_Signed, metaclass=DType): ...
class i64(_Signed, metaclass=DType): ...
class u8(_Unsigned, metaclass=DType): ...
class u16(_Unsigned, metaclass=DType): ...
class u32(_Unsigned, metaclass=DType): ...
class u64(_Unsigned, metaclass=DType): ...

class index(_Integer, metaclass=DType):
    """MLIR's `index`: mixes only with itself and Python ints."""

    def __add__(self, other: index | int, /) -> index: ...
    __sub__ = __add__
    __mul__ = __add__
    __floordiv__ = __add__
    __mod__ = __add__
    __and__ = __add__
    __or__ = __add__
    __xor__ = __add__
    __lshift__ = __add__
    __rshift__ = __add__
    def __lt__(self, other: index | int, /) -> boolean: ...
    __le__ = __lt__
    __gt__ = __lt__
    __ge__ = __lt__

class f16(_Floating, metaclass=DType): ...
class bf16(_Floating, metaclass=DType): ...
class f32(_Floating, metaclass=DType): ...
class f64(_Floating, metaclass=DType): ...

class f8e4m3(_Value, metaclass=DType):
    """fp8 E4M3 (storage only: loads, stores, shuffles and explicit conversions)."""

class f8e5m2(_Value, metaclass=DType):
    """fp8 E5M2 (storage only: loads, stores, shuffles and explicit conversions)."""

@type_check_only
class Vector(_Value, Generic[_E]):
    """A short vector of one element type (`vector<4xf32>` from `t.vload(i, 4)`)."""

    def __getitem__(self, k: int, /) -> _E: ...
    def __add__(self, other: Vector[_E] | _E | float, /) -> Vector[_E]: ...
    __sub__ = __add__
    __mul__ = __add__
    __truediv__ = __add__
    __floordiv__ = __add__
    __mod__ = __add__
    __and__ = __add__
    __or__ = __add__
    __xor__ = __add__
    __lshift__ = __add__
    __rshift__ = __add__
    def __radd__(self, other: _E | float, /) -> Vector[_E]: ...
    __rsub__ = __radd__
    __rmul__ = __radd__
    __rtruediv__ = __radd__
    __rfloordiv__ = __radd__
    __rmod__ = __radd__
    def __neg__(self) -> Vector[_E]: ...
    def __abs__(self) -> Vector[_E]: ...
    def to(self, dtype: type[_S], /) -> Vector[_S]: ...  # type: ignore[override]

# The annotations callers may pass a Python number to (see the module docstring).
Boolean: TypeAlias = boolean | bool
Int8: TypeAlias = i8 | int
Int16: TypeAlias = i16 | int
Int32: TypeAlias = i32 | int
Int64: TypeAlias = i64 | int
Uint8: TypeAlias = u8 | int
Uint16: TypeAlias = u16 | int
Uint32: TypeAlias = u32 | int
Uint64: TypeAlias = u64 | int
Index: TypeAlias = index | int
Float16: TypeAlias = f16 | float
BFloat16: TypeAlias = bf16 | float
Float32: TypeAlias = f32 | float
Float64: TypeAlias = f64 | float
Float8E4M3: TypeAlias = f8e4m3
Float8E5M2: TypeAlias = f8e5m2

SCALAR_TYPES: dict[str, DType]

def dtype_from_foreign(dtype: Any) -> DType | None: ...
def promote(a: DType, b: DType) -> DType | None: ...

# ----- tensors --------------------------------------------------------------------------

_Idx: TypeAlias = _Integer | int
_Index: TypeAlias = _Idx | tuple[_Idx, ...]

class TensorType:
    """`Tensor[dtype]` (rank 1) or `Tensor[dtype, rank]`: a global-memory view."""

    dtype: DType | None
    rank: int
    def __init__(self, dtype: DType | None, rank: int = 1) -> None: ...

@type_check_only
class TypedTensor(Generic[_E, _R]):
    """A global-memory tensor of element type `_E` and rank `_R`, as a kernel sees it."""

    @property
    def shape(self) -> tuple[i32, ...]: ...
    @property
    def strides(self) -> tuple[i32, ...]: ...
    @property
    def dtype(self) -> type[_E]: ...
    @property
    def rank(self) -> int: ...
    def __getitem__(self, index: _Index, /) -> _E: ...
    def __setitem__(self, index: _Index, value: _E | float, /) -> None: ...
    def vload(self, index: _Index, width: int = 4) -> Vector[_E]: ...
    def vstore(self, index: _Index, value: Vector[_E], /) -> None: ...

class Tensor(TypedTensor[Any, Any]):
    """`Tensor[f32]`, `Tensor[f32, 2]`; bare `Tensor` has no dtype (needs examples)."""

    def __class_getitem__(cls, params: object, /) -> TensorType: ...

UNTYPED_TENSOR: TensorType

class _TensorAnnotation:
    def __getitem__(self, params: Any) -> TensorType: ...

@type_check_only
class SharedArray(Generic[_E]):
    """A shared-memory array from `SharedAllocator.array` (static, row-major shape)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> type[_E]: ...
    def __getitem__(self, index: _Index, /) -> _E: ...
    def __setitem__(self, index: _Index, value: _E | float, /) -> None: ...
    def vload(self, index: _Index, width: int = 4) -> Vector[_E]: ...
    def vstore(self, index: _Index, value: Vector[_E], /) -> None: ...

# ----- compile-time parameters and specs ------------------------------------------------

class ConstexprType:
    """`Constexpr[int]`: a compile-time parameter; each value is its own specialization."""

    py_type: Any
    def __init__(self, py_type: Any = None) -> None: ...

class _ConstexprAnnotation:
    def __getitem__(self, py_type: Any) -> ConstexprType: ...

Constexpr: TypeAlias = Annotated[_T, "kdsl.Constexpr"]

class TensorSpec:
    """An abstract tensor argument for compiling without data: dtype and shape or rank."""

    dtype: DType
    shape: tuple[int, ...] | None
    rank: int | None
    def __init__(self, dtype: Any, shape: tuple[int, ...] | list[int] | None = None,
                 rank: int | None = None) -> None: ...
    @property
    def type(self) -> TensorType: ...

def is_dsl_annotation(annotation: Any) -> bool: ...

def evaluate_annotation(fn: Any, annotation: Any) -> Any: ...
