"""How DSL types look in exported C: element type codes, scalar argument types, kernel
parameter variables.

One table per question, so the header, the source, the manifest that `dsl.load_export`
reads and the tests agree:
- `DTYPE_CODES`: the `kdsl_dtype` value a `kdsl_tensor` carries for each element type (the
  dispatcher compares it with each specialization's);
- `SCALAR_C_TYPES`: the C type of a run-time scalar argument of each DSL type. f16 and
  bf16 scalars are passed as `float` (C has no portable half type) and rounded to nearest
  even when packed, as the Python launcher rounds the Python float it is given;
- `PARAM_C_TYPES`: the variable a kernel parameter of each launcher type code is packed
  into (`cuLaunchKernel` copies each parameter from the address it is given).
"""

from __future__ import annotations

from dsl.language.types import SCALAR_TYPES

# kdsl_dtype values: fixed, since compiled programs and Python (ctypes) both use them.
DTYPE_CODES: dict[str, int] = {
    "bool": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "u8": 6, "u16": 7, "u32": 8, "u64": 9,
    "f16": 10, "bf16": 11, "f32": 12, "f64": 13, "f8e4m3": 14, "f8e5m2": 15, "index": 16,
}
assert set(DTYPE_CODES) == set(SCALAR_TYPES)
MAX_RANK = 8  # kdsl_tensor holds this many extents and strides

SCALAR_C_TYPES: dict[str, str] = {
    "bool": "bool", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "index": "int64_t",
    "f16": "float", "bf16": "float", "f32": "float", "f64": "double",
}

# launcher type code -> (C type of the parameter variable, smallest value, largest value)
# for integers; None bounds for the others. The Python launcher packs with `struct`, which
# refuses a value outside its format's range: the C refuses the same values.
INT_PARAMS: dict[str, tuple[str, str, str]] = {
    "i8": ("int8_t", "INT8_MIN", "INT8_MAX"), "i16": ("int16_t", "INT16_MIN", "INT16_MAX"),
    "i32": ("int32_t", "INT32_MIN", "INT32_MAX"), "i64": ("int64_t", "INT64_MIN", "INT64_MAX"),
    "index": ("int64_t", "INT64_MIN", "INT64_MAX"), "u8": ("uint8_t", "0", "UINT8_MAX"),
    "u16": ("uint16_t", "0", "UINT16_MAX"), "u32": ("uint32_t", "0", "UINT32_MAX"),
    "u64": ("uint64_t", "0", "UINT64_MAX"),
}
FLOAT_PARAMS: dict[str, str] = {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t"}

# Constexpr values that can be C arguments: the Python type -> the C type
CONSTEXPR_C_TYPES: dict[type, str] = {bool: "bool", int: "int64_t", float: "double"}

# dsl.tensor_map element types -> CUtensorMapDataType (as dsl.runtime.tensor_maps encodes them)
TENSOR_MAP_TYPES: dict[str, int] = {
    "u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0, "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5,
    "f16": 6, "f32": 7, "f64": 8, "bf16": 9,
}
SWIZZLES: dict[int, int] = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle


def nbytes(dtype: str) -> int:
    """Bytes per element of a DSL element type."""
    return SCALAR_TYPES[dtype].nbytes


def dtype_enum(dtype: str) -> str:
    """The C enumerator of an element type: `KDSL_F32`."""
    return f"KDSL_{dtype.upper()}"


_KEYWORDS = """
    auto break case char const continue default do double else enum extern float for goto if inline int long
    register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
    bool true false alignas alignof and asm catch class constexpr decltype delete explicit export friend mutable
    namespace new noexcept not nullptr operator or private protected public static_assert template this
    thread_local throw try typeid typename using virtual wchar_t xor stream
"""
C_KEYWORDS = frozenset(_KEYWORDS.split())


def c_identifier(name: str) -> str:
    """A parameter name usable in C and C++ (a keyword, or `stream`, gets a trailing `_`)."""
    return f"{name}_" if name in C_KEYWORDS or name.startswith("__") else name
