"""What type checkers see of `dsl.language.types` (pyright, Pylance, mypy).

At run time a scalar type (`dsl.f32`) is a `DType` instance and `Tensor[f32, 2]` builds a
`TensorType`; the tracer reads those. Here each scalar type is a class instead: the type of
the values a kernel computes with, so `x[i] * 2` has a type and `dsl.f32(x)` reads as the
cast it is. Its metaclass is `DType`, so the class still is a `DType` (`f32.bits`, passing it
where a `DType` is wanted).

- Operators follow the promotion rules of `types.py`, declared once per family in a generic
  base: `_Integer[N]` and `_Floating[H]`, where `N` / `H` name the operands that mix with a
  type (see those classes). A wider operand's reflected operator gives the wider type
  (`i32 + i64` is `i64.__radd__`). Pairs the DSL rejects (DSL301: int with float, mixed
  signedness, `/` on ints, arithmetic on bools or fp8) have no operator here, so the
  checker reports them too.
- Float values subclass `float`, so `acc = 0.0` followed by `acc += x[i]`, and a list
  `[0.0] * 8` of accumulators, keep one type for the checkers. The cost, in pyright only: a
  Python float on the left (`0.5 * x`, `acc += x[i]` after `acc = 0.0`) gives `float`, since
  pyright calls `float.__mul__`, which takes any float subclass, and tries the right
  operand's `__rmul__` only when that fails (mypy tries it first, as Python does for a
  subclass that overrides it: `f32` there). No stub can make `float.__mul__` refuse `f32`
  and `list[float]` take it.
- Integer values do not subclass `int`: an int would count as a float for the checkers and
  hide an int-with-float mix, mixed signedness and `/`. So a list of Python ints
  (`acc = [0] * 4`) does not take DSL integers; `dsl.mypy_plugin` lets it for mypy.
- Comparisons give `boolean` values, not Python bools.
- `Int32`, `Float32`, ... are annotations a caller may also pass a Python number to
  (`eps: Float32 = 1e-5`), so they mean `i32 | int`, `f32 | float`, ...; the lower-case
  names are the value types and the cast functions.
- `Tensor[f32, 2]` has a bare int in it. pyright evaluates the type arguments of a generic
  class as type expressions, where `2` is an error ("Expected class", whatever the
  parameter: TypeVar, TypeVarTuple, ParamSpec, a generic alias); it evaluates them as plain
  expressions only for a non-generic class with its own `__class_getitem__`, and then
  keeps the class unspecialized. So `Tensor` is such a class: pyright accepts every
  `Tensor[...]` and reads its elements as unknown (`Any`). mypy reads `Tensor[f32, 2]` as
  `TypedTensor[f32, Literal[2]]` through `dsl.mypy_plugin`: its elements are `f32` and an
  index of the wrong rank (`x[i]` of a rank-2 tensor) is an error, as in the DSL.
- `Constexpr[T]` is `T` (an `Annotated` alias).

Adding a value type or intrinsic: a scalar type is a class here deriving from its family's
base (`class i32(_Integer[i16 | i8 | int], metaclass=DType)`); an intrinsic is a function in
the `.pyi` beside its module (`intrinsics.pyi`, `tensor_cores.pyi`) typed with the classes
of this file (`Vector[f32]`, `TypedTensor[_E, Any]`, `SharedArray[_E]`, `_Index`), and a
new module of `dsl.language` with a stub is added to `STUBBED` in
`tests/typing/test_stub_coverage.py`, which checks that every public name has a stub entry.
"""

from collections.abc import Iterator
from typing import Annotated, Any, Generic, Literal, TypeAlias, TypeVar, overload, type_check_only

from typing_extensions import Never, Self

_T = TypeVar("_T")
_S = TypeVar("_S", bound=_Value)
_E = TypeVar("_E")
_R = TypeVar("_R")
_N = TypeVar("_N")
_H = TypeVar("_H")

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
class _Integer(_Value, Generic[_N]):
    """An integer value. `_N`: the operands that give this type besides itself: Python ints
    and the narrower integers of its signedness (`i32` is `_Integer[i16 | i8 | int]`)."""

    def __index__(self) -> int: ...  # lets `range(n)` take a run-time bound, as the tracer does
    def __neg__(self) -> Self: ...
    def __pos__(self) -> Self: ...
    def __abs__(self) -> Self: ...
    def __invert__(self) -> Self: ...
    def __add__(self, other: Self | _N, /) -> Self: ...
    __sub__ = __add__
    __mul__ = __add__
    __floordiv__ = __add__
    __mod__ = __add__
    __and__ = __add__
    __or__ = __add__
    __xor__ = __add__
    __lshift__ = __add__
    __rshift__ = __add__
    def __radd__(self, other: _N, /) -> Self: ...
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
    def __lt__(self, other: Self | _N, /) -> boolean: ...
    __le__ = __lt__
    __gt__ = __lt__
    __ge__ = __lt__

@type_check_only
class _Floating(_Value, float, Generic[_H]):  # type: ignore[misc]
    """A float value (a `float` subclass: see the module docstring). `_H`: the operands that
    give f32 (f16 with bf16, or a half with f32); with f64 any float gives f64, and with
    itself or a Python number, this type. Each operator is written out: pyright reads an
    alias (`__sub__ = __add__`) as `float`'s own method, which is declared and wins."""

    @overload  # type: ignore[override]
    def __add__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __add__(self, other: Self | float, /) -> Self: ...
    @overload  # type: ignore[override]
    def __sub__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __sub__(self, other: Self | float, /) -> Self: ...
    @overload  # type: ignore[override]
    def __mul__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mul__(self, other: Self | float, /) -> Self: ...
    @overload  # type: ignore[override]
    def __truediv__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __truediv__(self, other: Self | float, /) -> Self: ...
    @overload  # type: ignore[override]
    def __mod__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __mod__(self, other: Self | float, /) -> Self: ...
    @overload  # type: ignore[override]
    def __pow__(self, other: f64, /) -> f64: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self, other: _H, /) -> f32: ...  # type: ignore[overload-overlap]
    @overload
    def __pow__(self, other: Self | float, /) -> Self: ...  # pyright: ignore[reportIncompatibleMethodOverride]
    def __radd__(self, other: float, /) -> Self: ...
    def __rsub__(self, other: float, /) -> Self: ...
    def __rmul__(self, other: float, /) -> Self: ...
    def __rtruediv__(self, other: float, /) -> Self: ...
    def __rmod__(self, other: float, /) -> Self: ...
    def __rpow__(self, other: float, /) -> Self: ...  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
    def __lt__(self, other: float, /) -> boolean: ...  # type: ignore[override, misc]
    def __le__(self, other: float, /) -> boolean: ...  # type: ignore[override, misc]
    def __gt__(self, other: float, /) -> boolean: ...  # type: ignore[override, misc]
    def __ge__(self, other: float, /) -> boolean: ...  # type: ignore[override, misc]
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
    def __lt__(self, other: boolean | bool, /) -> boolean: ...
    __le__ = __lt__
    __gt__ = __lt__
    __ge__ = __lt__
    def __bool__(self) -> bool: ...  # `if p:` on a run-time value becomes scf.if

class i8(_Integer[int], metaclass=DType): ...
class i16(_Integer[i8 | int], metaclass=DType): ...
class i32(_Integer[i16 | i8 | int], metaclass=DType): ...
class i64(_Integer[i32 | i16 | i8 | int], metaclass=DType): ...
class u8(_Integer[int], metaclass=DType): ...
class u16(_Integer[u8 | int], metaclass=DType): ...
class u32(_Integer[u16 | u8 | int], metaclass=DType): ...
class u64(_Integer[u32 | u16 | u8 | int], metaclass=DType): ...

class index(_Integer[int], metaclass=DType):
    """MLIR's `index`: mixes only with itself and Python ints."""

class f16(_Floating[bf16 | f32], metaclass=DType): ...
class bf16(_Floating[f16 | f32], metaclass=DType): ...
class f32(_Floating[f16 | bf16], metaclass=DType): ...
class f64(_Floating[Never], metaclass=DType): ...

class f8e4m3(_Value, metaclass=DType):
    """fp8 E4M3 (storage only: loads, stores, shuffles and explicit conversions)."""

class f8e5m2(_Value, metaclass=DType):
    """fp8 E5M2 (storage only: loads, stores, shuffles and explicit conversions)."""

@type_check_only
class Vector(_Value, Generic[_E]):
    """A short vector of one element type: `t.vload(i, 4)`, an MMA fragment or accumulator."""

    @overload
    def __getitem__(self, k: int, /) -> _E: ...
    @overload
    def __getitem__(self, k: slice, /) -> Vector[_E]: ...  # lanes of a fragment: `v[0:4]`
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
    # the lanes, as a tuple of scalars: `dsl.max(*v)`, `a, b, c, d = v`, `for e in v`, `len(v)`
    def __iter__(self) -> Iterator[_E]: ...
    def __len__(self) -> int: ...
    def sum(self) -> _E: ...  # lanes combined pairwise by halves (lane i with lane i + w/2)
    def max(self) -> _E: ...
    def min(self) -> _E: ...

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

_Idx: TypeAlias = _Integer[Any] | int
_Index: TypeAlias = _Idx | tuple[_Idx, ...]
# The index of each rank (`x[i, j]` of a rank-2 tensor); rank 1 also takes a bare index.
_Ix1: TypeAlias = _Idx | tuple[_Idx]
_Ix2: TypeAlias = tuple[_Idx, _Idx]
_Ix3: TypeAlias = tuple[_Idx, _Idx, _Idx]
_Ix4: TypeAlias = tuple[_Idx, _Idx, _Idx, _Idx]
_Ix5: TypeAlias = tuple[_Idx, _Idx, _Idx, _Idx, _Idx]
_Ix6: TypeAlias = tuple[_Idx, _Idx, _Idx, _Idx, _Idx, _Idx]
_Ix7: TypeAlias = tuple[_Idx, _Idx, _Idx, _Idx, _Idx, _Idx, _Idx]
_Ix8: TypeAlias = tuple[_Idx, _Idx, _Idx, _Idx, _Idx, _Idx, _Idx, _Idx]
_Stored: TypeAlias = _E | float  # what a store takes: an element value or a Python number

class TensorType:
    """`Tensor[dtype]` (rank 1) or `Tensor[dtype, rank]`: a global-memory view."""

    dtype: DType | None
    rank: int
    def __init__(self, dtype: DType | None, rank: int = 1) -> None: ...

@type_check_only
class TypedTensor(Generic[_E, _R]):
    """A global-memory tensor of element type `_E` and rank `_R` (`Literal[2]`), as a kernel
    sees it. Each access takes as many indices as the rank; with an unknown rank (`Any`:
    pyright, or bare `Tensor`) any count."""

    @property
    def shape(self) -> tuple[i32, ...]: ...
    @property
    def strides(self) -> tuple[i32, ...]: ...
    @property
    def dtype(self) -> type[_E]: ...
    @property
    def rank(self) -> int: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[1]], index: _Ix1, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[2]], index: _Ix2, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[3]], index: _Ix3, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[4]], index: _Ix4, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[5]], index: _Ix5, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[6]], index: _Ix6, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[7]], index: _Ix7, /) -> _E: ...
    @overload
    def __getitem__(self: TypedTensor[_E, Literal[8]], index: _Ix8, /) -> _E: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[1]], index: _Ix1, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[2]], index: _Ix2, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[3]], index: _Ix3, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[4]], index: _Ix4, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[5]], index: _Ix5, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[6]], index: _Ix6, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[7]], index: _Ix7, value: _Stored[_E], /) -> None: ...
    @overload
    def __setitem__(self: TypedTensor[_E, Literal[8]], index: _Ix8, value: _Stored[_E], /) -> None: ...
    def vload(self, index: _Index, width: int = 4) -> Vector[_E]: ...
    def vstore(self, index: _Index, value: Vector[_E], /) -> None: ...
    # the same bytes as elements of `dtype`: the innermost extent and outer strides scale by the sizes
    def view(self, dtype: type[_S], /) -> TypedTensor[_S, _R]: ...

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
    def __setitem__(self, index: _Index, value: _Stored[_E], /) -> None: ...
    def vload(self, index: _Index, width: int = 4) -> Vector[_E]: ...
    def vstore(self, index: _Index, value: Vector[_E], /) -> None: ...
    def view(self, dtype: type[_S], /) -> SharedArray[_S]: ...  # the same bytes as elements of `dtype`

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
